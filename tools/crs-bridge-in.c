/*
 * crs-bridge-in.c - JetStream -> crs: a pull consumer feeding a local
 * crs stream as its publisher.
 *
 * It asks JetStream (pull requests it writes itself, so it always knows
 * how many messages are on their way) only for what the local stream's
 * demand allows, less what it already holds or has asked for: a slow
 * subscriber here throttles the fetches. A message is acknowledged only
 * after it is committed to the local ring; its position (JetStream
 * sequence, and the sender's stream id and seq) is kept in a small state
 * file, so that a restarted bridge starts right after the last message it
 * committed, in order, instead of waiting for redeliveries that would
 * come out of order and repeat what its subscribers already read.
 *
 * After a reconnect, and whenever JetStream stops counting its acks, it
 * starts the consumer again from that position: see consumer_restart().
 */
#include <errno.h>
#include <fcntl.h>
#include <inttypes.h>
#include <poll.h>
#include <signal.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/timerfd.h>
#include <unistd.h>

#include "crs-bridge.h"

#define TICK_MS 20
#define MAX_PULLS 8
#define PULL_EXPIRES_MS 1000
#define ACK_EVERY 128 /* messages per ack (AckAll), or ACK_DELAY_MS */
#define ACK_DELAY_MS 10
#define SETUP_RETRY_MS 200  /* between attempts to (re)create the consumer */
#define CHECK_EVERY_MS 2000 /* at most one stall check per this */
#define STATE_MAGIC 0x3174617473627263ULL /* "crbstat1" */

/* Where the bridge stands, in a file mapping that outlives a kill -9.
 * Two slots: a write fills the other one, then publishes it by bumping
 * gen, so a reader never takes a half-written position. */
struct state_slot {
	uint64_t sid, oseq, sseq, check;
};
struct state_file {
	uint64_t magic;
	_Atomic uint64_t gen;
	struct state_slot slot[2];
	char js_stream[64];
	char durable[64];
};

struct pull {
	uint64_t id;
	uint64_t batch, left;
	int64_t deadline_ns;
};

struct in {
	const struct bridge_opts *o;
	struct bridge_nats n;
	int nats_open;
	crs_pub *pub;
	crs_loop *loop;
	int timer_fd;
	char api_next[256];

	struct pull pulls[MAX_PULLS];
	int npulls;
	uint64_t next_pull;

	natsMsg **q; /* fetched, not yet committed; oldest first */
	size_t q_head, q_len, q_cap;

	struct state_file *st;
	uint64_t sid, oseq, sseq; /* the last message handled */
	int have_last;
	char ack_to[256]; /* reply subject of the last handled message */
	uint64_t handled, acked_upto; /* messages handled; covered by acks */
	int64_t ack_due_ns; /* when the oldest unacked one was handled */

	uint64_t reconnects_seen;
	int need_setup; /* the consumer must be created again */
	int64_t setup_since_ns, setup_at_ns;
	int starved;	     /* a pull ended without a message */
	int64_t check_at_ns; /* the next stall check, at the earliest */
	int64_t heard_ns;
	int64_t status_at_ns;
	int ended, done, fatal;
	struct bridge_figures fig;
};

static volatile sig_atomic_t stop;
static void on_signal(int sig)
{
	(void)sig;
	stop = 1;
}

/* ---- state file --------------------------------------------------------- */

static uint64_t slot_check(const struct state_slot *s)
{
	uint64_t x = s->sid * 0x9e3779b97f4a7c15ULL ^ s->oseq * 0xbf58476d1ce4e5b9ULL ^
		     s->sseq * 0x94d049bb133111ebULL;
	return x ^ (x >> 31) ^ STATE_MAGIC;
}

