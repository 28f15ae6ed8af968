/*
 * test_review.c - regressions found in review, each with real processes
 * and real shared memory:
 *   - a subscription added to a loop after crs_loop_fd() was taken must
 *     make that fd readable when its messages arrive (it used to stay
 *     unannounced until the next crs_loop_run, which never came);
 *   - on the poll engine, a following subscription whose publisher was
 *     SIGKILLed after its end was delivered leaves the old stream (and
 *     unmaps it) inside a run that another registration keeps busy:
 *     the next run must not look at the old stream's data_signal (it
 *     used to read the unmapped word and die of SIGSEGV), and the
 *     subscription must go on to the next publisher of the name;
 *   - a request made between runs of a loop whose fd is watched, with
 *     messages already there (replay: the publisher ran ahead), must
 *     make the fd readable: nothing else would look;
 *   - on the fallback engines, whose loop fd is served by a watcher
 *     thread, a subscriber dropped by the application's own calls
 *     between runs (crs_pub_serve) must not crash the watcher, which
 *     used to read the dropped slot's unmapped progress word.
 */
#include <errno.h>
#include <poll.h>
#include <signal.h>
#include <string.h>
#include <sys/wait.h>
#include <time.h>

#include "util.h"

#define COUNT 500

struct got {
	uint64_t next;
	int done;
	int bad;
};

static void on_next(void *ctx, const struct crs_msg *m)
{
	struct got *g = ctx;
	if (m->seq != g->next || tu_verify(m->data, m->len, g->next) >= 0)
		g->bad++;
	g->next++;
}

static void on_complete(void *ctx)
{
	((struct got *)ctx)->done = 1;
}

static void on_error(void *ctx, int code, const char *message)
{
	(void)message;
	((struct got *)ctx)->done = -code;
}

static const struct crs_sub_callbacks callbacks = { on_next, on_complete,
						    on_error, NULL };

/* Waits for one subscriber, publishes COUNT, completes. */
static int publisher(void *arg, int chan)
{
	(void)chan;
	crs_pub *pub;
	CHECK_EQ(crs_pub_create(arg, NULL, &pub), 0);
	CHECK_EQ(crs_pub_wait_subscribers(pub, 1, 20000), 0);
	for (int i = 0; i < COUNT; i++)
		CHECK_EQ(tu_pub_send(pub, (uint64_t)i, 16 + (size_t)i % 64,
				     20000),
			 0);
	CHECK_EQ(crs_pub_complete(pub), 0);
	CHECK_EQ(crs_pub_wait_consumed(pub, 20000), 0);
	crs_pub_close(pub);
	return 0;
}

/* Take the loop's fd first, add the subscription afterwards, and then
 * only ever run the loop when the fd says so. Every poll must end with
 * the fd readable (or EINTR, io_uring's task work): a poll that sleeps
 * out its 10 s means the wakeup was lost. */
static void test_add_after_loop_fd(void **state)
{
	(void)state;
	unsetenv("CRS_NO_URING");
	char name[64];
	tu_name(name, sizeof(name), "addfd");
	pid_t pid = tu_spawn(publisher, name, NULL, 60);
	crs_loop *loop;
	assert_int_equal(crs_loop_create(&loop), 0);
	int lfd = crs_loop_fd(loop);
	assert_true(lfd >= 0);
	crs_sub *sub;
	struct got g = { 0 };
	assert_int_equal(tu_sub_open(name, 64, &sub), 0);
	assert_int_equal(crs_loop_add_sub(loop, sub, &callbacks, &g), 0);
	int lost = 0;
	while (!g.done && !lost) {
		struct pollfd p = { .fd = lfd, .events = POLLIN };
		int r = poll(&p, 1, 10000);
		if (r == 0)
			lost = 1;
		else if (r < 0 && errno != EINTR)
			fail_msg("poll: %s", strerror(errno));
		assert_true(crs_loop_run(loop, 0) >= 0);
	}
	assert_int_equal(lost, 0);
	assert_int_equal(g.done, 1);
	assert_int_equal(g.next, COUNT);
	assert_int_equal(g.bad, 0);
	crs_sub_close(sub);
	assert_int_equal(tu_wait_child(pid, 20000), 0);
	crs_loop_close(loop);
}

