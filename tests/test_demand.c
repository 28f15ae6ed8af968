/*
 * test_demand.c - one subscriber's demand: request(0) ends the
 * subscription with EINVAL (Reactive Streams 3.9) and releases its
 * pressure on the publisher; requests accumulate; cancel is idempotent,
 * requests after it are no-ops, and a cancelled subscriber holds nobody
 * back, neither by demand nor by the ring space it had not consumed;
 * prefetch requests P up front and replenishes by P - P/4 once that many
 * are consumed (128 -> 96, 4 -> 3, 1 -> 1), as the publisher sees it.
 */
#include "util.h"

#include <errno.h>
#include <string.h>

#define MAXLEN 200

/* ---- request(0) --------------------------------------------------------- */

enum { GO = 1, DONE, NOTE };

static int child_request_zero(void *arg, int chan)
{
	crs_sub *sub;
	CHECK_EQ(tu_sub_open(arg, 0, &sub), 0);
	CHECK_EQ(crs_sub_request(sub, 2), 0);
	CHECK_EQ(tu_send(chan, TU_READY, 0), 0);
	struct crs_msg m;
	CHECK_EQ(tu_sub_next(sub, &m, 10000), 1);
	CHECK_EQ(m.seq, 0);
	crs_sub_release(sub);
	CHECK_EQ(tu_expect(chan, GO, NULL, 10000), 0);
	/* Message 1 is published and within demand, but request(0) ends
	 * the subscription at once: on_error(EINVAL), nothing after it. */
	CHECK_EQ(crs_sub_request(sub, 0), -EINVAL);
	CHECK_EQ(crs_sub_poll(sub, &m), -CRS_EEND);
	const struct crs_end *e = crs_sub_end(sub);
	CHECK(e != NULL);
	CHECK_EQ(e->code, EINVAL);
	CHECK(e->message[0] != 0);
	CHECK_EQ(crs_sub_poll(sub, &m), -CRS_EEND);
	CHECK_EQ(crs_sub_wait(sub, 1000), 0); /* ended: returns at once */
	/* After the end: requests are no-ops, request(0) included. */
	CHECK_EQ(crs_sub_request(sub, 5), 0);
	CHECK_EQ(crs_sub_request(sub, 0), 0);
	CHECK_EQ(crs_sub_requested(sub), 2);
	CHECK_EQ(crs_sub_received(sub), 1);
	CHECK_EQ(crs_sub_end(sub)->code, EINVAL);
	CHECK_EQ(tu_send(chan, DONE, 0), 0);
	/* Only after the publisher has dropped us (request(0) alone must
	 * do that): a cancel does not change how it ended. */
	CHECK_EQ(tu_expect(chan, GO, NULL, 20000), 0);
	crs_sub_cancel(sub);
	CHECK_EQ(crs_sub_end(sub)->code, EINVAL);
	crs_sub_close(sub);
	return 0;
}

static void test_request_zero(void **state)
{
	(void)state;
	char name[64];
	tu_name(name, sizeof(name), "req0");
	struct tu_agent_arg arg = { name, 0, 0, MAXLEN };
	struct tu_agents other;
	assert_int_equal(tu_agents_start(&other, 1, &arg), 0);
	int chan;
	pid_t pid = tu_spawn(child_request_zero, name, &chan, 60);
	crs_pub *pub = tu_make_pub(name, 1 << 16);
	assert_int_equal(tu_agents_ready(&other, pub), 0);
	assert_int_equal(crs_pub_wait_subscribers(pub, 2, 10000), 0);
	assert_int_equal(tu_expect(chan, TU_READY, NULL, 10000), 0);
	assert_int_equal(tu_agents_cmd(&other, TU_CMD_REQUEST, 50, NULL), 0);
	assert_true(crs_pub_demand(pub) == 2);
	uint64_t seq = 0;
	tu_publish(pub, MAXLEN, &seq, 2);
	assert_true(crs_pub_demand(pub) == 0);

	assert_int_equal(tu_send(chan, GO, 0), 0);
	assert_int_equal(tu_expect(chan, DONE, NULL, 10000), 0);
	/* Its pressure is gone: the publisher drops it and the demand is
	 * the other subscriber's. */
	assert_int_equal(tu_pub_await_count(pub, 1, 10000), 0);
	assert_true(crs_pub_demand(pub) == 48);
	tu_publish(pub, MAXLEN, &seq, 48);
	assert_int_equal(tu_agents_cmd(&other, TU_CMD_RECV, 50, NULL), 0);
	assert_int_equal(crs_pub_complete(pub), 0);
	assert_int_equal(tu_agents_cmd(&other, TU_CMD_END, 0, NULL), 0);
	assert_int_equal(tu_send(chan, GO, 0), 0);
	assert_int_equal(tu_wait_child(pid, 10000), 0);
	assert_int_equal(tu_agents_finish(&other, pub), 0);
	close(chan);
	crs_pub_close(pub);
}

