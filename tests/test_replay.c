/*
 * test_replay.c - connectable streams and the replay buffer across
 * processes: connect/disconnect strategies, autoConnect, epochs, late
 * joiners bounded by count, bytes and age (on a clock the test drives),
 * replay of a terminated stream, and the overflow strategies with their
 * drop counts.
 *
 * The publisher lives in the test process; each subscriber is a child
 * ("reader") that reports every message value and its end over a
 * channel, and takes requests for more demand from the parent.
 */
#include <errno.h>
#include <string.h>

#include "util.h"

enum { MSG = 1, END = 2, READY = 3, REQUEST = 10 };

struct reader {
	const char *name;
	uint32_t prefetch; /* 0: manual, starting with `initial` */
	uint64_t initial;
};

/* A subscriber process: report (MSG, value) per message and (END, code)
 * at the end; (REQUEST, n) from the parent adds demand. */
static int reader(void *arg, int chan)
{
	const struct reader *r = arg;
	crs_sub *sub;
	CHECK_EQ(tu_sub_open(r->name, r->prefetch, &sub), 0);
	if (r->initial)
		CHECK_EQ(crs_sub_request(sub, r->initial), 0);
	CHECK_EQ(tu_send(chan, READY, 0), 0);
	for (;;) {
		uint64_t tag, val;
		while (tu_recv(chan, &tag, &val, 0) == 0)
			if (tag == REQUEST)
				CHECK_EQ(crs_sub_request(sub, val), 0);
		struct crs_msg m;
		int n = crs_sub_poll(sub, &m);
		if (n == 1) {
			uint64_t v;
			CHECK(m.len >= sizeof(v));
			memcpy(&v, m.data, sizeof(v));
			CHECK_EQ(tu_send(chan, MSG, v), 0);
		} else if (n < 0) {
			CHECK_EQ(tu_send(chan, END,
					 (uint64_t)crs_sub_end(sub)->code),
				 0);
			break;
		} else {
			crs_sub_wait(sub, 5);
		}
	}
	crs_sub_close(sub);
	return 0;
}

struct seen {
	uint64_t v[8192];
	int n;
	int ended;
	int code;
};

/* Serve pub while collecting a reader's reports, until it ended or
 * `until` messages arrived or timeout_ms passed. */
static void collect(crs_pub *pub, int chan, struct seen *s, int until,
		    int timeout_ms)
{
	int64_t deadline = tu_now_ms() + timeout_ms;
	while (!s->ended && s->n < until && tu_now_ms() < deadline) {
		if (pub)
			crs_pub_serve(pub);
		uint64_t tag, val;
		if (tu_recv(chan, &tag, &val, 5) != 0)
			continue;
		if (tag == MSG && s->n < 8192)
			s->v[s->n++] = val;
		else if (tag == END)
			s->ended = 1, s->code = (int)val;
	}
}

static pid_t start_reader(crs_pub *pub, struct reader *r, int *chan)
{
	pid_t pid = tu_spawn(reader, r, chan, 60);
	assert_true(pid > 0);
	assert_int_equal(tu_serve_expect(pub, *chan, READY, NULL, 10000), 0);
	return pid;
}

static void finish_reader(crs_pub *pub, pid_t pid, int chan)
{
	if (pub)
		assert_int_equal(tu_serve_wait_child(pub, pid, 10000), 0);
	else
		assert_int_equal(tu_wait_child(pid, 10000), 0);
	close(chan);
}

static void expect_values(const struct seen *s, uint64_t first, int count)
{
	assert_int_equal(s->n, count);
	for (int i = 0; i < count; i++)
		assert_int_equal(s->v[i], first + (uint64_t)i);
}

static int offer_value(crs_pub *pub, uint64_t v)
{
	return crs_pub_offer(pub, &v, sizeof(v));
}

static crs_pub *make_pub(const char *name, struct crs_pub_opts *o)
{
	crs_pub *pub;
	assert_int_equal(crs_pub_create(name, o, &pub), 0);
	return pub;
}

/* The classic: a source of 1..10, a subscriber that requested 5,
 * connect, then disconnect with SEND_ERROR: exactly 1..5, then
 * ECANCELED, and no completion. */