enum { PUB_DONE = 500, PARKED, KILLED, NEXT_UP };

struct follow_state {
	struct got g;
	int gaps;
	int fd_calls;
};

static void f_on_next(void *ctx, const struct crs_msg *m)
{
	on_next(&((struct follow_state *)ctx)->g, m);
}

static void f_on_complete(void *ctx)
{
	on_complete(&((struct follow_state *)ctx)->g);
}

static void f_on_error(void *ctx, int code, const char *message)
{
	on_error(&((struct follow_state *)ctx)->g, code, message);
}

static void f_on_gap(void *ctx)
{
	struct follow_state *f = ctx;
	f->gaps++;
	memset(&f->g, 0, sizeof(f->g));
}

static void on_pipe(void *ctx, int fd, short revents)
{
	(void)revents;
	char b;
	if (read(fd, &b, 1) == 1)
		((struct follow_state *)ctx)->fd_calls++;
}

/* Publishes n messages, completes, then stays (not closed) until it is
 * killed, or closes at once if told so through val of its arg. */
struct fpub {
	char name[64];
	int n;
	int stay;
};

static int follow_publisher(void *arg, int chan)
{
	const struct fpub *a = arg;
	crs_pub *pub;
	CHECK_EQ(crs_pub_create(a->name, NULL, &pub), 0);
	CHECK_EQ(crs_pub_wait_subscribers(pub, 1, 20000), 0);
	for (int i = 0; i < a->n; i++)
		CHECK_EQ(tu_pub_send(pub, (uint64_t)i, 16 + (size_t)i % 64,
				     20000),
			 0);
	CHECK_EQ(crs_pub_complete(pub), 0);
	CHECK_EQ(crs_pub_wait_consumed(pub, 20000), 0);
	if (a->stay) {
		CHECK_EQ(tu_send(chan, PUB_DONE, 0), 0);
		uint64_t tag, val;
		tu_recv(chan, &tag, &val, 50000); /* killed meanwhile */
	}
	crs_pub_close(pub);
	return 0;
}

/* Run the loop until cond or 20 s; a child's check. */
#define RUN_UNTIL(loop, cond)                                               \
	do {                                                                \
		int64_t until_ = tu_now_ms() + 20000;                       \
		while (!(cond) && tu_now_ms() < until_)                     \
			CHECK(crs_loop_run(loop, 100) >= 0);                \
		CHECK(cond);                                                \
	} while (0)

/* The subscriber process, on the poll engine (tu_spawn_engine). */
static int follow_subscriber(void *arg, int chan)
{
	const char *name = arg;
	crs_loop *loop;
	CHECK_EQ(crs_loop_create(&loop), 0);
	CHECK(strcmp(crs_loop_engine(loop), "io_uring") != 0);
	struct crs_sub_opts o;
	crs_sub_opts_init(&o);
	o.follow = 1;
	o.wait_ms = 10000;
	crs_sub *sub;
	CHECK_EQ(crs_sub_open(name, &o, &sub), 0);
	struct follow_state f = { 0 };
	const struct crs_sub_callbacks cb = { f_on_next, f_on_complete,
					      f_on_error, f_on_gap };
	CHECK_EQ(crs_loop_add_sub(loop, sub, &cb, &f), 0);
	int p[2];
	CHECK_EQ(pipe(p), 0);
	CHECK_EQ(crs_loop_add_fd(loop, p[0], POLLIN, on_pipe, &f), 0);
	RUN_UNTIL(loop, f.g.done);
	CHECK_EQ(f.g.done, 1);
	CHECK_EQ(f.g.next, 3);
	/* Idle once more: the loop sleeps on data_signal and the socket
	 * of the stream that ended, and stays armed on them. */
	CHECK(crs_loop_run(loop, 50) >= 0);
	CHECK_EQ(tu_send(chan, PARKED, 0), 0);
	CHECK_EQ(tu_expect(chan, KILLED, NULL, 20000), 0);
	/* The hangup and the pipe together: the subscription leaves the
	 * old stream in the same run in which the pipe's callback runs. */
	CHECK_EQ(write(p[1], "x", 1), 1);
	RUN_UNTIL(loop, f.fd_calls == 1);
	CHECK(crs_loop_run(loop, 0) >= 0); /* looked at unmapped words */
	CHECK_EQ(tu_send(chan, NEXT_UP, 0), 0);
	RUN_UNTIL(loop, f.gaps == 1 && f.g.done);
	CHECK_EQ(f.g.done, 1);
	CHECK_EQ(f.g.next, 5);
	CHECK_EQ(f.g.bad, 0);
	crs_loop_close(loop);
	crs_sub_close(sub);
	return 0;
}

