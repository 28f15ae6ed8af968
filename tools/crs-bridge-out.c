/*
 * crs-bridge-out.c - crs -> JetStream: a crs subscriber of the local
 * stream that publishes each message to a JetStream subject.
 *
 * Demand is the ack window: the subscription requests only what fits in
 * the window of messages JetStream has not acknowledged yet (with
 * --follow, that a far consumer has not acknowledged yet), so a slow or
 * missing engine holds the local publisher back instead of piling up
 * messages here. Every message carries Nats-Msg-Id "<stream id>:<seq>"
 * (the server drops duplicates of it) and expects its predecessor's id
 * as the stream's last (Nats-Expected-Last-Msg-Id), so a server that
 * lost some messages refuses the rest instead of storing a gap. On a
 * refusal, a missing ack or a reconnect the bridge resynchronises: it
 * asks the stream for its last message and publishes again whatever of
 * the window came after it. A restarted bridge does the same at start,
 * and leaves out what the stream already holds (a replay stream gives
 * it those again).
 */
#include <errno.h>
#include <inttypes.h>
#include <poll.h>
#include <signal.h>
#include <stdlib.h>
#include <string.h>
#include <sys/timerfd.h>
#include <unistd.h>

#include "crs-bridge.h"
#include "crs/inspect.h"

#define TICK_MS 20

struct entry {
	uint64_t seq;
	natsMsg *msg; /* as last sent; carries the payload */
	int64_t sent_ns;
	int acked;
	int end; /* the final message */
};

struct out {
	const struct bridge_opts *o;
	struct bridge_nats n;
	int nats_open;
	crs_sub *sub;
	crs_loop *loop;
	crs_inspector *insp;
	int timer_fd;
	uint64_t sid; /* the local stream's id */

	/* The window, oldest first, by seq: the messages demand let in
	 * (o->window at most) and one slot more for the final message,
	 * which comes without demand. */
	struct entry *win;
	uint32_t head, len, slots;

	/* Where the JetStream stream stands, as of the last resync. */
	uint64_t js_last_sseq;
	int js_has_ours;      /* its last message is one of this stream's */
	uint64_t js_our_seq;  /* ... with this seq */
	int js_end_stored;    /* ... and it was the final one */
	/* The chain of expectations for the next message sent. */
	char prev_id[BRIDGE_ID_MAX];
	int have_prev;

	uint64_t next_seq; /* the seq expected next from crs */
	int seen_any;
	uint64_t last_acked_sseq;
	uint64_t floor_sseq; /* --follow: the consumer's ack floor */
	int floor_known;
	int64_t floor_at_ns; /* when to read it again */

	int need_resync;
	int64_t resync_at_ns;
	uint64_t reconnects_seen;
	int64_t heard_ns; /* last word from JetStream */
	int64_t status_at_ns;

	int ended; /* the local stream ended; its final message queued */
	struct crs_end end;
	int done, fatal;
	struct bridge_figures fig;
};

static volatile sig_atomic_t stop;
static void on_signal(int sig)
{
	(void)sig;
	stop = 1;
}

static struct entry *at(struct out *b, uint32_t i)
{
	return &b->win[(b->head + i) % b->slots];
}

/* A message for seq with its id and the expectation that keeps the
 * stream gapless: the previous id, or after a resync the stream's last
 * sequence (the server may not remember the last id across a restart). */
