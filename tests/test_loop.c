/*
 * test_loop.c - crs_loop: one subscriber process consuming 100 streams
 * from 100 publisher processes; a publisher SIGKILLed while the loop
 * sleeps; an idle loop that burns (almost) no CPU; the loop embedded in
 * epoll through crs_loop_fd(); a publisher served from a loop; a
 * registration removed while the caller sleeps on crs_loop_fd(). Every test
 * runs on the io_uring engine and again on the poll fallback
 * (CRS_NO_URING=1), chosen when the loop is created.
 */
#include <errno.h>
#include <poll.h>
#include <signal.h>
#include <stdlib.h>
#include <string.h>
#include <sys/epoll.h>
#include <sys/resource.h>

#include "util.h"

#define STREAMS 100
#define PER_STREAM 300

struct stream_state {
	uint64_t next;	/* next expected sequence (pattern) */
	int done;	/* 1 completed, -code failed */
	int bad;
};

static void on_next(void *ctx, const struct crs_msg *m)
{
	struct stream_state *s = ctx;
	if (m->seq != s->next || tu_verify(m->data, m->len, s->next) >= 0 ||
	    m->len != 16 + s->next % 64)
		s->bad++;
	s->next++;
}

static void on_complete(void *ctx)
{
	((struct stream_state *)ctx)->done = 1;
}

static void on_error(void *ctx, int code, const char *message)
{
	(void)message;
	((struct stream_state *)ctx)->done = -code;
}

static const struct crs_sub_callbacks callbacks = { on_next, on_complete,
						    on_error, NULL };

struct pub_args {
	char name[64];
	int count;
	int idle_ms; /* stay idle (publish nothing) this long first */
};

/* A publisher process: wait for one subscriber, publish count messages,
 * complete, wait until consumed. */
static int publisher(void *arg, int chan)
{
	(void)chan;
	struct pub_args *a = arg;
	crs_pub *pub;
	CHECK_EQ(crs_pub_create(a->name, NULL, &pub), 0);
	CHECK_EQ(crs_pub_wait_subscribers(pub, 1, 20000), 0);
	if (a->idle_ms)
		crs_pub_wait_subscribers(pub, 2, a->idle_ms);
	for (int i = 0; i < a->count; i++)
		CHECK_EQ(tu_pub_send(pub, (uint64_t)i, 16 + (size_t)i % 64,
				     20000),
			 0);
	CHECK_EQ(crs_pub_complete(pub), 0);
	CHECK_EQ(crs_pub_wait_consumed(pub, 20000), 0);
	crs_pub_close(pub);
	return 0;
}

static void use_engine(int no_uring)
{
	if (no_uring)
		setenv("CRS_NO_URING", "1", 1);
	else
		unsetenv("CRS_NO_URING");
}

static crs_loop *new_loop(int no_uring)
{
	crs_loop *loop;
	use_engine(no_uring);
	assert_int_equal(crs_loop_create(&loop), 0);
	assert_string_equal(crs_loop_engine(loop),
			    no_uring ? "poll" : "io_uring");
	return loop;
}

static void many_streams(int no_uring)
{
	static struct pub_args args[STREAMS];
	static struct stream_state st[STREAMS];
	static crs_sub *subs[STREAMS];
	pid_t pids[STREAMS];
	memset(st, 0, sizeof(st));
	for (int i = 0; i < STREAMS; i++) {
		tu_name(args[i].name, sizeof(args[i].name), "loop");
		args[i].count = PER_STREAM;
		pids[i] = tu_spawn_engine(publisher, &args[i], NULL, 60,
					  no_uring);
		assert_true(pids[i] > 0);
	}
	crs_loop *loop = new_loop(no_uring);
	for (int i = 0; i < STREAMS; i++) {
		assert_int_equal(tu_sub_open(args[i].name, 32, &subs[i]), 0);
		assert_int_equal(
			crs_loop_add_sub(loop, subs[i], &callbacks, &st[i]), 0);
	}
	int64_t deadline = tu_now_ms() + 60000;
	int done = 0;
	while (done < STREAMS && tu_now_ms() < deadline) {
		assert_true(crs_loop_run(loop, 1000) >= 0);
		done = 0;
		for (int i = 0; i < STREAMS; i++)
			done += st[i].done != 0;
	}
	for (int i = 0; i < STREAMS; i++) {
		assert_int_equal(st[i].done, 1);
		assert_int_equal(st[i].bad, 0);
		assert_int_equal(st[i].next, PER_STREAM);
		crs_sub_close(subs[i]);
	}
	for (int i = 0; i < STREAMS; i++)
		assert_int_equal(tu_wait_child(pids[i], 20000), 0);
	crs_loop_close(loop);
}

