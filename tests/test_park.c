/*
 * test_park.c - the wakeup protocol (src/park.h) itself: a wait that
 * cannot be armed still sees the change it waits for (bounded naps, no
 * missed wakeup); announcements nest, so a blocking wait on a handle that
 * a loop also holds leaves the loop's announcement standing (subscriber
 * and publisher side, in separate processes); a hostile subscriber that
 * rewrites its park word after every commit does not get a futex wake
 * per commit; a sleeping subscriber asks for the commit fence in its
 * park word instead of a membarrier per sleep, keeps asking while it
 * sleeps, is woken for every message, and stops asking once it reads
 * without sleeping.
 */
#include <errno.h>
#include <poll.h>
#include <stdatomic.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>

#include "src/park.h"
#include "src/pub.h"
#include "src/sub.h"
#include "util.h"

/* ---- a wait that cannot be armed --------------------------------------- */

struct flag_waiter {
	_Atomic uint32_t *word; /* shared with the child that sets it */
	int announced;
};

static int flag_announce(void *ctx, struct ipc_waitset *ws)
{
	struct flag_waiter *w = ctx;
	w->announced++;
	/* Key UINT32_MAX is out of the waitset's range: the arm fails for
	 * real, as it would on ENOMEM or a full submission queue. */
	int err = ipc_waitset_futex(ws, UINT32_MAX, (const void *)w->word, 0);
	return err ? PARK_NAP : 0;
}

static int flag_has_work(void *ctx)
{
	struct flag_waiter *w = ctx;
	return atomic_load(w->word) != 0;
}

static void flag_withdraw(void *ctx)
{
	((struct flag_waiter *)ctx)->announced--;
}

static const struct park_hooks flag_hooks = { flag_announce, flag_has_work,
					       flag_withdraw };

static int set_flag_later(void *arg, int chan)
{
	(void)chan;
	tu_sleep_ms(100);
	atomic_store((_Atomic uint32_t *)arg, 1); /* and no futex wake */
	return 0;
}

static void failed_arm(int no_uring)
{
	_Atomic uint32_t *word = mmap(NULL, 4096, PROT_READ | PROT_WRITE,
				      MAP_SHARED | MAP_ANONYMOUS, -1, 0);
	assert_true(word != MAP_FAILED);
	atomic_store(word, 0);
	if (no_uring)
		setenv("CRS_NO_URING", "1", 1);
	struct ipc_waitset *ws;
	assert_int_equal(ipc_waitset_new(&ws), 0);
	unsetenv("CRS_NO_URING");
	struct flag_waiter w = { .word = word };
	pid_t pid = tu_spawn(set_flag_later, (void *)word, NULL, 30);
	uint64_t fired[4];
	/* No deadline: only the naps can bring the change to our notice
	 * (the test's timeout catches a wait that never returns). */
	int n;
	do /* -EINTR: SIGCHLD, or a debugger */
		n = park_wait(&flag_hooks, &w, ws, INT64_MAX, fired, 4);
	while ((n == 0 || n == -EINTR) && !atomic_load(word));
	assert_true(n == 0 || n == -EINTR);
	assert_int_equal(atomic_load(word), 1);
	assert_int_equal(w.announced, 0); /* every announce withdrawn */
	assert_int_equal(tu_wait_child(pid, 10000), 0);
	ipc_waitset_free(ws);
	munmap((void *)word, 4096);
}

static void test_failed_arm(void **state)
{
	(void)state;
	failed_arm(0);
}

static void test_failed_arm_poll(void **state)
{
	(void)state;
	failed_arm(1);
}

/* Keys from 2^31 on are refused at once: the entry array doubles, and
 * growing it for such a key used to wrap its size to 0 and spin. */
static void test_key_out_of_range(void **state)
{
	(void)state;
	struct ipc_waitset *ws;
	assert_int_equal(ipc_waitset_new(&ws), 0);
	static _Atomic uint32_t word;
	uint64_t keys[] = { 1ULL << 31, (1ULL << 31) + 5, UINT32_MAX - 1ULL };
	for (size_t i = 0; i < sizeof(keys) / sizeof(keys[0]); i++) {
		assert_int_not_equal(ipc_waitset_futex(ws, keys[i],
						       (const void *)&word, 0),
				     0);
		assert_int_not_equal(ipc_waitset_poll(ws, keys[i], 0, POLLIN),
				     0);
	}
	/* The waitset still works below the limit. */
	assert_int_equal(ipc_waitset_futex(ws, 3, (const void *)&word, 0), 0);
	ipc_waitset_free(ws);
}

