/*
 * test_follow.c - following a name across publisher restarts, and
 * opening without blocking, across processes.
 *
 * Follow: the test process subscribes once (crs_sub_opts.follow) while
 * publisher processes come and go under the same name: one completes
 * and closes, the next dies, the third completes. The subscription gets
 * each stream's messages, then its end, then an explicit gap signal
 * (-CRS_EGAP from crs_sub_poll, on_gap in a crs_loop) with the new
 * publisher's stream id, then the next stream's messages - by polling
 * and waiting, and inside a crs_loop, where it stays registered.
 *
 * Async open: a subscription opened with crs_sub_opts.async inside a
 * loop, to a publisher that is stopped (SIGSTOP) and so cannot answer
 * the handshake, leaves the loop serving an fd meanwhile; once the
 * publisher runs again the messages arrive. An async open of a stream
 * that does not exist ends with ENOENT; one that waits sees the stream
 * appear later.
 */
#include <errno.h>
#include <poll.h>
#include <signal.h>
#include <string.h>

#include "util.h"

#define LEN 64

enum { READY = 400, PUBLISHED, DIE };
enum { COMPLETE_AND_CLOSE, DIE_WHEN_TOLD };

struct pub_arg {
	const char *name;
	int n;	 /* messages, seq 0 .. n-1 */
	int how; /* COMPLETE_AND_CLOSE or DIE_WHEN_TOLD */
};

static int publisher(void *arg, int chan)
{
	const struct pub_arg *a = arg;
	crs_pub *pub;
	CHECK_EQ(crs_pub_create(a->name, NULL, &pub), 0);
	CHECK_EQ(tu_send(chan, READY, 0), 0);
	CHECK_EQ(tu_pub_await_count(pub, 1, 30000), 0);
	for (int seq = 0; seq < a->n; seq++)
		CHECK_EQ(tu_pub_send(pub, (uint64_t)seq, LEN, 20000), 0);
	if (a->how == COMPLETE_AND_CLOSE) {
		CHECK_EQ(crs_pub_complete(pub), 0);
		crs_pub_close(pub);
		return 0;
	}
	CHECK_EQ(tu_send(chan, PUBLISHED, 0), 0);
	uint64_t tag, val;
	tu_recv(chan, &tag, &val, 30000);
	_exit(0); /* dies: no close, no terminal record */
}

static pid_t start_publisher(struct pub_arg *a, int *chan)
{
	pid_t pid = tu_spawn(publisher, a, chan, 60);
	assert_true(pid > 0);
	assert_int_equal(tu_expect(*chan, READY, NULL, 10000), 0);
	return pid;
}

/* ---- polling ------------------------------------------------------------ */

/* Poll (waiting in between) until something other than "nothing". */
static int next_event(crs_sub *sub, struct crs_msg *m)
{
	int64_t deadline = tu_now_ms() + 20000;
	for (;;) {
		int r = crs_sub_poll(sub, m);
		if (r != 0 || tu_now_ms() > deadline)
			return r;
		crs_sub_wait(sub, 100);
	}
}

static void expect_messages(crs_sub *sub, int n)
{
	struct crs_msg m;
	for (int seq = 0; seq < n; seq++) {
		assert_int_equal(next_event(sub, &m), 1);
		assert_int_equal(m.seq, seq);
		assert_int_equal(m.len, LEN);
		assert_int_equal(tu_verify(m.data, m.len, m.seq), -1);
	}
}

static void expect_end(crs_sub *sub, int code)
{
	struct crs_msg m;
	assert_int_equal(next_event(sub, &m), -CRS_EEND);
	assert_non_null(crs_sub_end(sub));
	assert_int_equal(crs_sub_end(sub)->code, code);
}

/* The gap signal, once, and a new stream id; returns it. */
static uint64_t expect_gap(crs_sub *sub, uint64_t old_id)
{
	struct crs_msg m;
	assert_int_equal(next_event(sub, &m), -CRS_EGAP);
	assert_null(crs_sub_end(sub));
	uint64_t id = crs_sub_stream_id(sub);
	assert_true(id != 0 && id != old_id);
	return id;
}

