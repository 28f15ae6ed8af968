/*
 * sub.c - the subscriber: opening a stream (handshake, checks, read-only
 * mapping), polling frames in place, demand (request/prefetch/cancel),
 * terminal signals and blocking waits.
 *
 * Everything read from the data segment is untrusted: frames go through
 * ring.h's checks, the terminal record and the layout header are
 * checked before use, and a bad value ends this subscription with
 * CRS_EPROTO instead of an out-of-bounds read.
 *
 * Waits follow park.h: this file gives its hooks (sub_announce,
 * sub_has_work, sub_withdraw) and, as a waker, publishes demand and
 * wakes a parked publisher (sub_publish).
 */
#include <errno.h>
#include <limits.h>
#include <poll.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "atomics.h"
#include "attach.h"
#include "credit.h"
#include "handle.h"
#include "ipc/clock.h"
#include "ipc/futex.h"
#include "ipc/sock.h"
#include "ipc/waitset.h"
#include "layout.h"
#include "park.h"
#include "sub.h"
#include "terminal.h"

/* The default demand window, in messages: so large that the ring, not
 * demand, bounds the publisher (1 MiB ring: up to 26214 frames of
 * 32 B), which also bounds it in bytes. Measured in one crs-bench run
 * (clean rounds, 2026-12-01), spinning, 8 MiB ring, M msgs/s: at 32 B
 * prefetch 128 30.9, 16384 45.4, unbounded 75.1; at 64 KiB 0.78, 1.04,
 * 0.99. Demand refills come in steps of 3/4 of the window, the ring's
 * room in steps of 256 messages or a quarter ring. */
#define DEFAULT_PREFETCH (1u << 20)
#define DEFAULT_HANDSHAKE_MS 5000
#define LIVENESS_NS 1000000LL /* check the socket at most every 1 ms */
#define SPIN_BACKOFF_MAX 64   /* most pause hints between two polls */
/* Empty polls that find nothing else to do before one looks at the
 * clock: a clock read per empty poll was the larger part of an empty
 * poll, and an empty poll's length is how late a spinning reader sees
 * the next message. */
#define QUIET_POLLS 64
/* Report progress at least every this many messages (or ring/4 bytes),
 * so a busy but slow reader never looks stalled to the publisher. */
#define PUBLISH_EVERY 256
/* Commit fences asked for (park.h) are given back after this many
 * messages without a sleep: asking again costs one membarrier(), about
 * 9 us with the publisher running (a cross-CPU interrupt in a VM), the
 * price of a few hundred commit fences. */
#define FENCE_ASK_KEEP 256
/* A take adds no message whose frame starts this far past the batch's
 * first: its look-ahead walks header to header, one dependent load per
 * frame that skips the payload between, so over frames of a kilobyte or
 * more it cost more than the batch saved (crs-take, 64 a take, at 1 KiB
 * and 4 KiB: 0.36-0.48 of the faster ring against poll's 0.88-0.92;
 * bounded here, 0.53-0.94, x1.46-1.95 in a same-run A/B on an Intel
 * VM). Small frames keep their batches (64 of 32 B span 2.5 KiB). */
#define TAKE_LOOKAHEAD 4096u
/* Messages crs_sub_dispatch takes (and releases) at once. */
#define DISPATCH_BATCH 64

void crs_sub_opts_init(struct crs_sub_opts *o)
{
	memset(o, 0, sizeof(*o));
	o->prefetch = DEFAULT_PREFETCH;
	o->wait_ms = 0;
	o->handshake_ms = DEFAULT_HANDSHAKE_MS;
}

/* After cold or requested changed: what sub_next_hot reads by. */
static void sub_limit_reads(struct crs_sub *sub)
{
	sub->read_limit = sub->cold ? 0 : sub->requested;
}

/* The first end seen is the one reported. */
static void sub_end(struct crs_sub *sub, int code, const char *message)
{
	if (sub->ended)
		return;
	sub->ended = 1;
	sub->cold = 1;
	sub_limit_reads(sub);
	sub->end.code = code;
	memset(sub->end.message, 0, sizeof(sub->end.message));
	if (message)
		strlcpy(sub->end.message, message, sizeof(sub->end.message));
}

/* Bring since_request up to the messages received (releases count them
 * in received alone). */
static void sub_count_released(struct crs_sub *sub)
{
	if (sub->prefetch)
		sub->since_request += sub->received - sub->counted;
	sub->counted = sub->received;
}

/* Which release publishes by count: the one PUBLISH_EVERY messages on,
 * or the one that replenishes the prefetch if that comes first. */
static void sub_plan_publish(struct crs_sub *sub)
{
	uint64_t due = PUBLISH_EVERY;
	if (sub->prefetch) {
		uint64_t left = sub->since_request >= sub->replenish
					? 0
					: sub->replenish - sub->since_request;
		if (left < due)
			due = left;
	}
	sub->publish_due = sub->received + due;
}

/* Store our consumed position and demand, then wake the publisher if it
 * sleeps: the waker's side of park.h, with progress as the word W. */