static natsMsg *make_msg(struct out *b, uint64_t seq, const void *data,
			 int len, int end)
{
	char reply[96], id[BRIDGE_ID_MAX], num[24];
	snprintf(reply, sizeof(reply), "%s.%" PRIu64, b->n.inbox, seq);
	natsMsg *m;
	if (natsMsg_Create(&m, b->o->subject, reply, data, len) != NATS_OK)
		return NULL;
	bridge_id_format(id, b->sid, seq);
	natsMsgHeader_Set(m, CRS_HDR_ID, id);
	if (b->have_prev) {
		natsMsgHeader_Set(m, CRS_HDR_EXPECT_ID, b->prev_id);
	} else {
		snprintf(num, sizeof(num), "%" PRIu64, b->js_last_sseq);
		natsMsgHeader_Set(m, CRS_HDR_EXPECT_SEQ, num);
	}
	if (end) {
		natsMsgHeader_Set(m, CRS_HDR_END,
				  b->end.code ? "error" : "complete");
		if (b->end.code) {
			snprintf(num, sizeof(num), "%d", b->end.code);
			natsMsgHeader_Set(m, CRS_HDR_CODE, num);
			if (b->end.message[0]) /* empty values do not cross */
				natsMsgHeader_Set(m, CRS_HDR_MESSAGE,
						  b->end.message);
		}
	}
	memcpy(b->prev_id, id, sizeof(id));
	b->have_prev = 1;
	return m;
}

static void send_entry(struct out *b, struct entry *e)
{
	e->sent_ns = bridge_now_ns();
	natsStatus s = natsConnection_PublishMsg(b->n.nc, e->msg);
	if (s != NATS_OK)
		b->fig.errors++; /* its ack will not come: resync resends */
	b->fig.sent++;
}

static void enqueue(struct out *b, uint64_t seq, const void *data, size_t len,
		    int end)
{
	if (b->len >= b->o->window + (uint32_t)end) { /* demand never allows it */
		fprintf(stderr, "crs-bridge: window overrun\n");
		b->fatal = 1;
		return;
	}
	struct entry *e = at(b, b->len);
	*e = (struct entry){ .seq = seq, .end = end };
	e->msg = make_msg(b, seq, data, (int)len, end);
	if (!e->msg) {
		b->fatal = 1;
		return;
	}
	if (b->len++ == 0) /* the silence clock starts now */
		b->heard_ns = bridge_now_ns();
	send_entry(b, e);
}

static void on_next(void *ctx, const struct crs_msg *m)
{
	struct out *b = ctx;
	b->fig.received++;
	if (b->js_has_ours && m->seq <= b->js_our_seq) {
		b->fig.skipped++; /* stored by an earlier run */
		return;
	}
	uint64_t expect = b->seen_any	 ? b->next_seq
			  : b->js_has_ours ? b->js_our_seq + 1
					   : m->seq;
	if (m->seq > expect) {
		b->fig.gaps += m->seq - expect;
		fprintf(stderr,
			"crs-bridge: %" PRIu64 " messages before seq %" PRIu64
			" are gone from the local stream (not retained)\n",
			m->seq - expect, m->seq);
	}
	b->seen_any = 1;
	b->next_seq = m->seq + 1;
	enqueue(b, m->seq, m->data, m->len, 0);
}

static void local_end(struct out *b, int code, const char *message)
{
	b->ended = 1;
	b->end.code = code;
	snprintf(b->end.message, sizeof(b->end.message), "%s",
		 message ? message : "");
	uint64_t seq = b->seen_any	? b->next_seq
		       : b->js_has_ours ? b->js_our_seq + 1
					: 0;
	if (b->js_end_stored && b->js_has_ours && seq <= b->js_our_seq + 1 &&
	    !b->seen_any) {
		b->done = 1; /* an earlier run already carried the end */
		return;
	}
	enqueue(b, seq, "", 0, 1);
}

static void on_complete(void *ctx)
{
	local_end(ctx, 0, NULL);
}

static void on_error(void *ctx, int code, const char *message)
{
	local_end(ctx, code, message);
}

static void pop_acked(struct out *b)
{
	while (b->len && at(b, 0)->acked) {
		struct entry *e = at(b, 0);
		if (e->end)
			b->done = 1;
		natsMsg_Destroy(e->msg);
		e->msg = NULL;
		b->head = (b->head + 1) % b->slots;
		b->len--;
		b->fig.acked++;
	}
}