static void test_many_streams(void **state)
{
	(void)state;
	many_streams(0);
}

static void test_many_streams_poll(void **state)
{
	(void)state;
	many_streams(1);
}

static int idle_publisher(void *arg, int chan)
{
	struct pub_args *a = arg;
	crs_pub *pub;
	CHECK_EQ(crs_pub_create(a->name, NULL, &pub), 0);
	CHECK_EQ(tu_send(chan, 1, 0), 0); /* ready */
	/* Serve, then sleep until the parent says go (or goes away). */
	CHECK_EQ(crs_pub_wait_subscribers(pub, 1, 20000), 0);
	uint64_t tag;
	tu_recv(chan, &tag, NULL, 30000);
	for (int i = 0; i < a->count; i++)
		CHECK_EQ(tu_pub_send(pub, (uint64_t)i, 16 + (size_t)i % 64,
				     20000),
			 0);
	crs_pub_complete(pub);
	crs_pub_wait_consumed(pub, 20000);
	crs_pub_close(pub);
	return 0;
}

static void killed_while_sleeping(int no_uring)
{
	struct pub_args a = { .count = 0 };
	struct stream_state st = { 0 };
	int chan;
	tu_name(a.name, sizeof(a.name), "kill");
	pid_t pid = tu_spawn_engine(idle_publisher, &a, &chan, 60, no_uring);
	assert_int_equal(tu_expect(chan, 1, NULL, 10000), 0);
	crs_loop *loop = new_loop(no_uring);
	crs_sub *sub;
	assert_int_equal(tu_sub_open(a.name, 16, &sub), 0);
	assert_int_equal(crs_loop_add_sub(loop, sub, &callbacks, &st), 0);
	/* Let the loop fall asleep (long sleep phase) before the kill. */
	assert_int_equal(crs_loop_run(loop, 300), 0);
	tu_kill(pid);
	int64_t deadline = tu_now_ms() + 10000;
	while (!st.done && tu_now_ms() < deadline)
		assert_true(crs_loop_run(loop, 1000) >= 0);
	assert_int_equal(st.done, -EPIPE);
	assert_int_equal(crs_sub_end(sub)->code, EPIPE);
	crs_sub_close(sub);
	crs_loop_close(loop);
	close(chan);
}

static void test_killed_while_sleeping(void **state)
{
	(void)state;
	killed_while_sleeping(0);
}

static void test_killed_while_sleeping_poll(void **state)
{
	(void)state;
	killed_while_sleeping(1);
}

static double cpu_ms(void)
{
	struct rusage ru;
	getrusage(RUSAGE_SELF, &ru);
	return (double)(ru.ru_utime.tv_sec + ru.ru_stime.tv_sec) * 1e3 +
	       (double)(ru.ru_utime.tv_usec + ru.ru_stime.tv_usec) / 1e3;
}

/* Ten idle streams: two seconds in the loop cost under 20 ms of CPU. */
static void idle(int no_uring)
{
	enum { N = 10 };
	struct pub_args a[N];
	struct stream_state st[N];
	crs_sub *subs[N];
	int chan[N];
	pid_t pids[N];
	memset(st, 0, sizeof(st));
	for (int i = 0; i < N; i++) {
		tu_name(a[i].name, sizeof(a[i].name), "idle");
		a[i].count = 10;
		pids[i] = tu_spawn_engine(idle_publisher, &a[i], &chan[i], 60,
					  no_uring);
		assert_int_equal(tu_expect(chan[i], 1, NULL, 10000), 0);
	}
	crs_loop *loop = new_loop(no_uring);
	for (int i = 0; i < N; i++) {
		assert_int_equal(tu_sub_open(a[i].name, 16, &subs[i]), 0);
		assert_int_equal(
			crs_loop_add_sub(loop, subs[i], &callbacks, &st[i]), 0);
	}
	crs_loop_run(loop, 100); /* settle */
	double before = cpu_ms();
	int64_t t0 = tu_now_ms();
	int calls = 0;
	while (tu_now_ms() - t0 < 2000)
		calls += crs_loop_run(loop, (int)(2000 - (tu_now_ms() - t0)));
	double used = cpu_ms() - before;
	print_message("idle loop (%s): %.2f ms CPU in 2 s\n",
		      crs_loop_engine(loop), used);
	assert_int_equal(calls, 0);
	assert_true(used < 20.0);
	/* And the streams still work after the long sleep. */
	for (int i = 0; i < N; i++)
		tu_send(chan[i], 2, 0);
	int64_t deadline = tu_now_ms() + 20000;
	int done = 0;
	while (done < N && tu_now_ms() < deadline) {
		crs_loop_run(loop, 1000);
		done = 0;
		for (int i = 0; i < N; i++)
			done += st[i].done == 1;
	}
	for (int i = 0; i < N; i++) {
		assert_int_equal(st[i].done, 1);
		assert_int_equal(st[i].next, 10);
		assert_int_equal(st[i].bad, 0);
		crs_sub_close(subs[i]);
		assert_int_equal(tu_wait_child(pids[i], 20000), 0);
		close(chan[i]);
	}
	crs_loop_close(loop);
}

