/*
 * test_bridge.c - crs-bridge end to end over a real nats-server with
 * JetStream: an origin crs publisher (a child process) -> crs-bridge out
 * -> JetStream -> crs-bridge in -> a crs subscriber (this process). Every
 * message carries its origin sequence in its first 8 bytes and a pattern
 * of it in the rest, so the far subscriber checks each one byte for byte
 * and in order: a lost, repeated, reordered or torn message fails.
 *
 * Covered: a long transfer and its completion; demand end to end (a far
 * subscriber requesting 10 at a time keeps the origin within the window);
 * a late far subscriber with --deliver last 100; errors with and without
 * a message crossing; kill -9 of each bridge and restart; the server
 * killed for 2 s and restarted (file storage), and the outage limit;
 * JetStream ignoring bridge in's acks (an ack forged as a server restart
 * can produce it), which it must notice and recover from; garbage and
 * oversized messages on the subject, rejected and counted.
 *
 * Each test starts its own server (natsd.c) and stops it. Skipped (77)
 * when nats-server is not installed. Under AddressSanitizer the long
 * transfers are shorter (their time, not their checks, changes).
 *
 * usage: test_bridge CRS_BRIDGE
 */
#include <errno.h>
#include <signal.h>
#include <string.h>
#include <sys/wait.h>

#include <nats/nats.h>

#include "crs/inspect.h"
#include "natsd.h"
#include "util.h"

#if defined(__SANITIZE_ADDRESS__)
#define SANITIZED 1
#elif defined(__has_feature)
#if __has_feature(address_sanitizer)
#define SANITIZED 1
#endif
#endif
#ifndef SANITIZED
#define SANITIZED 0
#endif

#define MAXLEN 64

static const char *bridge_bin;
static struct natsd srv;

/* ---- payloads ----------------------------------------------------------- */

static size_t msg_len(uint64_t seq)
{
	return 8 + tu_len(seq, MAXLEN - 8);
}

static void msg_fill(void *buf, size_t len, uint64_t seq)
{
	memcpy(buf, &seq, 8);
	tu_fill((char *)buf + 8, len - 8, seq);
}

/* 0 if m is origin message seq, byte for byte. */
static int msg_check(const struct crs_msg *m, uint64_t seq)
{
	uint64_t got = UINT64_MAX;
	if (m->len >= 8)
		memcpy(&got, m->data, 8);
	if (got != seq || m->len != msg_len(seq) ||
	    tu_verify((const char *)m->data + 8, m->len - 8, seq) >= 0) {
		fprintf(stderr, "far message: want seq %llu (%zu bytes), got "
				"seq %llu (%zu bytes)\n",
			(unsigned long long)seq, msg_len(seq),
			(unsigned long long)got, m->len);
		return -1;
	}
	return 0;
}

/* ---- the origin publisher (a child) -------------------------------------- */

enum { O_READY = 1, O_PAUSED, O_GO, O_DONE, O_EXIT };

struct origin {
	char name[64];
	uint64_t n;	   /* messages */
	uint64_t pause_at; /* report O_PAUSED there and wait for O_GO */
	int replay;	   /* replay mode over a ring holding them all */
	int end_code;	   /* 0: complete */
	const char *end_msg;
};

static int send_one(crs_pub *pub, uint64_t seq)
{
	size_t len = msg_len(seq);
	for (;;) {
		void *buf;
		int r = crs_pub_claim(pub, len, &buf);
		if (r == 0) {
			msg_fill(buf, len, seq);
			return crs_pub_commit(pub, len);
		}
		if (r != -CRS_ENODEMAND && r != -CRS_ENOROOM)
			return r;
		r = crs_pub_wait(pub, len, -1);
		if (r && r != -ETIMEDOUT)
			return r;
	}
}

/* Serve subscribers until the parent says tag (or leaves). */
static void serve_until(crs_pub *pub, int chan, uint64_t tag)
{
	uint64_t t = 0, v;
	for (;;) {
		crs_pub_serve(pub);
		int r = tu_recv(chan, &t, &v, 10);
		if (r == -EPIPE || (r == 0 && t == tag))
			return;
	}
}

