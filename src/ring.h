/*
 * ring.h - the ring of frames: writing, finding, checking and walking
 * frames (their bits are frame.h's). The publisher writes with it
 * (pubring.h, pubring.c: claim, commit, padding, flush), subscribers
 * read with it (sub.c: poll, take, release), inspectors count the
 * frames not yet in the figures with it (inspect.c), retention walks
 * the publisher's own frames with it (retain.c), and the ring fuzzer
 * (tests/fuzz/fuzz_ring.c) drives it directly. Everything is static
 * inline: it is the data path.
 *
 * Overview. The ring is `size` bytes (a power of two, mask = size - 1)
 * of an endless stream addressed by 64-bit positions; a position lives
 * at offset pos & mask. A frame never wraps: one that would not fit
 * before the ring's end is preceded by a padding frame that fills the
 * rest of the ring (ring_wraps, ring_pad_needed, ring_pad), so readers
 * see every frame contiguous.
 *
 * The commit. One writer. Writing a frame of `bytes` at pos needs
 * [pos, pos + bytes + CRS_FRAME_HEADER): the frame and the header slot
 * after it (ring_end), which must hold zero before the frame's own
 * header word is stored (release, ring_publish). That release store is
 * the whole commit: it orders the payload and the zeroed next slot
 * before the header, and pairs with the reader's acquire load of that
 * header (ring_load). The slot is zeroed by the commit (ring_clear),
 * or earlier: a writer of small frames zeroes the ring
 * ahead of its position now and then (ring_clean), one memset for
 * many commits, which also makes the lines ahead its own before the
 * frames need them. Deferred commits (crs_pub_commit_more) store the
 * first deferred header last (at the flush), so a reader stops at it
 * until then.
 *
 * Reading. A reader at pos goes by the header word there alone. The
 * writer zeroed that slot before it published the frame in front of it,
 * so the slot holds 0 or the frame of pos, never one of an earlier lap;
 * and the tag (frame.h) is computed from pos, so a word whose tag is not
 * pos's is "not committed yet" (ring_committed): a zero, a word a dying
 * writer left half-written, or anything a hostile one put there.
 *
 * Checking. Every word read from a ring that another process writes is
 * untrusted. ring_check() is the one full check: a committed frame is a
 * message that fits before the ring's end and within max_message, or a
 * padding frame that ends exactly at the ring's end; anything else is
 * corrupt. ring_is_message() is its hot subset for the common case,
 * with fewer tests: positions are 8-aligned (a reader starts at an
 * aligned position and steps by frame sizes) and max_message is at most
 * size / 4 (checked at attach), so the PAD flag alone makes a length
 * exceed it. Whatever ring_is_message() accepts, ring_check() accepts
 * as the same message (the fuzzer checks this).
 *
 * Walking. A frame's header says how far the next one is
 * (frame_bytes); a reader steps over padding by the length
 * ring_check() gives, a writer over its own frames by their headers
 * (ring_next). A walk over any ring ends within one step per header
 * slot: a slot holds one word, and that word is the frame of at most
 * one position a walk can reach there (tags repeat only after 16 GiB).
 */
#ifndef CRS_RING_H
#define CRS_RING_H

#include <stdint.h>
#include <string.h>

#include "atomics.h"
#include "frame.h"

enum ring_frame {
	RING_CORRUPT = -1,
	RING_NONE = 0, /* not committed yet */
	RING_MESSAGE = 1,
	RING_PADDING = 2,
};

/* A reader's view of a ring: where it lies and what its frames may
 * hold, from a checked layout header (attach.c). */
struct ring_view {
	const uint8_t *base;
	uint64_t size;
	uint64_t mask;	      /* size - 1 */
	uint32_t max_message; /* at most size / 4 */
};

static inline const _Atomic uint64_t *ring_slot(const struct ring_view *v,
						uint64_t pos)
{
	return (const _Atomic uint64_t *)(v->base + (pos & v->mask));
}

/* Offset from the ring's start of the payload of the frame at pos. */
static inline uint64_t ring_payload_offset(uint64_t mask, uint64_t pos)
{
	return (pos & mask) + CRS_FRAME_HEADER;
}

/* Where the payload of the frame at pos starts. */
static inline const void *ring_payload(const struct ring_view *v, uint64_t pos)
{
	return v->base + ring_payload_offset(v->mask, pos);
}

/* --- Reading --- */

/* The header word at pos, for reading the frame behind it: pairs with
 * the release store in ring_publish(). */
static inline uint64_t ring_load(const struct ring_view *v, uint64_t pos)
{
	return shm_load_acquire(ring_slot(v, pos));
}

/* The header word at pos, for a look that reads nothing behind it (or
 * for the writer, at its own headers). */
static inline uint64_t ring_peek(const struct ring_view *v, uint64_t pos)
{
	return shm_load_relaxed(ring_slot(v, pos));
}

/* Is word (read at pos) the header of a frame committed at pos? */
static inline int ring_committed(uint64_t word, uint64_t pos)
{
	return frame_word_tag(word) == frame_tag(pos);
}

/* The hot check's second half: does the committed word at the
 * 8-aligned pos say a message that fits before the ring's end and within
 * max_message? */
