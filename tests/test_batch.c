/*
 * test_batch.c - the batch API across processes: crs_pub_commit_more +
 * crs_pub_flush on the publisher, crs_sub_take + crs_sub_release and
 * crs_sub_dispatch on the subscriber.
 *
 *   - a stream published in flushed batches arrives complete and in
 *     order through takes bounded by count and bytes, and then completes;
 *   - deferred messages stay invisible until the flush, and the flush
 *     wakes a subscriber asleep in crs_sub_wait;
 *   - a taken batch is consumed only when released, all at once;
 *   - a publisher that dies with deferred messages never delivers them;
 *   - a take looks no further ahead than 4 KiB of ring: large frames
 *     come in short batches, small ones in full ones;
 *   - crs_sub_dispatch delivers in batches and nothing after a cancel
 *     made inside on_next.
 * Runs on both wait engines (suite nouring sets CRS_NO_URING).
 */
#include "util.h"

#include <errno.h>
#include <signal.h>
#include <string.h>
#include <unistd.h>

#define MAXLEN 700
#define TOTAL 20000

enum {
	T_COUNT = 1,
	T_BATCHES,
	T_TAKEN,
	T_NOTHING,
	T_GOT,
	T_DONE,
	T_PUBLISHED,
	T_AGAIN
};

static crs_pub *make_pub(const char *name)
{
	return tu_make_pub(name, 1 << 16);
}

static int open_sub(const char *name, uint32_t prefetch, crs_sub **sub)
{
	struct crs_sub_opts o;
	crs_sub_opts_init(&o);
	o.prefetch = prefetch;
	o.wait_ms = 10000;
	o.spin_us = -1; /* sleep at once: the flush must wake us */
	return crs_sub_open(name, &o, sub);
}

/* A publisher of a new stream (its name in name) and child fn subscribed
 * to it, ready, with a demand of at least demand. */
static crs_pub *start_child(char *name, size_t size, const char *tag,
			    tu_child_fn fn, uint64_t demand, int *chan,
			    pid_t *pid)
{
	tu_name(name, size, tag);
	crs_pub *pub = make_pub(name);
	*pid = tu_spawn(fn, name, chan, 60);
	assert_int_equal(tu_pub_await_count(pub, 1, 10000), 0);
	assert_int_equal(tu_expect(*chan, TU_READY, NULL, 10000), 0);
	while (crs_pub_demand(pub) < demand)
		assert_int_equal(crs_pub_wait(pub, 1, 10000), 0);
	return pub;
}

/* Check msgs[0..n) continue the stream at *expect. */
static void check_batch(const struct crs_msg *m, int n, uint64_t *expect)
{
	for (int i = 0; i < n; i++) {
		CHECK_EQ(m[i].seq, *expect);
		CHECK_EQ(m[i].len, tu_len(m[i].seq, MAXLEN));
		CHECK(tu_verify(m[i].data, m[i].len, m[i].seq) < 0);
		(*expect)++;
	}
}

/* Publish n messages from *seq with deferred commits, flushing every
 * `every` (and at the end). */
static void publish_batched(crs_pub *pub, uint64_t *seq, uint64_t n,
			    unsigned every)
{
	for (uint64_t i = 0; i < n; i++) {
		size_t len = tu_len(*seq, MAXLEN);
		void *buf;
		int r;
		while ((r = crs_pub_claim(pub, len, &buf)) == -CRS_ENODEMAND ||
		       r == -CRS_ENOROOM)
			assert_int_equal(crs_pub_wait(pub, len, 10000), 0);
		assert_int_equal(r, 0);
		tu_fill(buf, len, *seq);
		assert_int_equal(crs_pub_commit_more(pub, len), 0);
		(*seq)++;
		if ((i + 1) % every == 0)
			assert_true(crs_pub_flush(pub) >= 1);
	}
	crs_pub_flush(pub);
}

/* ---- a whole stream in batches ---------------------------------------- */

