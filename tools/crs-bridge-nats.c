/*
 * crs-bridge-nats.c - the NATS side of crs-bridge: the connection (which
 * reconnects by itself), the inbox where publish acknowledgements and
 * pulled messages arrive, the JetStream stream, message ids, and the
 * status line.
 *
 * libnats delivers inbox messages on its own thread; they wait in a
 * mutex-guarded ring until the bridge's crs_loop, woken through an
 * eventfd, takes them. That keeps every crs handle on one thread.
 */
#include "crs-bridge.h"

#include <errno.h>
#include <inttypes.h>
#include <stdlib.h>
#include <string.h>
#include <sys/eventfd.h>
#include <time.h>
#include <unistd.h>

int64_t bridge_now_ns(void)
{
	struct timespec t;
	clock_gettime(CLOCK_MONOTONIC, &t);
	return (int64_t)t.tv_sec * 1000000000 + t.tv_nsec;
}

static void poke(struct bridge_nats *n)
{
	uint64_t one = 1;
	ssize_t r = write(n->efd, &one, sizeof(one));
	(void)r; /* EAGAIN: the counter is already non-zero */
}

void bridge_nats_drain_efd(struct bridge_nats *n)
{
	uint64_t v;
	ssize_t r = read(n->efd, &v, sizeof(v));
	(void)r;
}

/* libnats thread: queue the message for the loop. */
static void on_inbox(natsConnection *nc, natsSubscription *sub, natsMsg *m,
		     void *closure)
{
	(void)nc;
	(void)sub;
	struct bridge_nats *n = closure;
	pthread_mutex_lock(&n->lock);
	if (n->q_len == n->q_cap) {
		size_t cap = n->q_cap ? n->q_cap * 2 : 1024;
		natsMsg **q = malloc(cap * sizeof(*q));
		if (!q) {
			n->q_overflow = 1; /* counted; acks time out */
			pthread_mutex_unlock(&n->lock);
			natsMsg_Destroy(m);
			return;
		}
		for (size_t i = 0; i < n->q_len; i++)
			q[i] = n->queue[(n->q_head + i) % n->q_cap];
		free(n->queue);
		n->queue = q;
		n->q_head = 0;
		n->q_cap = cap;
	}
	n->queue[(n->q_head + n->q_len++) % n->q_cap] = m;
	int wake = n->waiting;
	n->waiting = 0;
	pthread_mutex_unlock(&n->lock);
	if (wake)
		poke(n);
}

int bridge_nats_sleep_ms(struct bridge_nats *n, int timeout_ms)
{
	pthread_mutex_lock(&n->lock);
	n->waiting = n->q_len == 0;
	pthread_mutex_unlock(&n->lock);
	return n->waiting ? timeout_ms : 0;
}

void bridge_nats_awake(struct bridge_nats *n)
{
	pthread_mutex_lock(&n->lock);
	n->waiting = 0;
	pthread_mutex_unlock(&n->lock);
}

natsMsg *bridge_nats_next(struct bridge_nats *n)
{
	natsMsg *m = NULL;
	pthread_mutex_lock(&n->lock);
	if (n->q_len) {
		m = n->queue[n->q_head];
		n->q_head = (n->q_head + 1) % n->q_cap;
		n->q_len--;
	}
	pthread_mutex_unlock(&n->lock);
	return m;
}

static void on_disconnected(natsConnection *nc, void *closure)
{
	(void)nc;
	struct bridge_nats *n = closure;
	int64_t zero = 0;
	atomic_compare_exchange_strong(&n->down_since_ns, &zero,
				       bridge_now_ns());
	atomic_store(&n->connected, 0);
	poke(n);
}

static void on_reconnected(natsConnection *nc, void *closure)
{
	(void)nc;
	struct bridge_nats *n = closure;
	atomic_store(&n->down_since_ns, 0);
	atomic_store(&n->connected, 1);
	atomic_fetch_add(&n->reconnects, 1);
	poke(n);
}

int64_t bridge_nats_down_ms(struct bridge_nats *n)
{
	int64_t since = atomic_load(&n->down_since_ns);
	return since ? (bridge_now_ns() - since) / 1000000 : 0;
}

