/*
 * fuzz_ring.c - libFuzzer harness for src/ring.h, the one module that
 * writes, reads, checks and walks frames. Two runs per input:
 *
 * 1. A hostile writer. The input, tiled, is a ring of 4, 8 or 16 KiB,
 *    a start position and a max_message (and, on request, the tags a
 *    walk from the start expects, where the input leaves them zero). A
 *    reader walks it as sub.c does (ring_load, ring_is_message as the
 *    hot test, ring_check for the rest). Every message it accepts lies
 *    inside the ring and within max_message; the hot test never accepts
 *    what the full check refuses, nor with another length; padding ends
 *    at the ring's end; and the walk ends within one step per slot.
 * 2. An honest writer over that junk. The input is also a list of
 *    messages, written as pubring.h writes them (room up to the
 *    reader's position plus a ring, ring_pad_needed and ring_pad at the
 *    wrap; the next header slot zeroed unless it was zeroed ahead with
 *    ring_clean, which the input asks for now and then; a message
 *    committed shorter than its claim, or written over an aborted one,
 *    with what would pass for the next frame's header written past its
 *    end), with a reader draining
 *    behind it now and then. The reader gets every message, in order,
 *    with its bytes, and stops exactly where the writer is (neither the
 *    junk nor the bytes past a short commit look committed); the
 *    writer's own walk (ring_next, as retention does) meets the same
 *    messages.
 *
 * A failed property aborts; AddressSanitizer watches every access.
 */
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "src/ring.h"

#define RING_MAX 16384

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

static uint8_t ring[RING_MAX] __attribute__((aligned(64)));

static void hostile(const struct ring_view *v, uint64_t start)
{
	uint64_t pos = start, steps = 0;
	for (;;) {
		if (++steps > v->size / CRS_FRAME_HEADER + 1)
			abort(); /* a walk that does not end */
		uint64_t word = ring_load(v, pos), len = 0;
		enum ring_frame k = ring_check(v, word, pos, &len);
		if (ring_is_message(v, word, pos) &&
		    (k != RING_MESSAGE || len != frame_word_len_flags(word)))
			abort();
		if (k == RING_PADDING) {
			if (((pos + len) & v->mask) != 0)
				abort();
			pos += len;
			continue;
		}
		if (k != RING_MESSAGE)
			return;
		const uint8_t *p = ring_payload(v, pos);
		if (len > v->max_message || p < v->base ||
		    p + len > v->base + v->size)
			abort();
		volatile uint8_t sink = 0;
		for (uint64_t j = 0; j < len; j++)
			sink ^= p[j];
		(void)sink;
		pos += frame_size(len);
	}
}

/* Give every slot whose tag half is zero the tag of the position a walk
 * from start reaches it at, so that the input's len_flags are looked at
 * (a tag is hard to guess). */
static void tag_slots(const struct ring_view *v, uint64_t start)
{
	uint64_t lap = start & ~v->mask;
	for (uint64_t off = 0; off < v->size; off += CRS_FRAME_HEADER) {
		uint64_t pos = lap + off + (off < (start & v->mask) ? v->size : 0);
		uint64_t word;
		memcpy(&word, ring + off, sizeof(word));
		if (frame_word_tag(word) == 0)
			word = frame_word(pos, frame_word_len_flags(word));
		memcpy(ring + off, &word, sizeof(word));
	}
}

struct honest {
	const struct ring_view *v;
	uint64_t wpos, wseq; /* the writer */
	uint64_t rpos, rseq; /* the reader */
	uint64_t tpos, tseq; /* the writer's own walk behind the reader */
	uint64_t clean_end;  /* zero from wpos + 8 up to here */
	uint32_t lens[RING_MAX / CRS_FRAME_HEADER]; /* by seq, circular */
};

static uint32_t *len_of(struct honest *h, uint64_t seq)
{
	return &h->lens[seq % (h->v->size / CRS_FRAME_HEADER)];
}

/* The reader takes everything committed; the writer's walk follows. */
static void drain(struct honest *h)
{
	const struct ring_view *v = h->v;
	for (;;) {
		uint64_t word = ring_load(v, h->rpos), len = 0;
		enum ring_frame k = ring_check(v, word, h->rpos, &len);
		if (k == RING_NONE)
			break;
		if (k == RING_PADDING) {
			h->rpos += len;
			if (h->rpos & v->mask)
				abort();
			continue;
		}
		if (k != RING_MESSAGE || h->rseq >= h->wseq ||
		    !ring_is_message(v, word, h->rpos) ||
		    len != *len_of(h, h->rseq))
			abort();
		const uint8_t *p = ring_payload(v, h->rpos);
		for (uint64_t j = 0; j < len; j++)
			if (p[j] != (uint8_t)h->rseq)
				abort();
		h->rpos += frame_size(len);
		h->rseq++;
	}
	if (h->rpos != h->wpos || h->rseq != h->wseq)
		abort();
	while (h->tpos < h->rpos) {
		uint64_t len;
		if (ring_next(v, &h->tpos, &len) &&
		    len != *len_of(h, h->tseq++))
			abort();
	}
	if (h->tpos != h->rpos || h->tseq != h->rseq)
		abort();
}

/* Fill the bytes of the claim at the writer's position from payload
 * byte from up to claimed with the header a frame would have at each
 * position they cover, as a payload may. */
static void plant_headers(struct honest *h, uint8_t *p, uint64_t from,
			  uint64_t claimed)
{
	for (uint64_t off = from; off + 8 <= claimed; off += 8) {
		uint64_t fake = frame_word(h->wpos + CRS_FRAME_HEADER + off, 0);
		memcpy(p + off, &fake, sizeof(fake));
	}
}

