/*
 * retain.c - replay retention (see retain.h).
 */
#include "retain.h"

#include <errno.h>
#include <stdlib.h>

#include "frame.h"
#include "ring.h"

#define MARKS_MAX (1u << 20)

int retain_init(struct retain *r, uint64_t count_max, uint64_t bytes_max,
		int64_t age_max_ns, uint64_t ring_size)
{
	*r = (struct retain){ .count_max = count_max,
			      .bytes_max = bytes_max,
			      .age_max_ns = age_max_ns };
	if (!age_max_ns)
		return 0;
	/* At most one mark per message the ring can hold. */
	uint64_t cap = ring_size / CRS_FRAME_HEADER;
	r->cap = cap < MARKS_MAX ? (uint32_t)cap : MARKS_MAX;
	r->marks = calloc(r->cap, sizeof(*r->marks));
	return r->marks ? 0 : -ENOMEM;
}

void retain_free(struct retain *r)
{
	free(r->marks);
	r->marks = NULL;
}

void retain_reset(struct retain *r, uint64_t pos, uint64_t seq, uint64_t bytes)
{
	r->tail_pos = pos;
	r->tail_seq = seq;
	r->tail_bytes = bytes;
	r->head = r->len = 0;
}

static struct retain_mark *mark_at(const struct retain *r, uint32_t i)
{
	return &r->marks[(r->head + i) % r->cap];
}

void retain_note(struct retain *r, uint64_t seq, int64_t t)
{
	if (!r->marks)
		return;
	if (r->len && mark_at(r, r->len - 1)->t == t)
		return;
	if (r->len == r->cap) { /* full: forget the oldest distinction */
		r->head = (r->head + 1) % r->cap;
		r->len--;
	}
	*mark_at(r, r->len) = (struct retain_mark){ seq, t };
	r->len++;
}

/* Time at which the tail message was committed, from the marks. */
int64_t retain_oldest_time(const struct retain *r)
{
	int64_t t = INT64_MIN;
	for (uint32_t i = 0; i < r->len; i++) {
		const struct retain_mark *m = mark_at(r, i);
		if (m->seq > r->tail_seq)
			break;
		t = m->t;
	}
	return t;
}

static int too_old(struct retain *r, int64_t now)
{
	if (!r->age_max_ns)
		return 0;
	/* Drop marks wholly behind the tail (the next mark is too). */
	while (r->len > 1 && mark_at(r, 1)->seq <= r->tail_seq) {
		r->head = (r->head + 1) % r->cap;
		r->len--;
	}
	int64_t t = retain_oldest_time(r);
	return t != INT64_MIN && now - t > r->age_max_ns;
}

/* Move the tail past one frame. Returns 0 if there is none. */
static int advance(struct retain *r, const uint8_t *ring, uint64_t ring_size,
		   uint64_t pos)
{
	if (r->tail_pos >= pos)
		return 0;
	const struct ring_view v = { .base = ring,
				     .size = ring_size,
				     .mask = ring_size - 1 };
	uint64_t len;
	if (ring_next(&v, &r->tail_pos, &len)) {
		r->tail_seq++;
		r->tail_bytes += len;
	}
	return 1;
}

void retain_trim(struct retain *r, const uint8_t *ring, uint64_t ring_size,
		 uint64_t pos, uint64_t seq, uint64_t bytes, int64_t now,
		 uint64_t keep_from)
{
	for (;;) {
		int over = r->tail_pos < keep_from ||
			   (r->count_max && seq - r->tail_seq > r->count_max) ||
			   (r->bytes_max &&
			    bytes - r->tail_bytes > r->bytes_max) ||
			   (r->tail_seq < seq && too_old(r, now));
		if (!over || !advance(r, ring, ring_size, pos))
			return;
	}
}