static void test_idle(void **state)
{
	(void)state;
	idle(0);
}

static void test_idle_poll(void **state)
{
	(void)state;
	idle(1);
}

/* The loop inside someone else's epoll: sleep in epoll_wait on
 * crs_loop_fd(), then run the loop without blocking. */
static void epoll_embedding(int no_uring)
{
	struct pub_args a = { .count = 2000 };
	struct stream_state st = { 0 };
	tu_name(a.name, sizeof(a.name), "epoll");
	pid_t pid = tu_spawn_engine(publisher, &a, NULL, 60, no_uring);
	crs_loop *loop = new_loop(no_uring);
	crs_sub *sub;
	assert_int_equal(tu_sub_open(a.name, 64, &sub), 0);
	assert_int_equal(crs_loop_add_sub(loop, sub, &callbacks, &st), 0);
	int lfd = crs_loop_fd(loop);
	assert_true(lfd >= 0);
	int ep = epoll_create1(0);
	struct epoll_event ev = { .events = EPOLLIN };
	assert_int_equal(epoll_ctl(ep, EPOLL_CTL_ADD, lfd, &ev), 0);
	int64_t deadline = tu_now_ms() + 30000;
	int wakeups = 0, timeouts = 0;
	while (!st.done && tu_now_ms() < deadline) {
		struct epoll_event out;
		/* io_uring posts completions with task work, which cuts
		 * a sleeping epoll_wait short with EINTR: a wakeup too. */
		int r = epoll_wait(ep, &out, 1, 1000);
		if (r == 1 || (r < 0 && errno == EINTR))
			wakeups++;
		else if (r == 0)
			timeouts++;
		else
			fail_msg("epoll_wait: %s", strerror(errno));
		assert_true(crs_loop_run(loop, 0) >= 0);
	}
	print_message("epoll: %d wakeups, %d timeouts\n", wakeups, timeouts);
	assert_int_equal(st.done, 1);
	assert_int_equal(st.next, 2000);
	assert_int_equal(st.bad, 0);
	assert_true(wakeups > 0);
	crs_sub_close(sub);
	assert_int_equal(tu_wait_child(pid, 20000), 0);
	close(ep);
	crs_loop_close(loop);
}

static void test_epoll_embedding(void **state)
{
	(void)state;
	epoll_embedding(0);
}

/* The fallback engine's fd: an eventfd its watcher thread signals. */
static void test_epoll_embedding_poll(void **state)
{
	(void)state;
	epoll_embedding(1);
}

/* A publisher driven by the loop: on_ready publishes what demand allows;
 * a subscriber process verifies everything arrives. */
struct feeder {
	int sent;
	int total;
	int calls;
};

static void feed(void *ctx, crs_pub *pub)
{
	struct feeder *f = ctx;
	f->calls++;
	while (f->sent < f->total) {
		void *buf;
		size_t len = 16 + (size_t)f->sent % 64;
		if (crs_pub_claim(pub, len, &buf) != 0)
			return;
		tu_fill(buf, len, (uint64_t)f->sent);
		crs_pub_commit(pub, len);
		f->sent++;
	}
}