/* ---- nested announcements ---------------------------------------------- */

/* Wait until fd polls readable (10 s at most; EINTR counts: io_uring
 * posts completions as task work). 1 if it did. */
static int fd_fires(int fd)
{
	int64_t deadline = tu_now_ms() + 10000;
	while (tu_now_ms() < deadline) {
		struct pollfd p = { .fd = fd, .events = POLLIN };
		int r = poll(&p, 1, 1000);
		if (r == 1 || (r < 0 && errno == EINTR))
			return 1;
	}
	return 0;
}

static void count_next(void *ctx, const struct crs_msg *m)
{
	(void)m;
	++*(int *)ctx;
}

/* Publisher child: one subscriber, then one message per "go". */
static int publisher(void *arg, int chan)
{
	crs_pub *pub;
	CHECK_EQ(crs_pub_create(arg, NULL, &pub), 0);
	CHECK_EQ(tu_send(chan, 1, 0), 0);
	CHECK_EQ(crs_pub_wait_subscribers(pub, 1, 20000), 0);
	for (uint64_t seq = 0;; seq++) {
		uint64_t tag;
		if (tu_recv(chan, &tag, NULL, 20000) || tag != 2)
			break;
		CHECK_EQ(tu_pub_send(pub, seq, 32, 20000), 0);
	}
	crs_pub_close(pub);
	return 0;
}

static void test_nested_sub(void **state)
{
	(void)state;
	char name[64];
	int chan, got = 0;
	tu_name(name, sizeof(name), "nest-sub");
	pid_t pid = tu_spawn(publisher, name, &chan, 60);
	assert_int_equal(tu_expect(chan, 1, NULL, 10000), 0);
	crs_loop *loop;
	assert_int_equal(crs_loop_create(&loop), 0);
	crs_sub *sub;
	struct crs_sub_opts o;
	crs_sub_opts_init(&o);
	o.wait_ms = 10000;
	o.spin_us = -1;
	assert_int_equal(crs_sub_open(name, &o, &sub), 0);
	struct crs_sub_callbacks cb = { .on_next = count_next };
	assert_int_equal(crs_loop_add_sub(loop, sub, &cb, &got), 0);
	int fd = crs_loop_fd(loop);
	assert_true(fd >= 0);
	for (int round = 1; round <= 3; round++) {
		assert_true(crs_loop_run(loop, 0) >= 0); /* announced again */
		/* A blocking wait of our own on the same handle: it must
		 * leave the loop's announcement standing. */
		assert_int_equal(crs_sub_wait(sub, 20), -ETIMEDOUT);
		assert_int_equal(tu_send(chan, 2, 0), 0);
		assert_true(fd_fires(fd));
		int64_t deadline = tu_now_ms() + 10000;
		while (got < round && tu_now_ms() < deadline)
			assert_true(crs_loop_run(loop, 100) >= 0);
		assert_int_equal(got, round);
	}
	crs_loop_close(loop); /* before the handle it still holds */
	crs_sub_close(sub);
	close(chan);
	assert_int_equal(tu_wait_child(pid, 10000), 0);
}

/* Subscriber child: subscribe with no demand, then request one message
 * per "go". */
static int requester(void *arg, int chan)
{
	crs_sub *sub;
	struct crs_sub_opts o;
	crs_sub_opts_init(&o);
	o.wait_ms = 10000;
	o.prefetch = 0;
	CHECK_EQ(crs_sub_open(arg, &o, &sub), 0);
	for (;;) {
		uint64_t tag;
		if (tu_recv(chan, &tag, NULL, 20000) || tag != 2)
			break;
		CHECK_EQ(crs_sub_request(sub, 1), 0);
	}
	crs_sub_close(sub);
	return 0;
}

static void count_ready(void *ctx, crs_pub *pub)
{
	(void)pub;
	++*(int *)ctx;
}