static void test_follow_poll(void **state)
{
	(void)state;
	char name[64];
	tu_name(name, sizeof(name), "follow");
	struct pub_arg p1 = { name, 5, COMPLETE_AND_CLOSE };
	struct pub_arg p2 = { name, 3, DIE_WHEN_TOLD };
	struct pub_arg p3 = { name, 2, COMPLETE_AND_CLOSE };
	int c1, c2, c3;
	pid_t pid1 = start_publisher(&p1, &c1);
	struct crs_sub_opts o;
	crs_sub_opts_init(&o);
	o.prefetch = 16;
	o.wait_ms = 10000;
	o.follow = 1;
	crs_sub *sub;
	assert_int_equal(crs_sub_open(name, &o, &sub), 0);
	uint64_t id = crs_sub_stream_id(sub);
	assert_true(id != 0);

	/* 1: completes and closes. */
	expect_messages(sub, 5);
	expect_end(sub, 0);
	assert_int_equal(tu_wait_child(pid1, 10000), 0);
	struct crs_msg m;
	assert_int_equal(crs_sub_poll(sub, &m), 0); /* nobody there yet */

	/* 2: dies after its messages. */
	pid_t pid2 = start_publisher(&p2, &c2);
	id = expect_gap(sub, id);
	expect_messages(sub, 3);
	assert_int_equal(tu_expect(c2, PUBLISHED, NULL, 10000), 0);
	assert_int_equal(tu_send(c2, DIE, 0), 0);
	assert_int_equal(tu_wait_child(pid2, 10000), 0);
	expect_end(sub, EPIPE);

	/* 3: takes over the dead one's leftovers. */
	pid_t pid3 = start_publisher(&p3, &c3);
	id = expect_gap(sub, id);
	expect_messages(sub, 2);
	expect_end(sub, 0);
	assert_int_equal(tu_wait_child(pid3, 10000), 0);
	assert_int_equal(crs_sub_received(sub), 10);
	assert_true(crs_sub_requested(sub) >= 10);

	/* A cancel stops following: the end stays. */
	crs_sub_cancel(sub);
	assert_int_equal(crs_sub_poll(sub, &m), -CRS_EEND);
	assert_int_equal(crs_sub_poll(sub, &m), -CRS_EEND);
	crs_sub_close(sub);
	close(c1);
	close(c2);
	close(c3);
}

/* A publisher that evicts its only subscriber (it requests nothing, so
 * it holds the lockstep stream back), then closes. */
static int evicting_publisher(void *arg, int chan)
{
	const char *name = arg;
	struct crs_pub_opts o;
	crs_pub_opts_init(&o);
	o.untethered_ms = 100;
	crs_pub *pub;
	CHECK_EQ(crs_pub_create(name, &o, &pub), 0);
	CHECK_EQ(tu_send(chan, READY, 0), 0);
	CHECK_EQ(tu_pub_await_count(pub, 1, 30000), 0);
	int64_t deadline = tu_now_ms() + 20000;
	while (crs_pub_subscribers(pub) > 0 && tu_now_ms() < deadline)
		crs_pub_wait(pub, LEN, 50); /* evicts on the way */
	CHECK_EQ(crs_pub_subscribers(pub), 0);
	crs_pub_close(pub);
	return 0;
}

/* An end of the subscriber's own making (here: evicted as a slow
 * consumer) stops following: a new publisher of the name is not
 * followed, the end stays. */
static void test_follow_stops_at_eviction(void **state)
{
	(void)state;
	char name[64];
	tu_name(name, sizeof(name), "evict");
	int c1, c2;
	pid_t pid1 = tu_spawn(evicting_publisher, name, &c1, 60);
	assert_int_equal(tu_expect(c1, READY, NULL, 10000), 0);
	struct crs_sub_opts o;
	crs_sub_opts_init(&o);
	o.prefetch = 0;
	o.follow = 1;
	o.wait_ms = 10000;
	crs_sub *sub;
	assert_int_equal(crs_sub_open(name, &o, &sub), 0);
	expect_end(sub, ETIMEDOUT);
	assert_int_equal(tu_wait_child(pid1, 10000), 0);
	struct pub_arg p2 = { name, 1, COMPLETE_AND_CLOSE };
	pid_t pid2 = start_publisher(&p2, &c2);
	struct crs_msg m;
	for (int i = 0; i < 5; i++) {
		assert_int_equal(crs_sub_poll(sub, &m), -CRS_EEND);
		assert_int_equal(crs_sub_wait(sub, 20), 0); /* the end */
	}
	assert_int_equal(crs_sub_end(sub)->code, ETIMEDOUT);
	crs_sub_close(sub);
	tu_kill(pid2);
	close(c1);
	close(c2);
}

/* ---- in a loop ---------------------------------------------------------- */

struct events {
	char log[256]; /* n: message, C: complete, E: error, G: gap, F: fd */
	int len;
	int bad;
	int code;
	uint64_t expect_seq;
};