/* ---- accumulation --------------------------------------------------------- */

static void test_requests_accumulate(void **state)
{
	(void)state;
	char name[64];
	tu_name(name, sizeof(name), "acc");
	struct tu_agent_arg arg = { name, 0, 0, MAXLEN };
	struct tu_agents g;
	assert_int_equal(tu_agents_start(&g, 1, &arg), 0);
	crs_pub *pub = tu_make_pub(name, 1 << 16);
	assert_int_equal(tu_agents_ready(&g, pub), 0);
	uint64_t v, total = 0, seq = 0;
	for (uint64_t n = 1; n <= 10; n++) {
		assert_int_equal(tu_agents_cmd(&g, TU_CMD_REQUEST, n, &v), 0);
		total += n;
		assert_int_equal(v, total);
		assert_true(crs_pub_demand(pub) == total - seq);
	}
	tu_publish(pub, MAXLEN, &seq, 20);
	assert_true(crs_pub_demand(pub) == total - 20);
	/* Huge requests saturate at unbounded instead of wrapping. */
	assert_int_equal(tu_agents_cmd(&g, TU_CMD_REQUEST, CRS_UNBOUNDED / 2,
				       &v),
			 0);
	assert_true(v == total + CRS_UNBOUNDED / 2);
	assert_int_equal(tu_agents_cmd(&g, TU_CMD_REQUEST, CRS_UNBOUNDED / 2,
				       &v),
			 0);
	assert_true(v == CRS_UNBOUNDED);
	assert_true(crs_pub_demand(pub) == CRS_UNBOUNDED);
	tu_publish(pub, MAXLEN, &seq, 100);
	assert_int_equal(tu_agents_cmd(&g, TU_CMD_RECV, 120, &v), 0);
	assert_int_equal(v, 120);
	assert_int_equal(crs_pub_complete(pub), 0);
	assert_int_equal(tu_agents_cmd(&g, TU_CMD_END, 0, NULL), 0);
	assert_int_equal(tu_agents_finish(&g, pub), 0);
	crs_pub_close(pub);
}

/* ---- cancel ----------------------------------------------------------------- */

static void test_cancel_releases_demand(void **state)
{
	(void)state;
	char name[64];
	tu_name(name, sizeof(name), "cancel");
	struct tu_agent_arg arg = { name, 0, 0, MAXLEN };
	struct tu_agents g; /* agent 0: slow, then cancels; 1: steady */
	assert_int_equal(tu_agents_start(&g, 2, &arg), 0);
	crs_pub *pub = tu_make_pub(name, 1 << 16);
	assert_int_equal(tu_agents_ready(&g, pub), 0);
	uint64_t v;
	assert_int_equal(tu_cmd(g.chan[0], TU_CMD_REQUEST, 3, &v, 10000), 0);
	assert_int_equal(tu_cmd(g.chan[1], TU_CMD_REQUEST, 50, &v, 10000), 0);
	assert_true(crs_pub_demand(pub) == 3);
	uint64_t seq = 0;
	tu_publish(pub, MAXLEN, &seq, 3);
	assert_true(crs_pub_demand(pub) == 0);
	assert_int_equal(tu_cmd(g.chan[0], TU_CMD_RECV, 2, &v, 10000), 0);

	/* Cancel (twice: idempotent). The end is ECANCELED, the message
	 * still queued is not delivered, requests are no-ops. */
	assert_int_equal(tu_cmd(g.chan[0], TU_CMD_CANCEL, 0, NULL, 10000), 0);
	assert_int_equal(tu_cmd(g.chan[0], TU_CMD_END, ECANCELED, &v, 10000),
			 0);
	assert_int_equal(v, 2);
	assert_int_equal(tu_cmd(g.chan[0], TU_CMD_REQUEST, 10, &v, 10000), 0);
	assert_int_equal(v, 3);
	assert_int_equal(tu_cmd(g.chan[0], TU_CMD_CANCEL, 0, NULL, 10000), 0);
	assert_int_equal(tu_cmd(g.chan[0], TU_CMD_END, ECANCELED, NULL, 10000),
			 0);

	/* The publisher no longer counts it: demand is the other's. */
	assert_int_equal(tu_pub_await_count(pub, 1, 10000), 0);
	assert_true(crs_pub_demand(pub) == 47);
	tu_publish(pub, MAXLEN, &seq, 47);
	assert_int_equal(tu_cmd(g.chan[1], TU_CMD_RECV, 50, &v, 10000), 0);
	assert_int_equal(crs_pub_complete(pub), 0);
	assert_int_equal(tu_cmd(g.chan[1], TU_CMD_END, 0, &v, 10000), 0);
	assert_int_equal(v, 50);
	assert_int_equal(tu_agents_finish(&g, pub), 0);
	crs_pub_close(pub);
}

