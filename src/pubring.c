/*
 * pubring.c - the cold half of the publisher's hot part (pubring.h):
 * setting what claim and commit steer by, padding, flushing deferred
 * frames, mirroring figures and waking parked subscribers.
 */
#include <limits.h>
#include <string.h>

#include "atomics.h"
#include "frame.h"
#include "ipc/futex.h"
#include "park.h"
#include "pubring.h"

void pubring_init(struct pub_ring *r, struct crs_data_header *hdr,
		  uint64_t ring_size, uint32_t max_message, int replay,
		  int fences)
{
	memset(r, 0, sizeof(*r));
	r->hdr = hdr;
	r->ring = (uint8_t *)hdr + CRS_RING_OFFSET;
	r->ring_size = ring_size;
	r->mask = ring_size - 1;
	r->max_message = max_message;
	r->replay = replay;
	r->fences = fences;
	pubring_set_parked(r, 0, NULL);
	pubring_set_tick(r, PUB_SERVE_EVERY);
	/* Not open yet: claim_limit stays 0. */
}

/* claim_limit (pubring.h): whenever what it stands for changes. */
void pubring_limit_claims(struct pub_ring *r)
{
	uint64_t lap_end = (r->pos & ~r->mask) + r->ring_size;
	uint64_t room = r->room_limit >= CRS_FRAME_HEADER
				? r->room_limit - CRS_FRAME_HEADER
				: 0;
	if (!r->open || r->replay)
		r->claim_limit = 0;
	else
		r->claim_limit = room < lap_end ? room : lap_end;
}

/* commit_limit (pubring.h): whenever what it stands for changes. */
static void limit_commits(struct pub_ring *r)
{
	r->commit_limit = r->notes || r->more || r->fences ? 0 : r->tick_seq;
}

void pubring_set_open(struct pub_ring *r, int open)
{
	r->open = open;
	pubring_abort(r);
	pubring_limit_claims(r);
}

void pubring_set_notes(struct pub_ring *r, int notes)
{
	r->notes = notes;
	limit_commits(r);
}

void pubring_set_limits(struct pub_ring *r, uint64_t credit, uint64_t room)
{
	r->credit_limit = credit;
	r->room_limit = room;
	pubring_limit_claims(r);
}

void pubring_hold(struct pub_ring *r)
{
	pubring_set_limits(r, 0, 0);
}

/* parked[0] without subscribers (pubring.h): never written. Not const:
 * a 64-bit atomic load may need writable memory on some 32-bit targets. */
static _Atomic uint64_t nobody_parked;

void pubring_set_parked(struct pub_ring *r, int n, struct crs_ctl *const *ctls)
{
	r->parked[0] = &nobody_parked;
	for (int k = 0; k < n; k++) {
		r->parked[k] = &ctls[k]->parked;
		r->watch[k] = (struct pubring_watch){
			.consumed = &ctls[k]->consumed
		};
	}
	r->nparked = n;
}

void pubring_set_tick(struct pub_ring *r, int messages)
{
	r->tick_seq = r->seq + (uint64_t)messages;
	r->tick_every = (uint32_t)messages;
	limit_commits(r);
}

void pubring_pad(struct pub_ring *r, uint64_t pad)
{
	ring_pad(r->ring, r->mask, r->pos, pad);
	r->pos += pad;
	pubring_limit_claims(r);
}

/* The largest frames, on average since the last tick, that
 * pubring_clean_ahead zeroes ahead of: bigger ones zero their own next
 * slot, as zeroing ahead of them would write their lines twice. And
 * how far ahead of pos it zeroes: twice what the frames since the last
 * tick took (a flush of a batch ticks once for all of it), within
 * these bounds and at most a quarter ring. */
#define CLEAN_FRAME_MAX 128u
#define CLEAN_AHEAD 4096u
#define CLEAN_AHEAD_MAX 65536u

void pubring_clean_ahead(struct pub_ring *r)
{
	uint64_t span = r->pos - r->tick_pos;
	uint64_t frames = r->seq - (r->tick_seq - r->tick_every);
	r->tick_pos = r->pos;
	/* Replay: what lies ahead is still retained. An open claim: its
	 * payload lies ahead. */
	if (r->replay || span > frames * CLEAN_FRAME_MAX ||
	    pubring_claim_open(r))
		return;
	uint64_t ahead = 2 * span < CLEAN_AHEAD	      ? CLEAN_AHEAD
			 : 2 * span > CLEAN_AHEAD_MAX ? CLEAN_AHEAD_MAX
						      : 2 * span;
	if (ahead > r->ring_size / 4)
		ahead = r->ring_size / 4;
	if (r->clean_end >= r->pos + ahead / 2)
		return; /* in steps of half of it or more */
	/* Not the slot at pos, which a reader may be looking at (the last
	 * commit zeroed it). Up to room: no reader needs the bytes below
	 * it any more. */
	uint64_t from = r->pos + CRS_FRAME_HEADER;
	if (from < r->clean_end)
		from = r->clean_end;
	uint64_t to = r->pos + ahead;
	if (to > r->room_limit)
		to = r->room_limit;
	if (to <= from)
		return;
	ring_clean(r->ring, r->mask, from, to);
	r->clean_end = to;
}

