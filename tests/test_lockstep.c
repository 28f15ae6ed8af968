/*
 * test_lockstep.c - publish (lockstep) mode with 1, 2 and 8 subscriber
 * processes under manual demand: the publisher may emit exactly the
 * minimum outstanding demand (crs_pub_demand() says so, claims beyond it
 * fail with -CRS_ENODEMAND), every subscriber receives exactly what was
 * sent, in order, and the flow resumes when the slowest asks for more.
 * Also: no subscriber means no demand; unbounded requests; a late joiner
 * holds everyone back until it requests and starts at the next message.
 */
#include "util.h"

#include <errno.h>
#include <string.h>

#define MAXLEN 300

/* Publish message seq now: claim/commit or offer (which, with the
 * default BLOCK overflow strategy, would wait for demand: only called
 * within demand). */
static int publish_now(crs_pub *pub, uint64_t seq)
{
	size_t len = tu_len(seq, MAXLEN);
	if (seq & 1) {
		uint8_t buf[MAXLEN];
		tu_fill(buf, len, seq);
		return crs_pub_offer(pub, buf, len);
	}
	void *p;
	int r = crs_pub_claim(pub, len, &p);
	if (r)
		return r;
	tu_fill(p, len, seq);
	return crs_pub_commit(pub, len);
}

/* Publish exactly n messages from *seq, all of which must go through at
 * once; then the next claim must be refused for lack of demand. */
static void publish_exactly(crs_pub *pub, uint64_t *seq, uint64_t n)
{
	assert_true(crs_pub_demand(pub) == n);
	for (uint64_t i = 0; i < n; i++) {
		int r = publish_now(pub, *seq);
		if (r)
			fail_msg("message %llu (%llu of %llu): %s",
				 (unsigned long long)*seq,
				 (unsigned long long)i, (unsigned long long)n,
				 crs_strerror(r));
		(*seq)++;
	}
	assert_true(crs_pub_demand(pub) == 0);
	void *p;
	assert_int_equal(crs_pub_claim(pub, 1, &p), -CRS_ENODEMAND);
	assert_int_equal(crs_pub_claim(pub, 0, &p), -CRS_ENODEMAND);
	assert_int_equal(crs_pub_wait(pub, 1, 0), -ETIMEDOUT);
}

static crs_pub *make_pub(const char *name)
{
	struct crs_pub_opts o;
	crs_pub_opts_init(&o);
	o.ring_bytes = 1 << 16;
	o.max_message = 0;
	crs_pub *pub = NULL;
	assert_int_equal(crs_pub_create(name, &o, &pub), 0);
	return pub;
}

/* Agent 0 is the slow one; agents 1.. are fast (fast == 0: they do not
 * request). */
static void request_slow_fast(struct tu_agents *g, uint64_t slow,
			      uint64_t fast, uint64_t *want_slow,
			      uint64_t *want_fast)
{
	uint64_t v;
	assert_int_equal(tu_cmd(g->chan[0], TU_CMD_REQUEST, slow, &v, 10000),
			 0);
	assert_true(v == *want_slow);
	for (int i = 1; fast && i < g->n; i++) {
		assert_int_equal(tu_cmd(g->chan[i], TU_CMD_REQUEST, fast, &v,
					10000),
				 0);
		assert_true(v == *want_fast);
	}
}