static void test_nested_pub(void **state)
{
	(void)state;
	char name[64];
	int chan, ready = 0;
	tu_name(name, sizeof(name), "nest-pub");
	crs_pub *pub = tu_make_pub(name, 1 << 16);
	crs_loop *loop;
	assert_int_equal(crs_loop_create(&loop), 0);
	pid_t pid = tu_spawn(requester, name, &chan, 60);
	assert_int_equal(tu_pub_await_count(pub, 1, 10000), 0);
	assert_int_equal(crs_loop_add_pub(loop, pub, count_ready, &ready), 0);
	int fd = crs_loop_fd(loop);
	assert_true(fd >= 0);
	for (int round = 1; round <= 3; round++) {
		while (crs_loop_run(loop, 0) > 0) /* on_ready of the last */
			;
		int seen = ready;
		/* A blocking wait of our own on the same handle. */
		assert_int_equal(crs_pub_wait_subscribers(pub, 2, 20),
				 -ETIMEDOUT);
		assert_int_equal(tu_send(chan, 2, 0), 0);
		assert_true(fd_fires(fd));
		int64_t deadline = tu_now_ms() + 10000;
		while (ready == seen && tu_now_ms() < deadline)
			assert_true(crs_loop_run(loop, 100) >= 0);
		assert_true(ready > seen);
		assert_int_equal(crs_pub_demand(pub), (uint64_t)round);
	}
	close(chan);
	assert_int_equal(tu_serve_wait_child(pub, pid, 10000), 0);
	crs_loop_close(loop);
	crs_pub_close(pub);
}

/* ---- a hostile park word ------------------------------------------------ */

/* Unbounded demand, consumes nothing, and announces itself parked on
 * the current data_signal again and again until told to stop. */
static int hostile(void *arg, int chan)
{
	struct crs_sub_opts o;
	crs_sub_opts_init(&o);
	o.wait_ms = 10000;
	o.prefetch = 0;
	crs_sub *h;
	CHECK_EQ(crs_sub_open(arg, &o, &h), 0);
	CHECK_EQ(crs_sub_request(h, CRS_UNBOUNDED), 0);
	CHECK_EQ(tu_send(chan, 1, 0), 0);
	struct crs_sub *sub = (struct crs_sub *)h;
	for (;;) {
		uint32_t v = atomic_load(&sub->hdr->signal.data_signal);
		atomic_store(&sub->ctl->parked, 1ULL << 32 | v);
		uint64_t tag;
		if (tu_recv(chan, &tag, NULL, 0) == 0 || getppid() == 1)
			break;
	}
	crs_sub_close(h);
	return 0;
}

static void test_hostile_park_word(void **state)
{
	(void)state;
	char name[64];
	int chan;
	tu_name(name, sizeof(name), "hostile");
	crs_pub *p = tu_make_pub(name, 1 << 20);
	struct crs_pub *pub = (struct crs_pub *)p;
	pid_t pid = tu_spawn(hostile, name, &chan, 60);
	assert_int_equal(tu_pub_await_count(p, 1, 10000), 0);
	assert_int_equal(tu_expect(chan, 1, NULL, 10000), 0);
	uint64_t before = atomic_load(&pub->ring.hdr->stats.wakes);
	for (uint64_t seq = 0; seq < 200; seq++) {
		/* Commit only once it claims to sleep on the current value:
		 * the worst case, every commit. */
		_Atomic uint64_t *w =
			&pub->control.slots[pub->control.active[0]].ctl->parked;
		int64_t deadline = tu_now_ms() + 10000;
		while (atomic_load(w) !=
			       (1ULL << 32 |
				atomic_load(
					&pub->ring.hdr->signal.data_signal)) &&
		       tu_now_ms() < deadline)
			;
		assert_int_equal(tu_pub_send(p, seq, 32, 10000), 0);
	}
	uint64_t wakes = atomic_load(&pub->ring.hdr->stats.wakes) - before;
	print_message("200 commits, %llu wakes\n", (unsigned long long)wakes);
	assert_true(wakes <= 2);
	assert_int_equal(tu_send(chan, 2, 0), 0);
	close(chan);
	assert_int_equal(tu_serve_wait_child(p, pid, 10000), 0);
	crs_pub_close(p);
}

/* ---- asking for the commit fence ---------------------------------------- */

enum { F_READY = 1, F_WORD };

/* Take n messages from *seq on, each after sleeping in crs_sub_wait
 * (spin_us -1: sleeps at once) if sleep, else by polling only. */
static void take(crs_sub *sub, uint64_t *seq, int n, int sleep)
{
	for (int i = 0; i < n; i++, (*seq)++) {
		struct crs_msg m;
		int r;
		int64_t deadline = tu_now_ms() + 10000;
		while ((r = crs_sub_poll(sub, &m)) == 0 &&
		       tu_now_ms() < deadline)
			if (sleep)
				CHECK_EQ(crs_sub_wait(sub, 10000), 0);
		CHECK_EQ(r, 1);
		CHECK_EQ(m.seq, *seq);
		CHECK(tu_verify(m.data, m.len, m.seq) < 0);
	}
	crs_sub_release(sub);
}

/* Sleeps for 10 messages, reads 300 without sleeping, sleeps for 10
 * more; reports its park word (awake) after each phase. */