void pubring_mirror(struct pub_ring *r)
{
	struct crs_pub_stats *st = &r->hdr->stats;
	/* A seqlock, so that an inspector reads the three as one (see
	 * read_figures() in inspect.c): the count is odd while they
	 * change. The release fence orders the odd count before the
	 * figures; the release store of the even one orders them before
	 * it. Both pair with the inspector's acquire load and fence. */
	uint64_t v = shm_load_relaxed(&st->mirror_seq); /* ours alone */
	shm_store_relaxed(&st->mirror_seq, v + 1);
	shm_fence_release();
	shm_store_relaxed(&st->position, r->more ? r->more_pos : r->pos);
	shm_store_relaxed(&st->published, r->more ? r->more_seq : r->seq);
	shm_store_relaxed(&st->bytes, r->more ? r->more_bytes : r->bytes);
	shm_store_release(&st->mirror_seq, v + 2);
}

void pubring_want_progress(struct pub_ring *r)
{
	/* Relaxed: nothing is read behind it (a subscriber that sees it
	 * only publishes once more). */
	shm_inc(&r->hdr->signal.progress_wanted);
}

void pubring_wake_all(struct pub_ring *r)
{
	r->signal++;
	/* Step c of park.h: W changes before the wake, so a subscriber
	 * that sleeps on the old value returns at once. The release pairs
	 * with the acquire load of data_signal in sub_announce(). */
	shm_store_release(&r->hdr->signal.data_signal, r->signal);
	ipc_futex_wake(&r->hdr->signal.data_signal, INT_MAX);
	shm_inc(&r->hdr->stats.wakes);
}

/* Subscriber k of the parked list announced that it sleeps on the
 * current signal: is a wake due? Not if it has consumed everything
 * committed (it read this message before it parked: nothing to wake it
 * for), and not if we woke it before while it was behind and it has
 * consumed nothing since. An honest subscriber woken while behind
 * consumes up to what was committed before that wake, and publishes it
 * (at its release or in sub_idle) before it parks again; if it cannot
 * (no demand, its epoch ended), only its own request (after which it
 * looks again itself) or a terminal signal (which wakes everyone
 * unconditionally) can give it work. A park word rewritten at every
 * commit by a hostile peer thus costs one wake, not one per commit. */
static int wake_due(struct pub_ring *r, int k)
{
	struct pubring_watch *w = &r->watch[k];
	/* Orders the load of the park word before the load of consumed:
	 * pairs with the full fence in sub_publish(), which comes after
	 * its store of consumed and before a later announcement. */
	shm_fence_acquire();
	uint64_t cons = shm_load_relaxed(w->consumed);
	if (cons >= r->pos || (w->woke && w->woke_consumed == cons))
		return 0;
	w->woke = 1;
	w->woke_consumed = cons;
	return 1;
}

void pubring_wake_from(struct pub_ring *r, int i, uint64_t w)
{
	int fenced = r->fences;
	for (;;) {
		if ((w & CRS_PARK_FENCE) && !fenced) {
			/* Asked for (park.h): orders the header store of
			 * the commit before the loads of the park words
			 * from here on; pairs with the fence in
			 * park_begin() after sub_announce(). */
			shm_fence_full();
			fenced = 1;
			w = shm_load_relaxed(r->parked[i]);
		}
		if ((w & CRS_PARK_ASLEEP) && (uint32_t)w == r->signal &&
		    wake_due(r, i)) {
			pubring_wake_all(r);
			return;
		}
		if (++i == r->nparked)
			return;
		w = shm_load_relaxed(r->parked[i]);
	}
}

int pubring_flush(struct pub_ring *r)
{
	if (!r->more)
		return 0;
	/* After the headers of every frame behind it (ring.h). */
	ring_publish(r->ring, r->mask, r->more_pos, r->more_word);
	r->more = 0;
	limit_commits(r);
	uint64_t n = r->seq - r->more_seq; /* plain commits behind it too */
	pubring_wake_if_parked(r);
	pubring_mirror(r);
	return (int)(n < INT32_MAX ? n : INT32_MAX);
}