/* Ask the stream where it stands; publish again what it lacks. */
static void resync(struct out *b)
{
	int64_t now = bridge_now_ns();
	b->need_resync = 0;
	if (!atomic_load(&b->n.connected)) {
		b->need_resync = 1; /* after the reconnect */
		return;
	}
	jsStreamInfo *si = NULL;
	jsErrCode jerr = 0;
	natsStatus s =
		js_GetStreamInfo(&si, b->n.js, b->o->js_stream, NULL, &jerr);
	if (s != NATS_OK) {
		b->fig.errors++;
		b->need_resync = 1;
		b->resync_at_ns = now + 200 * 1000000LL;
		return;
	}
	b->heard_ns = now;
	uint64_t last = si->State.LastSeq;
	jsStreamInfo_Destroy(si);
	b->js_last_sseq = last;
	if (last > 0) {
		natsMsg *m = NULL;
		if (js_GetMsg(&m, b->n.js, b->o->js_stream, last, NULL,
			      &jerr) == NATS_OK) {
			uint64_t sid, seq;
			if (bridge_id_parse(bridge_header(m, CRS_HDR_ID), &sid,
					    &seq) == 0 &&
			    sid == b->sid) {
				b->js_has_ours = 1;
				b->js_our_seq = seq;
				b->js_end_stored =
					bridge_header(m, CRS_HDR_END) != NULL;
			}
			natsMsg_Destroy(m);
		}
	}
	b->fig.resyncs++;
	b->have_prev = 0;
	/* What the stream holds is done; send the rest again, in order. */
	for (uint32_t i = 0; i < b->len; i++) {
		struct entry *e = at(b, i);
		if (b->js_has_ours && e->seq <= b->js_our_seq) {
			e->acked = 1;
			continue;
		}
		if (e->acked)
			continue; /* stored: others published after it */
		natsMsg *old = e->msg;
		e->msg = make_msg(b, e->seq, natsMsg_GetData(old),
				  natsMsg_GetDataLength(old), e->end);
		natsMsg_Destroy(old);
		if (!e->msg) {
			b->fatal = 1;
			return;
		}
		send_entry(b, e);
	}
	pop_acked(b);
}

static void on_ack(struct out *b, natsMsg *m)
{
	const char *subj = natsMsg_GetSubject(m);
	size_t il = strlen(b->n.inbox);
	if (strncmp(subj, b->n.inbox, il) || subj[il] != '.')
		return;
	uint64_t seq = strtoull(subj + il + 1, NULL, 10);
	b->heard_ns = bridge_now_ns();
	const char *data = natsMsg_GetData(m);
	int len = natsMsg_GetDataLength(m);
	struct entry *e = NULL;
	for (uint32_t i = 0; i < b->len && !e; i++)
		if (at(b, i)->seq == seq)
			e = at(b, i);
	if (!e || e->acked)
		return; /* an ack of an earlier send */
	if (natsMsg_IsNoResponders(m) || !data ||
	    memmem(data, (size_t)len, "\"error\"", 7)) {
		b->fig.errors++;
		int64_t code = bridge_json_number(data, len, "err_code");
		/* A broken chain resyncs at once; anything else after a
		 * pause, so that a refusing server is not flooded. */
		if (!b->need_resync)
			b->resync_at_ns =
				b->heard_ns + (code == JSStreamWrongLastMsgIDErr ||
							       code == 10071
						       ? 0
						       : 200 * 1000000LL);
		b->need_resync = 1;
		return;
	}
	int64_t sseq = bridge_json_number(data, len, "seq");
	if (sseq > 0 && (uint64_t)sseq > b->last_acked_sseq)
		b->last_acked_sseq = (uint64_t)sseq;
	e->acked = 1;
	pop_acked(b);
}

