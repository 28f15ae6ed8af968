/*
 * test_cancel.c - nothing is delivered after a subscriber's own
 * crs_sub_cancel(), across processes: no on_next, no on_complete and no
 * on_error(ECANCELED), whether it cancels inside on_next, between two
 * crs_sub_dispatch() calls after the end was already seen, or inside a
 * crs_loop (where the subscription then leaves the loop silently while
 * another one in the same loop runs to its completion).
 *
 * The publishers live in the test process and publish everything (and
 * complete) before the subscriber child starts dispatching, so each case
 * is decided by the subscriber's calls alone, not by timing.
 */
#include <errno.h>
#include <string.h>

#include "util.h"

#define LEN 64
#define COUNT 20
#define CANCEL_AT 10

enum { GO = 300, REPORT, DONE };

struct counts {
	crs_sub *sub;
	int cancel_at; /* cancel inside the on_next of this message */
	int next, complete, error, last_code;
	int bad; /* a message without its pattern */
};

static void on_next(void *ctx, const struct crs_msg *m)
{
	struct counts *c = ctx;
	if (m->len != LEN || tu_verify(m->data, m->len, m->seq) != -1)
		c->bad++;
	if (++c->next == c->cancel_at)
		crs_sub_cancel(c->sub);
}

static void on_complete(void *ctx)
{
	((struct counts *)ctx)->complete++;
}

static void on_error(void *ctx, int code, const char *message)
{
	(void)message;
	struct counts *c = ctx;
	c->error++;
	c->last_code = code;
}

static const struct crs_sub_callbacks callbacks = { on_next, on_complete,
						    on_error, NULL };

/* Send one subscription's counts and end code to the parent. */
static void report(int chan, const struct counts *c)
{
	const struct crs_end *end = crs_sub_end(c->sub);
	uint64_t v[] = { (uint64_t)c->next, (uint64_t)c->complete,
			 (uint64_t)c->error, (uint64_t)c->bad,
			 end ? (uint64_t)end->code : 9999 };
	for (size_t i = 0; i < sizeof(v) / sizeof(v[0]); i++)
		CHECK_EQ(tu_send(chan, REPORT, v[i]), 0);
}

static void expect_report(int chan, int next, int complete, int error,
			  int code)
{
	uint64_t v[5];
	for (int i = 0; i < 5; i++)
		assert_int_equal(tu_expect(chan, REPORT, &v[i], 30000), 0);
	assert_int_equal(v[0], next);
	assert_int_equal(v[1], complete);
	assert_int_equal(v[2], error);
	assert_int_equal(v[3], 0); /* every message intact */
	assert_int_equal(v[4], code);
}

/* Calls after the end must deliver nothing either. */
static void after_end_nothing(struct counts *c)
{
	struct counts before = *c;
	struct crs_msg m;
	CHECK_EQ(crs_sub_dispatch(c->sub, &callbacks, c, 100), -CRS_EEND);
	CHECK_EQ(crs_sub_poll(c->sub, &m), -CRS_EEND);
	CHECK_EQ(crs_sub_request(c->sub, 5), 0);
	CHECK_EQ(crs_sub_wait(c->sub, 0), 0); /* the end is "work" */
	CHECK_EQ(crs_sub_dispatch(c->sub, &callbacks, c, 100), -CRS_EEND);
	CHECK(!memcmp(&before, c, sizeof(before)));
}

enum mode { IN_ON_NEXT, AFTER_END_SEEN };

struct child_arg {
	const char *name;
	enum mode mode;
};

/* One subscription, dispatched by hand. */
static int dispatcher(void *arg, int chan)
{
	const struct child_arg *a = arg;
	struct counts c = { .cancel_at = a->mode == IN_ON_NEXT ? CANCEL_AT
							       : 0 };
	CHECK_EQ(tu_sub_open(a->name, 32, &c.sub), 0);
	CHECK_EQ(tu_send(chan, DONE, 0), 0);
	CHECK_EQ(tu_expect(chan, GO, NULL, 30000), 0);
	if (a->mode == AFTER_END_SEEN) {
		/* Everything, the completion included, is there already:
		 * the first call delivers the messages and sees the end,
		 * which it would deliver at the next call. */
		CHECK_EQ(crs_sub_dispatch(c.sub, &callbacks, &c, 100), 5);
		crs_sub_cancel(c.sub);
	}
	int64_t deadline = tu_now_ms() + 20000;
	while (crs_sub_dispatch(c.sub, &callbacks, &c, 4) != -CRS_EEND) {
		CHECK(tu_now_ms() < deadline);
		crs_sub_wait(c.sub, 100);
	}
	after_end_nothing(&c);
	report(chan, &c);
	crs_sub_close(c.sub);
	return 0;
}