static void sub_publish(struct crs_sub *sub)
{
	struct crs_ctl *c = sub->ctl;
	sub_count_released(sub);
	/* A request of the publisher read now is answered by this publish
	 * (relaxed: nothing is read behind it). */
	sub->wanted_seen = shm_load_relaxed(&sub->hdr->signal.progress_wanted);
	/* The release stores of consumed and requested pair with the
	 * acquire loads in control_recompute(); the one of progress, with
	 * the acquire loads in control_progress() and
	 * control_progress_changed(): a publisher that sees the new
	 * progress sees the demand behind it. */
	shm_store_relaxed(&c->consumed_seq, sub->seq);
	shm_store_release(&c->consumed, sub->pos);
	shm_store_release(&c->requested, sub->requested);
	shm_inc_release(&c->progress);
	sub->published_pos = sub->pos;
	sub_plan_publish(sub);
	/* Orders the stores above before the load of pub_parked; pairs
	 * with the fence in park_begin() after pub_announce(). */
	park_waker_fence(1);
	if (shm_load_relaxed(&sub->hdr->signal.pub_parked))
		ipc_futex_wake(&c->progress, 1);
}

static void sub_liveness(struct crs_sub *sub, int64_t now)
{
	sub->next_liveness_ns = now + LIVENESS_NS;
	if (!sub->pub_dead && ipc_fd_poll(sub->sock, POLLIN | POLLRDHUP, 0) > 0)
		sub->pub_dead = 1;
}

/* Learn where our epoch stops, once the publisher has written our
 * terminal record: nothing at or past its position is ours (the next
 * epoch's frames follow there). Called after an acquire load showed a
 * position or frame we did not know: a record written before those is
 * then visible. The first position seen stays: a record is not moved
 * (sub_idle calls one that was corrupt). record_seen keeps the state it
 * had, so that the hot path reads on up to stop_pos while the record
 * stays as it was (sub_record_allows). */
/* A record that ends our epoch at its position: COMPLETE, ERROR or
 * DETACHED (EVICTED ends it at once; anything else is corrupt). */
static int record_ends_at_pos(uint32_t state)
{
	return state == CRS_TERM_COMPLETE || state == CRS_TERM_ERROR ||
	       state == CRS_TERM_DETACHED;
}

static void sub_note_stop(struct crs_sub *sub)
{
	uint32_t state;
	if (sub->stop_pos == UINT64_MAX) {
		struct terminal_view t;
		state = terminal_get(&sub->ctl->term, &t);
		if (record_ends_at_pos(state))
			sub->stop_pos = t.pos;
	} else {
		state = shm_load_acquire(&sub->ctl->term.state);
	}
	if (record_ends_at_pos(state))
		sub->record_seen = state;
}

/* Is the record where sub_note_stop first saw it (or not noted yet)? */
static int record_in_place(const struct crs_sub *sub,
			   const struct terminal_view *t)
{
	return sub->stop_pos == UINT64_MAX || t->pos == sub->stop_pos;
}

/* Is a frame committed at pos? (The tag check alone decides: a word
 * that a dying publisher left half-written never matches.) */
static int frame_committed(const struct crs_sub *sub)
{
	uint64_t len;
	return ring_frame_at(&sub->ring, sub->pos, &len) != RING_NONE;
}

/* No terminal record of ours is out (relaxed: after an acquire that
 * showed a frame, a record written before it is visible). One load of a
 * line of ours that the publisher writes once. */
static inline int sub_no_record(const struct crs_sub *sub)
{
	return shm_load_relaxed(&sub->ctl->term.state) == CRS_TERM_NONE;
}

/* May the frame at pos be read on the hot path, as far as our terminal
 * record goes? Yes while its state is as sub_note_stop last saw it (none
 * at first) and pos lies before the position it noted (UINT64_MAX until
 * then): a stream that ended drains as fast as one that runs, and never
 * past its epoch's end, whatever the record says later. Any change (a
 * first record, an eviction, DETACHED becoming ERROR, a record taken
 * back) sends the reader through sub_next_slow. */
static inline int sub_record_allows(const struct crs_sub *sub, uint64_t pos)
{
	return __builtin_expect(shm_load_relaxed(&sub->ctl->term.state) ==
					sub->record_seen,
				1) &&
	       pos < sub->stop_pos;
}

/* The hot test of word, the committed header at pos: 1 with its length
 * if it is a message that lies inside the ring and within max_message,
 * before the end of our epoch as far as we know it (sub_record_allows);
 * 0 for anything else (padding, a record to look at, the end of the
 * epoch, a corrupt header), which sub_next_slow() sorts out with
 * ring_check(). */
static inline int sub_readable(const struct crs_sub *sub, uint64_t word,
			       uint64_t pos, uint64_t *len)
{
	/* After the acquire that showed the frame: a terminal record the
	 * publisher wrote before it (an epoch ended here, the next one's
	 * frames follow; or we were evicted) is visible now. */
	if (__builtin_expect(!sub_record_allows(sub, pos), 0))
		return 0;
	if (__builtin_expect(!ring_message_fits(&sub->ring, word, pos), 0))
		return 0;
	*len = frame_word_len_flags(word);
	return 1;
}

/* sub_readable() of the frame at pos, 0 if none is committed there. */
static inline int sub_peek(const struct crs_sub *sub, uint64_t pos,
			   uint64_t *len)
{
	uint64_t word = ring_load(&sub->ring, pos);
	return ring_committed(word, pos) && sub_readable(sub, word, pos, len);
}

/* Step over the padding frame of len at pos; what the last release
 * cached (ready) was for the old pos. */
static void sub_skip(struct crs_sub *sub, uint64_t len)
{
	sub->pos += len;
	sub->ready = 0;
}

/* Step over committed padding frames at pos (they need no demand), but
 * not over the next epoch's. */
static void skip_padding(struct crs_sub *sub)
{
	while (sub->pos < sub->stop_pos) {
		uint64_t len;
		if (ring_frame_at(&sub->ring, sub->pos, &len) != RING_PADDING)
			return;
		sub_note_stop(sub); /* after the acquire: see there */
		if (sub->pos >= sub->stop_pos)
			return;
		sub_skip(sub, len);
	}
}