static int origin_main(void *arg, int chan)
{
	struct origin *o = arg;
	struct crs_pub_opts po;
	crs_pub_opts_init(&po);
	po.ring_bytes = o->replay ? 8 << 20 : 1 << 20;
	po.mode = o->replay ? CRS_MODE_REPLAY : CRS_MODE_PUBLISH;
	crs_pub *pub;
	CHECK_EQ(crs_pub_create(o->name, &po, &pub), 0);
	CHECK_EQ(tu_send(chan, O_READY, 0), 0);
	for (uint64_t seq = 0; seq < o->n; seq++) {
		if (seq == o->pause_at && seq) {
			CHECK_EQ(tu_send(chan, O_PAUSED, seq), 0);
			serve_until(pub, chan, O_GO);
		}
		CHECK_EQ(send_one(pub, seq), 0);
	}
	if (o->end_code)
		CHECK_EQ(crs_pub_error(pub, o->end_code, o->end_msg), 0);
	else
		CHECK_EQ(crs_pub_complete(pub), 0);
	CHECK_EQ(tu_send(chan, O_DONE, o->n), 0);
	serve_until(pub, chan, O_EXIT); /* a restarted bridge may come back */
	crs_pub_close(pub);
	return 0;
}

static pid_t origin_start(struct origin *o, int *chan)
{
	pid_t pid = tu_spawn(origin_main, o, chan, 600);
	assert_true(pid > 0);
	assert_int_equal(tu_expect(*chan, O_READY, NULL, 10000), 0);
	return pid;
}

static void origin_finish(pid_t pid, int chan)
{
	tu_send(chan, O_EXIT, 0);
	assert_int_equal(tu_wait_child(pid, 20000), 0);
	close(chan);
}

/* ---- bridges ------------------------------------------------------------ */

#define MAX_PROCS 8
static pid_t procs[MAX_PROCS];
static struct bridge *running[MAX_PROCS]; /* whose logs to show */
static void show_logs(void);

struct bridge {
	pid_t pid;
	char out[300], err[300];
	char *argv[40];
	int argc;
};

/* crs-bridge with the words given (NULL-terminated), output in files. */
static void bridge_args(struct bridge *b, const char *tag, ...)
{
	memset(b, 0, sizeof(*b));
	snprintf(b->out, sizeof(b->out), "%s/%s.out", tu_dir(), tag);
	snprintf(b->err, sizeof(b->err), "%s/%s.err", tu_dir(), tag);
	b->argv[b->argc++] = (char *)bridge_bin;
	va_list ap;
	va_start(ap, tag);
	const char *w;
	while ((w = va_arg(ap, const char *)) && b->argc < 38)
		b->argv[b->argc++] = (char *)w;
	va_end(ap);
}

static void bridge_run(struct bridge *b)
{
	fflush(NULL);
	b->pid = natsd_spawn(b->argv, b->out, b->err);
	assert_true(b->pid > 0);
	for (int i = 0; i < MAX_PROCS; i++)
		if (!procs[i]) {
			procs[i] = b->pid;
			break;
		}
	for (int i = 0; i < MAX_PROCS; i++)
		if (!running[i] || running[i] == b) {
			running[i] = b;
			break;
		}
}

static void forget(pid_t pid)
{
	for (int i = 0; i < MAX_PROCS; i++)
		if (procs[i] == pid)
			procs[i] = 0;
}

static void show(const char *path)
{
	FILE *f = fopen(path, "r");
	if (!f)
		return;
	char line[512];
	fprintf(stderr, "---- %s\n", path);
	while (fgets(line, sizeof(line), f))
		fputs(line, stderr);
	fclose(f);
}

static void show_logs(void)
{
	for (int i = 0; i < MAX_PROCS; i++)
		if (running[i]) {
			show(running[i]->err);
			show(running[i]->out);
		}
}

/* Exit status, or -1 if it did not end within timeout_ms (killed). */
static int bridge_wait(struct bridge *b, int timeout_ms)
{
	int64_t deadline = tu_now_ms() + timeout_ms;
	int status = 0;
	while (waitpid(b->pid, &status, WNOHANG) == 0) {
		if (tu_now_ms() > deadline) {
			kill(b->pid, SIGKILL);
			waitpid(b->pid, &status, 0);
			status = -1;
			break;
		}
		tu_sleep_ms(10);
	}
	forget(b->pid);
	b->pid = 0;
	int rc = status == -1	      ? -1
		 : WIFEXITED(status) ? WEXITSTATUS(status)
				     : 128 + WTERMSIG(status);
	if (rc != 0)
		show(b->err);
	return rc;
}

static void bridge_kill(struct bridge *b)
{
	kill(b->pid, SIGKILL);
	waitpid(b->pid, NULL, 0);
	forget(b->pid);
	b->pid = 0;
}

