/*
 * pubring.h - the publisher's hot part: its view of the ring (position,
 * sequence, the cached demand and room limits), claim and commit,
 * deferred frames, and waking parked subscribers after a commit. The
 * bottom layer of the publisher (pub.h says how the parts stack): it
 * knows nothing of subscribers' sockets, epochs or retention. The parts
 * above set what it steers by (pubring_set_limits, pubring_set_open,
 * pubring_set_parked) and act on what it reports (pubring_commit_slow,
 * pubring_count).
 * Only pubring.h and pubring.c write struct pub_ring.
 *
 * Wakeups follow park.h. As a waker, commit stores the frame header and
 * then reads each subscriber's park word (pubring_parked); the
 * store-load order this needs comes from a full fence (fences) or,
 * when this process is registered for membarrier, from the membarrier()
 * a parking subscriber runs, which keeps the fence off this hot path.
 */
#ifndef CRS_PUBRING_H
#define CRS_PUBRING_H

#include <errno.h>
#include <stddef.h>
#include <stdint.h>

#include "atomics.h"
#include "crs/crs.h"
#include "frame.h"
#include "layout.h"
#include "park.h"
#include "ring.h"

#define PUB_SERVE_EVERY 16 /* messages between clock checks */

/* Two 64-bit counters as one value (GCC vector extension; plain code
 * where the target has no 16-byte registers). Aligned as a uint64_t:
 * the handle needs no 16-byte alignment, and unaligned 16-byte stores
 * cost the same as aligned ones where they exist. */
typedef uint64_t pubring_v2u64 __attribute__((vector_size(16), aligned(8)));

/* The subscribers' words commit reads to decide on a wake (wake_due in
 * pubring.c). */
struct pubring_watch {
	const _Atomic uint64_t *consumed; /* its ctl->consumed */
	uint64_t woke_consumed; /* consumed when its park word last made us
				   wake; valid while woke */
	int woke;
};

struct pub_ring {
	/* Read by every claim and commit. */
	uint8_t *ring;
	uint64_t ring_size;
	uint64_t mask;
	uint64_t pos; /* next frame's position */
	/* seq and bytes, moved together by every commit with one 16-byte
	 * store (pubring_commit): one store fewer in the store buffer. */
	union {
		struct {
			uint64_t seq;	/* next message's sequence */
			uint64_t bytes; /* payload bytes committed */
		};
		pubring_v2u64 seq_bytes;
	};
	uint64_t credit_limit; /* may publish while seq < credit_limit */
	/* A claim takes the fast path while its frame ends at or before
	 * this position: the room limit less the next header slot, and the
	 * end of the ring's current lap (a frame never wraps), or 0 while
	 * claims go the slow way (pubring_limit_claims). One test for
	 * three. */
	uint64_t claim_limit;
	/* Where the open claim's payload would end + 1: pos + len + 1. A
	 * claim is open while claim_end > pos (pubring_claim_open); a
	 * commit of the claimed length moves pos past it (a frame takes
	 * len + 8 bytes or more), which closes it without a store.
	 * The hot path keeps its stores few: while a store waits for a
	 * ring line the reader took, the ones behind it fill the store
	 * buffer, and then the publisher stalls (a few more stores per
	 * message halve the rate at 32 B). The words the claim tests are
	 * 64-bit for a like reason: a test of two 4-byte fields must not
	 * become one 8-byte load, which cannot take a 4-byte value just
	 * stored from the store buffer and waits for every older store to
	 * reach the cache. */
	uint64_t claim_end;
	/* The ring holds zeros from pos + 8 up to here, but for an open
	 * claim's payload: a commit whose next header slot lies below it
	 * need not zero that slot. Raised by pubring_clean_ahead, never
	 * while a claim is open; lowered where a claim's bytes stay behind
	 * (pubring_unclean): an abort, a commit shorter than its claim. */
	uint64_t clean_end;
	/* Commits take the slow path once seq reaches this: at the tick,
	 * or at once while they note, flush or fence (limit_commits in
	 * pubring.c).
	 * One test for four. */
	uint64_t commit_limit;
	int more; /* deferred frames wait for a flush */
	/* The count pubring_set_tick was given last (in a hole: a field
	 * that changed the handle's size moved the allocations behind it,
	 * which cost a spinning round trip a third on an AMD VM). */
	uint32_t tick_every;
	uint64_t more_pos;   /* the first one: its header is stored last */
	uint64_t more_word;  /* and is this */
	uint64_t more_seq;   /* seq and bytes before the first one: what */
	uint64_t more_bytes; /* readers can see until the flush */
	int notes;  /* commits are noted (epoch_note): retention marks */
	int fences; /* full fence per commit: membarrier unavailable */
	uint32_t max_message;
	uint32_t signal; /* our copy of data_signal */
	int nparked;
	/* The park words of nparked subscribers; without any, parked[0]
	 * is a word of our own that stays 0. */
	const _Atomic uint64_t *parked[CRS_SUBSCRIBERS_MAX];
	struct crs_data_header *hdr;
	/* Read on slow paths: what claim_limit and commit_limit stand for,
	 * and what a wake that a park word says may be due reads. */
	int open;   /* connected: claims are allowed (epoch.c says) */
	int replay; /* CRS_MODE_REPLAY: every claim goes the slow way */
	uint64_t room_limit; /* frames must end 8 bytes before this */
	uint64_t tick_seq;   /* the next tick is due once seq reaches it */
	uint64_t tick_pos;   /* pos at the last tick */
	struct pubring_watch watch[CRS_SUBSCRIBERS_MAX];
};