static int state_open(struct in *b)
{
	const struct bridge_opts *o = b->o;
	char path[512];
	if (o->state_path) {
		snprintf(path, sizeof(path), "%s", o->state_path);
	} else {
		char dir[256];
		int r = crs_runtime_dir(dir, sizeof(dir));
		if (r < 0) {
			fprintf(stderr, "crs-bridge in: %s\n", crs_errmsg());
			return -1;
		}
		snprintf(path, sizeof(path), "%s/.crs-bridge-%s-%s.state", dir,
			 o->js_stream, o->durable);
	}
	int fd = open(path, O_RDWR | O_CREAT | O_CLOEXEC, 0600);
	if (fd < 0 || ftruncate(fd, sizeof(struct state_file))) {
		fprintf(stderr, "crs-bridge in: %s: %s\n", path, strerror(errno));
		if (fd >= 0)
			close(fd);
		return -1;
	}
	void *map = mmap(NULL, sizeof(struct state_file), PROT_READ | PROT_WRITE,
			 MAP_SHARED, fd, 0);
	close(fd);
	if (map == MAP_FAILED)
		return -1;
	b->st = map;
	struct state_file *st = b->st;
	if (st->magic == STATE_MAGIC &&
	    !strncmp(st->js_stream, o->js_stream, sizeof(st->js_stream)) &&
	    !strncmp(st->durable, o->durable, sizeof(st->durable))) {
		uint64_t g = atomic_load(&st->gen);
		for (int k = 0; k < 2 && !b->have_last; k++) {
			const struct state_slot *s = &st->slot[(g + (uint64_t)k) & 1];
			if (s->check == slot_check(s) && s->sseq) {
				b->sid = s->sid;
				b->oseq = s->oseq;
				b->sseq = s->sseq;
				b->have_last = 1;
			}
		}
	} else {
		memset(st, 0, sizeof(*st));
		snprintf(st->js_stream, sizeof(st->js_stream), "%s", o->js_stream);
		snprintf(st->durable, sizeof(st->durable), "%s", o->durable);
		st->magic = STATE_MAGIC;
	}
	return 0;
}

static void state_save(struct in *b)
{
	struct state_file *st = b->st;
	uint64_t g = atomic_load_explicit(&st->gen, memory_order_relaxed) + 1;
	struct state_slot *s = &st->slot[g & 1];
	s->sid = b->sid;
	s->oseq = b->oseq;
	s->sseq = b->sseq;
	s->check = slot_check(s);
	/* Release: the slot's fields before the generation naming it. */
	atomic_store_explicit(&st->gen, g, memory_order_release);
}

/* ---- the consumer ------------------------------------------------------- */

/* The first stream sequence of --deliver (0: the policy as it is). */
static int deliver_config(struct in *b, jsConsumerConfig *cc)
{
	const struct bridge_opts *o = b->o;
	if (b->have_last) { /* resume right after what we committed */
		cc->DeliverPolicy = js_DeliverByStartSequence;
		cc->OptStartSeq = b->sseq + 1;
		return 0;
	}
	switch (o->deliver) {
	case DELIVER_ALL:
		cc->DeliverPolicy = js_DeliverAll;
		return 0;
	case DELIVER_NEW:
		cc->DeliverPolicy = js_DeliverNew;
		return 0;
	case DELIVER_FROM:
		cc->DeliverPolicy = js_DeliverByStartSequence;
		cc->OptStartSeq = o->deliver_arg ? o->deliver_arg : 1;
		return 0;
	case DELIVER_SINCE:
		cc->DeliverPolicy = js_DeliverByStartTime;
		cc->OptStartTime = (int64_t)o->deliver_arg;
		return 0;
	}
	/* last N: JetStream's DeliverLast is one message; count back. */
	jsStreamInfo *si = NULL;
	jsErrCode jerr = 0;
	if (js_GetStreamInfo(&si, b->n.js, o->js_stream, NULL, &jerr) != NATS_OK) {
		fprintf(stderr, "crs-bridge in: stream %s: %d\n", o->js_stream,
			(int)jerr);
		return -1;
	}
	uint64_t last = si->State.LastSeq, first = si->State.FirstSeq;
	jsStreamInfo_Destroy(si);
	if (last == 0 || o->deliver_arg == 0) {
		cc->DeliverPolicy = js_DeliverNew;
		return 0;
	}
	uint64_t start = last >= o->deliver_arg ? last - o->deliver_arg + 1 : 1;
	cc->DeliverPolicy = js_DeliverByStartSequence;
	cc->OptStartSeq = start > first ? start : first;
	return 0;
}