/* --follow: the far consumer's ack floor bounds the window, too. */
static void read_floor(struct out *b)
{
	jsConsumerInfo *ci = NULL;
	jsErrCode jerr = 0;
	if (js_GetConsumerInfo(&ci, b->n.js, b->o->js_stream, b->o->follow,
			       NULL, &jerr) != NATS_OK)
		return; /* not there yet: no demand from afar */
	b->floor_sseq = ci->AckFloor.Stream;
	b->floor_known = 1;
	jsConsumerInfo_Destroy(ci);
}

/* Request what fits in the window. */
static void top_up(struct out *b)
{
	if (b->ended || b->need_resync)
		return;
	uint64_t outstanding = crs_sub_requested(b->sub) - crs_sub_received(b->sub);
	uint64_t used = b->len + outstanding;
	if (b->o->follow) {
		if (!b->floor_known)
			return;
		uint64_t stored = b->last_acked_sseq > b->floor_sseq
					  ? b->last_acked_sseq - b->floor_sseq
					  : 0;
		used += stored;
	}
	uint64_t w = b->o->window;
	if (used >= w)
		return;
	uint64_t room = w - used;
	if (room >= (w + 7) / 8 || (room && b->len == 0 && outstanding == 0))
		crs_sub_request(b->sub, room);
}

static void figures(struct out *b)
{
	b->fig.in_flight = b->len;
	b->fig.connected = atomic_load(&b->n.connected);
	b->fig.lag = 0;
	struct crs_stream_info info;
	if (b->insp && crs_inspect_read(b->insp, &info, NULL, 0) >= 0 &&
	    info.published > b->next_seq)
		b->fig.lag = info.published - b->next_seq;
}

static void on_fd(void *ctx, int fd, short revents)
{
	struct out *b = ctx;
	(void)revents;
	if (fd == b->n.efd) {
		bridge_nats_drain_efd(&b->n);
	} else {
		uint64_t ticks;
		ssize_t r = read(fd, &ticks, sizeof(ticks));
		(void)r;
	}
}

/* Everything but crs delivery, after each loop round. */
static void pump(struct out *b)
{
	natsMsg *m;
	while ((m = bridge_nats_next(&b->n))) {
		on_ack(b, m);
		natsMsg_Destroy(m);
	}
	int64_t now = bridge_now_ns();
	uint64_t rc = atomic_load(&b->n.reconnects);
	if (rc != b->reconnects_seen) { /* in-flight acks may be lost */
		b->reconnects_seen = rc;
		b->need_resync = 1;
		b->resync_at_ns = now;
	}
	int64_t ack_timeout = b->o->outage_ms < 4000 ? b->o->outage_ms / 2 : 2000;
	if (b->len && now - at(b, 0)->sent_ns > ack_timeout * 1000000 &&
	    !b->need_resync) {
		b->need_resync = 1;
		b->resync_at_ns = now;
	}
	if (b->need_resync && now >= b->resync_at_ns)
		resync(b);
	if (b->o->follow && !b->ended && now >= b->floor_at_ns) {
		read_floor(b);
		b->floor_at_ns = now + 5 * 1000000LL;
	}
	top_up(b);

	int64_t down = bridge_nats_down_ms(&b->n);
	int64_t silent = b->len ? (now - b->heard_ns) / 1000000 : 0;
	if (down > b->o->outage_ms || silent > b->o->outage_ms) {
		fprintf(stderr,
			"crs-bridge out: NATS JetStream unreachable for %" PRId64
			" ms (limit %" PRId64 " ms): giving up with %u "
			"messages unacknowledged\n",
			down > silent ? down : silent, b->o->outage_ms, b->len);
		b->fatal = 1;
	}
	if (b->o->json && now >= b->status_at_ns) {
		figures(b);
		bridge_figures_print(stdout, &b->fig, 1);
		b->status_at_ns = now + b->o->status_ms * 1000000;
	}
}

