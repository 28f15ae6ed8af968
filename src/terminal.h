/*
 * terminal.h - writing and reading a terminal record (layout.h) safely:
 * the writer stores every field before the state (release); the reader
 * loads the state (acquire), copies the rest and NUL-terminates the
 * message itself, since the bytes in shared memory are untrusted.
 */
#ifndef CRS_TERMINAL_H
#define CRS_TERMINAL_H

#include <string.h>

#include "atomics.h"
#include "layout.h"

struct crs_terminal_view {
	uint32_t state; /* enum crs_term_state; anything else is corrupt */
	int code;
	uint64_t pos;
	uint64_t seq;
	char message[CRS_ERRMSG_MAX + 1];
};

static inline void crs_terminal_put(struct crs_terminal *t, uint32_t state,
				    int code, uint64_t pos, uint64_t seq,
				    const char *message)
{
	t->code = code;
	t->pos = pos;
	t->seq = seq;
	memset(t->message, 0, sizeof(t->message));
	if (message)
		strlcpy(t->message, message, CRS_ERRMSG_MAX + 1);
	/* Pairs with the acquire load in crs_terminal_get(). */
	crs_store_release(&t->state, state);
}

static inline uint32_t crs_terminal_get(const struct crs_terminal *t,
					struct crs_terminal_view *v)
{
	v->state = crs_load_acquire(&t->state);
	if (v->state == CRS_TERM_NONE)
		return v->state;
	v->code = t->code;
	v->pos = t->pos;
	v->seq = t->seq;
	memcpy(v->message, t->message, CRS_ERRMSG_MAX);
	v->message[CRS_ERRMSG_MAX] = 0;
	return v->state;
}

#endif