/* (Re)create the durable so that it starts where we should. */
static int consumer_setup(struct in *b)
{
	const struct bridge_opts *o = b->o;
	jsConsumerInfo *ci = NULL;
	jsErrCode jerr = 0;
	if (js_GetConsumerInfo(&ci, b->n.js, o->js_stream, o->durable, NULL,
			       &jerr) == NATS_OK) {
		/* Without a state file, trust its ack floor. */
		if (!b->have_last && ci->AckFloor.Stream) {
			b->sseq = ci->AckFloor.Stream;
			b->have_last = 1; /* sid unknown: no duplicate check */
			b->sid = 0;
		}
		jsConsumerInfo_Destroy(ci);
		js_DeleteConsumer(b->n.js, o->js_stream, o->durable, NULL, &jerr);
	}
	jsConsumerConfig cc;
	jsConsumerConfig_Init(&cc);
	cc.Durable = o->durable;
	cc.AckPolicy = js_AckAll;
	cc.AckWait = o->ack_wait_ms * 1000000;
	cc.MaxAckPending = (int64_t)o->window * 4;
	cc.FilterSubject = o->subject;
	if (deliver_config(b, &cc))
		return -1;
	natsStatus s = js_AddConsumer(&ci, b->n.js, o->js_stream, &cc, NULL, &jerr);
	if (s != NATS_OK) {
		fprintf(stderr, "crs-bridge in: consumer %s: %s (%d)\n",
			o->durable, natsStatus_GetText(s), (int)jerr);
		return -1;
	}
	if (!b->have_last) { /* where it starts, should we create it again */
		b->sseq = ci->Delivered.Stream;
		b->have_last = 1;
		b->sid = 0;
	}
	jsConsumerInfo_Destroy(ci);
	snprintf(b->api_next, sizeof(b->api_next),
		 "$JS.API.CONSUMER.MSG.NEXT.%s.%s", o->js_stream, o->durable);
	return 0;
}

/* ---- fetching ----------------------------------------------------------- */

static uint64_t asked(const struct in *b)
{
	uint64_t n = b->q_len;
	for (int i = 0; i < b->npulls; i++)
		n += b->pulls[i].left;
	return n;
}

/* Pulls stay in the order they were sent: JetStream serves them so. */
static void pull_remove(struct in *b, int i)
{
	memmove(&b->pulls[i], &b->pulls[i + 1],
		(size_t)(b->npulls - i - 1) * sizeof(b->pulls[0]));
	b->npulls--;
}

/* Ask for what the local demand allows beyond what is on its way. */
static void fetch(struct in *b)
{
	if (b->ended || b->need_setup || b->npulls == MAX_PULLS ||
	    !atomic_load(&b->n.connected))
		return;
	uint64_t demand = crs_pub_demand(b->pub);
	uint64_t cap = demand < b->o->window ? demand : b->o->window;
	uint64_t have = asked(b);
	if (cap <= have)
		return;
	uint64_t want = cap - have;
	if (want < cap / 4 && have)
		return; /* batch up small requests */
	char reply[96], req[96];
	struct pull *p = &b->pulls[b->npulls];
	p->id = ++b->next_pull;
	p->batch = p->left = want;
	p->deadline_ns = bridge_now_ns() + (PULL_EXPIRES_MS + 1000) * 1000000LL;
	snprintf(reply, sizeof(reply), "%s.%" PRIu64, b->n.inbox, p->id);
	snprintf(req, sizeof(req), "{\"batch\":%" PRIu64 ",\"expires\":%lld}",
		 want, (long long)PULL_EXPIRES_MS * 1000000);
	if (natsConnection_PublishRequestString(b->n.nc, b->api_next, reply,
						req) != NATS_OK) {
		b->fig.errors++;
		return;
	}
	if (b->npulls++ == 0) /* the silence clock starts now */
		b->heard_ns = bridge_now_ns();
}