static int taker(void *arg, int chan)
{
	const char *name = arg;
	crs_sub *sub;
	CHECK_EQ(open_sub(name, 128, &sub), 0);
	CHECK_EQ(tu_send(chan, TU_READY, 0), 0);
	struct crs_msg m[32];
	uint64_t expect = 0, batches = 0;
	int r;
	for (;;) {
		size_t max = 1 + batches % 32,
		       max_bytes = batches % 3 ? 0 : 2000;
		r = crs_sub_take(sub, m, max, max_bytes);
		if (r == 0) {
			crs_sub_wait(sub, 5000);
			continue;
		}
		if (r < 0)
			break;
		CHECK(r >= 1 && (size_t)r <= max);
		size_t bytes = 0;
		for (int i = 0; i < r; i++)
			bytes += m[i].len;
		CHECK(!max_bytes || r == 1 || bytes <= max_bytes);
		check_batch(m, r, &expect);
		batches++;
		crs_sub_release(sub);
	}
	CHECK_EQ(r, -CRS_EEND);
	CHECK_EQ(crs_sub_end(sub)->code, 0);
	CHECK_EQ(crs_sub_received(sub), TOTAL);
	CHECK_EQ(tu_send(chan, T_COUNT, expect), 0);
	CHECK_EQ(tu_send(chan, T_BATCHES, batches), 0);
	crs_sub_close(sub);
	return 0;
}

static void test_stream_in_batches(void **state)
{
	(void)state;
	char name[64];
	tu_name(name, sizeof(name), "batch");
	crs_pub *pub = make_pub(name);
	int chan;
	pid_t pid = tu_spawn(taker, name, &chan, 60);
	assert_int_equal(tu_pub_await_count(pub, 1, 10000), 0);
	assert_int_equal(tu_expect(chan, TU_READY, NULL, 10000), 0);
	uint64_t seq = 0;
	publish_batched(pub, &seq, TOTAL, 7);
	assert_int_equal(crs_pub_complete(pub), 0);
	uint64_t count, batches;
	assert_int_equal(tu_expect(chan, T_COUNT, &count, 30000), 0);
	assert_int_equal(tu_expect(chan, T_BATCHES, &batches, 1000), 0);
	assert_int_equal(count, TOTAL);
	assert_true(batches < TOTAL); /* some takes got more than one */
	assert_int_equal(tu_serve_wait_child(pub, pid, 10000), 0);
	close(chan);
	crs_pub_close(pub);
}

/* ---- invisible until flushed; consumed when released ------------------ */

static int holder(void *arg, int chan)
{
	const char *name = arg;
	crs_sub *sub;
	CHECK_EQ(open_sub(name, 64, &sub), 0);
	CHECK_EQ(tu_send(chan, TU_READY, 0), 0);
	struct crs_msg m[64];
	/* Five deferred messages are out: none may be seen. */
	CHECK_EQ(tu_expect(chan, T_NOTHING, NULL, 10000), 0);
	CHECK_EQ(crs_sub_wait(sub, 200), -ETIMEDOUT);
	CHECK_EQ(crs_sub_take(sub, m, 64, 0), 0);
	CHECK_EQ(tu_send(chan, T_NOTHING, 0), 0);
	/* Asleep (spin_us -1) until the flush wakes us. */
	CHECK_EQ(crs_sub_wait(sub, 10000), 0);
	/* All five appear at once: one take gets them. */
	uint64_t expect = 0;
	int n = crs_sub_take(sub, m, 64, 0);
	CHECK_EQ(n, 5);
	check_batch(m, n, &expect);
	CHECK_EQ(tu_send(chan, T_TAKEN, (uint64_t)n), 0);
	/* Held until the parent has seen that nothing is consumed. */
	CHECK_EQ(tu_expect(chan, T_DONE, NULL, 10000), 0);
	crs_sub_release(sub);
	CHECK_EQ(tu_expect(chan, T_DONE, NULL, 10000), 0);
	crs_sub_close(sub);
	return 0;
}

