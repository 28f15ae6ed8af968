/*
 * retain.h - the replay buffer's bookkeeping: which committed messages a
 * late joiner is still given. The messages themselves stay where they
 * are, in the ring; this tracks the oldest retained one (the tail) and
 * moves it forward when a bound (count, payload bytes, age) is exceeded
 * or when the publisher is about to overwrite it. Walking the tail reads
 * only the publisher's own frame headers.
 */
#ifndef CRS_RETAIN_H
#define CRS_RETAIN_H

#include <stdint.h>

#include "ipc/compiler.h"

struct retain_mark {
	uint64_t seq; /* first message committed at or after time t */
	int64_t t;
};

struct retain {
	uint64_t count_max; /* 0: no bound */
	uint64_t bytes_max; /* 0: no bound */
	int64_t age_max_ns; /* 0: no bound */
	uint64_t tail_pos;  /* oldest retained message (or pos if none) */
	uint64_t tail_seq;
	uint64_t tail_bytes; /* payload bytes committed before the tail */
	/* Age marks, oldest first, in a circular array: a mark is added
	 * whenever the clock moved on since the last one. */
	struct retain_mark *marks;
	uint32_t cap, head, len;
};

/* Bounds as given; age needs room for marks. 0 or -ENOMEM. */
CRS_MUST_USE int retain_init(struct retain *r, uint64_t count_max,
			     uint64_t bytes_max, int64_t age_max_ns,
			     uint64_t ring_size);
void retain_free(struct retain *r);
/* Retain nothing before (pos, seq, bytes): a new epoch starts there. */
void retain_reset(struct retain *r, uint64_t pos, uint64_t seq, uint64_t bytes);
/* Message seq was committed at time t. */
void retain_note(struct retain *r, uint64_t seq, int64_t t);
/* Advance the tail until the bounds hold at (seq, bytes, now) and the
 * tail is at or after keep_from (the overwrite horizon). ring points at
 * the ring of ring_size bytes; pos is the publisher's position. */
void retain_trim(struct retain *r, const uint8_t *ring, uint64_t ring_size,
		 uint64_t pos, uint64_t seq, uint64_t bytes, int64_t now,
		 uint64_t keep_from);
/* Time of the oldest retained message (INT64_MIN if unknown). */
int64_t retain_oldest_time(const struct retain *r);

#endif