static void test_disconnect_send_error(void **state)
{
	(void)state;
	char name[64];
	tu_name(name, sizeof(name), "classic");
	struct crs_pub_opts o;
	crs_pub_opts_init(&o);
	o.auto_connect = CRS_CONNECT_MANUAL;
	o.overflow = CRS_OVERFLOW_DROP;
	crs_pub *pub = make_pub(name, &o);
	assert_int_equal(offer_value(pub, 1), -ENOTCONN);
	struct reader r = { .name = name, .initial = 5 };
	int chan;
	pid_t pid = start_reader(pub, &r, &chan);
	int64_t epoch = crs_pub_connect(pub);
	assert_true(epoch >= 1);
	assert_int_equal(crs_pub_connect(pub), epoch); /* idempotent */
	for (uint64_t v = 1; v <= 10; v++)
		assert_int_equal(offer_value(pub, v), 0);
	assert_int_equal(crs_pub_dropped(pub), 5); /* lockstep: 5 demanded */
	assert_int_equal(crs_pub_disconnect(pub, epoch), 0);
	assert_int_equal(crs_pub_disconnect(pub, epoch), 0); /* once */
	struct seen s = { 0 };
	collect(pub, chan, &s, 100, 10000);
	expect_values(&s, 1, 5);
	assert_true(s.ended);
	assert_int_equal(s.code, ECANCELED);
	finish_reader(pub, pid, chan);
	crs_pub_close(pub);
}

static void disconnect_strategy(uint32_t strategy, int want_code)
{
	char name[64];
	tu_name(name, sizeof(name), "strategy");
	struct crs_pub_opts o;
	crs_pub_opts_init(&o);
	o.on_disconnect = strategy;
	crs_pub *pub = make_pub(name, &o);
	struct reader r = { .name = name, .prefetch = 16 };
	int chan;
	pid_t pid = start_reader(pub, &r, &chan);
	for (uint64_t v = 1; v <= 3; v++)
		assert_int_equal(offer_value(pub, v), 0);
	assert_int_equal(crs_pub_disconnect(pub, crs_pub_epoch(pub)), 0);
	assert_int_equal(offer_value(pub, 4), -ENOTCONN);
	struct seen s = { 0 };
	if (strategy == CRS_DISCONNECT_NO_EVENT) {
		collect(pub, chan, &s, 3, 10000);
		expect_values(&s, 1, 3);
		/* Nothing more arrives; closing the publisher ends it. */
		crs_pub_close(pub);
		pub = NULL;
	}
	collect(pub, chan, &s, 100, 10000);
	expect_values(&s, 1, 3);
	assert_true(s.ended);
	assert_int_equal(s.code, want_code);
	finish_reader(pub, pid, chan);
	crs_pub_close(pub);
}

static void test_disconnect_completed(void **state)
{
	(void)state;
	disconnect_strategy(CRS_DISCONNECT_SEND_COMPLETED, 0);
}

static void test_disconnect_no_event(void **state)
{
	(void)state;
	disconnect_strategy(CRS_DISCONNECT_NO_EVENT, EPIPE);
}

static void test_disconnect_default_is_error(void **state)
{
	(void)state;
	struct crs_pub_opts o;
	crs_pub_opts_init(&o);
	assert_int_equal(o.on_disconnect, CRS_DISCONNECT_SEND_ERROR);
	disconnect_strategy(o.on_disconnect, ECANCELED);
}

/* autoConnect(2): the first subscriber arrives long before the second;
 * both see everything from message 1. */