/* A figure from the last JSON status line of b, or -1. */
static long long figure(const struct bridge *b, const char *key)
{
	FILE *f = fopen(b->out, "r");
	if (!f)
		return -1;
	char line[1024], last[1024] = "";
	while (fgets(line, sizeof(line), f))
		memcpy(last, line, sizeof(last));
	fclose(f);
	char pat[64];
	snprintf(pat, sizeof(pat), "\"%s\":", key);
	const char *p = strstr(last, pat);
	return p ? atoll(p + strlen(pat)) : -1;
}

/* ---- JetStream from the test's side -------------------------------------- */

static natsConnection *nc;
static jsCtx *js;

static void js_connect(void)
{
	assert_int_equal(natsConnection_ConnectTo(&nc, srv.url), NATS_OK);
	assert_int_equal(natsConnection_JetStream(&js, nc, NULL), NATS_OK);
}

static void js_disconnect(void)
{
	if (js)
		jsCtx_Destroy(js);
	if (nc)
		natsConnection_Destroy(nc);
	js = NULL;
	nc = NULL;
}

/* Wait until the stream's last sequence reaches want. */
static void js_await_last(const char *stream, uint64_t want)
{
	int64_t deadline = tu_now_ms() + 60000;
	uint64_t last = 0;
	while (tu_now_ms() < deadline) {
		jsStreamInfo *si = NULL;
		if (js_GetStreamInfo(&si, js, stream, NULL, NULL) == NATS_OK) {
			last = si->State.LastSeq;
			jsStreamInfo_Destroy(si);
			if (last >= want)
				return;
		}
		tu_sleep_ms(20);
	}
	fprintf(stderr, "stream %s: last seq %llu, want %llu\n", stream,
		(unsigned long long)last, (unsigned long long)want);
	fail();
}

/* ---- the far subscriber -------------------------------------------------- */

static crs_sub *far_open(const char *name, uint32_t prefetch)
{
	struct crs_sub_opts so;
	crs_sub_opts_init(&so);
	so.prefetch = prefetch;
	so.wait_ms = 30000;
	so.handshake_ms = 10000;
	crs_sub *sub;
	assert_int_equal(crs_sub_open(name, &so, &sub), 0);
	return sub;
}

/* Read origin messages *next .. until-1 in order. */
static void far_read(crs_sub *sub, uint64_t *next, uint64_t until)
{
	while (*next < until) {
		struct crs_msg m;
		int r = tu_sub_next(sub, &m, 60000);
		if (r != 1) {
			fprintf(stderr, "far: %s at seq %llu\n",
				r == 0 ? "nothing for 60 s" : "ended",
				(unsigned long long)*next);
			if (r < 0)
				fprintf(stderr, "far: end %d %s\n",
					crs_sub_end(sub)->code,
					crs_sub_end(sub)->message);
			show_logs();
		}
		assert_int_equal(r, 1);
		assert_int_equal(msg_check(&m, *next), 0);
		crs_sub_release(sub);
		(*next)++;
	}
}

/* The stream must end now, with code (and message, if not NULL). */
static void far_end(crs_sub *sub, int code, const char *message)
{
	struct crs_msg m;
	int r = tu_sub_next(sub, &m, 60000);
	if (r == 1)
		fprintf(stderr, "far: one more message (%zu bytes)\n", m.len);
	if (r != -CRS_EEND) {
		fprintf(stderr, "far: %s instead of the end\n",
			r == 0 ? "nothing for 60 s" : "a message");
		show_logs();
	}
	assert_int_equal(r, -CRS_EEND);
	const struct crs_end *e = crs_sub_end(sub);
	if (e->code != code || (message && strcmp(e->message, message)))
		fprintf(stderr, "far: ended with %d \"%s\"\n", e->code,
			e->message);
	assert_int_equal(e->code, code);
	if (message)
		assert_string_equal(e->message, message);
}

/* ---- setup -------------------------------------------------------------- */

static int setup(void **state)
{
	(void)state;
	return natsd_start(&srv, 0) ? -1 : 0;
}

static int teardown(void **state)
{
	js_disconnect();
	for (int i = 0; i < MAX_PROCS; i++)
		if (procs[i]) {
			kill(procs[i], SIGKILL);
			waitpid(procs[i], NULL, 0);
			procs[i] = 0;
		}
	natsd_cleanup(&srv);
	memset(running, 0, sizeof(running));
	return tu_teardown(state);
}

#define BRIDGE_TEST(f) cmocka_unit_test_setup_teardown(f, setup, teardown)

/* ---- tests -------------------------------------------------------------- */