static int verifying_subscriber(void *arg, int chan)
{
	(void)chan;
	const char *name = arg;
	crs_sub *sub;
	CHECK_EQ(tu_sub_open(name, 8, &sub), 0);
	struct crs_msg m;
	uint64_t n = 0;
	int r;
	while ((r = tu_sub_next(sub, &m, 20000)) == 1) {
		CHECK_EQ(m.seq, n);
		CHECK(tu_verify(m.data, m.len, n) < 0);
		n++;
	}
	CHECK_EQ(r, -CRS_EEND);
	CHECK_EQ(crs_sub_end(sub)->code, 0);
	CHECK_EQ(n, 5000);
	crs_sub_close(sub);
	return 0;
}

static void publisher_in_loop(int no_uring)
{
	char name[64];
	tu_name(name, sizeof(name), "feed");
	crs_loop *loop = new_loop(no_uring);
	crs_pub *pub;
	assert_int_equal(crs_pub_create(name, NULL, &pub), 0);
	struct feeder f = { .total = 5000 };
	assert_int_equal(crs_loop_add_pub(loop, pub, feed, &f), 0);
	pid_t pid = tu_spawn_engine(verifying_subscriber, name, NULL, 60,
				    no_uring);
	int64_t deadline = tu_now_ms() + 30000;
	while (f.sent < f.total && tu_now_ms() < deadline)
		assert_true(crs_loop_run(loop, 1000) >= 0);
	assert_int_equal(f.sent, f.total);
	assert_true(f.calls > 1); /* small prefetch: many demand rounds */
	assert_int_equal(crs_pub_complete(pub), 0);
	assert_int_equal(crs_pub_wait_consumed(pub, 20000), 0);
	assert_int_equal(tu_serve_wait_child(pub, pid, 20000), 0);
	crs_loop_remove_pub(loop, pub);
	crs_pub_close(pub);
	crs_loop_close(loop);
}

static void test_publisher_in_loop(void **state)
{
	(void)state;
	publisher_in_loop(0);
}

static void test_publisher_in_loop_poll(void **state)
{
	(void)state;
	publisher_in_loop(1);
}

/* A subscriber that never requests, until it is killed. */
static int idle_holder(void *arg, int chan)
{
	crs_sub *sub;
	CHECK_EQ(tu_sub_open(arg, 0, &sub), 0);
	CHECK_EQ(tu_send(chan, 1, 0), 0);
	for (;;)
		pause();
}

/* A subscriber that requests 5 a while after joining and reads them. */
static int late_requester(void *arg, int chan)
{
	(void)chan;
	crs_sub *sub;
	CHECK_EQ(tu_sub_open(arg, 0, &sub), 0);
	tu_sleep_ms(300);
	CHECK_EQ(crs_sub_request(sub, 5), 0);
	struct crs_msg m;
	for (uint64_t n = 0; n < 5; n++) {
		CHECK_EQ(tu_sub_next(sub, &m, 10000), 1);
		CHECK(tu_verify(m.data, m.len, m.seq) < 0);
	}
	crs_sub_close(sub);
	return 0;
}

/* A subscriber slot dropped and refilled while the loop sleeps: the new
 * subscriber's control words may sit at the old address with the old
 * values, yet the loop must wake for the new one (and, on the poll
 * engine, never touch the old, unmapped words). With the waits of the
 * old slot kept armed, this loop would sleep forever. */
static void slot_reuse(int no_uring)
{
	char name[64];
	tu_name(name, sizeof(name), "reuse");
	crs_loop *loop = new_loop(no_uring);
	crs_pub *pub;
	assert_int_equal(crs_pub_create(name, NULL, &pub), 0);
	struct feeder f = { .total = 5 };
	assert_int_equal(crs_loop_add_pub(loop, pub, feed, &f), 0);
	int chan;
	pid_t a = tu_spawn_engine(idle_holder, name, &chan, 60, no_uring);
	int64_t deadline = tu_now_ms() + 10000;
	while (crs_pub_subscribers(pub) < 1 && tu_now_ms() < deadline)
		crs_loop_run(loop, 50);
	assert_int_equal(tu_expect(chan, 1, NULL, 10000), 0);
	for (int i = 0; i < 3; i++) /* sleep armed on A's words */
		crs_loop_run(loop, 20);
	tu_kill(a);
	close(chan);
	pid_t b = tu_spawn_engine(late_requester, name, NULL, 60, no_uring);
	tu_sleep_ms(100); /* A's hangup and B's hello wait together */
	while (f.sent < f.total)
		assert_true(crs_loop_run(loop, -1) >= 0);
	assert_int_equal(tu_serve_wait_child(pub, b, 20000), 0);
	crs_loop_remove_pub(loop, pub);
	crs_pub_close(pub);
	crs_loop_close(loop);
}

