/*
 * test_review.c - regressions found in review, each with real processes
 * and real shared memory:
 *   - a subscription added to a loop after crs_loop_fd() was taken must
 *     make that fd readable when its messages arrive (it used to stay
 *     unannounced until the next crs_loop_run, which never came).
 */
#include <errno.h>
#include <poll.h>
#include <string.h>

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
	assert_int_equal(crs_loop_new(&loop), 0);
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
	crs_loop_free(loop);
}

int main(void)
{
	tu_init();
	const struct CMUnitTest tests[] = {
		TU_TEST(test_add_after_loop_fd),
	};
	return cmocka_run_group_tests(tests, NULL, NULL);
}