static void test_auto_connect(void **state)
{
	(void)state;
	char name[64];
	tu_name(name, sizeof(name), "auto");
	struct crs_pub_opts o;
	crs_pub_opts_init(&o);
	o.auto_connect = 2;
	crs_pub *pub = make_pub(name, &o);
	struct reader r = { .name = name, .prefetch = 16 };
	int c1, c2;
	pid_t p1 = start_reader(pub, &r, &c1);
	for (int i = 0; i < 50; i++) { /* the first one waits a while */
		crs_pub_serve(pub);
		assert_int_equal(offer_value(pub, 0), -ENOTCONN);
		tu_sleep_ms(2);
	}
	assert_int_equal(crs_pub_epoch(pub), 0);
	pid_t p2 = start_reader(pub, &r, &c2);
	assert_int_equal(crs_pub_epoch(pub), 1);
	for (uint64_t v = 1; v <= 100; v++)
		assert_int_equal(offer_value(pub, v), 0); /* BLOCK: waits */
	assert_int_equal(crs_pub_complete(pub), 0);
	struct seen s1 = { 0 }, s2 = { 0 };
	collect(pub, c1, &s1, 1000, 10000);
	collect(pub, c2, &s2, 1000, 10000);
	expect_values(&s1, 1, 100);
	expect_values(&s2, 1, 100);
	assert_true(s1.ended && s2.ended);
	assert_int_equal(s1.code, 0);
	assert_int_equal(s2.code, 0);
	finish_reader(pub, p1, c1);
	finish_reader(pub, p2, c2);
	crs_pub_close(pub);
}

/* After completion a subscriber arriving in between waits for the next
 * connection and sees it from its start. */
static void test_reconnect_after_completion(void **state)
{
	(void)state;
	char name[64];
	tu_name(name, sizeof(name), "reconnect");
	crs_pub *pub = make_pub(name, NULL);
	struct reader r = { .name = name, .prefetch = 16 };
	int ca, cb;
	pid_t pa = start_reader(pub, &r, &ca);
	for (uint64_t v = 1; v <= 3; v++)
		assert_int_equal(offer_value(pub, v), 0);
	assert_int_equal(crs_pub_complete(pub), 0);
	assert_int_equal(crs_pub_complete(pub), -ESHUTDOWN);
	assert_int_equal(offer_value(pub, 9), -ESHUTDOWN);
	struct seen a = { 0 }, b = { 0 };
	collect(pub, ca, &a, 100, 10000);
	expect_values(&a, 1, 3);
	assert_int_equal(a.code, 0);
	pid_t pb = start_reader(pub, &r, &cb); /* between epochs */
	assert_int_equal(crs_pub_connect(pub), 2);
	/* A stale handle of epoch 1 never disturbs epoch 2. */
	assert_int_equal(crs_pub_disconnect(pub, 1), 0);
	assert_int_equal(crs_pub_epoch(pub), 2);
	for (uint64_t v = 4; v <= 6; v++)
		assert_int_equal(offer_value(pub, v), 0);
	assert_int_equal(crs_pub_complete(pub), 0);
	collect(pub, cb, &b, 100, 10000);
	expect_values(&b, 4, 3);
	assert_true(b.ended);
	assert_int_equal(b.code, 0);
	finish_reader(pub, pa, ca);
	finish_reader(pub, pb, cb);
	crs_pub_close(pub);
}

/* ---- replay ------------------------------------------------------------ */

static int64_t fake_now;
static int64_t fake_clock(void *ctx)
{
	(void)ctx;
	return fake_now;
}

static crs_pub *replay_pub(const char *name, uint64_t count, uint64_t bytes,
			   uint64_t age_ms)
{
	struct crs_pub_opts o;
	crs_pub_opts_init(&o);
	o.mode = CRS_MODE_REPLAY;
	o.ring_bytes = 64 * 1024;
	o.replay_count = count;
	o.replay_bytes = bytes;
	o.replay_age_ms = age_ms;
	o.clock = fake_clock;
	return make_pub(name, &o);
}

/* Publish from..to (8-byte values); in replay mode no subscriber is
 * needed and nothing blocks while the ring has room. */
static void publish_range(crs_pub *pub, uint64_t from, uint64_t to)
{
	for (uint64_t v = from; v <= to; v++) {
		fake_now = (int64_t)v * 1000000000; /* message v at v s */
		assert_int_equal(offer_value(pub, v), 0);
	}
}

/* A late joiner while the publisher keeps publishing during the
 * catch-up: retained first, then live, no gap, no duplicate. */
