/*
 * test_waitset.c - a waitset (ipc/waitset.c) follows its handle from
 * thread to thread. The io_uring engine sets its ring up for the one
 * task that submits to it (RING_SOLO), so the kernel refuses any other;
 * a thread that takes the waitset over must get a ring of its own, with
 * every wait that was pending on the old one still pending, and lose no
 * wakeup: here a waitset made in the main thread fires for a pipe armed
 * before the move and a futex wake after it in a second thread, then
 * comes back to the main thread and fires there again. The old ring's
 * futex waits, kept alive by a forked child that holds its fd, do not
 * take a wake of one waiter meant for the new ring. And a look that must
 * not block (deadline 0) sees a wake that came while the waiter was not
 * in the kernel, which such a ring posts only when entered.
 */
#include <errno.h>
#include <linux/futex.h>
#include <poll.h>
#include <pthread.h>
#include <stdatomic.h>
#include <stdint.h>
#include <sys/syscall.h>
#include <unistd.h>

#include "ipc/clock.h"
#include "ipc/waitset.h"
#include "util.h"

#define KEY_PIPE 1
#define KEY_WORD 2

struct shared {
	struct ipc_waitset *ws;
	_Atomic uint32_t word;
	int err; /* the second thread's verdict: 0, or what went wrong */
};

/* Set *word to v, then wake up to n of its sleepers. */
static void set_and_wake(_Atomic uint32_t *word, uint32_t v, int n)
{
	atomic_store(word, v);
	syscall(SYS_futex, (uint32_t *)word, FUTEX_WAKE, n, NULL, NULL, 0);
}

/* A word to set to v, and wake all on, from another thread. */
struct later {
	_Atomic uint32_t *word;
	uint32_t v;
};

/* After 50 ms. */
static void *set_later(void *arg)
{
	struct later *l = arg;
	tu_sleep_ms(50);
	set_and_wake(l->word, l->v, INT32_MAX);
	return NULL;
}

/* Wait up to 10 s for key alone to fire (EINTR: wait again). */
static int fires(struct ipc_waitset *ws, uint64_t key)
{
	int64_t deadline = ipc_deadline(10000);
	uint64_t fired[4];
	int n;
	do
		n = ipc_waitset_wait(ws, deadline, fired, 4);
	while (n == -EINTR);
	return n == 1 && fired[0] == key ? 0 : n < 0 ? n : -EPROTO;
}

/* The futex key fires once the word moves from v to v + 1 (set in a
 * third thread while we sleep). */
static int word_fires(struct shared *s, uint32_t v)
{
	int err = ipc_waitset_futex(s->ws, KEY_WORD, (const void *)&s->word, v);
	if (err)
		return err;
	struct later l = { &s->word, v + 1 };
	pthread_t t;
	if (pthread_create(&t, NULL, set_later, &l) != 0)
		return -EAGAIN;
	err = fires(s->ws, KEY_WORD);
	pthread_join(t, NULL);
	return err;
}

static void *second_thread(void *arg)
{
	struct shared *s = arg;
	/* Armed and submitted by the main thread, readable before we came:
	 * it must still be pending here. */
	s->err = fires(s->ws, KEY_PIPE);
	if (!s->err)
		s->err = word_fires(s, 0);
	return NULL;
}

static void test_moves_between_threads(void **state)
{
	(void)state;
	struct shared s = { .word = 0 };
	int fds[2];
	assert_int_equal(pipe(fds), 0);
	assert_int_equal(ipc_waitset_new(&s.ws), 0);
	const char *engine = ipc_waitset_engine(s.ws);
	assert_int_equal(ipc_waitset_poll(s.ws, KEY_PIPE, fds[0], POLLIN), 0);
	assert_int_equal(ipc_waitset_submit(s.ws, 0), 0);
	assert_int_equal(write(fds[1], "x", 1), 1);

	pthread_t t;
	assert_int_equal(pthread_create(&t, NULL, second_thread, &s), 0);
	assert_int_equal(pthread_join(t, NULL), 0);
	assert_int_equal(s.err, 0);

	/* Back in the first thread (the second one has exited). */
	assert_int_equal(word_fires(&s, 1), 0);
	assert_int_equal(atomic_load(&s.word), 2);
	/* The same engine all along: no fallback was needed. */
	assert_string_equal(ipc_waitset_engine(s.ws), engine);
	ipc_waitset_free(s.ws);
	close(fds[0]);
	close(fds[1]);
}

/* The child keeps the fds it inherited (the first thread's ring among
 * them) open for a while. */
static int hold_fds(void *arg, int chan)
{
	(void)arg;
	(void)chan;
	tu_sleep_ms(2000);
	return 0;
}

static void *wait_word(void *arg)
{
	struct shared *s = arg;
	s->err = fires(s->ws, KEY_WORD);
	return NULL;
}

static void test_old_ring_takes_no_wake(void **state)
{
	(void)state;
	struct shared s = { .word = 0 };
	assert_int_equal(ipc_waitset_new(&s.ws), 0);
	assert_int_equal(ipc_waitset_futex(s.ws, KEY_WORD,
					   (const void *)&s.word, 0),
			 0);
	assert_int_equal(ipc_waitset_submit(s.ws, 0), 0); /* queued */
	pid_t pid = tu_spawn(hold_fds, NULL, NULL, 30);
	pthread_t t;
	assert_int_equal(pthread_create(&t, NULL, wait_word, &s), 0);
	tu_sleep_ms(100);	     /* asleep on its own ring by now */
	set_and_wake(&s.word, 1, 1); /* as a subscriber wakes its publisher */
	assert_int_equal(pthread_join(t, NULL), 0);
	assert_int_equal(s.err, 0);
	assert_int_equal(tu_wait_child(pid, 10000), 0);
	ipc_waitset_free(s.ws);
}

/* At once. */
static void *wake_now(void *arg)
{
	struct later *l = arg;
	set_and_wake(l->word, l->v, INT32_MAX);
	return NULL;
}

static void test_look_sees_wake(void **state)
{
	(void)state;
	struct ipc_waitset *ws;
	assert_int_equal(ipc_waitset_new(&ws), 0);
	static _Atomic uint32_t word;
	atomic_store(&word, 0);
	uint64_t fired[4];
	assert_int_equal(ipc_waitset_futex(ws, KEY_WORD, (const void *)&word,
					   0),
			 0);
	/* Nothing yet; the wait is now pending in the kernel. */
	assert_int_equal(ipc_waitset_wait(ws, 0, fired, 4), 0);
	struct later l = { &word, 1 };
	pthread_t t;
	assert_int_equal(pthread_create(&t, NULL, wake_now, &l), 0);
	assert_int_equal(pthread_join(t, NULL), 0);
	/* The wake is over before we look, and the look does not block. */
	int n;
	do
		n = ipc_waitset_wait(ws, 0, fired, 4);
	while (n == -EINTR);
	assert_int_equal(n, 1);
	assert_int_equal(fired[0], KEY_WORD);
	ipc_waitset_free(ws);
}

int main(void)
{
	tu_init();
	const struct CMUnitTest tests[] = {
		TU_TEST(test_moves_between_threads),
		TU_TEST(test_old_ring_takes_no_wake),
		TU_TEST(test_look_sees_wake),
	};
	return cmocka_run_group_tests(tests, NULL, NULL);
}