static void test_cancel_releases_room(void **state)
{
	(void)state;
	/* A subscriber with unbounded demand that reads nothing fills the
	 * ring; once it cancels, the ring space it held is free. */
	char name[64];
	tu_name(name, sizeof(name), "room");
	struct tu_agent_arg arg = { name, 0, 0, MAXLEN };
	struct tu_agents g;
	assert_int_equal(tu_agents_start(&g, 2, &arg), 0);
	crs_pub *pub = tu_make_pub(name, 4096);
	assert_int_equal(tu_agents_ready(&g, pub), 0);
	assert_int_equal(tu_agents_cmd(&g, TU_CMD_REQUEST, CRS_UNBOUNDED, NULL),
			 0);
	uint64_t seq = 0;
	int r;
	void *p;
	/* Agent 1 keeps reading whatever comes (up to 1000). */
	assert_int_equal(tu_send(g.chan[1], TU_CMD_RECV, 1000), 0);
	while ((r = crs_pub_claim(pub, tu_len(seq, MAXLEN), &p)) == 0) {
		tu_fill(p, tu_len(seq, MAXLEN), seq);
		assert_int_equal(crs_pub_commit(pub, tu_len(seq, MAXLEN)), 0);
		seq++;
		assert_true(seq < 1000);
	}
	assert_int_equal(r, -CRS_ENOROOM);
	assert_int_equal(crs_pub_wait(pub, tu_len(seq, MAXLEN), 50),
			 -ETIMEDOUT);
	assert_true(crs_pub_demand(pub) == CRS_UNBOUNDED);
	assert_int_equal(tu_cmd(g.chan[0], TU_CMD_CANCEL, 0, NULL, 10000), 0);
	/* Room comes back without any help from the cancelled one. */
	tu_publish(pub, MAXLEN, &seq, 1000 - seq);
	assert_int_equal(tu_expect(g.chan[1], TU_ACK, NULL, 20000), 0);
	assert_int_equal(crs_pub_subscribers(pub), 1);
	assert_int_equal(crs_pub_complete(pub), 0);
	assert_int_equal(tu_cmd(g.chan[1], TU_CMD_END, 0, NULL, 10000), 0);
	assert_int_equal(tu_agents_finish(&g, pub), 0);
	crs_pub_close(pub);
}

/* ---- prefetch ----------------------------------------------------------------- */

struct prefetch_arg {
	const char *name;
	uint32_t prefetch;
	uint32_t replenish;
	int rounds;
};

static int child_prefetch(void *p, int chan)
{
	struct prefetch_arg *a = p;
	crs_sub *sub;
	int r = tu_sub_open(a->name, a->prefetch, &sub);
	CHECK_EQ(r, 0);
	CHECK_EQ(crs_sub_requested(sub), a->prefetch);
	CHECK_EQ(tu_send(chan, TU_READY, 0), 0);
	CHECK_EQ(tu_expect(chan, GO, NULL, 10000), 0);
	uint64_t total = a->prefetch + (uint64_t)a->rounds * a->replenish;
	struct crs_msg m;
	for (uint64_t k = 1; k <= total; k++) {
		CHECK_EQ(tu_sub_next(sub, &m, 10000), 1);
		CHECK_EQ(m.seq, k - 1);
		CHECK_EQ(tu_verify(m.data, m.len, m.seq), -1);
		/* Holding the message: not replenished yet. */
		CHECK_EQ(crs_sub_requested(sub),
			 a->prefetch + (k - 1) / a->replenish * a->replenish);
		crs_sub_release(sub);
		CHECK_EQ(crs_sub_requested(sub),
			 a->prefetch + k / a->replenish * a->replenish);
		if (k % a->replenish == 0 &&
		    k <= (uint64_t)a->rounds * a->replenish) {
			/* Pause so that the parent sees exactly this. */
			CHECK_EQ(tu_send(chan, NOTE, k), 0);
			CHECK_EQ(tu_expect(chan, GO, NULL, 10000), 0);
		}
	}
	CHECK_EQ(tu_sub_next(sub, &m, 10000), -CRS_EEND);
	CHECK_EQ(crs_sub_end(sub)->code, 0);
	crs_sub_close(sub);
	return 0;
}