/* Many messages end to end, then the completion. */
static void test_end_to_end(void **state)
{
	(void)state;
	uint64_t n = SANITIZED ? 100000 : 1000000;
	struct origin o = { .n = n };
	tu_name(o.name, sizeof(o.name), "e2e");
	int chan;
	pid_t pid = origin_start(&o, &chan);
	struct bridge out, in;
	bridge_args(&out, "e2e-out", "out", o.name, "--nats", srv.url,
		    "--subject", "e2e", "--memory", "--json", NULL);
	bridge_args(&in, "e2e-in", "in", "--nats", srv.url, "--subject", "e2e",
		    "--durable", "far", "far-e2e", "--memory", "--json", NULL);
	bridge_run(&out);
	bridge_run(&in);
	crs_sub *sub = far_open("far-e2e", 1024);
	uint64_t next = 0;
	int64_t t0 = tu_now_ms();
	far_read(sub, &next, n);
	int64_t ms = tu_now_ms() - t0;
	far_end(sub, 0, NULL);
	crs_sub_close(sub);
	fprintf(stderr, "end to end: %llu messages in %lld ms\n",
		(unsigned long long)n, (long long)ms);
	assert_int_equal(bridge_wait(&out, 30000), 0);
	assert_int_equal(bridge_wait(&in, 30000), 0);
	assert_int_equal(figure(&out, "acked"), (long long)n + 1);
	assert_int_equal(figure(&in, "rejected"), 0);
	assert_int_equal(figure(&in, "skipped"), 0);
	origin_finish(pid, chan);
}

/* A far subscriber asking for 10 at a time holds the origin within the
 * window: published <= far requested + window, at every look. */
static void test_demand_end_to_end(void **state)
{
	(void)state;
	const long window = 50;
	struct origin o = { .n = 1000000 };
	tu_name(o.name, sizeof(o.name), "dem");
	int chan;
	pid_t pid = origin_start(&o, &chan);
	struct bridge out, in;
	bridge_args(&out, "dem-out", "out", o.name, "--nats", srv.url,
		    "--subject", "dem", "--memory", "--window", "50",
		    "--follow", "fard", NULL);
	bridge_args(&in, "dem-in", "in", "--nats", srv.url, "--subject", "dem",
		    "--durable", "fard", "far-dem", NULL);
	bridge_run(&out);
	bridge_run(&in);
	crs_sub *sub = far_open("far-dem", 0);
	crs_inspector *insp;
	assert_int_equal(crs_inspect_open(o.name, &insp), 0);
	uint64_t requested = 0, next = 0;
	long worst = -1000000;
	for (int round = 0; round < 40; round++) {
		assert_int_equal(crs_sub_request(sub, 10), 0);
		requested += 10;
		far_read(sub, &next, requested);
		tu_sleep_ms(20); /* room for an overrun to show */
		struct crs_stream_info info;
		assert_true(crs_inspect_read(insp, &info, NULL, 0) >= 0);
		long ahead = (long)info.published - (long)requested;
		if (ahead > worst)
			worst = ahead;
		if (ahead > window)
			fprintf(stderr, "origin published %llu with %llu "
					"requested far away\n",
				(unsigned long long)info.published,
				(unsigned long long)requested);
		assert_true(ahead <= window);
		assert_true(info.published >= requested);
	}
	fprintf(stderr, "demand bound: origin at most %ld messages ahead of "
			"the far demand (window %ld)\n",
		worst, window);
	crs_inspect_close(insp);
	crs_sub_close(sub);
	bridge_kill(&out);
	bridge_kill(&in);
	tu_kill(pid);
	close(chan);
}

/* A late far subscriber with --deliver last 100: exactly the last 100,
 * then live ones, then the completion. */
static void test_deliver_last(void **state)
{
	(void)state;
	struct origin o = { .n = 1010, .pause_at = 1000 };
	tu_name(o.name, sizeof(o.name), "last");
	int chan;
	pid_t pid = origin_start(&o, &chan);
	struct bridge out, in;
	bridge_args(&out, "last-out", "out", o.name, "--nats", srv.url,
		    "--subject", "last", NULL);
	bridge_run(&out);
	assert_int_equal(tu_expect(chan, O_PAUSED, NULL, 30000), 0);
	js_connect();
	js_await_last("CRS_last", 1000);
	bridge_args(&in, "last-in", "in", "--nats", srv.url, "--subject",
		    "last", "--durable", "late", "--deliver", "last", "100",
		    "far-last", NULL);
	bridge_run(&in);
	crs_sub *sub = far_open("far-last", 16);
	uint64_t next = 900;
	far_read(sub, &next, 1000);
	assert_int_equal(tu_send(chan, O_GO, 0), 0);
	far_read(sub, &next, 1010);
	far_end(sub, 0, NULL);
	crs_sub_close(sub);
	assert_int_equal(bridge_wait(&out, 30000), 0);
	assert_int_equal(bridge_wait(&in, 30000), 0);
	origin_finish(pid, chan);
}