/* Nothing committed at pos: see whether the stream ended here. */
static int sub_idle(struct crs_sub *sub)
{
	skip_padding(sub); /* a terminal may lie just past it */
	if (sub->pos != sub->published_pos)
		sub_publish(sub);
	struct terminal_view t;
	switch (terminal_get_ctl(sub->ctl, &t)) {
	case CRS_TERM_NONE:
		break;
	case CRS_TERM_EVICTED:
		sub->follow = 0; /* cut off for what we did */
		sub_end(sub, t.code > 0 ? t.code : CRS_EPROTO, t.message);
		return -CRS_EEND;
	case CRS_TERM_COMPLETE:
	case CRS_TERM_ERROR:
		if (!record_in_place(sub, &t))
			goto corrupt; /* moved: a record is written once */
		if (t.pos == sub->pos) {
			if (t.state == CRS_TERM_COMPLETE)
				sub_end(sub, 0, NULL);
			else
				sub_end(sub, t.code > 0 ? t.code : CRS_EPROTO,
					t.message);
			return -CRS_EEND;
		}
		if (t.pos > sub->pos)
			break; /* messages before it are still to come */
		goto corrupt;  /* a terminal behind us */
	case CRS_TERM_DETACHED:
		/* Our epoch ended without a signal (NO_EVENT): nothing
		 * more, until the publisher closes (the record becomes
		 * ERROR) or dies (we see the hangup). */
		if (t.pos >= sub->pos && record_in_place(sub, &t))
			break;
		goto corrupt;
	default:
	corrupt:
		sub->follow = 0;
		sub_end(sub, CRS_EPROTO, "corrupt terminal record");
		return -CRS_EEND;
	}
	sub->quiet_polls = QUIET_POLLS;
	int64_t now = ipc_now_ns();
	if (now >= sub->next_liveness_ns)
		sub_liveness(sub, now);
	/* A dead publisher's committed messages stay readable in our
	 * mapping: deliver them (as demand allows), then its terminal
	 * record if it wrote one, and EPIPE only after that. Its headers
	 * say what it committed: a frame it died writing has none. */
	if (sub->pub_dead) {
		sub_note_stop(sub);
		if (sub->pos >= sub->stop_pos || !frame_committed(sub)) {
			sub_end(sub, EPIPE, "publisher died");
			return -CRS_EEND;
		}
	}
	return 0;
}

static int sub_cold(struct crs_sub *sub, uint64_t *len);
static void sub_stop_opening(struct crs_sub *sub);

/* An empty poll with nothing else to do: no frame at pos (a relaxed
 * look: nothing is read behind it), our consumed position published,
 * no terminal record, publisher not known dead, and no look at the
 * clock due. The common case of a reader that has caught up. */
static inline int sub_quiet(struct crs_sub *sub)
{
	return !sub->cold && sub->received < sub->requested &&
	       !ring_committed(ring_peek(&sub->ring, sub->pos), sub->pos) &&
	       sub->pos == sub->published_pos && sub_no_record(sub) &&
	       !sub->pub_dead && sub->quiet_polls && --sub->quiet_polls;
}

/* A caught-up reader, polling for the frame at pos, also keeps the
 * ring's next line in its cache: a small frame that straddles the two
 * then arrives in both at once, not in one after the other (a spinning
 * round trip at 32 B, 40-byte frames: 491 -> 439 ns p50, 9 rounds per
 * build). A prefetch of our own mapping: nothing is read. */
static inline void sub_warm_next_line(const struct crs_sub *sub)
{
	uint64_t next = ((sub->pos & sub->ring.mask) | (CRS_CACHELINE - 1)) + 1;
	__builtin_prefetch(sub->ring.base + (next & sub->ring.mask));
}

/* sub_next's slow path: every case sub_peek() leaves out. */
static __attribute__((noinline, cold)) int sub_next_slow(struct crs_sub *sub,
							 uint64_t *len)
{
	sub->nones++;
	if (sub_quiet(sub)) {
		sub_warm_next_line(sub);
		return 0;
	}
	if (sub->cold)
		return sub_cold(sub, len);
	/* Evicted: the publisher no longer protects what we have not read,
	 * so stop at once (a line only the publisher writes, once). */
	if (sub->received >= sub->requested ||
	    shm_load_relaxed(&sub->ctl->term.state) == CRS_TERM_EVICTED)
		return sub_idle(sub) < 0 ? -CRS_EEND : 0;
	for (;;) {
		if (sub->pos >= sub->stop_pos)
			return sub_idle(sub);
		enum ring_frame k = ring_frame_at(&sub->ring, sub->pos, len);
		if (k == RING_NONE)
			return sub_idle(sub);
		/* After the acquire, so that a record written before the
		 * next epoch's frames is seen with them: never read past
		 * our own epoch. */
		sub_note_stop(sub);
		if (sub->pos >= sub->stop_pos)
			return sub_idle(sub);
		switch (k) {
		case RING_MESSAGE:
			return 1;
		case RING_PADDING:
			sub_skip(sub, *len);
			continue;
		default:
			sub->follow = 0;
			sub_end(sub, CRS_EPROTO, "corrupt frame in the ring");
			return -CRS_EEND;
		}
	}
}

/* sub_next's hot path: 1 with the length of the message at pos if it
 * may be read now, 0 if sub_next_slow must look. */
