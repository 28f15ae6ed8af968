/*
 * terminal.h - writing and reading a terminal record (layout.h) safely:
 * the writer stores every field before the state (release); the reader
 * loads the state (acquire), copies the rest and NUL-terminates the
 * message itself, since the bytes in shared memory are untrusted.
 *
 * A record is written once. Afterwards the writer changes its state word
 * alone, never the other fields, which a reader may be copying at that
 * moment: an eviction keeps its reason in a record of its own
 * (crs_ctl.evict) and then sets the state to EVICTED.
 */
#ifndef CRS_TERMINAL_H
#define CRS_TERMINAL_H

#include <string.h>

#include "atomics.h"
#include "layout.h"

struct terminal_view {
	uint32_t state; /* enum crs_term_state; anything else is corrupt */
	int code;
	uint64_t pos;
	uint64_t seq;
	char message[CRS_ERRMSG_MAX + 1];
};

static inline void terminal_put(struct crs_terminal *t, uint32_t state,
				int code, uint64_t pos, uint64_t seq,
				const char *message)
{
	t->code = code;
	t->pos = pos;
	t->seq = seq;
	memset(t->message, 0, sizeof(t->message));
	if (message)
		strlcpy(t->message, message, CRS_ERRMSG_MAX + 1);
	/* Pairs with the acquire load in terminal_get(). */
	shm_store_release(&t->state, state);
}

static inline uint32_t terminal_get(const struct crs_terminal *t,
				    struct terminal_view *v)
{
	v->state = shm_load_acquire(&t->state);
	if (v->state == CRS_TERM_NONE)
		return v->state;
	v->code = t->code;
	v->pos = t->pos;
	v->seq = t->seq;
	memcpy(v->message, t->message, CRS_ERRMSG_MAX);
	v->message[CRS_ERRMSG_MAX] = 0;
	return v->state;
}

/* Evict the subscriber of ctl: its reason first, then EVICTED in the
 * state word (release), whatever record it had; that record's other
 * fields are not touched. The slot is dropped right after, so nothing
 * writes evict again. */
static inline void terminal_evict(struct crs_ctl *ctl, int code,
				  const char *message)
{
	ctl->evict.code = code;
	memset(ctl->evict.message, 0, sizeof(ctl->evict.message));
	if (message)
		strlcpy(ctl->evict.message, message, CRS_ERRMSG_MAX + 1);
	/* Pairs with the acquire load in terminal_get_ctl(). */
	shm_store_release(&ctl->term.state, (uint32_t)CRS_TERM_EVICTED);
}

/* A subscriber's own end (ctl->term), with code and message of its
 * eviction record when it was evicted. */
static inline uint32_t terminal_get_ctl(const struct crs_ctl *ctl,
					struct terminal_view *v)
{
	if (terminal_get(&ctl->term, v) == CRS_TERM_EVICTED) {
		/* After the acquire in terminal_get(): written before. */
		v->code = ctl->evict.code;
		memcpy(v->message, ctl->evict.message, CRS_ERRMSG_MAX);
		v->message[CRS_ERRMSG_MAX] = 0;
	}
	return v->state;
}

#endif