static void late_joiner(crs_pub *pub, const char *name, uint64_t first)
{
	struct reader r = { .name = name, .prefetch = 8 };
	int chan;
	pid_t pid = start_reader(pub, &r, &chan);
	publish_range(pub, 21, 40);
	assert_int_equal(crs_pub_complete(pub), 0);
	struct seen s = { 0 };
	collect(pub, chan, &s, 1000, 10000);
	expect_values(&s, first, (int)(40 - first + 1));
	assert_true(s.ended);
	assert_int_equal(s.code, 0);
	finish_reader(pub, pid, chan);
	crs_pub_close(pub);
}

static void test_replay_count(void **state)
{
	(void)state;
	char name[64];
	tu_name(name, sizeof(name), "count");
	crs_pub *pub = replay_pub(name, 5, 0, 0);
	publish_range(pub, 1, 20);
	late_joiner(pub, name, 16);
}

static void test_replay_bytes(void **state)
{
	(void)state;
	char name[64];
	tu_name(name, sizeof(name), "bytes");
	crs_pub *pub = replay_pub(name, 0, 7 * sizeof(uint64_t), 0);
	publish_range(pub, 1, 20);
	late_joiner(pub, name, 14);
}

static void test_replay_age(void **state)
{
	(void)state;
	char name[64];
	tu_name(name, sizeof(name), "age");
	crs_pub *pub = replay_pub(name, 0, 0, 3000);
	publish_range(pub, 1, 20); /* message v was published at v s */
	fake_now = 20 * 1000000000LL; /* now: 20 s; keep 17..20 */
	late_joiner(pub, name, 17);
}

static void test_replay_all_bounds(void **state)
{
	(void)state;
	char name[64];
	tu_name(name, sizeof(name), "all");
	/* count keeps 11.., bytes 9.., age 13..: the tightest wins. */
	crs_pub *pub = replay_pub(name, 10, 12 * sizeof(uint64_t), 7000);
	publish_range(pub, 1, 20);
	late_joiner(pub, name, 13);
}

/* Without bounds, the ring bounds the replay: late joiners get the
 * newest messages that fit and still no gap afterwards. */
static void test_replay_ring_bound(void **state)
{
	(void)state;
	char name[64];
	tu_name(name, sizeof(name), "ring");
	crs_pub *pub = replay_pub(name, 0, 0, 0);
	publish_range(pub, 1, 20);
	for (uint64_t v = 21; v <= 20000; v++) /* laps the 64 KiB ring */
		assert_int_equal(offer_value(pub, v), 0);
	struct reader r = { .name = name, .prefetch = 64 };
	int chan;
	pid_t pid = start_reader(pub, &r, &chan);
	assert_int_equal(crs_pub_complete(pub), 0);
	struct seen s = { 0 };
	collect(pub, chan, &s, 5000, 10000);
	assert_true(s.ended);
	assert_true(s.n > 1000 && s.n < 4096); /* 64 KiB / 16-byte frames */
	expect_values(&s, 20000 - (uint64_t)s.n + 1, s.n);
	finish_reader(pub, pid, chan);
	crs_pub_close(pub);
}

/* Replay of a terminated stream: the retained messages, then the
 * terminal signal; an error is replayed as an error. */
static void test_replay_terminated(void **state)
{
	(void)state;
	for (int err = 0; err <= 1; err++) {
		char name[64];
		tu_name(name, sizeof(name), "terminated");
		crs_pub *pub = replay_pub(name, 3, 0, 0);
		publish_range(pub, 1, 5);
		if (err)
			assert_int_equal(crs_pub_error(pub, 42, "boom"), 0);
		else
			assert_int_equal(crs_pub_complete(pub), 0);
		struct reader r = { .name = name, .prefetch = 8 };
		int chan;
		pid_t pid = start_reader(pub, &r, &chan);
		struct seen s = { 0 };
		collect(pub, chan, &s, 100, 10000);
		expect_values(&s, 3, 3);
		assert_true(s.ended);
		assert_int_equal(s.code, err ? 42 : 0);
		finish_reader(pub, pid, chan);
		crs_pub_close(pub);
	}
}

/* Replay mode runs ahead of demand; each subscriber still receives only
 * what it requested, at its own pace. */