static void q_push(struct in *b, natsMsg *m)
{
	if (b->q_len == b->q_cap) {
		size_t cap = b->q_cap ? b->q_cap * 2 : 256;
		natsMsg **q = malloc(cap * sizeof(*q));
		if (!q) {
			natsMsg_Destroy(m); /* unacked: JetStream redelivers */
			b->fig.errors++;
			return;
		}
		for (size_t i = 0; i < b->q_len; i++)
			q[i] = b->q[(b->q_head + i) % b->q_cap];
		free(b->q);
		b->q = q;
		b->q_head = 0;
		b->q_cap = cap;
	}
	b->q[(b->q_head + b->q_len++) % b->q_cap] = m;
}

/* Drop what was fetched and not committed (unacked: it comes again). */
static void q_clear(struct in *b)
{
	for (; b->q_len; b->q_len--) {
		natsMsg_Destroy(b->q[b->q_head]);
		b->q_head = (b->q_head + 1) % b->q_cap;
	}
}

/* Token k from the end of a $JS.ACK reply subject (0: the last). */
static uint64_t ack_token(const char *reply, int k)
{
	const char *end = reply + strlen(reply);
	for (const char *p = end; p > reply; p--) {
		if (p[-1] != '.')
			continue;
		if (k-- == 0)
			return strtoull(p, NULL, 10);
	}
	return 0;
}

/* A message at our inbox: a pulled message (under its own subject; it
 * counts against the oldest pull) or a pull's status (under the pull's
 * reply subject). */
static void on_inbox(struct in *b, natsMsg *m)
{
	b->heard_ns = bridge_now_ns();
	const char *subj = natsMsg_GetSubject(m);
	size_t il = strlen(b->n.inbox);
	uint64_t id = !strncmp(subj, b->n.inbox, il) && subj[il] == '.'
			      ? strtoull(subj + il + 1, NULL, 10)
			      : 0;
	int i = 0;
	while (i < b->npulls && b->pulls[i].id != id)
		i++;
	const char *status = bridge_header(m, "Status");
	const char *reply = natsMsg_GetReply(m);
	if (status || natsMsg_IsNoResponders(m) || !reply ||
	    strncmp(reply, "$JS.ACK.", 8)) {
		/* 100: a heartbeat; 404/408/409 (or no JetStream): the
		 * pull is over. */
		if (!status || strcmp(status, "100")) {
			if (i < b->npulls) {
				if (b->pulls[i].left == b->pulls[i].batch)
					b->starved = 1;
				pull_remove(b, i);
			}
			if (!status || status[0] == '5')
				b->fig.errors++;
		}
		natsMsg_Destroy(m);
		return;
	}
	if (b->need_setup) { /* from the consumer we are replacing */
		natsMsg_Destroy(m);
		return;
	}
	if (b->npulls && --b->pulls[0].left == 0)
		pull_remove(b, 0);
	b->fig.received++;
	if (ack_token(reply, 4) > 1)
		b->fig.redeliveries++;
	b->fig.lag = ack_token(reply, 0);
	q_push(b, m);
}

/* ---- committing --------------------------------------------------------- */

static int parse_code(const char *s)
{
	char *end;
	long v = s ? strtol(s, &end, 10) : 0;
	return s && *s && !*end && v > 0 && v < 1 << 20 ? (int)v : 0;
}

/* Deliver one fetched message to the local stream. Returns 1 if it was
 * handled (committed, left out, or rejected), 0 if it must wait for
 * demand or room. */