static void test_follow_after_kill_poll(void **state)
{
	(void)state;
	struct fpub first = { .n = 3, .stay = 1 }, next = { .n = 5 };
	tu_name(first.name, sizeof(first.name), "fkill");
	strcpy(next.name, first.name);
	int pchan, schan;
	pid_t pub = tu_spawn(follow_publisher, &first, &pchan, 60);
	pid_t sub = tu_spawn_engine(follow_subscriber, first.name, &schan,
				    60, 1);
	assert_int_equal(tu_expect(pchan, PUB_DONE, NULL, 20000), 0);
	assert_int_equal(tu_expect(schan, PARKED, NULL, 20000), 0);
	tu_kill(pub); /* dies: data_signal stays as it was */
	assert_int_equal(tu_send(schan, KILLED, 0), 0);
	if (tu_expect(schan, NEXT_UP, NULL, 20000) != 0)
		fail_msg("subscriber ended early: status %d",
			 tu_wait_child(sub, 20000));
	pid_t pub2 = tu_spawn(follow_publisher, &next, NULL, 60);
	assert_int_equal(tu_wait_child(sub, 30000), 0);
	assert_int_equal(tu_wait_child(pub2, 20000), 0);
	close(pchan);
	close(schan);
}

enum { AHEAD = 600, GO };

/* Replay: publishes 100 messages without waiting for demand, says so,
 * and publishes 100 more when told. */
static int replay_publisher(void *arg, int chan)
{
	struct crs_pub_opts o;
	crs_pub_opts_init(&o);
	o.mode = CRS_MODE_REPLAY;
	o.replay_count = 1000;
	o.ring_bytes = 256 * 1024;
	crs_pub *pub;
	CHECK_EQ(crs_pub_create(arg, &o, &pub), 0);
	CHECK_EQ(crs_pub_wait_subscribers(pub, 1, 20000), 0);
	for (int i = 0; i < 100; i++)
		CHECK_EQ(tu_pub_send(pub, (uint64_t)i, 16 + (size_t)i % 64,
				     20000),
			 0);
	CHECK_EQ(tu_send(chan, AHEAD, 0), 0);
	CHECK_EQ(tu_expect(chan, GO, NULL, 20000), 0);
	for (int i = 100; i < 200; i++)
		CHECK_EQ(tu_pub_send(pub, (uint64_t)i, 16 + (size_t)i % 64,
				     20000),
			 0);
	CHECK_EQ(crs_pub_complete(pub), 0);
	CHECK_EQ(crs_pub_wait_consumed(pub, 20000), 0);
	crs_pub_close(pub);
	return 0;
}

/* Poll the loop's fd (10 s: a lost wakeup otherwise) and run once. */
static int poll_and_run(crs_loop *loop, int lfd)
{
	struct pollfd p = { .fd = lfd, .events = POLLIN };
	int r = poll(&p, 1, 10000);
	if (r < 0 && errno != EINTR)
		fail_msg("poll: %s", strerror(errno));
	assert_true(crs_loop_run(loop, 0) >= 0);
	return r != 0;
}

