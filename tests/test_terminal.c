/*
 * test_terminal.c - the terminal signals: on_complete and
 * on_error(code, message) reach every subscriber after every message
 * published before them, need no demand, and are final; error messages
 * of up to CRS_ERRMSG_MAX bytes arrive intact and longer ones truncated;
 * closing without completing gives EPIPE; the callback form
 * crs_sub_dispatch() delivers on_next for each message and the terminal
 * callback exactly once.
 */
#include "util.h"

#include <errno.h>
#include <string.h>

#define MAXLEN 200

/* n agents subscribed with prefetch, on a new stream. */
static crs_pub *start(struct tu_agents *g, char *name, int n, uint32_t prefetch,
		      uint64_t ring)
{
	tu_name(name, 64, "term");
	struct tu_agent_arg arg = { name, prefetch, 0, MAXLEN };
	assert_int_equal(tu_agents_start(g, n, &arg), 0);
	crs_pub *pub = tu_make_pub(name, ring);
	assert_int_equal(tu_agents_ready(g, pub), 0);
	return pub;
}

static void test_complete_after_messages(void **state)
{
	(void)state;
	char name[64];
	struct tu_agents g;
	crs_pub *pub = start(&g, name, 3, 128, 1 << 16);
	uint64_t seq = 0, recv[TU_MAX_AGENTS];
	tu_publish(pub, MAXLEN, &seq, 100);
	assert_int_equal(crs_pub_complete(pub), 0);
	/* Nobody has read anything yet: all 100, then the completion. */
	assert_int_equal(tu_agents_cmd(&g, TU_CMD_RECV, 100, NULL), 0);
	assert_int_equal(tu_agents_cmd(&g, TU_CMD_END, 0, recv), 0);
	for (int i = 0; i < g.n; i++)
		assert_int_equal(recv[i], 100);
	assert_int_equal(tu_agents_finish(&g, pub), 0);
	crs_pub_close(pub);
}

static void test_complete_after_many_messages(void **state)
{
	(void)state;
	/* Many times the ring: the completion queues behind them all. */
	char name[64];
	struct tu_agents g;
	crs_pub *pub = start(&g, name, 2, 128, 4096);
	uint64_t seq = 0;
	assert_int_equal(tu_agents_send(&g, TU_CMD_RECV, 5000), 0);
	tu_publish(pub, MAXLEN, &seq, 5000);
	assert_int_equal(crs_pub_complete(pub), 0);
	assert_int_equal(tu_agents_collect(&g, NULL, 30000), 0);
	assert_int_equal(tu_agents_cmd(&g, TU_CMD_END, 0, NULL), 0);
	assert_int_equal(tu_agents_finish(&g, pub), 0);
	crs_pub_close(pub);
}

static void test_error_after_messages(void **state)
{
	(void)state;
	char name[64];
	struct tu_agents g;
	crs_pub *pub = start(&g, name, 3, 128, 1 << 16);
	uint64_t seq = 0;
	tu_publish(pub, MAXLEN, &seq, 77);
	assert_int_equal(crs_pub_error(pub, 42, "boom"), 0);
	assert_int_equal(tu_agents_cmd(&g, TU_CMD_RECV, 77, NULL), 0);
	assert_int_equal(tu_agents_cmd(&g, TU_CMD_END, 42, NULL), 0);
	assert_int_equal(tu_agents_finish(&g, pub), 0);
	crs_pub_close(pub);
}

static void test_terminal_is_final(void **state)
{
	(void)state;
	char name[64];
	struct tu_agents g;
	crs_pub *pub = start(&g, name, 1, 128, 1 << 16);
	/* Invalid error codes are refused and terminate nothing. */
	assert_int_equal(crs_pub_error(pub, 0, "zero"), -EINVAL);
	assert_int_equal(crs_pub_error(pub, -5, "negative"), -EINVAL);
	uint64_t seq = 0;
	tu_publish(pub, MAXLEN, &seq, 3);
	assert_int_equal(crs_pub_complete(pub), 0);
	assert_int_equal(crs_pub_complete(pub), -ESHUTDOWN);
	assert_int_equal(crs_pub_error(pub, 5, "late"), -ESHUTDOWN);
	void *p;
	assert_int_equal(crs_pub_claim(pub, 1, &p), -ESHUTDOWN);
	assert_int_equal(crs_pub_offer(pub, "x", 1), -ESHUTDOWN);
	assert_int_equal(crs_pub_wait(pub, 1, 0), -ESHUTDOWN);
	assert_int_equal(tu_agents_cmd(&g, TU_CMD_RECV, 3, NULL), 0);
	assert_int_equal(tu_agents_cmd(&g, TU_CMD_END, 0, NULL), 0);
	assert_int_equal(tu_agents_finish(&g, pub), 0);
	crs_pub_close(pub);
}

