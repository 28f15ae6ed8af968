/*
 * epoch.c - connectable streams: connect, autoConnect, disconnect with
 * its strategies, terminal signals, and where each new subscriber joins.
 *
 * A connection epoch runs from crs_pub_connect() to a terminal signal or
 * a disconnect. Each subscriber belongs to one epoch (pub_slot.epoch):
 * the one running when it arrived, or the next one if none runs. When an
 * epoch ends, each of its subscribers gets its own terminal record
 * (ctl->term) at the position where the epoch ended, so a subscriber
 * still reading old messages ends exactly after them while the publisher
 * already serves the next epoch. A finished subscriber keeps pinning the
 * ring space it has not read yet (end_pos), and nothing more; it reads
 * nothing past its record's position, where the next epoch goes on.
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
#include "ipc/clock.h"
#include "pub.h"
#include "terminal.h"

#define CLOSED_MESSAGE "publisher closed without completing"

int64_t pub_now(const struct crs_pub *pub)
{
	return pub->clock ? pub->clock(pub->clock_ctx) : ipc_now_ns();
}

/* Apply the retention bounds as of now (replay mode). */
static void trim_bounds(struct crs_pub *pub)
{
	crs_retain_trim(&pub->retain, pub->ring, pub->ring_size, pub->pos,
			pub->seq, pub->bytes, pub_now(pub), 0);
}

void pub_join(struct crs_pub *pub, struct pub_slot *s, struct crs_ctl *ctl)
{
	int replay = pub->mode == CRS_MODE_REPLAY;
	uint64_t pos = pub->pos, seq = pub->seq;
	s->end_pos = UINT64_MAX;
	s->epoch = pub->epoch;
	if (replay && pub->state != PUB_IDLE) {
		/* Late joiner: start at the oldest retained message. */
		trim_bounds(pub);
		pos = pub->retain.tail_pos;
		seq = pub->retain.tail_seq;
	}
	if (pub->state == PUB_TERMINATED && replay) {
		/* Replay of a terminated epoch: retained, then its end. */
		struct crs_terminal_view t;
		crs_terminal_get(&pub->hdr->terminal, &t);
		crs_terminal_put(&ctl->term, t.state, t.code, t.pos, t.seq,
				 t.message);
		s->end_pos = t.pos;
	} else if (pub->state != PUB_CONNECTED) {
		s->epoch = pub->epoch + 1; /* waits for the next connect */
	}
	ctl->start_pos = pos;
	ctl->start_seq = seq;
	crs_store_relaxed(&ctl->consumed, pos);
	crs_store_relaxed(&ctl->consumed_seq, seq);
	s->join_seq = seq;
	s->consumed = pos;
	s->consumed_seq = seq;
}

int64_t crs_pub_connect(crs_pub *pub)
{
	if (pub->state == PUB_CONNECTED)
		return (int64_t)pub->epoch;
	pub->epoch++;
	pub->state = PUB_CONNECTED;
	pub->auto_connect = CRS_CONNECT_MANUAL; /* autoConnect fires once */
	for (uint32_t i = 0; i < pub->max_subscribers; i++) {
		struct pub_slot *s = &pub->slots[i];
		if (s->used && s->end_pos == UINT64_MAX) {
			/* Waiting since before: nothing was published since
			 * it arrived, so it starts exactly here. */
			s->epoch = pub->epoch;
		}
	}
	crs_retain_reset(&pub->retain, pub->pos, pub->seq, pub->bytes);
	crs_terminal_put(&pub->hdr->terminal, CRS_TERM_NONE, 0, 0, 0, NULL);
	crs_store_relaxed(&pub->hdr->stats.state, (uint32_t)CRS_STATS_LIVE);
	crs_store_relaxed(&pub->hdr->stats.epoch, pub->epoch);
	pub->credit_limit = pub->room_limit = 0; /* recompute */
	return (int64_t)pub->epoch;
}

int64_t crs_pub_epoch(const crs_pub *pub)
{
	return (int64_t)pub->epoch;
}

void pub_auto_connect(struct crs_pub *pub)
{
	if (pub->auto_connect < 0 || pub->state != PUB_IDLE)
		return;
	int waiting = 0;
	for (uint32_t i = 0; i < pub->max_subscribers; i++)
		waiting += pub->slots[i].used &&
			   pub->slots[i].end_pos == UINT64_MAX;
	if (waiting >= pub->auto_connect)
		crs_pub_connect(pub);
}

/* End the current epoch for its subscribers at the current position,
 * with a terminal record of state (DETACHED: silently). */