/* An error crosses with its code and message, also an empty message. */
static void test_error_crosses(void **state)
{
	(void)state;
	static const char *const msgs[] = { "disk on fire", "" };
	static const int codes[] = { 42, EPROTO };
	for (int k = 0; k < 2; k++) {
		struct origin o = { .n = 100, .end_code = codes[k],
				    .end_msg = msgs[k] };
		tu_name(o.name, sizeof(o.name), "err");
		char subject[32], far[32], durable[16];
		snprintf(subject, sizeof(subject), "err%d", k);
		snprintf(far, sizeof(far), "far-err%d", k);
		snprintf(durable, sizeof(durable), "e%d", k);
		int chan;
		pid_t pid = origin_start(&o, &chan);
		struct bridge out, in;
		bridge_args(&out, "err-out", "out", o.name, "--nats", srv.url,
			    "--subject", subject, NULL);
		bridge_args(&in, "err-in", "in", "--nats", srv.url, "--subject",
			    subject, "--durable", durable, far, NULL);
		bridge_run(&out);
		bridge_run(&in);
		crs_sub *sub = far_open(far, 64);
		uint64_t next = 0;
		far_read(sub, &next, 100);
		far_end(sub, codes[k], msgs[k]);
		crs_sub_close(sub);
		assert_int_equal(bridge_wait(&out, 30000), 0);
		assert_int_equal(bridge_wait(&in, 30000), 0);
		origin_finish(pid, chan);
	}
}

/* kill -9 of bridge out, then of bridge in, each restarted: the far
 * subscriber gets every message once, in order (the origin is a replay
 * stream, so the restarted bridge out finds what it had not stored). */
static void test_kill_bridges(void **state)
{
	(void)state;
	uint64_t n = SANITIZED ? 30000 : 100000;
	struct origin o = { .n = n, .replay = 1 };
	tu_name(o.name, sizeof(o.name), "kill");
	int chan;
	pid_t pid = origin_start(&o, &chan);
	struct bridge out, in;
	bridge_args(&out, "kill-out", "out", o.name, "--nats", srv.url,
		    "--subject", "kill", "--window", "256", NULL);
	bridge_args(&in, "kill-in", "in", "--nats", srv.url, "--subject",
		    "kill", "--durable", "k", "far-kill", NULL);
	bridge_run(&out);
	bridge_run(&in);
	crs_sub *sub = far_open("far-kill", 256);
	uint64_t next = 0;
	far_read(sub, &next, n / 4);
	bridge_kill(&out);
	bridge_run(&out);
	far_read(sub, &next, n / 2);
	/* Let bridge in commit ahead of this reader (its demand allows 256)
	 * so that it dies with messages committed and not yet read. */
	tu_sleep_ms(300);
	bridge_kill(&in);
	/* What it committed before it died, then EPIPE. */
	struct crs_msg m;
	int r;
	while ((r = tu_sub_next(sub, &m, 30000)) == 1) {
		assert_int_equal(msg_check(&m, next), 0);
		crs_sub_release(sub);
		next++;
	}
	assert_int_equal(r, -CRS_EEND);
	assert_int_equal(crs_sub_end(sub)->code, EPIPE);
	crs_sub_close(sub);
	fprintf(stderr, "bridge in killed after %llu messages\n",
		(unsigned long long)next);
	bridge_run(&in);
	sub = far_open("far-kill", 256);
	far_read(sub, &next, n);
	far_end(sub, 0, NULL);
	crs_sub_close(sub);
	assert_int_equal(bridge_wait(&out, 30000), 0);
	assert_int_equal(bridge_wait(&in, 30000), 0);
	origin_finish(pid, chan);
}

/* The server killed mid-stream and restarted 2 s later on its store:
 * the stream goes on without loss or duplicate. */