static int sleeper(void *arg, int chan)
{
	struct crs_sub_opts o;
	crs_sub_opts_init(&o);
	o.wait_ms = 10000;
	o.spin_us = -1;
	crs_sub *h;
	CHECK_EQ(crs_sub_open(arg, &o, &h), 0);
	struct crs_sub *sub = (struct crs_sub *)h;
	CHECK_EQ(tu_send(chan, F_READY, 0), 0);
	uint64_t seq = 0;
	take(h, &seq, 10, 1);
	CHECK_EQ(tu_send(chan, F_WORD, atomic_load(&sub->ctl->parked)), 0);
	take(h, &seq, 300, 0);
	CHECK_EQ(tu_send(chan, F_WORD, atomic_load(&sub->ctl->parked)), 0);
	take(h, &seq, 10, 1);
	CHECK_EQ(tu_send(chan, F_WORD, atomic_load(&sub->ctl->parked)), 0);
	crs_sub_close(h);
	return 0;
}

/* Publish n messages from *seq; with asleep, each only once the
 * subscriber sleeps for it (on the current signal: not the sleep the
 * last wake ended), so that each needs a wake. */
static void feed(crs_pub *p, uint64_t *seq, int n, int asleep)
{
	struct crs_pub *pub = (struct crs_pub *)p;
	for (int i = 0; i < n; i++, (*seq)++) {
		_Atomic uint64_t *w =
			&pub->control.slots[pub->control.active[0]].ctl->parked;
		int64_t deadline = tu_now_ms() + 10000;
		while (asleep &&
		       (atomic_load(w) & (CRS_PARK_ASLEEP | 0xffffffffu)) !=
			       (CRS_PARK_ASLEEP |
				atomic_load(
					&pub->ring.hdr->signal.data_signal)) &&
		       tu_now_ms() < deadline)
			;
		assert_int_equal(tu_pub_send(p, *seq, 32, 10000), 0);
	}
}

static void test_fence_ask(void **state)
{
	(void)state;
	char name[64];
	int chan;
	tu_name(name, sizeof(name), "fence-ask");
	crs_pub *p = tu_make_pub(name, 1 << 20);
	struct crs_pub *pub = (struct crs_pub *)p;
	/* Registered for membarrier (else the commit always fences and
	 * nobody asks): asked for while sleeping, kept while awake. */
	uint64_t ask = pub->ring.fences ? 0 : CRS_PARK_FENCE;
	pid_t pid = tu_spawn(sleeper, name, &chan, 60);
	assert_int_equal(tu_pub_await_count(p, 1, 10000), 0);
	assert_int_equal(tu_expect(chan, F_READY, NULL, 10000), 0);
	uint64_t seq = 0, word;
	uint64_t wakes = atomic_load(&pub->ring.hdr->stats.wakes);
	feed(p, &seq, 10, 1);
	assert_int_equal(tu_expect(chan, F_WORD, &word, 10000), 0);
	assert_int_equal(word, ask);
	/* The sleeps needed wakes. A lost one would show as the child's
	 * crs_sub_wait timing out (it fails the test); the count is only a
	 * floor, as a sleep may also end early (a spurious return, then a
	 * re-check that finds the message first), which is allowed. */
	assert_true(atomic_load(&pub->ring.hdr->stats.wakes) - wakes >= 1);
	feed(p, &seq, 300, 0);
	assert_int_equal(tu_expect(chan, F_WORD, &word, 10000), 0);
	assert_int_equal(word, 0); /* 256 without a sleep: no longer asks */
	wakes = atomic_load(&pub->ring.hdr->stats.wakes);
	feed(p, &seq, 10, 1);
	assert_int_equal(tu_expect(chan, F_WORD, &word, 10000), 0);
	assert_int_equal(word, ask); /* asks again */
	assert_true(atomic_load(&pub->ring.hdr->stats.wakes) - wakes >= 1);
	close(chan);
	assert_int_equal(tu_serve_wait_child(p, pid, 10000), 0);
	crs_pub_close(p);
}

int main(void)
{
	tu_init();
	const struct CMUnitTest tests[] = {
		TU_TEST(test_failed_arm),
		TU_TEST(test_failed_arm_poll),
		TU_TEST(test_key_out_of_range),
		TU_TEST(test_nested_sub),
		TU_TEST(test_nested_pub),
		TU_TEST(test_hostile_park_word),
		TU_TEST(test_fence_ask),
	};
	return cmocka_run_group_tests(tests, NULL, NULL);
}