static inline int sub_next_hot(struct crs_sub *sub, uint64_t *len)
{
	if (__builtin_expect(sub->received >= sub->read_limit, 0))
		return 0; /* no demand, or cold */
	/* The release found this header committed (acquire) and checks it
	 * no more: an eviction or an end since sends us the slow way. */
	uint64_t word = sub->ready;
	if (__builtin_expect(word != 0, 1))
		return sub_readable(sub, word, sub->pos, len);
	return sub_peek(sub, sub->pos, len);
}

/* Find the next message at pos, skipping padding. Returns 1 with its
 * length, 0 if none yet (within demand), -CRS_EEND if the stream ended
 * (-CRS_EGAP: a new publisher to report). */
static inline int sub_next(struct crs_sub *sub, uint64_t *len)
{
	if (sub_next_hot(sub, len))
		return 1;
	return sub_next_slow(sub, len);
}

/* id: sub->at.seg.stream_id, which a caller filling many views loads
 * once (a store to msg may alias sub, so it would be loaded each time). */
static inline void sub_view(const struct crs_sub *sub, uint64_t pos,
			    uint64_t len, uint64_t seq, uint64_t id,
			    struct crs_msg *msg)
{
	msg->data = ring_payload(&sub->ring, pos);
	msg->len = len;
	msg->seq = seq;
	msg->stream_id = id;
}

/* A reader that streams right behind the writer slows both down: it
 * pulls each line just after the writer stored it, and its prefetches
 * take lines the writer is about to store. At 32 B the slow rounds are
 * those where the reader ran within 64 messages of the writer, the fast
 * ones those where it kept its distance (bench/results/2026-12-01/
 * ab-stores.txt, item 9; docs/PROTOCOL.md). So a streaming reader
 * (release_publish says when), with more behind the message it released,
 * looks at the publisher's mirrored position when it publishes its own;
 * if the writer is less than near ahead, it waits until it is far ahead,
 * until the writer stops moving (it waits for demand or room, or has
 * nothing to send), or for SLIP_MAX_NS at most. The position is a
 * figure from shared memory, untrusted: whatever it says, the wait is
 * that short. A reader that catches up, as every ping-pong does, never
 * waits. The wait is timed by the clock, not by counting pause hints:
 * a pause takes about 25 ns on Zen 4, 40 on recent Intel and next to
 * nothing where it is a yield (aarch64). */
#define SLIP_WINDOW 256
#define SLIP_NEAR (16u << 10)
#define SLIP_FAR (64u << 10)
#define SLIP_LOOK_NS 800 /* between looks: the mirror moves every 16
			    commits, which take under 800 ns streaming */
#define SLIP_MAX_NS 25000
/* A backstop for a clock that does not move: a spin is a pause hint and
 * a clock read, so 4096 of them last about SLIP_MAX_NS or longer. */
#define SLIP_SPINS_MAX 4096

static void sub_keep_distance(struct crs_sub *sub)
{
	int64_t far = (int64_t)(SLIP_FAR < sub->ring.size / 4
					? SLIP_FAR
					: sub->ring.size / 4);
	int64_t near = SLIP_NEAR < far / 4 ? SLIP_NEAR : far / 4;
	const _Atomic uint64_t *mirrored = &sub->hdr->stats.position;
	/* Signed: mirrored every 16 messages, it may trail our position. */
	uint64_t at = shm_load_relaxed(mirrored);
	if ((int64_t)(at - sub->pos) >= near)
		return;
	shm_inc(&sub->ctl->paced);
	int64_t start = ipc_now_ns(), looked = start;
	for (int spins = 0; spins < SLIP_SPINS_MAX; spins++) {
		spin_relax();
		int64_t t = ipc_now_ns();
		if (t - looked < SLIP_LOOK_NS)
			continue;
		uint64_t now = shm_load_relaxed(mirrored);
		if (now == at || (int64_t)(now - sub->pos) >= far ||
		    t - start >= SLIP_MAX_NS)
			return;
		at = now;
		looked = t;
	}
}

/* crs_sub_release's slow path: replenish a prefetch if due, and publish
 * consumed position and demand; more: a message follows (committed:
 * whether we may read it is for the demand test below). */
static __attribute__((noinline, cold)) void release_publish(struct crs_sub *sub,
							    int more)
{
	/* Not sleeping for a while: let the publisher's commits go
	 * unfenced again (park.h; the next sleep asks anew). */
	if (sub->fence_word && !sub->parkers &&
	    sub->received - sub->parked_received >= FENCE_ASK_KEEP) {
		sub->fence_word = 0;
		shm_store_relaxed(&sub->ctl->parked, 0);
	}
	sub_count_released(sub);
	if (sub->since_request >= sub->replenish) {
		sub->requested = credit_add(sub->requested, sub->since_request);
		sub->since_request = 0;
		sub_limit_reads(sub);
	}
	sub_publish(sub);
	/* Streaming: over the last SLIP_WINDOW messages or more, sub_next
	 * found one at once nearly every time (a ping-pong finds none after
	 * each; nones counts its slow path, which every miss takes), and
	 * we may read on (else the application must request first). */
	uint64_t msgs = sub->received - sub->window_received;
	if (msgs >= SLIP_WINDOW) {
		if (more && sub->received < sub->requested &&
		    (sub->nones - sub->window_nones) * 16 < msgs)
			sub_keep_distance(sub);
		sub->window_received = sub->received;
		sub->window_nones = sub->nones;
	}
}

/* Inlined into every caller: gcc's size estimate of the ring.h helpers
 * left it out of line, a call more per poll and release. */