static void test_server_restart(void **state)
{
	(void)state;
	uint64_t n = SANITIZED ? 30000 : 100000;
	struct origin o = { .n = n, .pause_at = n / 2 };
	tu_name(o.name, sizeof(o.name), "srv");
	int chan;
	pid_t pid = origin_start(&o, &chan);
	struct bridge out, in;
	bridge_args(&out, "srv-out", "out", o.name, "--nats", srv.url,
		    "--subject", "srv", "--json", NULL);
	bridge_args(&in, "srv-in", "in", "--nats", srv.url, "--subject", "srv",
		    "--durable", "s", "--json", "far-srv", NULL);
	bridge_run(&out);
	bridge_run(&in);
	crs_sub *sub = far_open("far-srv", 256);
	uint64_t next = 0;
	far_read(sub, &next, n / 4);
	/* Both bridges mid-stream: the origin publishing again, bridge out
	 * with messages in flight, bridge in fetching. */
	assert_int_equal(tu_expect(chan, O_PAUSED, NULL, 60000), 0);
	assert_int_equal(tu_send(chan, O_GO, 0), 0);
	tu_sleep_ms(30);
	int port = srv.port;
	natsd_stop(&srv, SIGKILL);
	tu_sleep_ms(2000);
	assert_int_equal(natsd_start(&srv, port), 0);
	far_read(sub, &next, n);
	far_end(sub, 0, NULL);
	crs_sub_close(sub);
	assert_int_equal(bridge_wait(&out, 30000), 0);
	assert_int_equal(bridge_wait(&in, 30000), 0);
	fprintf(stderr, "server restart: out resynced %lld times, in created "
			"its consumer again %lld times and skipped %lld\n",
		figure(&out, "resyncs"), figure(&in, "resyncs"),
		figure(&in, "skipped"));
	assert_true(figure(&in, "resyncs") >= 1); /* after the reconnect */
	/* JetStream holds each message once: nothing was stored twice. */
	js_connect();
	jsStreamInfo *si = NULL;
	assert_int_equal(js_GetStreamInfo(&si, js, "CRS_srv", NULL, NULL), NATS_OK);
	fprintf(stderr, "stream: %llu messages, last seq %llu\n",
		(unsigned long long)si->State.Msgs,
		(unsigned long long)si->State.LastSeq);
	assert_int_equal(si->State.Msgs, n + 1);
	jsStreamInfo_Destroy(si);
	origin_finish(pid, chan);
}

/* Ack everything the consumer has delivered under a delivery sequence
 * beyond any to come, as libnats can after a server restart (it resends
 * an ack published while it reconnected, for a delivery the restarted
 * server has forgotten). 1 if JetStream took it: its AckAll floor then
 * ignores every later ack of the bridge. */
#define FORGED_DSEQ (1ULL << 40)
static int forge_ack(const char *stream, const char *durable)
{
	jsConsumerInfo *ci = NULL;
	assert_int_equal(js_GetConsumerInfo(&ci, js, stream, durable, NULL, NULL),
			 NATS_OK);
	uint64_t sseq = ci->Delivered.Stream, floor = ci->AckFloor.Stream;
	jsConsumerInfo_Destroy(ci);
	if (sseq <= floor) /* all acked: AckAll would ignore it */
		return 0;
	char subj[256];
	snprintf(subj, sizeof(subj), "$JS.ACK.%s.%s.1.%llu.%llu.0.0", stream,
		 durable, (unsigned long long)sseq,
		 (unsigned long long)FORGED_DSEQ);
	assert_int_equal(natsConnection_PublishString(nc, subj, "+ACK"), NATS_OK);
	assert_int_equal(natsConnection_Flush(nc), NATS_OK);
	assert_int_equal(js_GetConsumerInfo(&ci, js, stream, durable, NULL, NULL),
			 NATS_OK);
	int took = ci->AckFloor.Consumer >= FORGED_DSEQ;
	jsConsumerInfo_Destroy(ci);
	return took;
}

/* JetStream stops counting the bridge's acks mid-stream: once it holds
 * MaxAckPending deliveries back, bridge in must notice and create its
 * consumer again from its own position; nothing lost, nothing twice. */