/* Bytes from position from on no longer count as zeroed ahead
 * (pubring_unclean). */
static void unclean(struct honest *h, uint64_t from)
{
	if (h->clean_end > from)
		h->clean_end = from;
}

/* A claim of up to 512 bytes at the writer's position, filled with
 * headers, then aborted (pubring_abort): where it fits before the
 * ring's end and within room. */
static void abort_claim(struct honest *h)
{
	const struct ring_view *v = h->v;
	uint32_t n = v->max_message < 512 ? v->max_message : 512;
	uint64_t frame = frame_size(n);
	if (ring_wraps(h->wpos & v->mask, frame, v->size) ||
	    ring_end(h->wpos, frame) > h->rpos + v->size)
		return;
	plant_headers(h, ring + ring_payload_offset(v->mask, h->wpos), 0, n);
	unclean(h, h->wpos + CRS_FRAME_HEADER);
}

/* Write a message of len, claimed extra bytes longer (filled too); then,
 * with clean, zero the ring ahead by up to ahead bytes, as
 * pubring_clean_ahead does. */
static void write_one(struct honest *h, uint32_t len, uint32_t extra,
		      int clean, uint64_t ahead)
{
	const struct ring_view *v = h->v;
	uint8_t *base = ring;
	uint32_t claimed = len + extra;
	if (claimed > v->max_message)
		claimed = len;
	uint64_t frame = frame_size(claimed);
	uint64_t pad = ring_pad_needed(h->wpos & v->mask, frame, v->size);
	if (ring_end(h->wpos, pad + frame) > h->rpos + v->size) {
		drain(h); /* no room: the reader must catch up first */
		pad = ring_pad_needed(h->wpos & v->mask, frame, v->size);
		if (ring_end(h->wpos, pad + frame) > h->rpos + v->size)
			abort();
	}
	if (pad) {
		ring_pad(base, v->mask, h->wpos, pad);
		h->wpos += pad;
	}
	uint8_t *p = base + ring_payload_offset(v->mask, h->wpos);
	memset(p, (uint8_t)h->wseq, len);
	plant_headers(h, p, frame_size(len) - CRS_FRAME_HEADER, claimed);
	uint64_t next = h->wpos + frame_size(len);
	*len_of(h, h->wseq) = len;
	/* As pubring_commit. */
	if (next < h->wpos + CRS_FRAME_HEADER + claimed)
		unclean(h, next);
	if (next + CRS_FRAME_HEADER > h->clean_end)
		ring_clear(base, v->mask, next);
	ring_publish(base, v->mask, h->wpos, frame_word(h->wpos, len));
	h->wpos = next;
	h->wseq++;
	if (!clean)
		return;
	uint64_t from = h->wpos + CRS_FRAME_HEADER, to = h->wpos + ahead;
	if (from < h->clean_end)
		from = h->clean_end;
	if (to > h->rpos + v->size)
		to = h->rpos + v->size;
	if (to > from) {
		ring_clean(base, v->mask, from, to);
		h->clean_end = to;
	}
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
	static struct honest h;
	if (size < 12)
		return 0;
	/* Start position (8 bytes), max_message (2), ring size (1), flags
	 * (1: tag_slots); the rest fills the ring and is the honest writer's
	 * lengths (2 bytes each, the top bit: let the reader drain). */
	uint64_t start;
	memcpy(&start, data, 8);
	start &= ~(uint64_t)(CRS_FRAME_ALIGN - 1);
	uint64_t rsize = 4096u << (data[10] % 3);
	struct ring_view v = {
		.base = ring,
		.size = rsize,
		.mask = rsize - 1,
		.max_message =
			(uint32_t)((data[8] | data[9] << 8) % (rsize / 4 + 1)),
	};
	const uint8_t *rest = data + 12;
	size_t n = size - 12;
	memset(ring, 0, sizeof(ring));
	for (size_t off = 0; n && off < rsize; off += n) /* tiled */
		memcpy(ring + off, rest, n < rsize - off ? n : rsize - off);
	if (data[11] & 1)
		tag_slots(&v, start);
	hostile(&v, start);

	/* The honest writer starts where its ring says nothing is
	 * committed (a fresh ring is zero); the junk stays elsewhere. A
	 * publisher's positions start at 0: keep them far from 2^64. */
	start &= (1ULL << 40) - 1;
	v.max_message = (uint32_t)(rsize / 4);
	memset(&h, 0, sizeof(h));
	h.v = &v;
	h.wpos = h.rpos = h.tpos = start;
	ring_clear(ring, v.mask, start);
	/* Three bytes a message: its length, and whether the reader drains
	 * after it (top bit); how much longer it was claimed (low 6 bits),
	 * whether the writer zeroes ahead after it (bit 6), as far as the
	 * length says (up to a quarter ring), and whether an aborted claim
	 * comes before it (bit 7). */
	for (size_t i = 0; i + 3 <= n; i += 3) {
		uint32_t x = (uint32_t)(rest[i] | rest[i + 1] << 8);
		uint8_t y = rest[i + 2];
		if (y & 0x80)
			abort_claim(&h);
		write_one(&h, (x & 0x7fff) % (v.max_message + 1), y & 63u,
			  (y >> 6) & 1, (x & 0x7fff) % (rsize / 4 + 1));
		if (x & 0x8000)
			drain(&h);
	}
	drain(&h);
	return 0;
}
