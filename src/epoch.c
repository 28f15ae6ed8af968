/*
 * epoch.c - connectable streams: connect, autoConnect, disconnect with
 * its strategies, terminal signals, where each new subscriber joins,
 * and the replay buffer's retention. The epoch part (epoch.h).
 *
 * A connection epoch runs from crs_pub_connect() to a terminal signal or
 * a disconnect. Each subscriber belongs to one epoch (its member's
 * epoch): the one running when it arrived, or the next one if none
 * runs. When an epoch ends, each of its subscribers gets its own
 * terminal record (ctl->term) at the position where the epoch ended, so
 * a subscriber still reading old messages ends exactly after them while
 * the publisher already serves the next epoch. A finished subscriber
 * keeps pinning the ring space it has not read yet (end_pos), and
 * nothing more; it reads nothing past its record's position, where the
 * next epoch goes on.
 *
 * A NO_EVENT disconnect still writes a record, DETACHED: the subscriber
 * must know where its epoch stopped, or it would read on into the next
 * one. It delivers nothing there. The record already carries the EPIPE
 * of crs_pub_close(), so the close flips the state word alone and never
 * rewrites a record a subscriber may be reading.
 */
#include <errno.h>
#include <string.h>

#include "atomics.h"
#include "epoch.h"
#include "ipc/clock.h"
#include "terminal.h"

#define CLOSED_MESSAGE "publisher closed without completing"

int epoch_init(struct pub_epoch *e, struct pub_ring *ring,
	       const struct crs_pub_opts *o)
{
	memset(e, 0, sizeof(*e));
	e->ring = ring;
	e->mode = o->mode;
	e->on_disconnect = o->on_disconnect;
	e->auto_connect = o->auto_connect;
	e->max_subscribers = o->max_subscribers;
	e->clock = o->clock;
	e->clock_ctx = o->clock_ctx;
	int err = retain_init(&e->retain, o->replay_count, o->replay_bytes,
			      (int64_t)o->replay_age_ms * 1000000,
			      o->ring_bytes);
	if (!err)
		pubring_set_notes(ring, e->retain.marks != NULL);
	return err;
}

void epoch_start(struct pub_epoch *e)
{
	epoch_auto_connect(e); /* autoConnect(0): connected from the start */
}

void epoch_free(struct pub_epoch *e)
{
	retain_free(&e->retain);
}

int64_t epoch_now(const struct pub_epoch *e)
{
	return e->clock ? e->clock(e->clock_ctx) : ipc_now_ns();
}

/* Apply the retention bounds as of now (replay mode). */
static void trim_bounds(struct pub_epoch *e)
{
	const struct pub_ring *r = e->ring;
	retain_trim(&e->retain, r->ring, r->ring_size, r->pos, r->seq, r->bytes,
		    epoch_now(e), 0);
}

struct epoch_join epoch_join(struct pub_epoch *e)
{
	int replay = e->mode == CRS_MODE_REPLAY;
	struct epoch_join j = { .pos = e->ring->pos,
				.seq = e->ring->seq,
				.epoch = e->epoch,
				.end_pos = UINT64_MAX };
	if (replay && e->state != PUB_IDLE) {
		/* Late joiner: start at the oldest retained message. */
		trim_bounds(e);
		j.pos = e->retain.tail_pos;
		j.seq = e->retain.tail_seq;
	}
	if (e->state == PUB_TERMINATED && replay) {
		/* Replay of a terminated epoch: retained, then its end. */
		terminal_get(&e->ring->hdr->terminal, &j.end);
		j.end_pos = j.end.pos;
	} else if (e->state != PUB_CONNECTED) {
		j.epoch = e->epoch + 1; /* waits for the next connect */
	}
	return j;
}

void epoch_member_add(struct pub_epoch *e, uint32_t slot, struct crs_ctl *ctl,
		      const struct epoch_join *j)
{
	e->members[slot] = (struct epoch_member){ .ctl = ctl,
						  .join_seq = j->seq,
						  .join_pos = j->pos,
						  .epoch = j->epoch,
						  .end_pos = j->end_pos };
}

void epoch_member_drop(struct pub_epoch *e, uint32_t slot)
{
	memset(&e->members[slot], 0, sizeof(e->members[slot]));
}

uint64_t epoch_connect(struct pub_epoch *e)
{
	struct pub_ring *r = e->ring;
	if (e->state == PUB_CONNECTED)
		return e->epoch;
	e->epoch++;
	e->state = PUB_CONNECTED;
	e->auto_connect = CRS_CONNECT_MANUAL; /* autoConnect fires once */
	for (uint32_t i = 0; i < e->max_subscribers; i++) {
		struct epoch_member *m = &e->members[i];
		if (m->ctl && m->end_pos == UINT64_MAX) {
			/* Waiting since before: nothing was published since
			 * it arrived, so it starts exactly here. */
			m->epoch = e->epoch;
		}
	}
	retain_reset(&e->retain, r->pos, r->seq, r->bytes);
	terminal_put(&r->hdr->terminal, CRS_TERM_NONE, 0, 0, 0, NULL);
	shm_store_relaxed(&r->hdr->stats.state, (uint32_t)CRS_STATS_LIVE);
	shm_store_relaxed(&r->hdr->stats.epoch, e->epoch);
	pubring_hold(r); /* recompute */
	pubring_set_open(r, 1);
	return e->epoch;
}

void epoch_auto_connect(struct pub_epoch *e)
{
	if (e->auto_connect < 0 || e->state != PUB_IDLE)
		return;
	int waiting = 0;
	for (uint32_t i = 0; i < e->max_subscribers; i++)
		waiting += e->members[i].ctl &&
			   e->members[i].end_pos == UINT64_MAX;
	if (waiting >= e->auto_connect)
		epoch_connect(e);
}