static void run_lockstep(int n)
{
	char name[64];
	tu_name(name, sizeof(name), "lockstep");
	struct tu_agent_arg arg = { name, 0, 0, MAXLEN };
	struct tu_agents g;
	assert_int_equal(tu_agents_start(&g, n, &arg), 0);
	crs_pub *pub = make_pub(name);
	assert_int_equal(tu_agents_ready(&g, pub), 0);
	uint64_t seq = 0;
	uint64_t recv[TU_MAX_AGENTS];

	/* Subscribed, nothing requested: no demand. */
	assert_true(crs_pub_demand(pub) == 0);
	publish_exactly(pub, &seq, 0);

	/* The slow one asks for 5, the others for 20: 5 may go. */
	uint64_t ws = 5, wf = 20;
	request_slow_fast(&g, 5, 20, &ws, &wf);
	publish_exactly(pub, &seq, 5);
	assert_int_equal(tu_agents_cmd(&g, TU_CMD_RECV, 5, recv), 0);
	for (int i = 0; i < n; i++)
		assert_int_equal(recv[i], 5);
	assert_int_equal(tu_agents_cmd(&g, TU_CMD_NOMORE, 30, NULL), 0);

	/* The slow one catches up to 20: 15 more may go, for everyone. */
	ws = 20;
	request_slow_fast(&g, 15, 0, &ws, &wf);
	publish_exactly(pub, &seq, 15);
	assert_int_equal(tu_agents_cmd(&g, TU_CMD_RECV, 15, recv), 0);
	for (int i = 0; i < n; i++)
		assert_int_equal(recv[i], 20);
	assert_int_equal(tu_agents_cmd(&g, TU_CMD_NOMORE, 30, NULL), 0);

	/* The fast ones go unbounded; the slow one still bounds all. */
	uint64_t v;
	for (int i = 1; i < n; i++) {
		assert_int_equal(tu_cmd(g.chan[i], TU_CMD_REQUEST,
					CRS_UNBOUNDED, &v, 10000),
				 0);
		assert_true(v == CRS_UNBOUNDED);
		/* Adding to unbounded stays unbounded. */
		assert_int_equal(tu_cmd(g.chan[i], TU_CMD_REQUEST, 7, &v,
					10000),
				 0);
		assert_true(v == CRS_UNBOUNDED);
	}
	assert_int_equal(tu_cmd(g.chan[0], TU_CMD_REQUEST, 10, &v, 10000), 0);
	assert_int_equal(v, 30);
	publish_exactly(pub, &seq, 10);
	assert_int_equal(tu_agents_cmd(&g, TU_CMD_RECV, 10, NULL), 0);

	/* Everyone unbounded: the publisher is limited by room only. */
	assert_int_equal(tu_cmd(g.chan[0], TU_CMD_REQUEST, CRS_UNBOUNDED - 1,
				&v, 10000),
			 0);
	assert_true(v == CRS_UNBOUNDED); /* 30 + (MAX - 1) saturates */
	assert_true(crs_pub_demand(pub) == CRS_UNBOUNDED);
	const uint64_t many = 3000; /* several times the ring */
	assert_int_equal(tu_agents_send(&g, TU_CMD_RECV, many), 0);
	for (uint64_t i = 0; i < many; i++, seq++)
		assert_int_equal(tu_pub_send(pub, seq, tu_len(seq, MAXLEN),
					     20000),
				 0);
	assert_int_equal(tu_agents_collect(&g, recv, 30000), 0);
	for (int i = 0; i < n; i++)
		assert_int_equal(recv[i], seq);
	assert_true(crs_pub_demand(pub) == CRS_UNBOUNDED);

	assert_int_equal(crs_pub_complete(pub), 0);
	assert_int_equal(tu_agents_cmd(&g, TU_CMD_END, 0, recv), 0);
	for (int i = 0; i < n; i++)
		assert_int_equal(recv[i], seq);
	assert_int_equal(tu_agents_finish(&g, pub), 0);
	crs_pub_close(pub);
}

static void test_lockstep_1(void **state)
{
	(void)state;
	run_lockstep(1);
}

static void test_lockstep_2(void **state)
{
	(void)state;
	run_lockstep(2);
}

static void test_lockstep_8(void **state)
{
	(void)state;
	run_lockstep(8);
}

static void test_no_subscriber_no_demand(void **state)
{
	(void)state;
	char name[64];
	tu_name(name, sizeof(name), "nosub");
	crs_pub *pub = make_pub(name);
	assert_true(crs_pub_demand(pub) == 0);
	assert_int_equal(crs_pub_subscribers(pub), 0);
	assert_int_equal(crs_pub_serve(pub), 0);
	void *p;
	assert_int_equal(crs_pub_claim(pub, 0, &p), -CRS_ENODEMAND);
	assert_int_equal(crs_pub_claim(pub, 10, &p), -CRS_ENODEMAND);
	assert_int_equal(crs_pub_wait(pub, 10, 20), -ETIMEDOUT);
	assert_int_equal(crs_pub_wait_subscribers(pub, 1, 10), -ETIMEDOUT);
	assert_int_equal(crs_pub_wait_subscribers(pub, 0, 0), 0);

	/* One unbounded subscriber comes and goes: demand follows. */
	struct tu_agent_arg arg = { name, 0, 0, MAXLEN };
	struct tu_agents g;
	assert_int_equal(tu_agents_start(&g, 1, &arg), 0);
	assert_int_equal(tu_agents_ready(&g, pub), 0);
	assert_int_equal(tu_agents_cmd(&g, TU_CMD_REQUEST, CRS_UNBOUNDED, NULL),
			 0);
	assert_true(crs_pub_demand(pub) == CRS_UNBOUNDED);
	uint64_t seq = 0;
	assert_int_equal(publish_now(pub, seq++), 0);
	assert_int_equal(tu_agents_cmd(&g, TU_CMD_RECV, 1, NULL), 0);
	assert_int_equal(tu_agents_finish(&g, pub), 0);
	assert_int_equal(tu_pub_await_count(pub, 0, 10000), 0);
	assert_true(crs_pub_demand(pub) == 0);
	assert_int_equal(crs_pub_claim(pub, 10, &p), -CRS_ENODEMAND);
	crs_pub_close(pub);
}