static void add(struct events *e, char c)
{
	if (e->len < (int)sizeof(e->log) - 1)
		e->log[e->len++] = c;
}

static void ev_next(void *ctx, const struct crs_msg *m)
{
	struct events *e = ctx;
	if (m->seq != e->expect_seq++ || m->len != LEN ||
	    tu_verify(m->data, m->len, m->seq) != -1)
		e->bad++;
	add(e, 'n');
}

static void ev_complete(void *ctx)
{
	add(ctx, 'C');
}

static void ev_error(void *ctx, int code, const char *message)
{
	(void)message;
	struct events *e = ctx;
	e->code = code;
	add(e, 'E');
}

static void ev_gap(void *ctx)
{
	struct events *e = ctx;
	e->expect_seq = 0; /* the new publisher counts from 0 */
	add(e, 'G');
}

static void ev_fd(void *ctx, int fd, short revents)
{
	(void)revents;
	char b;
	if (read(fd, &b, 1) == 1)
		add(ctx, 'F');
}

static const struct crs_sub_callbacks ev_callbacks = {
	.on_next = ev_next,
	.on_complete = ev_complete,
	.on_error = ev_error,
	.on_gap = ev_gap,
};

/* Run the loop until the log reads want. */
static void run_until(crs_loop *loop, struct events *e, const char *want)
{
	int64_t deadline = tu_now_ms() + 20000;
	while ((size_t)e->len < strlen(want) && tu_now_ms() < deadline)
		assert_true(crs_loop_run(loop, 100) >= 0);
	e->log[e->len] = 0;
	assert_string_equal(e->log, want);
	assert_int_equal(e->bad, 0);
}

/* Is sub still registered? (Adding it again says, and is undone.) */
static int still_in(crs_loop *loop, crs_sub *sub, struct events *e)
{
	int r = crs_loop_add_sub(loop, sub, &ev_callbacks, e);
	if (r == 0)
		assert_int_equal(crs_loop_remove_sub(loop, sub), 0);
	return r == -EEXIST;
}

static void test_follow_loop(void **state)
{
	(void)state;
	char name[64];
	tu_name(name, sizeof(name), "lfollow");
	struct pub_arg p1 = { name, 5, COMPLETE_AND_CLOSE };
	struct pub_arg p2 = { name, 3, DIE_WHEN_TOLD };
	struct pub_arg p3 = { name, 2, COMPLETE_AND_CLOSE };
	int c1, c2, c3;
	struct crs_sub_opts o;
	crs_sub_opts_init(&o);
	o.prefetch = 16;
	o.follow = 1;
	o.async = 1;
	o.wait_ms = -1;
	crs_sub *sub;
	/* Opened before any publisher exists: it waits in the loop. */
	assert_int_equal(crs_sub_open(name, &o, &sub), 0);
	assert_int_equal(crs_sub_stream_id(sub), 0);
	crs_loop *loop;
	assert_int_equal(crs_loop_create(&loop), 0);
	struct events e = { 0 };
	assert_int_equal(crs_loop_add_sub(loop, sub, &ev_callbacks, &e), 0);
	assert_int_equal(crs_loop_run(loop, 20), 0);

	pid_t pid1 = start_publisher(&p1, &c1);
	run_until(loop, &e, "nnnnnC");
	assert_true(still_in(loop, sub, &e));
	assert_int_equal(tu_wait_child(pid1, 10000), 0);

	pid_t pid2 = start_publisher(&p2, &c2);
	run_until(loop, &e, "nnnnnCGnnn");
	assert_int_equal(tu_expect(c2, PUBLISHED, NULL, 10000), 0);
	assert_int_equal(tu_send(c2, DIE, 0), 0);
	assert_int_equal(tu_wait_child(pid2, 10000), 0);
	run_until(loop, &e, "nnnnnCGnnnE");
	assert_int_equal(e.code, EPIPE);
	assert_true(still_in(loop, sub, &e));

	pid_t pid3 = start_publisher(&p3, &c3);
	run_until(loop, &e, "nnnnnCGnnnEGnnC");
	assert_int_equal(tu_wait_child(pid3, 10000), 0);

	/* Cancelled, it leaves the loop without another callback. */
	crs_sub_cancel(sub);
	assert_int_equal(crs_loop_run(loop, 0), 0);
	assert_false(still_in(loop, sub, &e));
	e.log[e.len] = 0;
	assert_string_equal(e.log, "nnnnnCGnnnEGnnC");
	crs_loop_close(loop);
	crs_sub_close(sub);
	close(c1);
	close(c2);
	close(c3);
}