static void test_terminal_open_claim(void **state)
{
	(void)state;
	/* Completing with a claim open drops the claim: the completion
	 * follows the last committed message. */
	char name[64];
	struct tu_agents g;
	crs_pub *pub = start(&g, name, 2, 128, 4096);
	uint64_t seq = 0;
	tu_publish(pub, MAXLEN, &seq, 10);
	void *p;
	assert_int_equal(crs_pub_claim(pub, 500, &p), 0);
	memset(p, 0xee, 500);
	assert_int_equal(crs_pub_complete(pub), 0);
	assert_int_equal(crs_pub_commit(pub, 500), -EINVAL);
	assert_int_equal(tu_agents_cmd(&g, TU_CMD_RECV, 10, NULL), 0);
	assert_int_equal(tu_agents_cmd(&g, TU_CMD_END, 0, NULL), 0);
	assert_int_equal(tu_agents_finish(&g, pub), 0);
	crs_pub_close(pub);
}

static void test_close_without_complete(void **state)
{
	(void)state;
	char name[64];
	struct tu_agents g;
	crs_pub *pub = start(&g, name, 2, 128, 1 << 16);
	uint64_t seq = 0;
	tu_publish(pub, MAXLEN, &seq, 20);
	crs_pub_close(pub);
	assert_int_equal(tu_agents_cmd(&g, TU_CMD_RECV, 20, NULL), 0);
	assert_int_equal(tu_agents_cmd(&g, TU_CMD_END, EPIPE, NULL), 0);
	assert_int_equal(tu_agents_finish(&g, NULL), 0);
}

static void test_close_right_after_complete(void **state)
{
	(void)state;
	/* Completed, then closed at once, long before anybody read: the
	 * subscribers still get everything and a completion, not EPIPE. */
	char name[64];
	struct tu_agents g;
	crs_pub *pub = start(&g, name, 2, 128, 1 << 16);
	uint64_t seq = 0;
	tu_publish(pub, MAXLEN, &seq, 100);
	assert_int_equal(crs_pub_complete(pub), 0);
	crs_pub_close(pub);
	tu_sleep_ms(20);
	assert_int_equal(tu_agents_cmd(&g, TU_CMD_RECV, 100, NULL), 0);
	assert_int_equal(tu_agents_cmd(&g, TU_CMD_END, 0, NULL), 0);
	assert_int_equal(tu_agents_finish(&g, NULL), 0);
}

static void test_replay_close_after_complete_no_demand(void **state)
{
	(void)state;
	/* Replay mode runs ahead of demand. The publisher completes and
	 * exits while a subscriber has used up its demand: the remaining
	 * messages and the completion are in the subscriber's mapping, so
	 * requesting more must deliver them, not EPIPE "publisher died". */
	char name[64];
	tu_name(name, sizeof(name), "replayclose");
	struct tu_agent_arg arg = { name, 0, 0, MAXLEN };
	struct tu_agents g;
	assert_int_equal(tu_agents_start(&g, 2, &arg), 0);
	struct crs_pub_opts o;
	crs_pub_opts_init(&o);
	o.mode = CRS_MODE_REPLAY;
	o.ring_bytes = 1 << 16;
	crs_pub *pub;
	assert_int_equal(crs_pub_create(name, &o, &pub), 0);
	assert_int_equal(tu_agents_ready(&g, pub), 0);
	assert_int_equal(tu_agents_cmd(&g, TU_CMD_REQUEST, 5, NULL), 0);
	uint64_t seq = 0;
	tu_publish(pub, MAXLEN, &seq, 20);
	assert_int_equal(tu_agents_cmd(&g, TU_CMD_RECV, 5, NULL), 0);
	assert_int_equal(crs_pub_complete(pub), 0);
	crs_pub_close(pub);
	/* Idle with no demand after the publisher is gone... */
	assert_int_equal(tu_agents_cmd(&g, TU_CMD_NOMORE, 20, NULL), 0);
	/* ...then more demand: the rest, then the completion. */
	assert_int_equal(tu_agents_cmd(&g, TU_CMD_REQUEST, 100, NULL), 0);
	assert_int_equal(tu_agents_cmd(&g, TU_CMD_RECV, 15, NULL), 0);
	assert_int_equal(tu_agents_cmd(&g, TU_CMD_END, 0, NULL), 0);
	assert_int_equal(tu_agents_finish(&g, NULL), 0);
}

