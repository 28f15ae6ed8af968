/*
 * sub.h - the subscriber's private state, shared by sub.c (open, poll,
 * demand, waits) and loop.c (waiting for many subscriptions at once).
 */
#ifndef CRS_SUB_H
#define CRS_SUB_H

#include <stddef.h>
#include <stdint.h>

#include "attach.h"
#include "crs/crs.h"
#include "ipc/waitset.h"
#include "layout.h"
#include "opener.h"
#include "ring.h"

struct crs_sub {
	/* Hot: poll and release. */
	struct ring_view ring;
	uint32_t held;	   /* messages handed out by the last poll or take */
	uint64_t pos;	   /* the first of them, or the next to read */
	uint64_t held_end; /* where reading goes on once they are released */
	uint64_t stop_pos; /* where our epoch ended (our terminal record's
			      position); UINT64_MAX until we saw one */
	uint32_t record_seen; /* that record's state then (sub_note_stop),
				 CRS_TERM_NONE before */
	uint64_t seq;
	uint64_t requested; /* total, saturating */
	uint64_t received;
	/* requested, or 0 while cold (sub_limit_reads): the hot path
	 * reads on while received is below it, one test for two. */
	uint64_t read_limit;
	uint32_t prefetch;
	uint64_t replenish; /* request again after this many (prefetch) */
	/* Messages received since the last request, as far as received
	 * had come when sub_count_released last ran (counted holds that
	 * value: releases count in received alone). */
	uint64_t since_request;
	uint64_t counted;
	uint64_t published_pos; /* consumed position last stored */
	uint64_t publish_step;
	/* A release publishes once received reaches publish_due
	 * (sub_plan_publish) or pos is publish_step past published_pos:
	 * two tests instead of three counters to keep. */
	uint64_t publish_due;
	/* The header word at pos that the last release found committed
	 * (an acquire load), or 0 if none was. Valid while nothing is
	 * held: the next poll or take checks it (sub_next_hot) without
	 * loading it again. */
	uint64_t ready;
	/* sub_keep_distance: times sub_next found no message at once, and
	 * received and that count where its window began. */
	uint64_t nones, window_received, window_nones;
	uint32_t quiet_polls; /* empty polls left before sub_idle looks at
				 the clock (liveness) again */
	uint32_t wanted_seen; /* progress_wanted at the last publish */
	struct crs_ctl *ctl;
	const struct crs_data_header *hdr;
	int cold; /* sub_next takes the slow path: ended, opening, or a new
		     publisher to report */

	/* Cold. */
	int ended;
	int end_delivered;
	int pub_dead;
	int cancelled;
	int pub_fences;
	int pub_fence_ask;   /* CRS_SEG_PUB_FENCE_ASK: it fences on request */
	int parkers;	     /* announcements standing on our park word */
	uint64_t fence_word; /* CRS_PARK_FENCE once asked for and covered by
				a membarrier (park.h), else 0 */
	uint64_t parked_received; /* received at the last announcement */
	int64_t spin_ns;	  /* poll this long in waits before parking */
	int64_t next_liveness_ns;
	struct crs_end end;
	int sock;
	struct attach at; /* sockets and mappings */
	/* Opening without blocking, and following the name (opener.h). */
	char name[CRS_NAME_MAX + 1];
	int handshake_ms;
	int follow;	 /* crs_sub_opts.follow, until an end of our own */
	int opening;	 /* op runs; hdr and ctl are NULL meanwhile */
	int gap_pending; /* attached to a new publisher: report CRS_EGAP */
	uint64_t requested_before; /* totals of the streams before this one */
	uint64_t received_before;
	struct opener op;
	struct ipc_waitset *ws; /* for crs_sub_wait: keys 0, 1 */
	/* Bumped when what a waitset may be armed on goes away (the old
	 * stream's mapping, the opener's fds): waits armed before must be
	 * forgotten, not slept on (loop.c, wait_has_work). */
	uint32_t stream_gen;
	uint32_t wait_gen; /* stream_gen when crs_sub_wait last armed */
	/* A merged subscription of a shared stream (merge.c): every call
	 * goes there; the fields above hold only its demand and end. */
	struct sub_merge *merge;
};

/* For loop.c, which reads no field itself. Bumped when what a waitset
 * may be armed on goes away (stream_gen); the end was told to the
 * application, or it cancelled (end_delivered); follows the name to its
 * next publisher (follow). */
static inline uint32_t sub_stream_gen(const struct crs_sub *sub)
{
	return sub->stream_gen;
}
static inline int sub_end_told(const struct crs_sub *sub)
{
	return sub->end_delivered;
}
static inline int sub_follows(const struct crs_sub *sub)
{
	return sub->follow;
}

/* 1 if crs_sub_poll() would return non-zero now (a message within
 * demand, or the end), 0 otherwise. */
int sub_has_work(struct crs_sub *sub);
/* park.h hooks, also used by loop.c. Announce that we sleep on the
 * current data_signal (our park word, nested: counted in parkers) and
 * arm ws to wake when it moves (key base) or the liveness socket stirs
 * (key base + 1). Returns PARK_* flags. */
int sub_announce(struct crs_sub *sub, struct ipc_waitset *ws, uint64_t base);
/* Withdraw one announcement; the last one clears the park word. */
void sub_withdraw(struct crs_sub *sub);
/* The liveness socket stirred: the publisher is gone (or misbehaves). */
void sub_hangup(struct crs_sub *sub);

/* sub_next's answer for a merged subscription (never returned to the
 * application: crs_sub_poll and crs_sub_take hand over to merge.c). */
#define SUB_MERGED (-CRS_ELAST - 1)

/* ---- merged subscriptions (merge.c) ----------------------------------
 * One crs_sub over the member streams of a shared stream
 * (crs_pub_opts.shared), one member subscription per publisher,
 * discovered in the runtime directory as they join. sub.c hands every
 * call on a subscription with sub->merge set to these. */

/* 1 if crs_sub_open(name) should merge: name is not a member name and
 * is marked shared (or o->shared). */
int merge_wanted(const char *name, const struct crs_sub_opts *o);
/* Make sub (fresh from crs_sub_open: demand set) a merged subscription
 * of name. 0 or -errno. */
int merge_open(struct crs_sub *sub, const char *name,
	       const struct crs_sub_opts *o);
/* As sub_take (crs_sub_dispatch), and as crs_sub_take (which tells the
 * application of the end). */
int merge_take(struct crs_sub *sub, struct crs_msg *msgs, size_t max,
	       size_t max_bytes);
int merge_poll(struct crs_sub *sub, struct crs_msg *msgs, size_t max,
	       size_t max_bytes);
void merge_release(struct crs_sub *sub);
int merge_request(struct crs_sub *sub, uint64_t n);
void merge_cancel(struct crs_sub *sub);
/* crs_sub_wait's sleep for a merge: until a member has work, one
 * joins, or the deadline. */
void merge_park(struct crs_sub *sub, int64_t deadline);
/* The hooks above for crs_loop (and crs_sub_wait). A loop gets one key
 * for the whole merge: the fd of a waitset of its own, armed on every
 * member. */
int merge_has_work(struct crs_sub *sub);
int merge_announce(struct crs_sub *sub, struct ipc_waitset *ws, uint64_t base);
void merge_withdraw(struct crs_sub *sub);
/* Close the members and free the merge (sub itself stays). */
void merge_close(struct crs_sub *sub);

#endif