/* Create the stream, or update its limits if the user gave some. */
static int ensure_stream(struct bridge_nats *n, const struct bridge_opts *o)
{
	jsStreamConfig cfg;
	jsStreamConfig_Init(&cfg);
	const char *subjects[] = { o->subject };
	cfg.Name = o->js_stream;
	cfg.Subjects = subjects;
	cfg.SubjectsLen = 1;
	cfg.Storage = o->memory ? js_MemoryStorage : js_FileStorage;
	if (o->max_msgs > 0)
		cfg.MaxMsgs = o->max_msgs;
	if (o->max_bytes > 0)
		cfg.MaxBytes = o->max_bytes;
	/* The duplicate window may not exceed MaxAge (the server refuses). */
	cfg.Duplicates = 120 * (int64_t)1000000000;
	if (o->max_age_s > 0) {
		cfg.MaxAge = o->max_age_s * (int64_t)1000000000;
		if (cfg.Duplicates > cfg.MaxAge)
			cfg.Duplicates = cfg.MaxAge;
	}
	jsStreamInfo *si = NULL;
	jsErrCode jerr = 0;
	natsStatus s = js_GetStreamInfo(&si, n->js, o->js_stream, NULL, &jerr);
	if (s == NATS_OK) {
		jsStreamInfo_Destroy(si);
		if (!(o->max_msgs || o->max_bytes || o->max_age_s))
			return 0; /* keep what the stream has */
		s = js_UpdateStream(&si, n->js, &cfg, NULL, &jerr);
	} else if (jerr == JSStreamNotFoundErr) {
		s = js_AddStream(&si, n->js, &cfg, NULL, &jerr);
		if (jerr == JSStreamNameExistErr) /* the other side was first */
			return 0;
	}
	if (s != NATS_OK) {
		fprintf(stderr, "crs-bridge: JetStream stream %s: %s (%d)\n",
			o->js_stream, natsStatus_GetText(s), (int)jerr);
		return -1;
	}
	jsStreamInfo_Destroy(si);
	return 0;
}

int bridge_nats_open(struct bridge_nats *n, const struct bridge_opts *o)
{
	memset(n, 0, sizeof(*n));
	pthread_mutex_init(&n->lock, NULL);
	n->efd = eventfd(0, EFD_CLOEXEC | EFD_NONBLOCK);
	if (n->efd < 0) {
		perror("crs-bridge: eventfd");
		return -1;
	}
	natsOptions *opts;
	if (natsOptions_Create(&opts) != NATS_OK)
		return -1;
	natsOptions_SetURL(opts, o->url);
	natsOptions_SetName(opts, o->out ? "crs-bridge out" : "crs-bridge in");
	natsOptions_SetMaxReconnect(opts, -1); /* the outage limit decides */
	natsOptions_SetReconnectWait(opts, 100);
	natsOptions_SetReconnectJitter(opts, 50, 50);
	natsOptions_SetTimeout(opts, 1000);
	natsOptions_SetDisconnectedCB(opts, on_disconnected, n);
	natsOptions_SetReconnectedCB(opts, on_reconnected, n);

	/* The server may come up after us: retry within the outage limit. */
	int64_t deadline = bridge_now_ns() + o->outage_ms * 1000000;
	natsStatus s;
	while ((s = natsConnection_Connect(&n->nc, opts)) != NATS_OK &&
	       bridge_now_ns() < deadline)
		usleep(100 * 1000);
	natsOptions_Destroy(opts);
	if (s != NATS_OK) {
		fprintf(stderr, "crs-bridge: cannot connect to %s: %s\n",
			o->url, natsStatus_GetText(s));
		return -1;
	}
	atomic_store(&n->connected, 1);
	if (natsConnection_JetStream(&n->js, n->nc, NULL) != NATS_OK)
		return -1;
	natsInbox *inbox;
	if (natsInbox_Create(&inbox) != NATS_OK)
		return -1;
	snprintf(n->inbox, sizeof(n->inbox), "%s", (const char *)inbox);
	natsInbox_Destroy(inbox);
	char wild[80];
	snprintf(wild, sizeof(wild), "%s.*", n->inbox);
	s = natsConnection_Subscribe(&n->inbox_sub, n->nc, wild, on_inbox, n);
	if (s == NATS_OK)
		s = natsSubscription_SetPendingLimits(n->inbox_sub, -1, -1);
	if (s != NATS_OK) {
		fprintf(stderr, "crs-bridge: subscribe: %s\n",
			natsStatus_GetText(s));
		return -1;
	}
	/* A server just started, or busy recovering its store, may time out
	 * JetStream API calls: retry within the outage limit, as connect. */
	int err;
	while ((err = ensure_stream(n, o)) && bridge_now_ns() < deadline)
		usleep(100 * 1000);
	return err;
}