static void test_terminal_needs_no_demand(void **state)
{
	(void)state;
	char name[64];
	struct tu_agents g;
	/* prefetch 0 and no request at all. */
	crs_pub *pub = start(&g, name, 2, 0, 1 << 16);
	assert_true(crs_pub_demand(pub) == 0);
	assert_int_equal(crs_pub_complete(pub), 0);
	assert_int_equal(tu_agents_cmd(&g, TU_CMD_END, 0, NULL), 0);
	assert_int_equal(tu_agents_finish(&g, pub), 0);
	crs_pub_close(pub);

	/* Demand used up exactly, then an error. */
	pub = start(&g, name, 2, 0, 1 << 16);
	assert_int_equal(tu_agents_cmd(&g, TU_CMD_REQUEST, 3, NULL), 0);
	uint64_t seq = 0;
	tu_publish(pub, MAXLEN, &seq, 3);
	assert_true(crs_pub_demand(pub) == 0);
	assert_int_equal(crs_pub_error(pub, EIO, "disk on fire"), 0);
	assert_int_equal(tu_agents_cmd(&g, TU_CMD_RECV, 3, NULL), 0);
	assert_int_equal(tu_agents_cmd(&g, TU_CMD_END, EIO, NULL), 0);
	assert_int_equal(tu_agents_finish(&g, pub), 0);
	crs_pub_close(pub);
}

/* ---- error messages ------------------------------------------------------- */

struct msg_arg {
	const char *name;
	int code;
	const char *expect;
};

static int child_error_message(void *p, int chan)
{
	struct msg_arg *a = p;
	crs_sub *sub;
	CHECK_EQ(tu_sub_open(a->name, 0, &sub), 0);
	CHECK_EQ(tu_send(chan, TU_READY, 0), 0);
	struct crs_msg m;
	CHECK_EQ(tu_sub_next(sub, &m, 10000), -CRS_EEND);
	const struct crs_end *e = crs_sub_end(sub);
	CHECK(e != NULL);
	CHECK_EQ(e->code, a->code);
	if (strcmp(e->message, a->expect) != 0) {
		fprintf(stderr, "message \"%s\" (%zu bytes), expected \"%s\" "
				"(%zu bytes)\n",
			e->message, strlen(e->message), a->expect,
			strlen(a->expect));
		return TU_CHILD_FAIL;
	}
	crs_sub_close(sub);
	return 0;
}

static void run_error_message(const char *sent, const char *expect)
{
	char name[64];
	tu_name(name, sizeof(name), "errmsg");
	struct msg_arg a = { name, 1234, expect };
	int chan;
	pid_t pid = tu_spawn(child_error_message, &a, &chan, 30);
	crs_pub *pub = tu_make_pub(name, 1 << 16);
	assert_int_equal(crs_pub_wait_subscribers(pub, 1, 10000), 0);
	assert_int_equal(tu_expect(chan, TU_READY, NULL, 10000), 0);
	assert_int_equal(crs_pub_error(pub, 1234, sent), 0);
	assert_int_equal(tu_serve_wait_child(pub, pid, 20000), 0);
	close(chan);
	crs_pub_close(pub);
}

static void test_error_message_lengths(void **state)
{
	(void)state;
	char exact[CRS_ERRMSG_MAX + 1], longer[300];
	for (int i = 0; i < CRS_ERRMSG_MAX; i++)
		exact[i] = (char)('a' + i % 26);
	exact[CRS_ERRMSG_MAX] = 0;
	assert_int_equal(strlen(exact), 128);
	for (int i = 0; i < 299; i++)
		longer[i] = (char)('A' + i % 26);
	longer[299] = 0;
	char truncated[CRS_ERRMSG_MAX + 1];
	memcpy(truncated, longer, CRS_ERRMSG_MAX);
	truncated[CRS_ERRMSG_MAX] = 0;
	char one_over[CRS_ERRMSG_MAX + 2];
	memcpy(one_over, exact, CRS_ERRMSG_MAX);
	one_over[CRS_ERRMSG_MAX] = 'Z';
	one_over[CRS_ERRMSG_MAX + 1] = 0;

	run_error_message("short", "short");
	run_error_message("", "");
	run_error_message(NULL, "");
	run_error_message(exact, exact);	 /* 128: intact */
	run_error_message(one_over, exact);	 /* 129: last byte cut */
	run_error_message(longer, truncated);	 /* 299: first 128 */
	run_error_message("multi\nline\ttext", "multi\nline\ttext");
}

/* ---- dispatch ---------------------------------------------------------------- */

struct counts {
	uint64_t next, complete, error, bad;
	int code;
	char message[CRS_ERRMSG_MAX + 1];
};

static void on_next(void *ctx, const struct crs_msg *m)
{
	struct counts *c = ctx;
	if (c->complete || c->error)
		c->bad++; /* nothing after a terminal signal */
	if (m->seq != c->next || m->len != tu_len(m->seq, MAXLEN) ||
	    tu_verify(m->data, m->len, m->seq) != -1)
		c->bad++;
	c->next++;
}