static void run_prefetch(uint32_t prefetch, uint32_t replenish)
{
	char name[64];
	tu_name(name, sizeof(name), "prefetch");
	struct prefetch_arg a = { name, prefetch, replenish, 3 };
	int chan;
	pid_t pid = tu_spawn(child_prefetch, &a, &chan, 60);
	/* Room for the whole first batch: it is published before the
	 * child reads. */
	uint64_t ring = 1 << 16;
	while (ring < (uint64_t)prefetch * (MAXLEN + 16))
		ring *= 2;
	crs_pub *pub = tu_make_pub(name, ring);
	assert_int_equal(crs_pub_wait_subscribers(pub, 1, 10000), 0);
	assert_int_equal(tu_expect(chan, TU_READY, NULL, 10000), 0);
	assert_true(crs_pub_demand(pub) == prefetch);
	uint64_t seq = 0;
	tu_publish(pub, MAXLEN, &seq, prefetch);
	void *p;
	assert_int_equal(crs_pub_claim(pub, 1, &p), -CRS_ENODEMAND);
	assert_int_equal(tu_send(chan, GO, 0), 0);
	for (int round = 1; round <= a.rounds; round++) {
		uint64_t k;
		assert_int_equal(tu_expect(chan, NOTE, &k, 10000), 0);
		assert_int_equal(k, (uint64_t)round * replenish);
		/* Replenished by exactly one batch: the publisher sees it. */
		assert_true(crs_pub_demand(pub) ==
			    prefetch + (uint64_t)round * replenish - seq);
		tu_publish(pub, MAXLEN, &seq, prefetch + (uint64_t)round * replenish - seq);
		assert_int_equal(crs_pub_claim(pub, 1, &p), -CRS_ENODEMAND);
		assert_int_equal(tu_send(chan, GO, 0), 0);
	}
	assert_int_equal(crs_pub_complete(pub), 0);
	assert_int_equal(tu_wait_child(pid, 20000), 0);
	close(chan);
	crs_pub_close(pub);
}

static void test_prefetch_128(void **state)
{
	(void)state;
	run_prefetch(128, 96);
}

/* The default options request 2^20 up front (their replenishing is
 * the arithmetic the explicit cases check). */
static int child_default(void *arg, int chan)
{
	const char *name = arg;
	struct crs_sub_opts o;
	crs_sub_opts_init(&o);
	o.wait_ms = 10000;
	crs_sub *sub;
	CHECK_EQ(crs_sub_open(name, &o, &sub), 0);
	CHECK_EQ(crs_sub_requested(sub), 1u << 20);
	CHECK_EQ(tu_send(chan, TU_READY, 0), 0);
	CHECK_EQ(tu_expect(chan, GO, NULL, 10000), 0);
	crs_sub_close(sub);
	return 0;
}

static void test_prefetch_default(void **state)
{
	(void)state;
	char name[64];
	tu_name(name, sizeof(name), "default");
	int chan;
	pid_t pid = tu_spawn(child_default, name, &chan, 60);
	crs_pub *pub = tu_make_pub(name, 1 << 16);
	assert_int_equal(crs_pub_wait_subscribers(pub, 1, 10000), 0);
	assert_int_equal(tu_expect(chan, TU_READY, NULL, 10000), 0);
	assert_true(crs_pub_demand(pub) == 1u << 20);
	assert_int_equal(tu_send(chan, GO, 0), 0);
	assert_int_equal(tu_serve_wait_child(pub, pid, 10000), 0);
	close(chan);
	crs_pub_close(pub);
}

static void test_prefetch_4(void **state)
{
	(void)state;
	run_prefetch(4, 3);
}

static void test_prefetch_1(void **state)
{
	(void)state;
	run_prefetch(1, 1);
}

int main(void)
{
	tu_init();
	const struct CMUnitTest tests[] = {
		TU_TEST(test_request_zero),
		TU_TEST(test_requests_accumulate),
		TU_TEST(test_cancel_releases_demand),
		TU_TEST(test_cancel_releases_room),
		TU_TEST(test_prefetch_128),
		TU_TEST(test_prefetch_default),
		TU_TEST(test_prefetch_4),
		TU_TEST(test_prefetch_1),
	};
	return cmocka_run_group_tests_name("demand", tests, NULL, NULL);
}