static inline int ring_message_fits(const struct ring_view *v, uint64_t word,
				    uint64_t pos)
{
	uint32_t n = frame_word_len_flags(word);
	/* Offset and size are multiples of 8, so the padding of the
	 * payload to 8 needs no test. */
	return n <= v->max_message &&
	       (pos & v->mask) + CRS_FRAME_HEADER + n <= v->size;
}

/* The hot check: is word (read at the 8-aligned pos) a committed message
 * that fits before the ring's end and within max_message? Its length is
 * then frame_word_len_flags(word). 0 says nothing more: ask
 * ring_check(). */
static inline int ring_is_message(const struct ring_view *v, uint64_t word,
				  uint64_t pos)
{
	return ring_committed(word, pos) && ring_message_fits(v, word, pos);
}

/* The full check of the word read at pos. On RING_MESSAGE, *len is the
 * payload length; on RING_PADDING, the whole padding frame's size. A
 * frame is refused if its position is not 8-aligned, it runs past the
 * ring's end, exceeds max_message, or pads anywhere but up to the end. */
static inline enum ring_frame ring_check(const struct ring_view *v,
					 uint64_t word, uint64_t pos,
					 uint64_t *len)
{
	if (!ring_committed(word, pos))
		return RING_NONE;
	if (!frame_aligned(pos))
		return RING_CORRUPT;
	uint64_t off = pos & v->mask;
	uint32_t lf = frame_word_len_flags(word);
	uint64_t n = lf & CRS_FRAME_LEN_MASK;
	if (lf & CRS_FRAME_PAD) {
		if (off + CRS_FRAME_HEADER + n != v->size)
			return RING_CORRUPT;
		*len = CRS_FRAME_HEADER + n;
		return RING_PADDING;
	}
	if (n > v->max_message || off + frame_size(n) > v->size)
		return RING_CORRUPT;
	*len = n;
	return RING_MESSAGE;
}

/* Load and check the frame at pos (ring_load, ring_check). */
static inline enum ring_frame ring_frame_at(const struct ring_view *v,
					    uint64_t pos, uint64_t *len)
{
	return ring_check(v, ring_load(v, pos), pos, len);
}

/* --- Writing (one writer) --- */

/* Does a frame of bytes at ring offset off run past the ring's end? */
static inline int ring_wraps(uint64_t off, uint64_t bytes, uint64_t size)
{
	return off + bytes > size;
}

/* Bytes of padding a frame of bytes needs in front of it at ring offset
 * off: the rest of the ring if it wraps, else 0. */
static inline uint64_t ring_pad_needed(uint64_t off, uint64_t bytes,
				       uint64_t size)
{
	return ring_wraps(off, bytes, size) ? size - off : 0;
}

/* Where the room that writing bytes at pos needs ends: the frames and
 * the next header slot, which must be zero (zeroed ahead, or by the
 * commit). */
static inline uint64_t ring_end(uint64_t pos, uint64_t bytes)
{
	return pos + bytes + CRS_FRAME_HEADER;
}

static inline _Atomic uint64_t *ring_slot_mut(uint8_t *ring, uint64_t mask,
					      uint64_t pos)
{
	return (_Atomic uint64_t *)(ring + (pos & mask));
}

/* Zero the header slot at pos: no reader takes it for committed. */
static inline void ring_clear(uint8_t *ring, uint64_t mask, uint64_t pos)
{
	shm_store_relaxed(ring_slot_mut(ring, mask, pos), 0);
}

/* Zero the bytes at positions [from, to), at most a ring's size: every
 * header slot there reads as not committed until a frame is published
 * in it. Plain stores: the release store of the header in front of them
 * orders them for readers, and readers go by that header alone. */
static inline void ring_clean(uint8_t *ring, uint64_t mask, uint64_t from,
			      uint64_t to)
{
	uint64_t off = from & mask, n = to - from, tail = mask + 1 - off;
	if (n <= tail) {
		memset(ring + off, 0, n);
	} else {
		memset(ring + off, 0, tail);
		memset(ring, 0, n - tail);
	}
}

/* Store the header word of the frame at pos: its commit, after its
 * payload and the zeroed slot behind it. Pairs with the acquire load in
 * ring_load(). */
static inline void ring_publish(uint8_t *ring, uint64_t mask, uint64_t pos,
				uint64_t word)
{
	shm_store_release(ring_slot_mut(ring, mask, pos), word);
}

/* Commit a padding frame of pad bytes at pos (up to the ring's end),
 * zeroing the slot after it (the next lap's first) first. */
static inline void ring_pad(uint8_t *ring, uint64_t mask, uint64_t pos,
			    uint64_t pad)
{
	ring_clear(ring, mask, pos + pad);
	ring_publish(ring, mask, pos, frame_word(pos, frame_pad(pad)));
}

/* The writer's walk over its own committed frames: moves *pos past the
 * frame there. Returns 1 with its payload length in *len if it is a
 * message, 0 if it is padding. */
static inline int ring_next(const struct ring_view *v, uint64_t *pos,
			    uint64_t *len)
{
	uint32_t lf = frame_word_len_flags(ring_peek(v, *pos));
	*pos += frame_bytes(lf);
	if (lf & CRS_FRAME_PAD)
		return 0;
	*len = lf;
	return 1;
}

#endif