static void test_replay_runs_ahead(void **state)
{
	(void)state;
	char name[64];
	tu_name(name, sizeof(name), "ahead");
	crs_pub *pub = replay_pub(name, 0, 0, 0);
	struct reader r = { .name = name, .initial = 3 };
	int chan;
	pid_t pid = start_reader(pub, &r, &chan);
	publish_range(pub, 1, 50); /* no demand needed */
	struct seen s = { 0 };
	collect(pub, chan, &s, 3, 10000);
	collect(pub, chan, &s, 4, 300); /* and no more than requested */
	expect_values(&s, 1, 3);
	tu_send(chan, REQUEST, 100);
	assert_int_equal(crs_pub_complete(pub), 0);
	collect(pub, chan, &s, 1000, 10000);
	expect_values(&s, 1, 50);
	assert_int_equal(s.code, 0);
	finish_reader(pub, pid, chan);
	crs_pub_close(pub);
}

/* ---- overflow ----------------------------------------------------------- */

static crs_pub *overflow_pub(const char *name, uint32_t policy)
{
	struct crs_pub_opts o;
	crs_pub_opts_init(&o);
	o.overflow = policy;
	return make_pub(name, &o);
}

static void test_overflow_drop(void **state)
{
	(void)state;
	char name[64];
	tu_name(name, sizeof(name), "drop");
	crs_pub *pub = overflow_pub(name, CRS_OVERFLOW_DROP);
	struct reader r = { .name = name, .initial = 2 };
	int chan;
	pid_t pid = start_reader(pub, &r, &chan);
	for (uint64_t v = 1; v <= 10; v++)
		assert_int_equal(offer_value(pub, v), 0);
	assert_int_equal(crs_pub_dropped(pub), 8);
	assert_int_equal(crs_pub_complete(pub), 0);
	struct seen s = { 0 };
	collect(pub, chan, &s, 100, 10000);
	expect_values(&s, 1, 2);
	assert_int_equal(s.code, 0);
	finish_reader(pub, pid, chan);
	crs_pub_close(pub);
}

static void test_overflow_latest(void **state)
{
	(void)state;
	char name[64];
	tu_name(name, sizeof(name), "latest");
	crs_pub *pub = overflow_pub(name, CRS_OVERFLOW_LATEST);
	struct reader r = { .name = name, .initial = 2 };
	int chan;
	pid_t pid = start_reader(pub, &r, &chan);
	for (uint64_t v = 1; v <= 10; v++)
		assert_int_equal(offer_value(pub, v), 0);
	assert_int_equal(crs_pub_dropped(pub), 7); /* 3..9 replaced */
	struct seen s = { 0 };
	collect(pub, chan, &s, 2, 10000);
	tu_send(chan, REQUEST, 5);
	collect(pub, chan, &s, 3, 10000); /* the kept one goes out */
	assert_int_equal(crs_pub_complete(pub), 0);
	collect(pub, chan, &s, 100, 10000);
	assert_int_equal(s.n, 3);
	assert_int_equal(s.v[0], 1);
	assert_int_equal(s.v[1], 2);
	assert_int_equal(s.v[2], 10);
	assert_int_equal(s.code, 0);
	assert_int_equal(crs_pub_dropped(pub), 7);
	finish_reader(pub, pid, chan);
	crs_pub_close(pub);
}

static void test_overflow_error(void **state)
{
	(void)state;
	char name[64];
	tu_name(name, sizeof(name), "error");
	crs_pub *pub = overflow_pub(name, CRS_OVERFLOW_ERROR);
	struct reader r = { .name = name, .initial = 2 };
	int chan;
	pid_t pid = start_reader(pub, &r, &chan);
	assert_int_equal(offer_value(pub, 1), 0);
	assert_int_equal(offer_value(pub, 2), 0);
	assert_int_equal(offer_value(pub, 3), -CRS_ENODEMAND);
	assert_int_equal(offer_value(pub, 4), -ESHUTDOWN);
	struct seen s = { 0 };
	collect(pub, chan, &s, 100, 10000);
	expect_values(&s, 1, 2);
	assert_true(s.ended);
	assert_int_equal(s.code, ENOBUFS);
	finish_reader(pub, pid, chan);
	crs_pub_close(pub);
}