static void test_slot_reuse(void **state)
{
	(void)state;
	slot_reuse(0);
}

static void test_slot_reuse_poll(void **state)
{
	(void)state;
	slot_reuse(1);
}

/* A registration removed between runs, while the caller sleeps on
 * crs_loop_fd(): the fd must still wake for the ones that stay. The
 * fallback engine's watcher used to stop at any removal and start again
 * only at the next add or run, so the fd stayed quiet (asyncio awaited
 * for ever). Stream a publishes only after the test, b after 300 ms. */
static void remove_between_runs(int no_uring)
{
	struct pub_args a = { .count = 5, .idle_ms = 1500 };
	struct pub_args b = { .count = 50, .idle_ms = 300 };
	struct stream_state sa = { 0 }, sb = { 0 };
	tu_name(a.name, sizeof(a.name), "rma");
	tu_name(b.name, sizeof(b.name), "rmb");
	pid_t pa = tu_spawn_engine(publisher, &a, NULL, 60, no_uring);
	pid_t pb = tu_spawn_engine(publisher, &b, NULL, 60, no_uring);
	crs_loop *loop = new_loop(no_uring);
	crs_sub *suba, *subb;
	assert_int_equal(tu_sub_open(a.name, 64, &suba), 0);
	assert_int_equal(tu_sub_open(b.name, 64, &subb), 0);
	assert_int_equal(crs_loop_add_sub(loop, suba, &callbacks, &sa), 0);
	assert_int_equal(crs_loop_add_sub(loop, subb, &callbacks, &sb), 0);
	int lfd = crs_loop_fd(loop);
	assert_true(lfd >= 0);
	assert_true(crs_loop_run(loop, 0) >= 0);
	assert_int_equal(crs_loop_remove_sub(loop, suba), 0);
	struct pollfd p = { .fd = lfd, .events = POLLIN };
	assert_int_equal(poll(&p, 1, 10000), 1); /* b's messages */
	int64_t deadline = tu_now_ms() + 20000;
	while (!sb.done && tu_now_ms() < deadline) {
		p.revents = 0;
		if (poll(&p, 1, 1000) < 0 && errno != EINTR)
			fail_msg("poll: %s", strerror(errno));
		assert_true(crs_loop_run(loop, 0) >= 0);
	}
	assert_int_equal(sb.done, 1);
	assert_int_equal(sb.next, 50);
	assert_int_equal(sb.bad, 0);
	assert_int_equal(sa.next, 0); /* removed before a published */
	/* Stream a, read without the loop: all of it, then the end. */
	struct crs_msg m;
	for (uint64_t i = 0; i < 5; i++) {
		assert_int_equal(tu_sub_next(suba, &m, 20000), 1);
		assert_int_equal(m.seq, i);
		crs_sub_release(suba);
	}
	assert_int_equal(tu_sub_next(suba, &m, 20000), -CRS_EEND);
	crs_sub_close(suba);
	crs_sub_close(subb);
	assert_int_equal(tu_wait_child(pa, 20000), 0);
	assert_int_equal(tu_wait_child(pb, 20000), 0);
	crs_loop_close(loop);
}

static void test_remove_between_runs(void **state)
{
	(void)state;
	remove_between_runs(0);
}

static void test_remove_between_runs_poll(void **state)
{
	(void)state;
	remove_between_runs(1);
}

int main(void)
{
	tu_init();
	const struct CMUnitTest tests[] = {
		TU_TEST(test_many_streams),
		TU_TEST(test_many_streams_poll),
		TU_TEST(test_killed_while_sleeping),
		TU_TEST(test_killed_while_sleeping_poll),
		TU_TEST(test_idle),
		TU_TEST(test_idle_poll),
		TU_TEST(test_epoll_embedding),
		TU_TEST(test_epoll_embedding_poll),
		TU_TEST(test_publisher_in_loop),
		TU_TEST(test_publisher_in_loop_poll),
		TU_TEST(test_slot_reuse),
		TU_TEST(test_slot_reuse_poll),
		TU_TEST(test_remove_between_runs),
		TU_TEST(test_remove_between_runs_poll),
	};
	return cmocka_run_group_tests(tests, NULL, NULL);
}