static inline __attribute__((always_inline)) void sub_release(
	struct crs_sub *sub)
{
	uint32_t n = sub->held;
	if (!n) {
		if (__builtin_expect(sub->merge != NULL, 0))
			merge_release(sub); /* a merge holds in its members */
		return;
	}
	sub->held = 0;
	uint64_t pos = sub->held_end;
	sub->pos = pos;
	sub->seq += n;
	sub->received += n;
	/* A committed header at pos, for the next poll or take (which
	 * checks its fit: sub_next_hot) and for the test below. */
	uint64_t word = ring_load(&sub->ring, pos);
	int committed = ring_committed(word, pos);
	sub->ready = committed ? word : 0;
	/* A frame follows that our epoch may let us read: committed, and
	 * before the stop we noted. A record that came out since the last
	 * poll is not looked for here (fewer loads on the hot path): its
	 * epoch's end bumped progress_wanted, which the test below reads. */
	int next = committed && pos < sub->stop_pos;
	/* Batched, but never hidden: at the end of what was published (the
	 * publisher may be waiting for just that, crs_pub_wait_consumed:
	 * no frame we may read follows), and at the first release after
	 * the publisher asked (untethered in serve.c, end_epoch). */
	if (__builtin_expect(
		    !next || sub->received >= sub->publish_due ||
			    pos - sub->published_pos >= sub->publish_step ||
			    shm_load_relaxed(
				    &sub->hdr->signal.progress_wanted) !=
				    sub->wanted_seen,
		    0))
		release_publish(sub, next);
}

void crs_sub_release(crs_sub *sub)
{
	sub_release(sub);
}

/* Hand out the message of len at pos, held until the next release. */
static inline int sub_hand_out(struct crs_sub *sub, uint64_t len,
			       struct crs_msg *msg)
{
	sub_view(sub, sub->pos, len, sub->seq, sub->at.seg.stream_id, msg);
	sub->held = 1;
	sub->held_end = sub->pos + frame_size(len);
	return 1;
}

static inline int sub_poll(struct crs_sub *sub, struct crs_msg *msg)
{
	uint64_t len = 0;
	if (sub->held)
		sub_release(sub);
	int r = sub_next(sub, &len);
	if (r != 1)
		return r;
	return sub_hand_out(sub, len, msg);
}

/* The application has been told of the end (or of the new publisher). */
static void sub_told(struct crs_sub *sub, int r)
{
	if (r == -CRS_EEND) {
		sub->end_delivered = 1;
	} else if (r == -CRS_EGAP) {
		sub->gap_pending = 0;
		sub->ended = sub->end_delivered = sub->cold = 0;
		sub_limit_reads(sub);
		memset(&sub->end, 0, sizeof(sub->end));
	}
}

/* A merged subscription holds nothing itself (held stays 0) and stays
 * cold, so the 1:1 hot paths of poll, take and release never test for
 * one: it shows on their slow paths only (SUB_MERGED, and a release with
 * nothing held). */
static __attribute__((noinline)) int poll_slow(struct crs_sub *sub,
					       struct crs_msg *msg)
{
	int r;
	if (sub->held) {
		r = sub_poll(sub, msg);
	} else {
		uint64_t len = 0;
		r = sub_next_slow(sub, &len); /* sub_next_hot said no */
		if (r == 1)
			r = sub_hand_out(sub, len, msg);
	}
	if (__builtin_expect(r < 0, 0)) {
		if (r == SUB_MERGED)
			return merge_poll(sub, msg, 1, 0);
		sub_told(sub, r);
	}
	return r;
}

/* The hot path calls nothing, so it needs no stack frame: anything else
 * (a release first, no message at once, an end) is poll_slow's. */
int crs_sub_poll(crs_sub *sub, struct crs_msg *msg)
{
	uint64_t len;
	if (__builtin_expect(sub->held != 0 || !sub_next_hot(sub, &len), 0))
		return poll_slow(sub, msg);
	return sub_hand_out(sub, len, msg);
}

/* Up to max views (and, with max_bytes, no more payload than that
 * unless the first message alone is larger), all held until the next
 * release: the batch form of sub_poll. Stops early at padding, a
 * record or anything unusual (the next call's sub_next() deals with
 * it), and at TAKE_LOOKAHEAD bytes of ring. */
static inline int sub_take(struct crs_sub *sub, struct crs_msg *msgs,
			   size_t max, size_t max_bytes)
{
	uint64_t len = 0;
	if (sub->held)
		sub_release(sub);
	if (max == 0)
		return sub->merge ? SUB_MERGED : 0;
	int r = sub_next(sub, &len);
	if (r != 1)
		return r;
	uint64_t left = sub->requested - sub->received; /* > 0 here */
	if (max > left)
		max = (size_t)left;
	if (max > INT32_MAX)
		max = INT32_MAX;
	uint64_t pos = sub->pos, bytes = 0, seq = sub->seq;
	uint64_t id = sub->at.seg.stream_id;
	size_t n = 0;
	for (;;) {
		sub_view(sub, pos, len, seq + n, id, &msgs[n]);
		n++;
		bytes += len;
		pos += frame_size(len);
		if (n >= max || pos - sub->pos >= TAKE_LOOKAHEAD ||
		    !sub_peek(sub, pos, &len) ||
		    (max_bytes && bytes + len > max_bytes))
			break;
	}
	sub->held = (uint32_t)n;
	sub->held_end = pos;
	return (int)n;
}

int crs_sub_take(crs_sub *sub, struct crs_msg *msgs, size_t max,
		 size_t max_bytes)
{
	int r = sub_take(sub, msgs, max, max_bytes);
	if (__builtin_expect(r < 0, 0)) {
		if (r == SUB_MERGED)
			return merge_poll(sub, msgs, max, max_bytes);
		sub_told(sub, r);
	}
	return r;
}

