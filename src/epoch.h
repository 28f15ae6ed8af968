/*
 * epoch.h - the publisher's epoch part: connection epochs (connect,
 * autoConnect, disconnect), terminal signals, where each new subscriber
 * joins, and the replay buffer's retention. Above the hot part
 * (pubring.h), below the control part (serve.h): it knows each
 * subscriber only as the slot and control segment the control part
 * registers with it (epoch_member_add). Only epoch.c writes struct
 * pub_epoch.
 */
#ifndef CRS_EPOCH_H
#define CRS_EPOCH_H

#include <errno.h>
#include <stdint.h>

#include "crs/crs.h"
#include "layout.h"
#include "pubring.h"
#include "retain.h"
#include "terminal.h"

/* Publisher states: unconnected (before connect, after disconnect),
 * connected (publishing in an epoch), terminated (epoch completed or
 * failed; a new connect starts the next one). */
enum pub_state { PUB_IDLE = 0, PUB_CONNECTED, PUB_TERMINATED };

/* What a call that needs a connected publisher returns in state. */
static inline int pub_state_error(int state)
{
	return state == PUB_TERMINATED ? -ESHUTDOWN : -ENOTCONN;
}

/* A subscriber as the epoch part sees it. */
struct epoch_member {
	struct crs_ctl *ctl; /* NULL: no subscriber in this slot */
	uint64_t join_seq;   /* its demand counts from here */
	uint64_t join_pos;
	uint64_t epoch;	  /* the connection epoch it belongs to */
	uint64_t end_pos; /* where its epoch ended for it; UINT64_MAX
			     while the epoch runs */
};

/* Where a subscriber admitted now starts (epoch_join's decision). */
struct epoch_join {
	uint64_t pos, seq; /* its start */
	uint64_t epoch;	   /* the epoch it belongs to */
	uint64_t end_pos;  /* UINT64_MAX, or where its epoch ended: it joins
			      the replay of a terminated epoch */
	struct terminal_view end; /* then its terminal record */
};

struct pub_epoch {
	struct pub_ring *ring;
	int state;		/* enum pub_state */
	uint32_t mode;		/* enum crs_mode */
	uint32_t on_disconnect; /* enum crs_disconnect */
	int32_t auto_connect;	/* connect at this many subscribers; -1 no */
	uint64_t epoch;		/* current (or last) connection epoch */
	uint32_t max_subscribers;
	struct retain retain;
	int64_t (*clock)(void *ctx);
	void *clock_ctx;
	struct epoch_member members[CRS_SUBSCRIBERS_MAX];
};

/* Bounds and strategies from o (checked); 0 or -ENOMEM. Then
 * epoch_start: autoConnect(0) connects at once. */
CRS_MUST_USE int epoch_init(struct pub_epoch *e, struct pub_ring *ring,
			    const struct crs_pub_opts *o);
void epoch_start(struct pub_epoch *e);
void epoch_free(struct pub_epoch *e);
/* The publisher's clock (crs_pub_opts.clock, else CLOCK_MONOTONIC). */
int64_t epoch_now(const struct pub_epoch *e);

/* Where a subscriber admitted now starts, and which epoch it joins. */
struct epoch_join epoch_join(struct pub_epoch *e);
/* It was admitted to slot i with control segment ctl; it left. */
void epoch_member_add(struct pub_epoch *e, uint32_t slot, struct crs_ctl *ctl,
		      const struct epoch_join *j);
void epoch_member_drop(struct pub_epoch *e, uint32_t slot);
/* Connect if autoConnect's count of subscribers has been reached. */
void epoch_auto_connect(struct pub_epoch *e);

/* crs_pub_connect, crs_pub_complete/error (state: COMPLETE or ERROR),
 * crs_pub_disconnect, as crs.h says. epoch_terminate returns 0 (it
 * ended the epoch) or -errno; epoch_disconnect 1 if it ended one, 0 if
 * the epoch was not (or no longer) the current one. */
uint64_t epoch_connect(struct pub_epoch *e);
int epoch_terminate(struct pub_epoch *e, uint32_t state, int code,
		    const char *message);
int epoch_disconnect(struct pub_epoch *e, int64_t epoch);
/* Give everyone without a terminal record EPIPE (crs_pub_close). */
void epoch_close(struct pub_epoch *e);

/* Retention (replay mode): message seq-1 was just committed; a frame
 * will end at end (the retained ones it overwrites go); apply the
 * bounds now and mirror the figures for inspectors. */
void epoch_note(struct pub_epoch *e);
void epoch_overwrite(struct pub_epoch *e, uint64_t end);
void epoch_mirror(struct pub_epoch *e);

#endif
