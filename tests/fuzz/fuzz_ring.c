/*
 * fuzz_ring.c - libFuzzer harness for the subscriber's frame and
 * position validation: the real crs_sub_poll/release code runs against
 * a ring, terminal record and layout filled from the fuzzer's bytes (a
 * hostile publisher). It must deliver only views that lie inside the
 * ring and never exceed max_message, or end the subscription; never read
 * out of bounds (AddressSanitizer watches) and never loop forever.
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
	sub.max_message = max_message;
	sub.pos = sub.published_pos = start;
	sub.publish_step = RING / 4;
	sub.requested = 1000;
	atomic_store(&hdr.stats.position, published);
	sub.hdr = &hdr;
	sub.ctl = &ctl;
	sub.sock = -1;
	sub.next_liveness_ns = INT64_MAX;

	struct crs_msg m;
	for (int i = 0; i < 2 * RING; i++) {
		int r = crs_sub_poll(&sub, &m);
		if (r <= 0)
			break;
		const uint8_t *p = m.data;
		if (p < ring || p + m.len > ring + RING || m.len > max_message)
			abort();
		volatile uint8_t sink = 0;
		for (size_t k = 0; k < m.len; k++)
			sink ^= p[k];
		(void)sink;
		crs_sub_release(&sub);
	}
	return 0;
}