int crs_sub_request(crs_sub *sub, uint64_t n)
{
	if (sub->merge)
		return merge_request(sub, n);
	if (sub->cancelled || (sub->ended && !sub->follow))
		return 0;
	if (n == 0) {
		sub->follow = 0; /* a violation of ours ends it for good */
		sub_stop_opening(sub);
		sub_end(sub, EINVAL,
			"request(0) violates Reactive Streams 3.9");
		if (sub->ctl) { /* as in crs_sub_cancel() */
			shm_store_release(&sub->ctl->cancelled, 1);
			sub_publish(sub);
		}
		return -EINVAL;
	}
	sub->requested = credit_add(sub->requested, n);
	sub_limit_reads(sub);
	if (!sub->ctl)
		return 0; /* published when the stream is open */
	sub_publish(sub);
	/* Still announced (a loop whose fd is watched, between runs): no
	 * one looks at this demand until woken, and messages may already
	 * wait (replay), so no commit need come to wake us. Wake what
	 * sleeps on data_signal (other subscribers just look again). */
	if (sub->parkers)
		ipc_futex_wake(&sub->hdr->signal.data_signal, INT_MAX);
	return 0;
}

void crs_sub_cancel(crs_sub *sub)
{
	if (sub->merge) {
		merge_cancel(sub);
		return;
	}
	if (sub->cancelled)
		return;
	sub->cancelled = 1;
	sub->held = 0;
	/* Nothing is delivered after our own cancel, not even an end seen
	 * but not delivered yet (Reactive Streams 3.6); crs_sub_end() still
	 * says how it ended, if it had. */
	sub->follow = 0;
	sub_stop_opening(sub);
	sub_end(sub, ECANCELED, "cancelled");
	sub->end_delivered = 1;
	sub->gap_pending = 0;
	if (!sub->ctl)
		return;
	/* Read by control_recompute(): our demand no longer holds anyone. It
	 * loads the flag relaxed and reads nothing behind it; the release
	 * only keeps it before sub_publish()'s progress bump, which wakes
	 * the publisher to look. */
	shm_store_release(&sub->ctl->cancelled, 1);
	sub_publish(sub);
	ipc_sock_shutdown(sub->sock);
}

int sub_has_work(struct crs_sub *sub)
{
	if (sub->merge)
		return merge_has_work(sub);
	uint64_t len;
	return sub_next(sub, &len) != 0;
}

int sub_announce(struct crs_sub *sub, struct ipc_waitset *ws, uint64_t base)
{
	if (sub->merge)
		return merge_announce(sub, ws, base);
	if (sub->opening) /* nothing mapped yet: the opener's fds */
		return opener_arm(&sub->op, ws, base) ? PARK_NAP : 0;
	/* The acquire pairs with the release store of data_signal in
	 * pubring_wake_all(): having seen a wake's value, we also see the
	 * terminal records written before it (epoch.c). */
	uint32_t seen = shm_load_acquire(&sub->hdr->signal.data_signal);
	/* A publisher that skips its commit fence is asked for it. */
	uint64_t ask = !sub->pub_fences && sub->pub_fence_ask ? CRS_PARK_FENCE
							      : 0;
	/* Read by pubring_wake_if_parked() after each commit. */
	shm_store_relaxed(&sub->ctl->parked, CRS_PARK_ASLEEP | ask | seen);
	sub->parkers++;
	sub->parked_received = sub->received;
	int how = 0;
	/* Until the publisher fences for us (always, or since a
	 * membarrier after we first asked), membarrier() does it: after
	 * the store above (the syscall is a full fence on this CPU too)
	 * and before the re-check (park.h). A publisher too old to be
	 * asked needs one before every sleep. */
	if (!sub->pub_fences && !sub->fence_word) {
		if (ipc_membarrier() == 0)
			sub->fence_word = ask;
		else
			how |= PARK_NAP;
	}
	if (ipc_waitset_futex(ws, base, &sub->hdr->signal.data_signal, seen))
		how |= PARK_NAP;
	/* Once the publisher is known dead its socket stays readable: only
	 * our own demand can make progress now, so do not wait on it. */
	if (sub->pub_dead)
		ipc_waitset_forget(ws, base + 1);
	else if (ipc_waitset_poll(ws, base + 1, sub->sock, POLLIN | POLLRDHUP))
		how |= PARK_NAP;
	return how;
}

void sub_withdraw(struct crs_sub *sub)
{
	if (sub->merge) {
		merge_withdraw(sub);
		return;
	}
	if (sub->parkers == 0 || --sub->parkers > 0 || !sub->ctl)
		return;
	shm_store_relaxed(&sub->ctl->parked, sub->fence_word);
	shm_inc(&sub->ctl->wakeups);
}

void sub_hangup(struct crs_sub *sub)
{
	if (sub->merge) /* its members' hangups are merge_announce's */
		return;
	/* Look before believing it: the key may have fired for what it
	 * watched before (the opener's timer, an old stream's socket). */
	if (!sub->opening && !sub->pub_dead &&
	    ipc_fd_poll(sub->sock, POLLIN | POLLRDHUP, 0) > 0)
		sub->pub_dead = 1;
}

/* crs_sub_wait's hooks: park.h over this one subscription. */
static int wait_announce(void *ctx, struct ipc_waitset *ws)
{
	struct crs_sub *sub = ctx;
	sub->wait_gen = sub->stream_gen;
	return sub_announce(sub, ws, 0);
}

