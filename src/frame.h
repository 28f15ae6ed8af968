/*
 * frame.h - the wire format of a frame in the ring (what the bits of a
 * header word mean). How frames are written, found, checked and walked
 * in the ring is ring.h's.
 *
 * A frame is an 8-byte header word followed by the payload, padded to 8
 * bytes. The header word is tag << CRS_FRAME_TAG_SHIFT | len_flags:
 * - tag: CRS_FRAME_TAG_SET | (pos / 8 & CRS_FRAME_TAG_POS_MASK), where
 *   pos is the frame's position. Never 0, so a zeroed header never looks
 *   committed, and it differs between neighbouring frames and between
 *   laps of the ring (it repeats every 16 GiB of stream: 16 laps of the
 *   largest ring).
 * - len_flags: the payload length (CRS_FRAME_LEN_MASK), or, with the
 *   CRS_FRAME_PAD flag, a padding frame of CRS_FRAME_HEADER + that many
 *   bytes: it fills the rest of the ring before a frame that does not fit.
 */
#ifndef CRS_FRAME_H
#define CRS_FRAME_H

#include <stdint.h>

#define CRS_FRAME_HEADER 8u
#define CRS_FRAME_ALIGN 8u

#define CRS_FRAME_TAG_SHIFT 32
#define CRS_FRAME_TAG_SET 0x80000000u	   /* in every tag */
#define CRS_FRAME_TAG_POS_MASK 0x7fffffffu /* the bits of pos / 8 kept */

#define CRS_FRAME_PAD 0x80000000u      /* in len_flags: a padding frame */
#define CRS_FRAME_LEN_MASK 0x7fffffffu /* in len_flags: the length */

/* Bytes a frame of payload len takes, header and padding to 8 included. */
static inline uint64_t frame_size(uint64_t len)
{
	return (len + CRS_FRAME_HEADER + CRS_FRAME_ALIGN - 1) &
	       ~(uint64_t)(CRS_FRAME_ALIGN - 1);
}

static inline int frame_aligned(uint64_t pos)
{
	return (pos & (CRS_FRAME_ALIGN - 1)) == 0;
}

static inline uint32_t frame_tag(uint64_t pos)
{
	return (uint32_t)((pos / CRS_FRAME_ALIGN) & CRS_FRAME_TAG_POS_MASK) |
	       CRS_FRAME_TAG_SET;
}

static inline uint64_t frame_word(uint64_t pos, uint32_t len_flags)
{
	return (uint64_t)frame_tag(pos) << CRS_FRAME_TAG_SHIFT | len_flags;
}

static inline uint32_t frame_word_tag(uint64_t word)
{
	return (uint32_t)(word >> CRS_FRAME_TAG_SHIFT);
}

static inline uint32_t frame_word_len_flags(uint64_t word)
{
	return (uint32_t)word;
}

/* len_flags of a padding frame that takes bytes (at least the header). */
static inline uint32_t frame_pad(uint64_t bytes)
{
	return CRS_FRAME_PAD | (uint32_t)(bytes - CRS_FRAME_HEADER);
}

/* Bytes the frame whose header says len_flags takes. */
static inline uint64_t frame_bytes(uint32_t len_flags)
{
	return len_flags & CRS_FRAME_PAD
		       ? (len_flags & CRS_FRAME_LEN_MASK) + CRS_FRAME_HEADER
		       : frame_size(len_flags);
}

#endif