void bridge_nats_close(struct bridge_nats *n)
{
	if (n->inbox_sub) { /* let its last callbacks finish */
		if (natsSubscription_Drain(n->inbox_sub) == NATS_OK)
			natsSubscription_WaitForDrainCompletion(n->inbox_sub, 1000);
		natsSubscription_Destroy(n->inbox_sub);
	}
	if (n->js)
		jsCtx_Destroy(n->js);
	if (n->nc) {
		natsConnection_FlushTimeout(n->nc, 1000);
		natsConnection_Destroy(n->nc);
	}
	natsMsg *m; /* while libnats still runs: it frees them */
	while ((m = bridge_nats_next(n)))
		natsMsg_Destroy(m);
	/* Connection callbacks (the disconnect of the close itself) run on
	 * libnats threads and use n: wait for them before n goes away. */
	nats_CloseAndWait(2000);
	free(n->queue);
	if (n->efd >= 0)
		close(n->efd);
	pthread_mutex_destroy(&n->lock);
}

/* ---- ids and headers ---------------------------------------------------- */

void bridge_id_format(char *buf, uint64_t stream_id, uint64_t seq)
{
	snprintf(buf, BRIDGE_ID_MAX, "%016" PRIx64 ":%" PRIu64, stream_id, seq);
}

int bridge_id_parse(const char *s, uint64_t *stream_id, uint64_t *seq)
{
	if (!s || strlen(s) < 18 || s[16] != ':')
		return -1;
	uint64_t id = 0, q = 0;
	for (int i = 0; i < 16; i++) {
		char c = s[i];
		int d = c >= '0' && c <= '9'   ? c - '0'
			: c >= 'a' && c <= 'f' ? c - 'a' + 10
					       : -1;
		if (d < 0)
			return -1;
		id = id << 4 | (uint64_t)d;
	}
	const char *p = s + 17;
	if (!*p)
		return -1;
	for (; *p; p++) {
		if (*p < '0' || *p > '9' || q > (UINT64_MAX - 9) / 10)
			return -1;
		q = q * 10 + (uint64_t)(*p - '0');
	}
	*stream_id = id;
	*seq = q;
	return 0;
}

const char *bridge_header(natsMsg *m, const char *key)
{
	const char *v = NULL;
	if (natsMsgHeader_Get(m, key, &v) != NATS_OK)
		return NULL;
	return v;
}

int64_t bridge_json_number(const char *json, int len, const char *key)
{
	char pat[40];
	snprintf(pat, sizeof(pat), "\"%s\":", key);
	size_t pl = strlen(pat);
	for (int i = 0; json && i + (int)pl < len; i++) {
		if (memcmp(json + i, pat, pl))
			continue;
		int64_t v = 0;
		int j = i + (int)pl, digits = 0;
		while (j < len && json[j] == ' ')
			j++;
		for (; j < len && json[j] >= '0' && json[j] <= '9'; j++) {
			if (v > (INT64_MAX - 9) / 10)
				return -1;
			v = v * 10 + (json[j] - '0');
			digits++;
		}
		return digits ? v : -1;
	}
	return -1;
}

/* ---- status ------------------------------------------------------------- */

void bridge_figures_print(FILE *f, const struct bridge_figures *g, int json)
{
	if (json)
		fprintf(f,
			"{\"bridge\":\"%s\",\"received\":%" PRIu64
			",\"sent\":%" PRIu64 ",\"acked\":%" PRIu64
			",\"in_flight\":%" PRIu64 ",\"skipped\":%" PRIu64
			",\"rejected\":%" PRIu64 ",\"gaps\":%" PRIu64
			",\"redeliveries\":%" PRIu64 ",\"resyncs\":%" PRIu64
			",\"errors\":%" PRIu64 ",\"lag\":%" PRIu64
			",\"connected\":%s}\n",
			g->dir, g->received, g->sent, g->acked, g->in_flight,
			g->skipped, g->rejected, g->gaps, g->redeliveries,
			g->resyncs, g->errors, g->lag,
			g->connected ? "true" : "false");
	else
		fprintf(f,
			"crs-bridge %s: received %" PRIu64 " sent %" PRIu64
			" acked %" PRIu64 " in flight %" PRIu64
			" skipped %" PRIu64 " rejected %" PRIu64
			" gaps %" PRIu64 " redelivered %" PRIu64
			" resyncs %" PRIu64 " errors %" PRIu64 " lag %" PRIu64
			"%s\n",
			g->dir, g->received, g->sent, g->acked, g->in_flight,
			g->skipped, g->rejected, g->gaps, g->redeliveries,
			g->resyncs, g->errors, g->lag,
			g->connected ? "" : " (disconnected)");
	fflush(f);
}