/* The re-check may leave the stream (following): then what was armed
 * is gone, so look again instead of sleeping on it. */
static int wait_has_work(void *ctx)
{
	struct crs_sub *sub = ctx;
	return sub_has_work(sub) || sub->wait_gen != sub->stream_gen;
}

static void wait_withdraw(void *sub)
{
	sub_withdraw(sub);
}

static const struct park_hooks wait_hooks = {
	.announce = wait_announce,
	.has_work = wait_has_work,
	.withdraw = wait_withdraw,
};

/* Sleep until data_signal moves, the socket stirs, or the deadline. */
static void sub_park(struct crs_sub *sub, int64_t deadline)
{
	uint64_t fired[2];
	int n = park_wait(&wait_hooks, sub, sub->ws, deadline, fired, 2);
	for (int k = 0; k < n; k++)
		if (fired[k] == 1)
			sub_hangup(sub);
}

int crs_sub_wait(crs_sub *sub, int timeout_ms)
{
	int64_t deadline = ipc_deadline(timeout_ms);
	int64_t spin_until = ipc_now_ns() + sub->spin_ns;
	unsigned step = 1;
	for (;;) {
		if (sub_has_work(sub))
			return 0;
		int64_t now = ipc_now_ns();
		if (now >= deadline)
			return -ETIMEDOUT;
		if (now < spin_until) {
			spin_backoff(&step, SPIN_BACKOFF_MAX);
			continue;
		}
		if (sub->merge)
			merge_park(sub, deadline);
		else
			sub_park(sub, deadline);
	}
}

int crs_sub_dispatch(crs_sub *sub, const struct crs_sub_callbacks *cb,
		     void *ctx, size_t max)
{
	struct crs_msg batch[DISPATCH_BATCH];
	size_t n = 0;
	while (n < max) {
		size_t want = max - n < DISPATCH_BATCH ? max - n
						       : DISPATCH_BATCH;
		int r = sub->merge ? merge_take(sub, batch, want, 0)
				   : sub_take(sub, batch, want, 0);
		if (r == 0)
			break;
		if (r < 0 && n > 0)
			break; /* report the count; the end comes next call */
		if (r == -CRS_EGAP) {
			sub_told(sub, r);
			if (cb->on_gap)
				cb->on_gap(ctx);
			return r;
		}
		if (r < 0) {
			if (!sub->end_delivered) {
				sub->end_delivered = 1;
				if (sub->end.code == 0) {
					if (cb->on_complete)
						cb->on_complete(ctx);
				} else if (cb->on_error) {
					cb->on_error(ctx, sub->end.code,
						     sub->end.message);
				}
			}
			return -CRS_EEND;
		}
		/* One batch, released together: one consumed-position store
		 * and one demand update for all of it. Nothing more after a
		 * cancel made inside on_next. */
		for (int i = 0; i < r; i++) {
			if (cb->on_next)
				cb->on_next(ctx, &batch[i]);
			n++;
			if (sub->cancelled)
				return n > INT32_MAX ? INT32_MAX : (int)n;
		}
		crs_sub_release(sub);
	}
	return n > INT32_MAX ? INT32_MAX : (int)n;
}

const struct crs_end *crs_sub_end(const crs_sub *sub)
{
	return sub->ended ? &sub->end : NULL;
}

uint64_t crs_sub_requested(const crs_sub *sub)
{
	return credit_add(sub->requested_before, sub->requested);
}

uint64_t crs_sub_received(const crs_sub *sub)
{
	return sub->received_before + sub->received;
}

uint64_t crs_sub_stream_id(const crs_sub *sub)
{
	return sub->at.seg.stream_id; /* the checked copy */
}

/* ---- open and follow ------------------------------------------------ */

static void sub_stop_opening(struct crs_sub *sub)
{
	if (sub->opening) {
		opener_stop(&sub->op);
		sub->stream_gen++; /* its fds are closed */
	}
	sub->opening = 0;
}

/* Take an attachment: read from its start, with our demand. A stream
 * after an earlier one (following) is reported as a gap first, and
 * inherits the demand the earlier one left outstanding. */
static void sub_attach(struct crs_sub *sub, const struct attach *at)
{
	int again = sub->ended;
	sub->at = *at;
	const struct crs_seg_header *h = &sub->at.seg; /* the checked copy */
	sub->hdr = sub->at.hdr;
	sub->ctl = sub->at.ctl;
	sub->ring = (struct ring_view){
		.base = (const uint8_t *)sub->hdr + CRS_RING_OFFSET,
		.size = h->ring_size,
		.mask = h->ring_size - 1,
		.max_message = h->max_message,
	};
	sub->pub_fences = (h->flags & CRS_SEG_PUB_FENCES) != 0;
	sub->pub_fence_ask = (h->flags & CRS_SEG_PUB_FENCE_ASK) != 0;
	sub->fence_word = 0;
	sub->pos = sub->published_pos = sub->at.welcome.start_pos;
	sub->stop_pos = UINT64_MAX;
	sub->record_seen = CRS_TERM_NONE;
	sub->held = 0;
	sub->ready = 0;
	sub->seq = sub->at.welcome.start_seq;
	sub->publish_step = sub->ring.size / 4;
	sub->sock = sub->at.sock;
	sub->pub_dead = 0;
	sub->next_liveness_ns = 0;
	sub->quiet_polls = 0; /* look at the first empty poll */
	if (again) {
		sub_count_released(sub); /* received starts again at 0 */
		uint64_t left = sub->requested == CRS_UNBOUNDED
					? CRS_UNBOUNDED
					: sub->requested - sub->received;
		sub->requested_before = credit_add(sub->requested_before,
						   sub->received);
		sub->received_before += sub->received;
		sub->requested = left;
		sub->received = sub->counted = 0;
		sub->window_received = 0; /* sub_keep_distance's window */
		sub->window_nones = sub->nones;
		sub->gap_pending = 1; /* stays cold until reported */
	} else {
		sub->cold = 0;
	}
	sub_limit_reads(sub);
	if (sub->requested)
		sub_publish(sub); /* plans the next one too */
	else
		sub_plan_publish(sub);
}