/* BLOCK: offer waits for demand that a subscriber grants bit by bit. */
static int slow_granter(void *arg, int chan)
{
	(void)chan;
	crs_sub *sub;
	CHECK_EQ(tu_sub_open(arg, 0, &sub), 0);
	uint64_t n = 0;
	while (n < 50) {
		CHECK_EQ(crs_sub_request(sub, 1), 0);
		struct crs_msg m;
		CHECK_EQ(tu_sub_next(sub, &m, 10000), 1);
		uint64_t v;
		memcpy(&v, m.data, sizeof(v));
		CHECK_EQ(v, n + 1);
		n++;
	}
	struct crs_msg m;
	CHECK_EQ(tu_sub_next(sub, &m, 10000), -CRS_EEND);
	CHECK_EQ(crs_sub_end(sub)->code, 0);
	crs_sub_close(sub);
	return 0;
}

static void test_overflow_block(void **state)
{
	(void)state;
	char name[64];
	tu_name(name, sizeof(name), "block");
	crs_pub *pub = overflow_pub(name, CRS_OVERFLOW_BLOCK);
	pid_t pid = tu_spawn(slow_granter, name, NULL, 60);
	assert_int_equal(tu_pub_await_count(pub, 1, 10000), 0);
	for (uint64_t v = 1; v <= 50; v++)
		assert_int_equal(offer_value(pub, v), 0);
	assert_int_equal(crs_pub_dropped(pub), 0);
	assert_int_equal(crs_pub_complete(pub), 0);
	assert_int_equal(tu_serve_wait_child(pub, pid, 20000), 0);
	crs_pub_close(pub);
}

/* A claim that had to pad to the ring's end and was then aborted: the
 * padding is committed, and a subscriber steps over it to the end. */
static void test_abort_after_padding(void **state)
{
	(void)state;
	char name[64];
	tu_name(name, sizeof(name), "padabort");
	struct crs_pub_opts o;
	crs_pub_opts_init(&o);
	o.ring_bytes = 4096;
	crs_pub *pub = make_pub(name, &o);
	struct reader r = { .name = name, .prefetch = 16 };
	int chan;
	pid_t pid = start_reader(pub, &r, &chan);
	uint8_t big[1024] = { 0 };
	for (uint64_t v = 1; v <= 3; v++) {
		memcpy(big, &v, sizeof(v));
		assert_int_equal(crs_pub_offer(pub, big, sizeof(big)), 0);
	}
	struct seen s = { 0 };
	collect(pub, chan, &s, 3, 10000); /* consumed: room for the pad */
	void *buf;
	assert_int_equal(crs_pub_claim(pub, sizeof(big), &buf), 0);
	crs_pub_abort(pub);
	assert_int_equal(crs_pub_complete(pub), 0);
	collect(pub, chan, &s, 100, 10000);
	expect_values(&s, 1, 3);
	assert_true(s.ended);
	assert_int_equal(s.code, 0);
	finish_reader(pub, pid, chan);
	crs_pub_close(pub);
}

int main(void)
{
	tu_init();
	const struct CMUnitTest tests[] = {
		TU_TEST(test_disconnect_send_error),
		TU_TEST(test_disconnect_completed),
		TU_TEST(test_disconnect_no_event),
		TU_TEST(test_disconnect_default_is_error),
		TU_TEST(test_auto_connect),
		TU_TEST(test_reconnect_after_completion),
		TU_TEST(test_replay_count),
		TU_TEST(test_replay_bytes),
		TU_TEST(test_replay_age),
		TU_TEST(test_replay_all_bounds),
		TU_TEST(test_replay_ring_bound),
		TU_TEST(test_replay_terminated),
		TU_TEST(test_replay_runs_ahead),
		TU_TEST(test_overflow_drop),
		TU_TEST(test_overflow_latest),
		TU_TEST(test_overflow_error),
		TU_TEST(test_overflow_block),
		TU_TEST(test_abort_after_padding),
	};
	return cmocka_run_group_tests(tests, NULL, NULL);
}