static void end_epoch(struct crs_pub *pub, uint32_t state, int code,
		      const char *message)
{
	crs_pub_flush(pub); /* deferred frames come before the end */
	pub->claimed = 0;
	if (pub->latest_held) { /* LATEST: never sent in this epoch */
		pub->latest_held = 0;
		crs_store_relaxed(&pub->hdr->stats.dropped,
				  crs_load_relaxed(&pub->hdr->stats.dropped) +
					  1);
	}
	for (uint32_t i = 0; i < pub->max_subscribers; i++) {
		struct pub_slot *s = &pub->slots[i];
		if (!s->used || s->epoch != pub->epoch ||
		    s->end_pos != UINT64_MAX)
			continue;
		crs_terminal_put(&s->ctl->term, state, code, pub->pos,
				 pub->seq, message);
		s->end_pos = pub->pos;
	}
	pub->credit_limit = pub->room_limit = 0; /* recompute */
	/* No fence needed before the wake: each record's state is a
	 * release store (crs_terminal_put), pub_wake_all() changes
	 * data_signal before waking everyone unconditionally, and a
	 * subscriber that parked on the old value returns at once
	 * (park.h). */
	pub_wake_all(pub);
}

static int pub_terminate(struct crs_pub *pub, uint32_t state, int code,
			 const char *message)
{
	if (pub->state != PUB_CONNECTED)
		return pub->state == PUB_TERMINATED ? -ESHUTDOWN : -ENOTCONN;
	end_epoch(pub, state, code, message);
	crs_terminal_put(&pub->hdr->terminal, state, code, pub->pos, pub->seq,
			 message);
	crs_store_relaxed(&pub->hdr->stats.state,
			  state == CRS_TERM_COMPLETE
				  ? (uint32_t)CRS_STATS_COMPLETED
				  : (uint32_t)CRS_STATS_FAILED);
	pub->state = PUB_TERMINATED;
	return 0;
}

int crs_pub_complete(crs_pub *pub)
{
	return pub_terminate(pub, CRS_TERM_COMPLETE, 0, NULL);
}

int crs_pub_error(crs_pub *pub, int code, const char *message)
{
	if (code <= 0)
		return -EINVAL;
	return pub_terminate(pub, CRS_TERM_ERROR, code, message);
}

int crs_pub_disconnect(crs_pub *pub, int64_t epoch)
{
	if (pub->state != PUB_CONNECTED || epoch != (int64_t)pub->epoch)
		return 0; /* a stale handle changes nothing */
	switch (pub->on_disconnect) {
	case CRS_DISCONNECT_SEND_COMPLETED:
		end_epoch(pub, CRS_TERM_COMPLETE, 0, NULL);
		break;
	case CRS_DISCONNECT_NO_EVENT:
		end_epoch(pub, CRS_TERM_DETACHED, EPIPE, CLOSED_MESSAGE);
		break;
	default:
		end_epoch(pub, CRS_TERM_ERROR, ECANCELED,
			  "stream disconnected");
		break;
	}
	pub->state = PUB_IDLE;
	/* Still here and free to connect again: live, not closed. */
	crs_store_relaxed(&pub->hdr->stats.state, (uint32_t)CRS_STATS_LIVE);
	return 0;
}

/* Closing: whoever has no terminal record yet gets EPIPE where its
 * stream stops (waiting subscribers at once); a DETACHED one gets the
 * EPIPE its record already holds. */
void pub_close_epochs(struct crs_pub *pub)
{
	crs_pub_flush(pub);
	for (uint32_t i = 0; i < pub->max_subscribers; i++) {
		struct pub_slot *s = &pub->slots[i];
		struct crs_terminal_view t;
		if (!s->used)
			continue;
		uint32_t state = crs_terminal_get(&s->ctl->term, &t);
		if (state == CRS_TERM_DETACHED)
			/* Pairs with the acquire in crs_terminal_get(). */
			crs_store_release(&s->ctl->term.state, CRS_TERM_ERROR);
		if (state != CRS_TERM_NONE)
			continue;
		uint64_t at = s->end_pos != UINT64_MAX ? s->end_pos
			    : s->epoch == pub->epoch   ? pub->pos
						       : s->consumed;
		crs_terminal_put(&s->ctl->term, CRS_TERM_ERROR, EPIPE, at,
				 pub->seq, CLOSED_MESSAGE);
	}
	if (pub->state == PUB_CONNECTED)
		crs_terminal_put(&pub->hdr->terminal, CRS_TERM_ERROR, EPIPE,
				 pub->pos, pub->seq, CLOSED_MESSAGE);
	pub_wake_all(pub); /* no fence needed: see end_epoch() */
}
