/*
 * frame.h - frames in the ring and their validation.
 *
 * A frame is an 8-byte header word followed by the payload, padded to 8
 * bytes. The header word is the commit flag: the publisher stores it last
 * (release) as tag(pos) << 32 | len, after zeroing the header slot of the
 * next frame. A reader at position pos therefore sees either a word whose
 * tag matches pos (committed) or anything else (not yet). A frame that
 * does not fit before the ring's end is preceded by a padding frame
 * (PAD flag) that fills the rest of the ring.
 *
 * frame_check() is the one place where a header read from shared
 * memory is trusted or refused.
 */
#ifndef CRS_FRAME_H
#define CRS_FRAME_H

#include <stdint.h>

#define CRS_FRAME_HEADER 8u
#define CRS_FRAME_ALIGN 8u
#define CRS_FRAME_PAD 0x80000000u
#define CRS_FRAME_LEN_MASK 0x7fffffffu

static inline uint64_t frame_size(uint64_t len)
{
	return (len + CRS_FRAME_HEADER + CRS_FRAME_ALIGN - 1) &
	       ~(uint64_t)(CRS_FRAME_ALIGN - 1);
}

/* Never 0, so a zeroed header never looks committed. */
static inline uint32_t frame_tag(uint64_t pos)
{
	return (uint32_t)((pos >> 3) & 0x7fffffffu) | 0x80000000u;
}

static inline uint64_t frame_word(uint64_t pos, uint32_t len_flags)
{
	return (uint64_t)frame_tag(pos) << 32 | len_flags;
}

enum frame_kind {
	CRS_FRAME_CORRUPT = -1,
	CRS_FRAME_NONE = 0, /* not committed yet */
	CRS_FRAME_MESSAGE = 1,
	CRS_FRAME_PADDING = 2,
};

/* Classify the header word read at position pos. On MESSAGE, *len is the
 * payload length; on PADDING, the whole padding frame's size. A frame is
 * refused if it is not 8-aligned, runs past the ring's end, exceeds
 * max_message, or pads anywhere but up to the end. */
static inline enum frame_kind frame_check(uint64_t word, uint64_t pos,
						  uint64_t ring_size,
						  uint32_t max_message,
						  uint64_t *len)
{
	if ((uint32_t)(word >> 32) != frame_tag(pos))
		return CRS_FRAME_NONE;
	uint64_t off = pos & (ring_size - 1);
	uint32_t lf = (uint32_t)word;
	uint64_t n = lf & CRS_FRAME_LEN_MASK;
	if (pos & (CRS_FRAME_ALIGN - 1))
		return CRS_FRAME_CORRUPT;
	if (lf & CRS_FRAME_PAD) {
		if (off + CRS_FRAME_HEADER + n != ring_size)
			return CRS_FRAME_CORRUPT;
		*len = CRS_FRAME_HEADER + n;
		return CRS_FRAME_PADDING;
	}
	if (n > max_message || off + frame_size(n) > ring_size)
		return CRS_FRAME_CORRUPT;
	*len = n;
	return CRS_FRAME_MESSAGE;
}

#endif