static void test_late_joiner(void **state)
{
	(void)state;
	char name[64];
	tu_name(name, sizeof(name), "late");
	struct tu_agent_arg arg = { name, 0, 0, MAXLEN };
	struct tu_agents early, late;
	assert_int_equal(tu_agents_start(&early, 2, &arg), 0);
	crs_pub *pub = make_pub(name);
	assert_int_equal(tu_agents_ready(&early, pub), 0);
	assert_int_equal(tu_agents_cmd(&early, TU_CMD_REQUEST, 100, NULL), 0);
	uint64_t seq = 0;
	publish_exactly(pub, &seq, 100);
	assert_int_equal(tu_agents_cmd(&early, TU_CMD_REQUEST, 1000, NULL), 0);
	assert_true(crs_pub_demand(pub) == 1000);
	for (int i = 0; i < 10; i++)
		assert_int_equal(publish_now(pub, seq++), 0);

	/* A latecomer starts with the next message (seq 110) and, having
	 * requested nothing, holds everyone back. */
	arg.first_seq = seq;
	assert_int_equal(tu_agents_start(&late, 1, &arg), 0);
	int64_t deadline = tu_now_ms() + 20000;
	while (crs_pub_subscribers(pub) < 3 && tu_now_ms() < deadline) {
		crs_pub_serve(pub);
		tu_sleep_ms(1);
	}
	assert_int_equal(crs_pub_subscribers(pub), 3);
	uint64_t v;
	assert_int_equal(tu_expect(late.chan[0], TU_READY, &v, 10000), 0);
	assert_int_equal(v, 0);
	assert_true(crs_pub_demand(pub) == 0);
	void *p;
	assert_int_equal(crs_pub_claim(pub, 1, &p), -CRS_ENODEMAND);

	assert_int_equal(tu_cmd(late.chan[0], TU_CMD_REQUEST, 3, &v, 10000), 0);
	publish_exactly(pub, &seq, 3);
	assert_int_equal(tu_cmd(late.chan[0], TU_CMD_RECV, 3, &v, 10000), 0);
	assert_int_equal(v, 3);
	assert_int_equal(tu_cmd(late.chan[0], TU_CMD_NOMORE, 20, NULL, 10000),
			 0);
	assert_int_equal(tu_agents_cmd(&early, TU_CMD_RECV, 113, NULL), 0);

	/* When the latecomer leaves, its pressure goes with it. */
	assert_int_equal(tu_agents_finish(&late, pub), 0);
	assert_int_equal(tu_pub_await_count(pub, 2, 10000), 0);
	assert_true(crs_pub_demand(pub) == 1000 - 13);
	assert_int_equal(crs_pub_complete(pub), 0);
	assert_int_equal(tu_agents_cmd(&early, TU_CMD_END, 0, NULL), 0);
	assert_int_equal(tu_agents_finish(&early, pub), 0);
	crs_pub_close(pub);
}

static void test_slot_reuse(void **state)
{
	(void)state;
	/* Subscribers leave and others take their slots: a newcomer owes
	 * nothing to its predecessor's demand or position. */
	char name[64];
	tu_name(name, sizeof(name), "reuse");
	struct crs_pub_opts o;
	crs_pub_opts_init(&o);
	o.ring_bytes = 1 << 14;
	o.max_subscribers = 2;
	crs_pub *pub;
	assert_int_equal(crs_pub_create(name, &o, &pub), 0);
	uint64_t seq = 0;
	for (int round = 0; round < 6; round++) {
		struct tu_agent_arg arg = { name, 0, seq, MAXLEN };
		struct tu_agents g;
		assert_int_equal(tu_agents_start(&g, 2, &arg), 0);
		assert_int_equal(tu_agents_ready(&g, pub), 0);
		assert_int_equal(crs_pub_subscribers(pub), 2);
		assert_true(crs_pub_demand(pub) == 0);
		uint64_t want = 3 + (uint64_t)round;
		assert_int_equal(tu_cmd(g.chan[0], TU_CMD_REQUEST, want, NULL,
					10000),
				 0);
		assert_int_equal(tu_cmd(g.chan[1], TU_CMD_REQUEST, 500, NULL,
					10000),
				 0);
		publish_exactly(pub, &seq, want);
		assert_int_equal(tu_agents_cmd(&g, TU_CMD_RECV, want, NULL), 0);
		assert_int_equal(tu_agents_finish(&g, pub), 0);
		assert_int_equal(tu_pub_await_count(pub, 0, 10000), 0);
		assert_true(crs_pub_demand(pub) == 0);
	}
	crs_pub_close(pub);
}

int main(void)
{
	tu_init();
	const struct CMUnitTest tests[] = {
		TU_TEST(test_no_subscriber_no_demand),
		TU_TEST(test_lockstep_1),
		TU_TEST(test_lockstep_2),
		TU_TEST(test_lockstep_8),
		TU_TEST(test_late_joiner),
		TU_TEST(test_slot_reuse),
	};
	return cmocka_run_group_tests_name("lockstep", tests, NULL, NULL);
}