static void on_complete(void *ctx)
{
	struct counts *c = ctx;
	c->complete++;
}

static void on_error(void *ctx, int code, const char *message)
{
	struct counts *c = ctx;
	c->error++;
	c->code = code;
	snprintf(c->message, sizeof(c->message), "%s", message);
}

struct dispatch_arg {
	const char *name;
	uint64_t count;
	int code; /* 0: expect on_complete */
	int count_only;
};

static int child_dispatch(void *p, int chan)
{
	struct dispatch_arg *a = p;
	crs_sub *sub;
	CHECK_EQ(tu_sub_open(a->name, 16, &sub), 0);
	CHECK_EQ(tu_send(chan, TU_READY, 0), 0);
	struct counts c = { 0 };
	struct crs_sub_callbacks cb = { a->count_only ? NULL : on_next,
					on_complete, on_error, NULL };
	uint64_t delivered = 0;
	int64_t deadline = tu_now_ms() + 20000;
	int r;
	for (;;) {
		r = crs_sub_dispatch(sub, &cb, &c, 7);
		if (r < 0)
			break;
		CHECK(r <= 7);
		delivered += (uint64_t)r;
		if (r == 0) {
			CHECK(tu_now_ms() < deadline);
			crs_sub_wait(sub, 1000);
		}
	}
	CHECK_EQ(r, -CRS_EEND);
	CHECK_EQ(c.bad, 0);
	if (!a->count_only)
		CHECK_EQ(c.next, a->count);
	/* The return values count every on_next call: with on_next NULL
	 * ("count only") they are the only count there is. */
	CHECK_EQ(delivered, a->count);
	if (a->code == 0) {
		CHECK_EQ(c.complete, 1);
		CHECK_EQ(c.error, 0);
	} else {
		CHECK_EQ(c.complete, 0);
		CHECK_EQ(c.error, 1);
		CHECK_EQ(c.code, a->code);
		CHECK(strcmp(c.message, "dispatch error") == 0);
	}
	/* Exactly once: later calls return -CRS_EEND and call nothing. */
	for (int i = 0; i < 3; i++)
		CHECK_EQ(crs_sub_dispatch(sub, &cb, &c, 100), -CRS_EEND);
	CHECK_EQ(c.complete + c.error, 1);
	/* max == 0 delivers nothing. */
	CHECK(crs_sub_dispatch(sub, &cb, &c, 0) <= 0);
	CHECK_EQ(c.complete + c.error, 1);
	crs_sub_close(sub);
	return 0;
}

static void run_dispatch(int code, int count_only)
{
	char name[64];
	tu_name(name, sizeof(name), "dispatch");
	struct dispatch_arg a = { name, 500, code, count_only };
	int chan;
	pid_t pid = tu_spawn(child_dispatch, &a, &chan, 60);
	crs_pub *pub = tu_make_pub(name, 4096);
	assert_int_equal(crs_pub_wait_subscribers(pub, 1, 10000), 0);
	assert_int_equal(tu_expect(chan, TU_READY, NULL, 10000), 0);
	uint64_t seq = 0;
	tu_publish(pub, MAXLEN, &seq, a.count);
	if (code)
		assert_int_equal(crs_pub_error(pub, code, "dispatch error"), 0);
	else
		assert_int_equal(crs_pub_complete(pub), 0);
	assert_int_equal(tu_serve_wait_child(pub, pid, 30000), 0);
	close(chan);
	crs_pub_close(pub);
}

static void test_dispatch_complete(void **state)
{
	(void)state;
	run_dispatch(0, 0);
}

static void test_dispatch_error(void **state)
{
	(void)state;
	run_dispatch(ECONNABORTED, 0);
}

static void test_dispatch_count_only(void **state)
{
	(void)state;
	run_dispatch(0, 1);
}

int main(void)
{
	tu_init();
	const struct CMUnitTest tests[] = {
		TU_TEST(test_complete_after_messages),
		TU_TEST(test_complete_after_many_messages),
		TU_TEST(test_error_after_messages),
		TU_TEST(test_terminal_is_final),
		TU_TEST(test_terminal_open_claim),
		TU_TEST(test_close_without_complete),
		TU_TEST(test_close_right_after_complete),
		TU_TEST(test_terminal_needs_no_demand),
		TU_TEST(test_replay_close_after_complete_no_demand),
		TU_TEST(test_error_message_lengths),
		TU_TEST(test_dispatch_complete),
		TU_TEST(test_dispatch_error),
		TU_TEST(test_dispatch_count_only),
	};
	return cmocka_run_group_tests_name("terminal", tests, NULL, NULL);
}