static void test_flush_and_release(void **state)
{
	(void)state;
	char name[64];
	int chan;
	pid_t pid;
	crs_pub *pub = start_child(name, sizeof(name), "flush", holder, 5,
				   &chan, &pid);
	for (uint64_t seq = 0; seq < 5; seq++) {
		size_t len = tu_len(seq, MAXLEN);
		void *buf;
		assert_int_equal(crs_pub_claim(pub, len, &buf), 0);
		tu_fill(buf, len, seq);
		assert_int_equal(crs_pub_commit_more(pub, len), 0);
	}
	assert_int_equal(tu_send(chan, T_NOTHING, 0), 0);
	assert_int_equal(tu_expect(chan, T_NOTHING, NULL, 10000), 0);
	tu_sleep_ms(50); /* let it fall asleep; the test holds either way */
	assert_int_equal(crs_pub_flush(pub), 5);
	assert_int_equal(crs_pub_flush(pub), 0);
	uint64_t n;
	assert_int_equal(tu_expect(chan, T_TAKEN, &n, 10000), 0);
	assert_int_equal(n, 5);
	/* All five held: none consumed. */
	assert_int_equal(crs_pub_wait_consumed(pub, 100), -ETIMEDOUT);
	assert_int_equal(tu_send(chan, T_DONE, 0), 0);
	/* One release consumes all five. */
	assert_int_equal(crs_pub_wait_consumed(pub, 10000), 0);
	assert_int_equal(tu_send(chan, T_DONE, 0), 0);
	assert_int_equal(tu_serve_wait_child(pub, pid, 10000), 0);
	close(chan);
	crs_pub_close(pub);
}

/* ---- a dead publisher's deferred messages ------------------------------ */

static int dying_publisher(void *arg, int chan)
{
	const char *name = arg;
	crs_pub *pub;
	struct crs_pub_opts o;
	crs_pub_opts_init(&o);
	o.ring_bytes = 1 << 16;
	CHECK_EQ(crs_pub_create(name, &o, &pub), 0);
	CHECK_EQ(tu_send(chan, TU_READY, 0), 0);
	while (crs_pub_demand(pub) < 10)
		CHECK_EQ(crs_pub_wait(pub, 1, 10000), 0);
	uint64_t seq = 0;
	for (; seq < 6; seq++) { /* 3 flushed, then 3 deferred */
		size_t len = tu_len(seq, MAXLEN);
		void *buf;
		CHECK_EQ(crs_pub_claim(pub, len, &buf), 0);
		tu_fill(buf, len, seq);
		CHECK_EQ(crs_pub_commit_more(pub, len), 0);
		if (seq == 2)
			CHECK_EQ(crs_pub_flush(pub), 3);
	}
	kill(getpid(), SIGKILL); /* no flush, no close */
	return 1;
}

static void test_dead_publisher_deferred(void **state)
{
	(void)state;
	char name[64];
	tu_name(name, sizeof(name), "dead");
	int chan;
	pid_t pid = tu_spawn(dying_publisher, name, &chan, 60);
	assert_int_equal(tu_expect(chan, TU_READY, NULL, 10000), 0);
	crs_sub *sub;
	assert_int_equal(open_sub(name, 100, &sub), 0);
	assert_int_equal(tu_wait_child(pid, 10000), 128 + SIGKILL);
	struct crs_msg m[16];
	uint64_t expect = 0;
	int r;
	while ((r = crs_sub_take(sub, m, 16, 0)) >= 0) {
		if (r == 0) {
			crs_sub_wait(sub, 1000);
			continue;
		}
		for (int i = 0; i < r; i++) {
			assert_int_equal(m[i].seq, expect);
			assert_true(tu_verify(m[i].data, m[i].len, expect) < 0);
			expect++;
		}
	}
	assert_int_equal(r, -CRS_EEND);
	assert_int_equal(expect, 3);
	assert_int_equal(crs_sub_end(sub)->code, EPIPE);
	close(chan);
	crs_sub_close(sub);
}