/* The ring of ring_size bytes after hdr (already mapped). */
void pubring_init(struct pub_ring *r, struct crs_data_header *hdr,
		  uint64_t ring_size, uint32_t max_message, int replay,
		  int fences);
/* Claims allowed (connected) or not; a closed ring also ends a claim. */
void pubring_set_open(struct pub_ring *r, int open);
/* Commits are noted (epoch_note): retention keeps age marks. */
void pubring_set_notes(struct pub_ring *r, int notes);
/* The limits control_recompute found (serve.c); pubring_hold: none
 * until the next recompute (the subscriber set or the epoch changed). */
void pubring_set_limits(struct pub_ring *r, uint64_t credit, uint64_t room);
void pubring_hold(struct pub_ring *r);
/* The subscribers whose park words commit reads: n of them, in the
 * order of the control part's active list. Forgets earlier wakes. */
void pubring_set_parked(struct pub_ring *r, int n, struct crs_ctl *const *ctls);
/* Messages until the next tick (pubring_count). */
void pubring_set_tick(struct pub_ring *r, int messages);
/* After a claim on the slow path: the lap may have changed. */
void pubring_limit_claims(struct pub_ring *r);
/* Wake every parked subscriber (unconditionally: terminal signals). */
void pubring_wake_all(struct pub_ring *r);
/* Ask subscribers to publish their consumed position at their next
 * release (progress_wanted). */
void pubring_want_progress(struct pub_ring *r);
/* pubring_wake_if_parked's slow path, from park word i on (w: its
 * value, with a flag set): fence if asked, then wake if one sleeps on
 * the signal. */
void pubring_wake_from(struct pub_ring *r, int i, uint64_t w);
/* At a tick: if the frames since the last one were small, zero the
 * ring ahead of pos (as far as room allows), so that the commits to come
 * need not zero their next header slots one by one. Not while a claim
 * is open (a flush may tick then): its payload lies ahead of pos. */
void pubring_clean_ahead(struct pub_ring *r);
/* Store position and counters for inspectors (crs_stream_info): kept
 * here by every commit and stored only at a tick, a serve or a flush,
 * so the data path stores no shared line per message. */
void pubring_mirror(struct pub_ring *r);
/* Publish the deferred frames: their count (0: none). */
int pubring_flush(struct pub_ring *r);
/* A padding frame of pad bytes at pos (committed even if the claim is
 * then aborted: readers step over it by its header alone). */
void pubring_pad(struct pub_ring *r, uint64_t pad);

/* Bytes a message of len takes at the current position, with the
 * padding frame needed when it does not fit before the ring's end. */
static inline uint64_t pubring_need(const struct pub_ring *r, size_t len,
				    uint64_t *pad)
{
	uint64_t frame = frame_size(len);
	*pad = ring_pad_needed(r->pos & r->mask, frame, r->ring_size);
	return *pad + frame;
}

/* Can a frame of need bytes (padding included) be written now, by the
 * cached limits? 0, -CRS_ENODEMAND or -CRS_ENOROOM. */
static inline int pubring_check(const struct pub_ring *r, uint64_t need)
{
	if (r->seq >= r->credit_limit)
		return -CRS_ENODEMAND;
	if (ring_end(r->pos, need) > r->room_limit)
		return -CRS_ENOROOM;
	return 0;
}

/* Is a claim open? */
static inline int pubring_claim_open(const struct pub_ring *r)
{
	return r->claim_end > r->pos;
}

/* Open a claim of len bytes at the current position (checked). */
static inline void *pubring_take(struct pub_ring *r, size_t len)
{
	r->claim_end = r->pos + len + 1;
	return r->ring + ring_payload_offset(r->mask, r->pos);
}

/* The claim fast path: 0 with *buf, or 1 if anything is unusual (the
 * caller's slow path sorts it out; nothing was changed). */
static inline int pubring_claim(struct pub_ring *r, size_t len, void **buf)
{
	uint64_t frame = frame_size(len);
	/* Everything unusual in one test: the cached limits say whether
	 * demand and room allow it (control_recompute refreshes them). */
	if (__builtin_expect(pubring_claim_open(r) || len > r->max_message ||
				     r->seq >= r->credit_limit ||
				     r->pos + frame > r->claim_limit,
			     0))
		return 1;
	*buf = pubring_take(r, len);
	return 0;
}