static int deliver(struct in *b, natsMsg *m)
{
	uint64_t sid = 0, oseq = 0;
	const char *end = bridge_header(m, CRS_HDR_END);
	int len = natsMsg_GetDataLength(m);
	int valid = bridge_id_parse(bridge_header(m, CRS_HDR_ID), &sid, &oseq) == 0;
	int code = 0;
	if (valid && end) {
		if (!strcmp(end, "error"))
			valid = (code = parse_code(bridge_header(m, CRS_HDR_CODE))) > 0;
		else
			valid = !strcmp(end, "complete");
	}
	if (!valid) {
		b->fig.rejected++;
		fprintf(stderr, "crs-bridge in: rejected a message that is not "
				"a bridged crs message (%d bytes)\n",
			len);
		return 1;
	}
	if (b->have_last && b->sid == sid && oseq <= b->oseq) {
		b->fig.skipped++; /* committed before */
		return 1;
	}
	if (b->have_last && b->sid == sid && oseq > b->oseq + 1)
		b->fig.gaps += oseq - b->oseq - 1; /* limits or --deliver */
	if (end) {
		int r = code ? crs_pub_error(b->pub, code,
					     bridge_header(m, CRS_HDR_MESSAGE))
			     : crs_pub_complete(b->pub);
		if (r && r != -ESHUTDOWN) {
			fprintf(stderr, "crs-bridge in: ending the stream: %s\n",
				crs_strerror(r));
			b->fatal = 1;
			return 0;
		}
		b->ended = 1;
	} else {
		void *buf;
		int r = crs_pub_claim(b->pub, (size_t)len, &buf);
		if (r == -CRS_ENODEMAND || r == -CRS_ENOROOM || r == -ENOTCONN)
			return 0;
		if (r == -EMSGSIZE) {
			b->fig.rejected++;
			fprintf(stderr,
				"crs-bridge in: rejected a %d-byte message "
				"(larger than the stream's largest)\n",
				len);
			return 1;
		}
		if (r) {
			fprintf(stderr, "crs-bridge in: claim: %s\n",
				crs_strerror(r));
			b->fatal = 1;
			return 0;
		}
		memcpy(buf, natsMsg_GetData(m), (size_t)len);
		crs_pub_commit(b->pub, (size_t)len);
		b->fig.sent++;
	}
	b->sid = sid;
	b->oseq = oseq;
	b->have_last = 1;
	return 1;
}

static void commit_queue(struct in *b)
{
	while (b->q_len && !b->ended && !b->fatal) {
		natsMsg *m = b->q[b->q_head];
		if (!deliver(b, m))
			break;
		/* Right after the commit: the position that survives us. */
		const char *reply = natsMsg_GetReply(m);
		b->sseq = ack_token(reply, 3);
		state_save(b);
		snprintf(b->ack_to, sizeof(b->ack_to), "%s", reply);
		if (b->handled++ == b->acked_upto)
			b->ack_due_ns = bridge_now_ns();
		b->q_head = (b->q_head + 1) % b->q_cap;
		b->q_len--;
		natsMsg_Destroy(m);
	}
}

/* AckAll: one ack covers every message handled before it. Acks go in
 * batches (each costs the server as much as a message), at the latest
 * ACK_DELAY_MS after the first message they cover; the state file, not
 * the ack, is what a restart trusts. */
static void flush_ack(struct in *b, int now_anyway)
{
	uint64_t due = b->handled - b->acked_upto;
	/* Not while disconnected: libnats would keep the ack and send it to
	 * whichever server comes back, which may know nothing of it. */
	if (!due || !atomic_load(&b->n.connected) ||
	    (!now_anyway && due < ACK_EVERY &&
	     bridge_now_ns() - b->ack_due_ns < ACK_DELAY_MS * 1000000LL))
		return;
	if (natsConnection_PublishString(b->n.nc, b->ack_to, "+ACK") == NATS_OK) {
		b->acked_upto = b->handled;
		b->fig.acked = b->handled;
	} else {
		b->fig.errors++;
	}
}

/* ---- starting the consumer again ---------------------------------------- */

/* Drop what the consumer sent and have it created again right after the
 * last message we committed, as a restarted bridge would. After a
 * reconnect this is needed: the server may have restarted and forgotten
 * deliveries, and one ack for such a delivery (libnats sends on what was
 * published while it reconnected) moves its AckAll floor past every
 * delivery to come; it then ignores our acks and, at MaxAckPending,
 * delivers nothing more. The dropped messages come again from the new
 * consumer, which starts before them, so their ack is not needed. */