/* ---- dispatch in batches; cancel inside on_next ------------------------ */

struct counter {
	crs_sub *sub;
	uint64_t next;
	uint64_t cancel_at; /* cancel inside on_next of this seq */
	int ended;
};

static void on_next(void *ctx, const struct crs_msg *msg)
{
	struct counter *c = ctx;
	CHECK_EQ(msg->seq, c->next);
	CHECK(tu_verify(msg->data, msg->len, msg->seq) < 0);
	c->next++;
	if (msg->seq == c->cancel_at)
		crs_sub_cancel(c->sub);
}

static void on_complete(void *ctx)
{
	((struct counter *)ctx)->ended++;
}

static void on_error(void *ctx, int code, const char *message)
{
	(void)code;
	(void)message;
	((struct counter *)ctx)->ended++;
}

static int dispatcher(void *arg, int chan)
{
	const char *name = arg;
	crs_sub *sub;
	CHECK_EQ(open_sub(name, 0, &sub), 0);
	CHECK_EQ(crs_sub_request(sub, 1000), 0);
	CHECK_EQ(tu_send(chan, TU_READY, 0), 0);
	/* All 1000 are out before we cancel at 700: a cancel drops our
	 * slot at the publisher's next serve, and with nobody left it
	 * could not publish the rest (a slow publisher, under load). */
	CHECK_EQ(tu_expect(chan, T_PUBLISHED, NULL, 20000), 0);
	struct counter c = { .sub = sub, .cancel_at = 700 };
	struct crs_sub_callbacks cb = { .on_next = on_next,
					.on_complete = on_complete,
					.on_error = on_error };
	int64_t deadline = tu_now_ms() + 20000;
	while (!crs_sub_end(sub) && tu_now_ms() < deadline) {
		int r = crs_sub_dispatch(sub, &cb, &c, 500);
		CHECK(r >= 0 && r <= 500);
		if (r == 0)
			crs_sub_wait(sub, 1000);
	}
	/* Cancelled at 700: nothing after it, also not the rest of the
	 * batch 700 was taken in, and no terminal callback. */
	CHECK_EQ(c.next, 701);
	CHECK_EQ(crs_sub_dispatch(sub, &cb, &c, 500), -CRS_EEND);
	CHECK_EQ(c.next, 701);
	CHECK_EQ(c.ended, 0);
	CHECK_EQ(tu_send(chan, T_GOT, c.next), 0);
	crs_sub_close(sub);
	return 0;
}

static void test_dispatch_batches(void **state)
{
	(void)state;
	char name[64];
	tu_name(name, sizeof(name), "disp");
	/* Room for all 1000 (at most 720 KiB of frames): the subscriber
	 * cancels at 700 and frees no room after that. */
	crs_pub *pub = tu_make_pub(name, 1 << 20);
	int chan;
	pid_t pid = tu_spawn(dispatcher, name, &chan, 60);
	assert_int_equal(tu_pub_await_count(pub, 1, 10000), 0);
	assert_int_equal(tu_expect(chan, TU_READY, NULL, 10000), 0);
	while (crs_pub_demand(pub) < 1000)
		assert_int_equal(crs_pub_wait(pub, 1, 10000), 0);
	uint64_t seq = 0;
	publish_batched(pub, &seq, 1000, 50); /* within its demand */
	assert_int_equal(tu_send(chan, T_PUBLISHED, 0), 0);
	uint64_t got;
	assert_int_equal(tu_expect(chan, T_GOT, &got, 20000), 0);
	assert_int_equal(got, 701);
	assert_int_equal(tu_serve_wait_child(pub, pid, 10000), 0);
	close(chan);
	crs_pub_close(pub);
}

/* ---- how far a take looks ahead --------------------------------------- */

#define BIG_LEN 1000 /* frames of 1008 bytes: 5 start in the first 4 KiB */
#define SMALL_LEN 32 /* frames of 40 bytes: 64 span 2.5 KiB */