/* A dead publisher's leftovers (attach_connect) are no stream. */
static int leftovers_absent(int err)
{
	return err == -ECONNREFUSED || err == -ESTALE ? -ENOENT : err;
}

/* One step of the open under way: 0 (not yet), 1 (attached) or
 * -CRS_EEND (it failed: that is how this subscription ends). */
static int sub_open_step(struct crs_sub *sub)
{
	struct attach at;
	int r = opener_step(&sub->op, &at);
	if (r == 0)
		return 0;
	sub_stop_opening(sub);
	if (r < 0) {
		r = leftovers_absent(r);
		sub->follow = 0;
		sub_end(sub, -r, crs_errmsg()); /* what crs_sub_open says */
		return -CRS_EEND;
	}
	sub_attach(sub, &at);
	return 1;
}

/* Following, after the end was told: leave the old stream and look for
 * the next publisher of the name, for as long as it takes. */
static void sub_follow(struct crs_sub *sub)
{
	shm_store_release(&sub->ctl->cancelled, 1);
	shm_store_relaxed(&sub->ctl->parked, 0);
	sub->parkers = 0; /* the park word goes with the old stream */
	sub->fence_word = 0;
	attach_close(&sub->at);
	sub->stream_gen++; /* data_signal is unmapped */
	sub->hdr = NULL;
	sub->ctl = NULL;
	sub->ring.base = NULL;
	sub->sock = -1;
	opener_start(&sub->op, sub->name, -1, sub->handshake_ms, 1);
	sub->opening = 1;
}

/* sub_next's slow path. */
static int sub_cold(struct crs_sub *sub, uint64_t *len)
{
	if (sub->merge)
		return SUB_MERGED; /* always cold: see crs_sub_poll */
	if (sub->opening) {
		int r = sub_open_step(sub);
		if (r <= 0)
			return r;
	}
	if (sub->gap_pending)
		return -CRS_EGAP;
	if (!sub->ended) {
		sub->cold = 0; /* opened: read */
		sub_limit_reads(sub);
		return sub_next(sub, len);
	}
	if (!sub->follow || !sub->end_delivered)
		return -CRS_EEND;
	/* A new publisher can take the name only once the old one has
	 * gone (closed or died); until then, nothing. */
	if (sub->held || (!sub->pub_dead &&
			  ipc_fd_poll(sub->sock, POLLIN | POLLRDHUP, 0) == 0))
		return 0;
	sub_follow(sub);
	return sub_cold(sub, len);
}

static void sub_free(struct crs_sub *sub)
{
	merge_close(sub);
	sub_stop_opening(sub);
	attach_close(&sub->at);
	ipc_waitset_free(sub->ws);
	free(sub);
}

int crs_sub_open(const char *name, const struct crs_sub_opts *opts,
		 crs_sub **out)
{
	struct crs_sub_opts o;
	if (opts)
		o = *opts;
	else
		crs_sub_opts_init(&o);
	if (o.handshake_ms == 0)
		o.handshake_ms = DEFAULT_HANDSHAKE_MS;
	int err = crs_name_check(name);
	if (err)
		return err;
	struct crs_sub *sub = handle_alloc(sizeof(*sub));
	if (!sub)
		return -ENOMEM;
	sub->at.sock = sub->at.data_fd = sub->at.ctl_fd = sub->sock = -1;
	strlcpy(sub->name, name, sizeof(sub->name));
	sub->handshake_ms = o.handshake_ms;
	sub->follow = o.follow != 0;
	sub->spin_ns = spin_budget_ns(o.spin_us);
	sub->prefetch = o.prefetch;
	sub->replenish = o.prefetch ? credit_replenish(o.prefetch) : UINT64_MAX;
	sub->requested = o.prefetch; /* published once attached */
	sub->cold = 1;
	sub_limit_reads(sub);
	err = ipc_waitset_new(&sub->ws);
	int merged = !err && merge_wanted(name, &o);
	if (merged)
		err = merge_open(sub, name, &o);
	if (err) {
		sub_free(sub);
		return err;
	}
	if (merged) { /* opens its members as they are found */
		*out = sub;
		return 0;
	}
	if (o.async) {
		opener_start(&sub->op, name, o.wait_ms, o.handshake_ms, 0);
		sub->opening = 1;
		*out = sub;
		return 0;
	}
	struct attach at;
	err = attach_open(name, HS_ROLE_SUBSCRIBER, o.wait_ms, o.handshake_ms,
			  &at);
	if (err) {
		sub_free(sub);
		return leftovers_absent(err);
	}
	sub_attach(sub, &at);
	*out = sub;
	return 0;
}

void crs_sub_close(crs_sub *sub)
{
	if (!sub)
		return;
	if (!sub->cancelled && sub->ctl) {
		sub->cancelled = 1;
		/* As in crs_sub_cancel(). */
		shm_store_release(&sub->ctl->cancelled, 1);
		sub_publish(sub);
	}
	sub_free(sub);
}