static void test_request_between_runs(void **state)
{
	(void)state;
	unsetenv("CRS_NO_URING");
	char name[64];
	tu_name(name, sizeof(name), "reqfd");
	int chan;
	pid_t pid = tu_spawn(replay_publisher, name, &chan, 60);
	struct crs_sub_opts o;
	crs_sub_opts_init(&o);
	o.prefetch = 0; /* demand only as requested below */
	o.wait_ms = 10000;
	crs_sub *sub;
	assert_int_equal(crs_sub_open(name, &o, &sub), 0);
	crs_loop *loop;
	assert_int_equal(crs_loop_create(&loop), 0);
	struct got g = { 0 };
	assert_int_equal(crs_loop_add_sub(loop, sub, &callbacks, &g), 0);
	int lfd = crs_loop_fd(loop);
	assert_true(lfd >= 0);
	assert_int_equal(tu_expect(chan, AHEAD, NULL, 20000), 0);
	assert_true(crs_loop_run(loop, 0) >= 0); /* nothing: no demand */
	assert_int_equal(g.next, 0);
	/* Messages wait in the ring; the publisher is idle now. */
	assert_int_equal(crs_sub_request(sub, 5), 0);
	int lost = 0;
	while (g.next < 5 && !lost)
		lost = !poll_and_run(loop, lfd);
	assert_int_equal(lost, 0);
	assert_int_equal(g.next, 5);
	assert_int_equal(tu_send(chan, GO, 0), 0);
	assert_int_equal(crs_sub_request(sub, CRS_UNBOUNDED), 0);
	while (!g.done && !lost)
		lost = !poll_and_run(loop, lfd);
	assert_int_equal(lost, 0);
	assert_int_equal(g.done, 1);
	assert_int_equal(g.next, 200);
	assert_int_equal(g.bad, 0);
	crs_loop_close(loop);
	crs_sub_close(sub);
	assert_int_equal(tu_wait_child(pid, 20000), 0);
	close(chan);
}

static int drop_rounds(void *arg, int chan)
{
	(void)chan;
	const char *name = arg;
	crs_pub *pub;
	CHECK_EQ(crs_pub_create(name, NULL, &pub), 0);
	crs_loop *loop;
	CHECK_EQ(crs_loop_create(&loop), 0);
	CHECK(strcmp(crs_loop_engine(loop), "io_uring") != 0);
	CHECK_EQ(crs_loop_add_pub(loop, pub, NULL, NULL), 0);
	int lfd = crs_loop_fd(loop);
	CHECK(lfd >= 0);
	for (int round = 0; round < 5; round++) {
		int hold[2];
		CHECK_EQ(pipe(hold), 0);
		pid_t s = fork();
		CHECK(s >= 0);
		if (s == 0) { /* subscribes, and leaves when hold closes */
			crs_sub *sub;
			close(hold[1]);
			int ok = tu_sub_open(name, 8, &sub) == 0;
			char b;
			_exit(ok && read(hold[0], &b, 1) == 0 ? 0 : 1);
		}
		close(hold[0]);
		int64_t until = tu_now_ms() + 20000;
		while (crs_pub_subscribers(pub) < 1 && tu_now_ms() < until) {
			struct pollfd p = { .fd = lfd, .events = POLLIN };
			poll(&p, 1, 100);
			CHECK(crs_loop_run(loop, 0) >= 0);
		}
		/* Announced again, the watcher sleeps on its progress. */
		CHECK_EQ(crs_pub_subscribers(pub), 1);
		close(hold[1]);
		int st;
		CHECK_EQ(waitpid(s, &st, 0), s);
		CHECK(WIFEXITED(st) && WEXITSTATUS(st) == 0);
		/* Dropped (and unmapped) outside a run, as an application
		 * publishing from its own timer does. */
		while (crs_pub_subscribers(pub) > 0 && tu_now_ms() < until)
			crs_pub_serve(pub);
		CHECK_EQ(crs_pub_subscribers(pub), 0);
		/* Past the watcher's next look (a 20 ms slice). */
		tu_sleep_ms(50);
	}
	crs_loop_close(loop);
	crs_pub_close(pub);
	return 0;
}

static void test_watcher_slot_dropped(void **state)
{
	(void)state;
	char name[64];
	tu_name(name, sizeof(name), "wdrop");
	pid_t pid = tu_spawn_engine(drop_rounds, name, NULL, 60, 1);
	assert_int_equal(tu_wait_child(pid, 40000), 0);
}

int main(void)
{
	tu_init();
	const struct CMUnitTest tests[] = {
		TU_TEST(test_add_after_loop_fd),
		TU_TEST(test_follow_after_kill_poll),
		TU_TEST(test_request_between_runs),
		TU_TEST(test_watcher_slot_dropped),
	};
	return cmocka_run_group_tests(tests, NULL, NULL);
}