/* Take everything committed now, 64 at most per take: the takes' sizes,
 * each released before the next, sent as one word, a byte each. */
static uint64_t take_sizes(crs_sub *sub, size_t len, int expect_total)
{
	struct crs_msg m[64];
	uint64_t sizes = 0;
	int total = 0, shift = 0;
	CHECK_EQ(crs_sub_wait(sub, 10000), 0);
	while (total < expect_total && shift < 64) {
		int n = crs_sub_take(sub, m, 64, 0);
		CHECK(n >= 1);
		for (int i = 0; i < n; i++) {
			CHECK_EQ(m[i].len, len);
			CHECK(tu_verify(m[i].data, m[i].len, m[i].seq) < 0);
		}
		crs_sub_release(sub);
		sizes |= (uint64_t)n << shift;
		shift += 8;
		total += n;
	}
	CHECK_EQ(total, expect_total);
	return sizes;
}

static int lookahead_taker(void *arg, int chan)
{
	crs_sub *sub;
	CHECK_EQ(open_sub(arg, 0, &sub), 0);
	CHECK_EQ(crs_sub_request(sub, CRS_UNBOUNDED), 0);
	CHECK_EQ(tu_send(chan, TU_READY, 0), 0);
	CHECK_EQ(tu_expect(chan, T_PUBLISHED, NULL, 10000), 0);
	CHECK_EQ(tu_send(chan, T_TAKEN, take_sizes(sub, BIG_LEN, 8)), 0);
	CHECK_EQ(tu_expect(chan, T_AGAIN, NULL, 10000), 0);
	CHECK_EQ(tu_send(chan, T_TAKEN, take_sizes(sub, SMALL_LEN, 64)), 0);
	crs_sub_close(sub);
	return 0;
}

/* n messages of len from *seq, all made visible by one flush. */
static void publish_flushed(crs_pub *pub, uint64_t *seq, int n, size_t len)
{
	for (int i = 0; i < n; i++, (*seq)++) {
		void *buf;
		assert_int_equal(crs_pub_claim(pub, len, &buf), 0);
		tu_fill(buf, len, *seq);
		assert_int_equal(crs_pub_commit_more(pub, len), 0);
	}
	assert_int_equal(crs_pub_flush(pub), n);
}

static void test_take_lookahead(void **state)
{
	(void)state;
	char name[64];
	int chan;
	pid_t pid;
	crs_pub *pub = start_child(name, sizeof(name), "ahead", lookahead_taker,
				   72, &chan, &pid);
	uint64_t seq = 0, sizes;
	/* 8 frames of 1008 bytes: the first take stops before the frame at
	 * 5040, past 4 KiB; the next takes the other 3. */
	publish_flushed(pub, &seq, 8, BIG_LEN);
	assert_int_equal(tu_send(chan, T_PUBLISHED, 0), 0);
	assert_int_equal(tu_expect(chan, T_TAKEN, &sizes, 10000), 0);
	assert_int_equal(sizes, 5 | 3 << 8);
	/* 64 frames of 40 bytes: one take. */
	publish_flushed(pub, &seq, 64, SMALL_LEN);
	assert_int_equal(tu_send(chan, T_AGAIN, 0), 0);
	assert_int_equal(tu_expect(chan, T_TAKEN, &sizes, 10000), 0);
	assert_int_equal(sizes, 64);
	assert_int_equal(tu_serve_wait_child(pub, pid, 10000), 0);
	close(chan);
	crs_pub_close(pub);
}

int main(void)
{
	tu_init();
	const struct CMUnitTest tests[] = {
		TU_TEST(test_stream_in_batches),
		TU_TEST(test_flush_and_release),
		TU_TEST(test_dead_publisher_deferred),
		TU_TEST(test_dispatch_batches),
		TU_TEST(test_take_lookahead),
	};
	return cmocka_run_group_tests(tests, NULL, NULL);
}