int bridge_out(const struct bridge_opts *o)
{
	struct out *b = calloc(1, sizeof(*b));
	if (!b)
		return 1;
	b->o = o;
	b->fig.dir = "out";
	b->slots = o->window + 1;
	b->win = calloc(b->slots, sizeof(*b->win));
	int status = 1;
	struct sigaction sa = { .sa_handler = on_signal };
	sigaction(SIGINT, &sa, NULL);
	sigaction(SIGTERM, &sa, NULL);

	struct crs_sub_opts so;
	crs_sub_opts_init(&so);
	so.prefetch = 0; /* demand is ours to give: the ack window */
	so.wait_ms = -1;
	int err = crs_sub_open(o->stream, &so, &b->sub);
	if (err) {
		fprintf(stderr, "crs-bridge out: %s: %s (%s)\n", o->stream,
			crs_strerror(err), crs_errmsg());
		goto out;
	}
	b->sid = crs_sub_stream_id(b->sub);
	if (crs_inspect_open(o->stream, &b->insp))
		b->insp = NULL; /* lag stays 0 */
	if (!b->win)
		goto out;
	b->nats_open = 1; /* also after a failure: close cleans up */
	if (bridge_nats_open(&b->n, o))
		goto out;
	b->heard_ns = bridge_now_ns();
	resync(b); /* where an earlier run left off */
	while (b->need_resync && !stop &&
	       bridge_nats_down_ms(&b->n) <= o->outage_ms &&
	       bridge_now_ns() - b->heard_ns < o->outage_ms * 1000000) {
		usleep(100 * 1000);
		resync(b);
	}
	if (b->need_resync) {
		fprintf(stderr, "crs-bridge out: JetStream stream %s does not "
				"answer\n",
			o->js_stream);
		goto out;
	}

	static const struct crs_sub_callbacks cb = { on_next, on_complete,
						     on_error, NULL };
	b->timer_fd = timerfd_create(CLOCK_MONOTONIC, TFD_CLOEXEC | TFD_NONBLOCK);
	struct itimerspec its = { { 0, TICK_MS * 1000000 },
				  { 0, TICK_MS * 1000000 } };
	if (b->timer_fd < 0 || timerfd_settime(b->timer_fd, 0, &its, NULL) ||
	    crs_loop_create(&b->loop) || crs_loop_add_sub(b->loop, b->sub, &cb, b) ||
	    crs_loop_add_fd(b->loop, b->n.efd, POLLIN, on_fd, b) ||
	    crs_loop_add_fd(b->loop, b->timer_fd, POLLIN, on_fd, b)) {
		fprintf(stderr, "crs-bridge out: cannot set up its loop\n");
		goto out;
	}
	top_up(b);
	while (!b->done && !b->fatal && !stop) {
		int r = crs_loop_run(b->loop, bridge_nats_sleep_ms(&b->n, 1000));
		bridge_nats_awake(&b->n);
		if (r < 0 && r != -EINTR) {
			fprintf(stderr, "crs-bridge out: loop: %s\n",
				crs_strerror(r));
			b->fatal = 1;
		}
		pump(b);
	}
	/* Stopped by a signal: give the acks in flight a moment. */
	int64_t deadline = bridge_now_ns() + 2000 * 1000000LL;
	while (stop && b->len && !b->fatal && bridge_now_ns() < deadline) {
		crs_loop_run(b->loop, TICK_MS);
		pump(b);
	}
	status = b->fatal ? 1 : 0;
	figures(b);
	bridge_figures_print(o->json ? stdout : stderr, &b->fig, o->json);
out:
	if (b->loop)
		crs_loop_close(b->loop);
	if (b->timer_fd > 0)
		close(b->timer_fd);
	for (uint32_t i = 0; b->win && i < b->len; i++)
		natsMsg_Destroy(at(b, i)->msg);
	if (b->nats_open)
		bridge_nats_close(&b->n);
	if (b->insp)
		crs_inspect_close(b->insp);
	if (b->sub)
		crs_sub_close(b->sub);
	free(b->win);
	free(b);
	return status;
}