static void consumer_restart(struct in *b)
{
	q_clear(b);
	b->npulls = 0;
	b->acked_upto = b->handled;
	b->need_setup = 1;
	b->setup_since_ns = b->setup_at_ns = bridge_now_ns();
}

static void consumer_retry(struct in *b)
{
	int64_t now = bridge_now_ns();
	if (!atomic_load(&b->n.connected) || now < b->setup_at_ns)
		return;
	if (consumer_setup(b)) { /* JetStream not back yet */
		b->setup_at_ns = now + SETUP_RETRY_MS * 1000000LL;
		return;
	}
	b->need_setup = 0;
	b->fig.resyncs++;
}

/* JetStream holds deliveries back while MaxAckPending of them wait for
 * an ack. If it does so while we hold nothing unacknowledged, it is not
 * counting our acks (an ack it should not have taken, as above, or one
 * from someone else); a consumer deleted under us starves us the same
 * way. Asked only after a pull that ended with nothing. */
static void consumer_check(struct in *b)
{
	const struct bridge_opts *o = b->o;
	int64_t now = bridge_now_ns();
	b->starved = 0;
	if (b->need_setup || b->q_len || b->handled != b->acked_upto ||
	    now < b->check_at_ns)
		return;
	b->check_at_ns = now + CHECK_EVERY_MS * 1000000LL;
	jsConsumerInfo *ci = NULL;
	jsErrCode jerr = 0;
	if (js_GetConsumerInfo(&ci, b->n.js, o->js_stream, o->durable, NULL,
			       &jerr) == NATS_OK) {
		int64_t unacked = ci->NumAckPending;
		int64_t max = ci->Config ? ci->Config->MaxAckPending : 0;
		jsConsumerInfo_Destroy(ci);
		if (max <= 0 || unacked < max)
			return;
		fprintf(stderr,
			"crs-bridge in: consumer %s counts %lld messages "
			"unacknowledged, all of them acknowledged: ",
			o->durable, (long long)unacked);
	} else if (jerr == JSConsumerNotFoundErr) {
		fprintf(stderr,
			"crs-bridge in: consumer %s is gone: ", o->durable);
	} else {
		return; /* JetStream busy or away: the outage limit decides */
	}
	fprintf(stderr, "creating it again after stream sequence %" PRIu64 "\n",
		b->sseq);
	consumer_restart(b);
}

/* ---- the loop ----------------------------------------------------------- */

static void on_fd(void *ctx, int fd, short revents)
{
	struct in *b = ctx;
	(void)revents;
	if (fd == b->n.efd) {
		bridge_nats_drain_efd(&b->n);
	} else {
		uint64_t ticks;
		ssize_t r = read(fd, &ticks, sizeof(ticks));
		(void)r;
	}
}

static void pump(struct in *b)
{
	natsMsg *m;
	while ((m = bridge_nats_next(&b->n)))
		on_inbox(b, m);
	commit_queue(b);
	flush_ack(b, b->ended);
	int64_t now = bridge_now_ns();
	uint64_t rc = atomic_load(&b->n.reconnects);
	if (rc != b->reconnects_seen) { /* pulls of the old link are gone */
		b->reconnects_seen = rc;
		consumer_restart(b);
	}
	if (b->starved)
		consumer_check(b);
	if (b->need_setup)
		consumer_retry(b);
	for (int i = 0; i < b->npulls; i++)
		if (now > b->pulls[i].deadline_ns)
			pull_remove(b, i--);
	fetch(b);

	int64_t down = bridge_nats_down_ms(&b->n);
	if (b->need_setup && (now - b->setup_since_ns) / 1000000 > down)
		down = (now - b->setup_since_ns) / 1000000;
	int64_t silent = b->npulls ? (now - b->heard_ns) / 1000000 - PULL_EXPIRES_MS
				   : 0;
	if (!b->ended && (down > b->o->outage_ms || silent > b->o->outage_ms)) {
		char msg[CRS_ERRMSG_MAX];
		snprintf(msg, sizeof(msg),
			 "crs-bridge: NATS JetStream unreachable for over %lld s",
			 (long long)(b->o->outage_ms / 1000));
		fprintf(stderr, "crs-bridge in: %s\n", msg);
		crs_pub_error(b->pub, EHOSTUNREACH, msg);
		b->ended = b->fatal = 1;
	}
	b->fig.in_flight = asked(b);
	b->fig.connected = atomic_load(&b->n.connected);
	if (b->o->json && now >= b->status_at_ns) {
		bridge_figures_print(stdout, &b->fig, 1);
		b->status_at_ns = now + b->o->status_ms * 1000000;
	}
}