/* The ring from position from on no longer counts as zeroed ahead: a
 * claim's bytes stay behind there (the next clean-ahead zeroes them
 * again). */
static inline void pubring_unclean(struct pub_ring *r, uint64_t from)
{
	if (r->clean_end > from)
		r->clean_end = from;
}

/* End the open claim (if any) without a commit. */
static inline void pubring_abort(struct pub_ring *r)
{
	if (!pubring_claim_open(r))
		return;
	r->claim_end = 0;
	pubring_unclean(r, r->pos + CRS_FRAME_HEADER);
}

/* After a commit: the first park word with a flag set (a subscriber
 * sleeps, or asks for fences), or -1; pubring_wake_from(i) takes it
 * from there. fenced: r->fences, or 0 where the caller knows it is. */
static inline int pubring_parked_fenced(const struct pub_ring *r, int fenced)
{
	/* Orders the header store of the commit before the loads of the
	 * park words: pairs with the fence in park_begin() after
	 * sub_announce(). Registered for membarrier, a compiler fence: a
	 * word that needs the order carries CRS_PARK_FENCE, and one
	 * without it is covered by the membarrier() its subscriber runs
	 * before relying on the fence (park.h). */
	park_waker_fence(fenced);
	/* parked[0] is always there to load (pubring_set_parked): the
	 * common single subscriber costs one test, no loop. */
	if (__builtin_expect(shm_load_relaxed(r->parked[0]) >> 32 != 0, 0))
		return 0;
	for (int i = 1; i < r->nparked; i++)
		if (__builtin_expect(shm_load_relaxed(r->parked[i]) >> 32 != 0,
				     0))
			return i;
	return -1;
}

static inline int pubring_parked(const struct pub_ring *r)
{
	return pubring_parked_fenced(r, r->fences);
}

/* After a commit: the slow path is due (a tick, a note, a flush or a
 * fence: limit_commits in pubring.c). Otherwise it only wakes
 * (pubring_parked_fenced(r, 0)): commits do not fence then. */
static inline int pubring_commit_slow(const struct pub_ring *r)
{
	return r->seq >= r->commit_limit;
}

/* After a commit: wake subscribers parked on the current signal. */
static inline void pubring_wake_if_parked(struct pub_ring *r)
{
	int i = pubring_parked(r);
	if (i >= 0)
		pubring_wake_from(r, i, shm_load_relaxed(r->parked[i]));
}

/* After a commit (or flush): 1 if the messages up to the next tick are
 * out (PUB_SERVE_EVERY of them, pubring_set_tick), time for the caller
 * to mirror the figures, serve if due and set the next count: every
 * caller does. A test of seq, so that counting stores nothing. */
static inline int pubring_count(const struct pub_ring *r)
{
	return r->seq >= r->tick_seq;
}

/* Commit len bytes of the open claim; more: defer its header to the
 * next flush (then nothing is left to do). Returns 0 or -EINVAL (no
 * claim, or longer than claimed). Without more, the caller goes on
 * with its slow path if pubring_commit_slow says so (note, flush, fence,
 * wake, count), else it only wakes (pubring_parked_fenced(r, 0)). */
static inline int pubring_commit(struct pub_ring *r, size_t len, int more)
{
	uint64_t pos = r->pos;
	/* No claim open, or longer than claimed. */
	if (__builtin_expect(!pubring_claim_open(r) ||
				     len >= r->claim_end - pos,
			     0))
		return -EINVAL;
	uint64_t next = pos + frame_size(len);
	/* Shorter than the claimed payload, which may have been written
	 * over the next header slot and past it: that no longer counts as
	 * zeroed, and the claim ends here (pos may not pass claim_end). */
	if (__builtin_expect(next < r->claim_end + CRS_FRAME_HEADER - 1, 0)) {
		r->claim_end = 0;
		pubring_unclean(r, next);
	}
	/* The next header slot must read 0 before this header is stored:
	 * zero it unless it lies in what was zeroed ahead. */
	if (__builtin_expect(next + CRS_FRAME_HEADER > r->clean_end, 0))
		ring_clear(r->ring, r->mask, next);
	if (more && !r->more) {
		/* The first deferred frame: its header is stored last, at
		 * the flush; readers stop at it until then, also at the
		 * frames behind it whose headers are stored now. */
		r->more = 1;
		r->commit_limit = 0; /* the next plain commit flushes */
		r->more_pos = pos;
		r->more_word = frame_word(pos, (uint32_t)len);
		r->more_seq = r->seq;
		r->more_bytes = r->bytes;
	} else {
		ring_publish(r->ring, r->mask, pos,
			     frame_word(pos, (uint32_t)len));
	}
	r->pos = next;
	r->seq_bytes += (pubring_v2u64){ 1, len };
	return 0;
}

#endif