/* ---- async open ----------------------------------------------------------- */

static void test_async_open_does_not_block_loop(void **state)
{
	(void)state;
	char name[64];
	tu_name(name, sizeof(name), "async");
	struct pub_arg p = { name, 3, COMPLETE_AND_CLOSE };
	int chan;
	pid_t pid = start_publisher(&p, &chan);
	assert_int_equal(kill(pid, SIGSTOP), 0); /* cannot answer now */

	crs_loop *loop;
	assert_int_equal(crs_loop_create(&loop), 0);
	struct events e = { 0 };
	int fds[2];
	assert_int_equal(pipe(fds), 0);
	assert_int_equal(crs_loop_add_fd(loop, fds[0], POLLIN, ev_fd, &e), 0);
	struct crs_sub_opts o;
	crs_sub_opts_init(&o);
	o.async = 1;
	o.handshake_ms = -1; /* only the publisher's answer ends the open */
	crs_sub *sub;
	assert_int_equal(crs_sub_open(name, &o, &sub), 0);
	assert_int_equal(crs_loop_add_sub(loop, sub, &ev_callbacks, &e), 0);
	struct crs_msg m;
	assert_int_equal(crs_sub_poll(sub, &m), 0); /* connected, waiting */

	/* The loop runs its other work while the open waits. */
	for (int i = 0; i < 3; i++) {
		assert_int_equal(write(fds[1], "x", 1), 1);
		char want[4] = "FFF";
		want[i + 1] = 0;
		run_until(loop, &e, want);
	}
	assert_int_equal(kill(pid, SIGCONT), 0);
	run_until(loop, &e, "FFFnnnC");
	assert_int_equal(tu_wait_child(pid, 10000), 0);
	crs_loop_close(loop);
	crs_sub_close(sub);
	close(fds[0]);
	close(fds[1]);
	close(chan);
}

static void test_async_open_missing(void **state)
{
	(void)state;
	char name[64];
	tu_name(name, sizeof(name), "nosuch");
	struct crs_sub_opts o;
	crs_sub_opts_init(&o);
	o.async = 1; /* wait_ms 0: one attempt */
	crs_sub *sub;
	assert_int_equal(crs_sub_open(name, &o, &sub), 0);
	struct crs_msg m;
	assert_int_equal(crs_sub_poll(sub, &m), -CRS_EEND);
	assert_int_equal(crs_sub_end(sub)->code, ENOENT);
	crs_sub_close(sub);

	/* The same in a loop: on_error(ENOENT), and it leaves. */
	assert_int_equal(crs_sub_open(name, &o, &sub), 0);
	crs_loop *loop;
	assert_int_equal(crs_loop_create(&loop), 0);
	struct events e = { 0 };
	assert_int_equal(crs_loop_add_sub(loop, sub, &ev_callbacks, &e), 0);
	run_until(loop, &e, "E");
	assert_int_equal(e.code, ENOENT);
	assert_false(still_in(loop, sub, &e));
	crs_loop_close(loop);
	crs_sub_close(sub);
	assert_int_equal(crs_sub_open("bad/name", &o, &sub), -EINVAL);
}

/* Waiting for a stream that appears later: the directory watch (or
 * the retry timer) finds it, by crs_sub_wait alone. */
static void test_async_open_appears(void **state)
{
	(void)state;
	char name[64];
	tu_name(name, sizeof(name), "later");
	struct crs_sub_opts o;
	crs_sub_opts_init(&o);
	o.async = 1;
	o.wait_ms = 20000;
	o.prefetch = 8;
	crs_sub *sub;
	assert_int_equal(crs_sub_open(name, &o, &sub), 0);
	assert_int_equal(crs_sub_wait(sub, 50), -ETIMEDOUT);
	struct pub_arg p = { name, 4, COMPLETE_AND_CLOSE };
	int chan;
	pid_t pid = start_publisher(&p, &chan);
	expect_messages(sub, 4);
	expect_end(sub, 0);
	assert_int_equal(tu_wait_child(pid, 10000), 0);
	crs_sub_close(sub);
	close(chan);
}

int main(void)
{
	tu_init();
	const struct CMUnitTest tests[] = {
		TU_TEST(test_follow_poll),
		TU_TEST(test_follow_stops_at_eviction),
		TU_TEST(test_follow_loop),
		TU_TEST(test_async_open_does_not_block_loop),
		TU_TEST(test_async_open_missing),
		TU_TEST(test_async_open_appears),
	};
	return cmocka_run_group_tests(tests, NULL, NULL);
}