static void on_ready(void *ctx, crs_pub *pub)
{
	(void)ctx;
	(void)pub; /* pump() runs after every round */
}

int bridge_in(const struct bridge_opts *o)
{
	struct in *b = calloc(1, sizeof(*b));
	if (!b)
		return 1;
	b->o = o;
	b->fig.dir = "in";
	int status = 1;
	struct sigaction sa = { .sa_handler = on_signal };
	sigaction(SIGINT, &sa, NULL);
	sigaction(SIGTERM, &sa, NULL);

	if (state_open(b))
		goto out;
	b->nats_open = 1; /* also after a failure: close cleans up */
	if (bridge_nats_open(&b->n, o))
		goto out;
	/* As the stream in bridge_nats_open: retry within the outage limit. */
	int64_t deadline = bridge_now_ns() + o->outage_ms * 1000000;
	int setup;
	while ((setup = consumer_setup(b)) && bridge_now_ns() < deadline)
		usleep(100 * 1000);
	if (setup)
		goto out;
	int err = crs_pub_create(o->stream, &o->pub, &b->pub);
	if (err) {
		fprintf(stderr, "crs-bridge in: %s: %s (%s)\n", o->stream,
			crs_strerror(err), crs_errmsg());
		goto out;
	}
	b->heard_ns = bridge_now_ns();
	b->timer_fd = timerfd_create(CLOCK_MONOTONIC, TFD_CLOEXEC | TFD_NONBLOCK);
	struct itimerspec its = { { 0, TICK_MS * 1000000 },
				  { 0, TICK_MS * 1000000 } };
	if (b->timer_fd < 0 || timerfd_settime(b->timer_fd, 0, &its, NULL) ||
	    crs_loop_create(&b->loop) || crs_loop_add_pub(b->loop, b->pub, on_ready, b) ||
	    crs_loop_add_fd(b->loop, b->n.efd, POLLIN, on_fd, b) ||
	    crs_loop_add_fd(b->loop, b->timer_fd, POLLIN, on_fd, b)) {
		fprintf(stderr, "crs-bridge in: cannot set up its loop\n");
		goto out;
	}
	while (!b->ended && !stop) {
		int r = crs_loop_run(b->loop, bridge_nats_sleep_ms(&b->n, 1000));
		bridge_nats_awake(&b->n);
		if (r < 0 && r != -EINTR) {
			fprintf(stderr, "crs-bridge in: loop: %s\n",
				crs_strerror(r));
			crs_pub_error(b->pub, EIO, "crs-bridge: loop failed");
			b->fatal = 1;
			break;
		}
		pump(b);
	}
	flush_ack(b, 1);
	natsConnection_FlushTimeout(b->n.nc, 1000); /* the last ack */
	/* Ended: let the subscribers read the rest and the end. */
	while (b->ended && !stop && crs_pub_wait_consumed(b->pub, 200))
		crs_pub_serve(b->pub);
	status = b->fatal ? 1 : 0;
	bridge_figures_print(o->json ? stdout : stderr, &b->fig, o->json);
out:
	if (b->loop)
		crs_loop_close(b->loop);
	if (b->timer_fd > 0)
		close(b->timer_fd);
	if (b->pub)
		crs_pub_close(b->pub);
	q_clear(b);
	free(b->q);
	if (b->nats_open)
		bridge_nats_close(&b->n);
	if (b->st)
		munmap(b->st, sizeof(*b->st));
	free(b);
	return status;
}