static pid_t start_child(tu_child_fn fn, void *arg, crs_pub **pubs, int npub,
			 int *chan)
{
	pid_t pid = tu_spawn(fn, arg, chan, 60);
	assert_true(pid > 0);
	int64_t deadline = tu_now_ms() + 10000;
	uint64_t tag = 0, val;
	while (tu_now_ms() < deadline) {
		for (int i = 0; i < npub; i++)
			crs_pub_serve(pubs[i]);
		if (tu_recv(*chan, &tag, &val, 2) == 0)
			break;
	}
	assert_int_equal(tag, DONE);
	for (int i = 0; i < npub; i++)
		assert_int_equal(tu_pub_await_count(pubs[i], 1, 10000), 0);
	return pid;
}

static void publish_and_complete(crs_pub *pub, int n)
{
	for (int seq = 0; seq < n; seq++)
		assert_int_equal(tu_pub_send(pub, (uint64_t)seq, LEN, 10000),
				 0);
	assert_int_equal(crs_pub_complete(pub), 0);
}

static void run_dispatcher(enum mode mode, int n, int next, int code)
{
	char name[64];
	tu_name(name, sizeof(name), "cancel");
	crs_pub *pub = tu_make_pub(name, 1 << 16);
	struct child_arg a = { name, mode };
	int chan;
	pid_t pid = start_child(dispatcher, &a, &pub, 1, &chan);
	publish_and_complete(pub, n);
	assert_int_equal(tu_send(chan, GO, 0), 0);
	expect_report(chan, next, 0, 0, code);
	assert_int_equal(tu_serve_wait_child(pub, pid, 10000), 0);
	close(chan);
	crs_pub_close(pub);
}

static void test_cancel_in_on_next(void **state)
{
	(void)state;
	run_dispatcher(IN_ON_NEXT, COUNT, CANCEL_AT, ECANCELED);
}

static void test_cancel_after_end_seen(void **state)
{
	(void)state;
	/* crs_sub_end() says it had completed, but no callback says so. */
	run_dispatcher(AFTER_END_SEEN, 5, 5, 0);
}

/* Two subscriptions in one crs_loop: the first cancels itself inside
 * its tenth on_next and leaves the loop without another callback; the
 * second gets all its messages and its completion. */
/* Is sub still registered? (Adding it again says, and is undone.) */
static int still_in(crs_loop *loop, struct counts *c)
{
	int r = crs_loop_add_sub(loop, c->sub, &callbacks, c);
	if (r == 0)
		CHECK_EQ(crs_loop_remove_sub(loop, c->sub), 0);
	return r == -EEXIST;
}

static int looper(void *arg, int chan)
{
	const char *const *names = arg;
	struct counts c[2] = { { .cancel_at = CANCEL_AT }, { 0 } };
	crs_loop *loop;
	CHECK_EQ(crs_loop_create(&loop), 0);
	for (int i = 0; i < 2; i++) {
		CHECK_EQ(tu_sub_open(names[i], 32, &c[i].sub), 0);
		CHECK_EQ(crs_loop_add_sub(loop, c[i].sub, &callbacks, &c[i]),
			 0);
	}
	CHECK_EQ(tu_send(chan, DONE, 0), 0);
	CHECK_EQ(tu_expect(chan, GO, NULL, 30000), 0);
	int64_t deadline = tu_now_ms() + 20000;
	int left[2] = { 0, 0 };
	while (!left[0] || !left[1]) {
		CHECK(tu_now_ms() < deadline);
		CHECK(crs_loop_run(loop, 100) >= 0);
		for (int i = 0; i < 2; i++)
			left[i] = !still_in(loop, &c[i]);
	}
	/* Nothing more from an empty loop. */
	CHECK_EQ(crs_loop_run(loop, 0), 0);
	for (int i = 0; i < 2; i++) {
		after_end_nothing(&c[i]);
		report(chan, &c[i]);
		crs_sub_close(c[i].sub);
	}
	crs_loop_close(loop);
	return 0;
}

static void test_cancel_in_loop(void **state)
{
	(void)state;
	char n0[64], n1[64];
	tu_name(n0, sizeof(n0), "lc");
	tu_name(n1, sizeof(n1), "lk");
	crs_pub *pubs[2] = { tu_make_pub(n0, 1 << 16), tu_make_pub(n1, 1 << 16) };
	const char *names[2] = { n0, n1 };
	int chan;
	pid_t pid = start_child(looper, names, pubs, 2, &chan);
	for (int i = 0; i < 2; i++)
		publish_and_complete(pubs[i], COUNT);
	assert_int_equal(tu_send(chan, GO, 0), 0);
	expect_report(chan, CANCEL_AT, 0, 0, ECANCELED);
	expect_report(chan, COUNT, 1, 0, 0);
	assert_int_equal(tu_wait_child(pid, 10000), 0);
	close(chan);
	for (int i = 0; i < 2; i++)
		crs_pub_close(pubs[i]);
}

int main(void)
{
	tu_init();
	const struct CMUnitTest tests[] = {
		TU_TEST(test_cancel_in_on_next),
		TU_TEST(test_cancel_after_end_seen),
		TU_TEST(test_cancel_in_loop),
	};
	return cmocka_run_group_tests(tests, NULL, NULL);
}