static void test_acks_ignored(void **state)
{
	(void)state;
	uint64_t n = SANITIZED ? 20000 : 50000;
	struct origin o = { .n = n };
	tu_name(o.name, sizeof(o.name), "ign");
	int chan;
	pid_t pid = origin_start(&o, &chan);
	struct bridge out, in;
	bridge_args(&out, "ign-out", "out", o.name, "--nats", srv.url,
		    "--subject", "ign", "--memory", "--json", NULL);
	bridge_args(&in, "ign-in", "in", "--nats", srv.url, "--subject", "ign",
		    "--durable", "a", "--memory", "--json", "far-ign", NULL);
	bridge_run(&out);
	bridge_run(&in);
	crs_sub *sub = far_open("far-ign", 256);
	uint64_t next = 0;
	far_read(sub, &next, 1000);
	js_connect();
	/* Between reads, while deliveries wait for their ack. */
	int forged = 0;
	while (!forged && next < n / 2) {
		far_read(sub, &next, next + 50);
		forged = forge_ack("CRS_ign", "a");
	}
	assert_true(forged);
	uint64_t forged_at = next;
	far_read(sub, &next, n);
	far_end(sub, 0, NULL);
	crs_sub_close(sub);
	assert_int_equal(bridge_wait(&out, 30000), 0);
	assert_int_equal(bridge_wait(&in, 30000), 0);
	fprintf(stderr, "acks ignored at seq %llu: in created its consumer "
			"again %lld times\n",
		(unsigned long long)forged_at, figure(&in, "resyncs"));
	assert_true(figure(&in, "resyncs") >= 1);
	origin_finish(pid, chan);
}

/* The local stream ends while the window is full: nothing acked yet
 * (the server stopped), demand all used. The end needs no demand, so it
 * comes anyway, and bridge out must keep it for the server instead of
 * failing ("window overrun" before) and losing it. */
static void test_end_behind_full_window(void **state)
{
	(void)state;
	const uint64_t window = 32;
	struct origin o = { .n = 2 * window, .pause_at = window };
	tu_name(o.name, sizeof(o.name), "full");
	int chan;
	pid_t pid = origin_start(&o, &chan);
	struct bridge out, in;
	bridge_args(&out, "full-out", "out", o.name, "--nats", srv.url,
		    "--subject", "full", "--memory", "--window", "32",
		    "--json", NULL);
	bridge_args(&in, "full-in", "in", "--nats", srv.url, "--subject",
		    "full", "--durable", "f", "far-full", NULL);
	bridge_run(&out);
	bridge_run(&in);
	crs_sub *sub = far_open("far-full", 256);
	uint64_t next = 0;
	far_read(sub, &next, window); /* stored: acked, window empty */
	assert_int_equal(tu_expect(chan, O_PAUSED, NULL, 60000), 0);
	tu_sleep_ms(300); /* the acks reach bridge out, it asks for 32 */
	assert_int_equal(kill(srv.pid, SIGSTOP), 0);
	assert_int_equal(tu_send(chan, O_GO, 0), 0);
	assert_int_equal(tu_expect(chan, O_DONE, NULL, 60000), 0);
	tu_sleep_ms(500); /* bridge out takes the 32 and the end, unacked */
	assert_int_equal(kill(srv.pid, SIGCONT), 0);
	far_read(sub, &next, o.n);
	far_end(sub, 0, NULL);
	crs_sub_close(sub);
	assert_int_equal(bridge_wait(&out, 30000), 0);
	assert_int_equal(bridge_wait(&in, 30000), 0);
	origin_finish(pid, chan);
}

/* The server gone for longer than --outage: the far stream ends with
 * EHOSTUNREACH and says why; bridge out exits 1 saying why. */
static void test_outage_limit(void **state)
{
	(void)state;
	struct origin o = { .n = 1000000 };
	tu_name(o.name, sizeof(o.name), "outage");
	int chan;
	pid_t pid = origin_start(&o, &chan);
	struct bridge out, in;
	bridge_args(&out, "outage-out", "out", o.name, "--nats", srv.url,
		    "--subject", "outage", "--outage", "1", NULL);
	bridge_args(&in, "outage-in", "in", "--nats", srv.url, "--subject",
		    "outage", "--durable", "o", "--outage", "1", "far-outage",
		    NULL);
	bridge_run(&out);
	bridge_run(&in);
	crs_sub *sub = far_open("far-outage", 64);
	uint64_t next = 0;
	far_read(sub, &next, 1000);
	natsd_stop(&srv, SIGKILL);
	struct crs_msg m;
	int r;
	while ((r = tu_sub_next(sub, &m, 30000)) == 1) {
		assert_int_equal(msg_check(&m, next), 0);
		crs_sub_release(sub);
		next++;
	}
	assert_int_equal(r, -CRS_EEND);
	const struct crs_end *e = crs_sub_end(sub);
	assert_int_equal(e->code, EHOSTUNREACH);
	assert_non_null(strstr(e->message, "unreachable"));
	crs_sub_close(sub);
	assert_int_equal(bridge_wait(&in, 30000), 1);
	int64_t t0 = tu_now_ms();
	int rc;
	while ((rc = waitpid(out.pid, NULL, WNOHANG)) == 0 &&
	       tu_now_ms() - t0 < 30000)
		tu_sleep_ms(10);
	assert_int_equal(rc, out.pid);
	forget(out.pid);
	FILE *f = fopen(out.err, "r");
	assert_non_null(f);
	char text[4096] = "";
	size_t got = fread(text, 1, sizeof(text) - 1, f);
	text[got] = '\0';
	fclose(f);
	assert_non_null(strstr(text, "unreachable"));
	tu_kill(pid);
	close(chan);
}