/* End the current epoch for its subscribers at the current position,
 * with a terminal record of state (DETACHED: silently). */
static void end_epoch(struct pub_epoch *e, uint32_t state, int code,
		      const char *message)
{
	struct pub_ring *r = e->ring;
	pubring_flush(r); /* deferred frames come before the end */
	pubring_set_open(r, 0);
	for (uint32_t i = 0; i < e->max_subscribers; i++) {
		struct epoch_member *m = &e->members[i];
		if (!m->ctl || m->epoch != e->epoch || m->end_pos != UINT64_MAX)
			continue;
		terminal_put(&m->ctl->term, state, code, r->pos, r->seq,
			     message);
		m->end_pos = r->pos;
	}
	/* A subscriber that read its last message before its record came
	 * out and releases it after (the release tests no record): it
	 * publishes its position all the same, even if the next epoch's
	 * frames follow at once (committed after this, so it sees both). */
	pubring_want_progress(r);
	pubring_hold(r); /* recompute */
	/* No fence needed before the wake: each record's state is a
	 * release store (terminal_put), pubring_wake_all() changes
	 * data_signal before waking everyone unconditionally, and a
	 * subscriber that parked on the old value returns at once
	 * (park.h). */
	pubring_wake_all(r);
}

int epoch_terminate(struct pub_epoch *e, uint32_t state, int code,
		    const char *message)
{
	struct crs_data_header *hdr = e->ring->hdr;
	if (e->state != PUB_CONNECTED)
		return pub_state_error(e->state);
	end_epoch(e, state, code, message);
	terminal_put(&hdr->terminal, state, code, e->ring->pos, e->ring->seq,
		     message);
	shm_store_relaxed(&hdr->stats.state,
			  state == CRS_TERM_COMPLETE
				  ? (uint32_t)CRS_STATS_COMPLETED
				  : (uint32_t)CRS_STATS_FAILED);
	e->state = PUB_TERMINATED;
	return 0;
}

int epoch_disconnect(struct pub_epoch *e, int64_t epoch)
{
	if (e->state != PUB_CONNECTED || epoch != (int64_t)e->epoch)
		return 0; /* a stale handle changes nothing */
	switch (e->on_disconnect) {
	case CRS_DISCONNECT_SEND_COMPLETED:
		end_epoch(e, CRS_TERM_COMPLETE, 0, NULL);
		break;
	case CRS_DISCONNECT_NO_EVENT:
		end_epoch(e, CRS_TERM_DETACHED, EPIPE, CLOSED_MESSAGE);
		break;
	default:
		end_epoch(e, CRS_TERM_ERROR, ECANCELED, "stream disconnected");
		break;
	}
	e->state = PUB_IDLE;
	/* Still here and free to connect again: live, not closed. */
	shm_store_relaxed(&e->ring->hdr->stats.state, (uint32_t)CRS_STATS_LIVE);
	return 1;
}

/* Closing: whoever has no terminal record yet gets EPIPE where its
 * stream stops (waiting subscribers at once, where they joined: nothing
 * was published since); a DETACHED one gets the EPIPE its record
 * already holds. */
void epoch_close(struct pub_epoch *e)
{
	struct pub_ring *r = e->ring;
	pubring_flush(r);
	for (uint32_t i = 0; i < e->max_subscribers; i++) {
		struct epoch_member *m = &e->members[i];
		struct terminal_view t;
		if (!m->ctl)
			continue;
		uint32_t state = terminal_get(&m->ctl->term, &t);
		if (state == CRS_TERM_DETACHED)
			/* Pairs with the acquire in terminal_get(). */
			shm_store_release(&m->ctl->term.state, CRS_TERM_ERROR);
		if (state != CRS_TERM_NONE)
			continue;
		uint64_t at = m->end_pos != UINT64_MAX ? m->end_pos
			      : m->epoch == e->epoch   ? r->pos
						       : m->join_pos;
		terminal_put(&m->ctl->term, CRS_TERM_ERROR, EPIPE, at, r->seq,
			     CLOSED_MESSAGE);
	}
	if (e->state == PUB_CONNECTED)
		terminal_put(&r->hdr->terminal, CRS_TERM_ERROR, EPIPE, r->pos,
			     r->seq, CLOSED_MESSAGE);
	pubring_wake_all(r); /* no fence needed: see end_epoch() */
}

void epoch_note(struct pub_epoch *e)
{
	retain_note(&e->retain, e->ring->seq - 1, epoch_now(e));
}

void epoch_overwrite(struct pub_epoch *e, uint64_t end)
{
	const struct pub_ring *r = e->ring;
	if (e->mode == CRS_MODE_REPLAY && end > r->ring_size)
		retain_trim(&e->retain, r->ring, r->ring_size, r->pos, r->seq,
			    r->bytes, 0, end - r->ring_size);
}

void epoch_mirror(struct pub_epoch *e)
{
	const struct pub_ring *r = e->ring;
	if (e->mode != CRS_MODE_REPLAY)
		return;
	struct crs_pub_stats *ps = &r->hdr->stats;
	int64_t clock = epoch_now(e);
	retain_trim(&e->retain, r->ring, r->ring_size, r->pos, r->seq, r->bytes,
		    clock, 0);
	shm_store_relaxed(&ps->retained, r->seq - e->retain.tail_seq);
	shm_store_relaxed(&ps->retained_bytes, r->bytes - e->retain.tail_bytes);
	shm_store_relaxed(&ps->retained_since_ns,
			  retain_oldest_time(&e->retain));
	shm_store_relaxed(&ps->clock_ns, clock);
}
