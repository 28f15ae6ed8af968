/*
 * fuzz_ring.c - libFuzzer harness for the subscriber's frame
 * validation: the real crs_sub_poll, crs_sub_take and crs_sub_release
 * code runs against a ring, terminal record and layout filled from the
 * fuzzer's bytes (a hostile publisher). It must deliver only views
 * that lie inside the ring and never exceed max_message, or end the
 * subscription; never read out of bounds (AddressSanitizer watches) and
 * never loop forever.
 */
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "src/sub.h"

#define RING 4096

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
	static struct crs_data_header hdr;
	static struct crs_ctl ctl;
	static uint8_t ring[RING] __attribute__((aligned(64)));
	if (size < 16)
		return 0;
	memset(&hdr, 0, sizeof(hdr));
	memset(&ctl, 0, sizeof(ctl));
	memset(ring, 0, sizeof(ring));
	/* First bytes: start position and max message; then the terminal
	 * record; the rest is the ring's content. */
	uint64_t start;
	memcpy(&start, data, 8);
	start &= ~7ULL;
	uint32_t max_message = (data[8] | data[9] << 8) % (RING / 4 + 1);
	/* The publisher's position, as untrusted as the rest. */
	uint64_t published = start + (uint64_t)(data[10] | data[11] << 8) * 8;
	if (data[12] & 1)
		published = start + ((uint64_t)data[13] << 56);
	size_t off = 16;
	size_t tl = size - off < sizeof(hdr.terminal) ? size - off
						       : sizeof(hdr.terminal);
	memcpy(&ctl.term, data + off, tl);
	off += tl;
	memcpy(ring, data + off, size - off < RING ? size - off : RING);

	struct crs_sub sub = { 0 };
	sub.ring = ring;
	sub.ring_size = RING;
	sub.mask = RING - 1;
	sub.stop_pos = UINT64_MAX;
	sub.replenish = UINT64_MAX;
	sub.max_message = max_message;
	sub.pos = sub.published_pos = start;
	sub.publish_step = RING / 4;
	sub.requested = 1000;
	atomic_store(&hdr.stats.position, published);
	sub.hdr = &hdr;
	sub.ctl = &ctl;
	sub.sock = -1;
	sub.next_liveness_ns = INT64_MAX;

	/* Byte 14 picks crs_sub_poll or crs_sub_take (batches of up to
	 * byte 15 + 1 messages, byte 14's high bits bounding the bytes). */
	int take = data[14] & 1;
	size_t max = (size_t)data[15] % 16 + 1;
	size_t max_bytes = (size_t)(data[14] >> 1) * 64;
	struct crs_msg m[16];
	for (int i = 0; i < 2 * RING; i++) {
		int r = take ? crs_sub_take(&sub, m, max, max_bytes)
			     : crs_sub_poll(&sub, &m[0]);
		if (r <= 0)
			break;
		if ((size_t)r > (take ? max : 1))
			abort();
		for (int k = 0; k < r; k++) {
			const uint8_t *p = m[k].data;
			if (p < ring || p + m[k].len > ring + RING ||
			    m[k].len > max_message)
				abort();
			volatile uint8_t sink = 0;
			for (size_t j = 0; j < m[k].len; j++)
				sink ^= p[j];
			(void)sink;
		}
		crs_sub_release(&sub);
	}
	return 0;
}