/* Garbage on the subject: rejected and counted; the stream goes on. */
static void test_garbage(void **state)
{
	(void)state;
	struct origin o = { .n = 200, .pause_at = 100 };
	tu_name(o.name, sizeof(o.name), "junk");
	int chan;
	pid_t pid = origin_start(&o, &chan);
	struct bridge out, in;
	bridge_args(&out, "junk-out", "out", o.name, "--nats", srv.url,
		    "--subject", "junk", NULL);
	bridge_args(&in, "junk-in", "in", "--nats", srv.url, "--subject",
		    "junk", "--durable", "j", "--ring", "64K", "--max-message",
		    "1K", "--json", "far-junk", NULL);
	bridge_run(&out);
	bridge_run(&in);
	crs_sub *sub = far_open("far-junk", 32);
	uint64_t next = 0;
	far_read(sub, &next, 100);
	assert_int_equal(tu_expect(chan, O_PAUSED, NULL, 30000), 0);
	js_connect();
	js_await_last("CRS_junk", 100);

	static char big[4096];
	const struct {
		const char *id, *end, *code;
		const char *data;
		int len;
	} junk[] = {
		{ NULL, NULL, NULL, "no headers at all", 17 },
		{ "nonsense", NULL, NULL, "bad id", 6 },
		{ "00000000000000zz:1", NULL, NULL, "bad hex", 7 },
		{ "0000000000000001:5", "maybe", NULL, "", 0 },
		{ "0000000000000001:6", "error", "abc", "", 0 },
		{ "00000000000000ff:0", NULL, NULL, big, sizeof(big) },
	};
	const int njunk = (int)(sizeof(junk) / sizeof(junk[0]));
	for (int i = 0; i < njunk; i++) {
		natsMsg *m;
		assert_int_equal(natsMsg_Create(&m, "junk", NULL, junk[i].data,
						junk[i].len),
				 NATS_OK);
		if (junk[i].id)
			natsMsgHeader_Set(m, "Nats-Msg-Id", junk[i].id);
		if (junk[i].end)
			natsMsgHeader_Set(m, "Crs-End", junk[i].end);
		if (junk[i].code)
			natsMsgHeader_Set(m, "Crs-Error-Code", junk[i].code);
		jsPubAck *ack = NULL;
		assert_int_equal(js_PublishMsg(&ack, js, m, NULL, NULL), NATS_OK);
		jsPubAck_Destroy(ack);
		natsMsg_Destroy(m);
	}
	assert_int_equal(tu_send(chan, O_GO, 0), 0);
	far_read(sub, &next, 200);
	far_end(sub, 0, NULL);
	crs_sub_close(sub);
	assert_int_equal(bridge_wait(&out, 30000), 0);
	assert_int_equal(bridge_wait(&in, 30000), 0);
	assert_int_equal(figure(&in, "rejected"), njunk);
	assert_int_equal(figure(&in, "sent"), 200);
	origin_finish(pid, chan);
}

int main(int argc, char **argv)
{
	if (argc < 2) {
		fprintf(stderr, "usage: test_bridge CRS_BRIDGE\n");
		return 2;
	}
	if (!natsd_binary()) {
		printf("nats-server is not installed: skipped\n");
		return 77;
	}
	bridge_bin = argv[1];
	tu_init();
	if (getenv("BRIDGE_TEST")) /* one test, for debugging */
		cmocka_set_test_filter(getenv("BRIDGE_TEST"));
	const struct CMUnitTest tests[] = {
		BRIDGE_TEST(test_end_to_end),
		BRIDGE_TEST(test_demand_end_to_end),
		BRIDGE_TEST(test_deliver_last),
		BRIDGE_TEST(test_error_crosses),
		BRIDGE_TEST(test_kill_bridges),
		BRIDGE_TEST(test_server_restart),
		BRIDGE_TEST(test_acks_ignored),
		BRIDGE_TEST(test_end_behind_full_window),
		BRIDGE_TEST(test_outage_limit),
		BRIDGE_TEST(test_garbage),
	};
	int r = cmocka_run_group_tests(tests, NULL, NULL);
	nats_Close();
	return r;
}
