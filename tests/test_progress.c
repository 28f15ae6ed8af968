/*
 * test_progress.c - consumption reaches the publisher in bounded time
 * although subscribers publish their position in batches: a steady slow
 * consumer is never taken for a stalled one (untethered eviction), and a
 * subscriber that released everything and then makes no further call is
 * seen as done by crs_pub_wait_consumed. And a publisher waits for its
 * autoConnect in crs_pub_wait (the blocking wait until connected).
 * Separate processes; run on both wait engines.
 */
#include <errno.h>
#include <string.h>

#include "util.h"

#define STEADY_MSGS 100

/* Consume STEADY_MSGS messages, one every 10 ms, never ending early. */
static int steady_consumer(void *arg, int chan)
{
	crs_sub *sub;
	CHECK_EQ(tu_sub_open(arg, 128, &sub), 0);
	for (uint64_t seq = 0; seq < STEADY_MSGS; seq++) {
		struct crs_msg m;
		int r = tu_sub_next(sub, &m, 10000);
		if (r != 1)
			fprintf(stderr, "message %llu: %d (%s)\n",
				(unsigned long long)seq, r,
				crs_sub_end(sub) ? crs_sub_end(sub)->message
						 : "-");
		CHECK_EQ(r, 1);
		CHECK_EQ(m.seq, seq);
		crs_sub_release(sub);
		tu_sleep_ms(10);
	}
	/* Stay until the parent has counted us: leaving at once could
	 * take us off its count before it looks. */
	uint64_t tag;
	tu_recv(chan, &tag, NULL, 30000);
	crs_sub_close(sub);
	return 0;
}

static void test_steady_consumer_kept(void **state)
{
	(void)state;
	char name[64];
	tu_name(name, sizeof(name), "steady");
	struct crs_pub_opts o;
	crs_pub_opts_init(&o);
	o.untethered_ms = 300; /* a third of the time it takes to consume */
	crs_pub *pub;
	assert_int_equal(crs_pub_create(name, &o, &pub), 0);
	int chan;
	pid_t pid = tu_spawn(steady_consumer, name, &chan, 60);
	assert_int_equal(tu_pub_await_count(pub, 1, 10000), 0);
	/* All within its prefetch: it holds the stream back only by
	 * reading slowly, and its replenish (at 96) comes too late to
	 * count as progress. */
	for (uint64_t seq = 0; seq < STEADY_MSGS; seq++)
		assert_int_equal(tu_pub_send(pub, seq, 32, 10000), 0);
	assert_int_equal(crs_pub_wait_consumed(pub, 20000), 0);
	assert_int_equal(crs_pub_subscribers(pub), 1); /* not evicted */
	assert_int_equal(tu_send(chan, 1, 0), 0);
	close(chan);
	assert_int_equal(tu_serve_wait_child(pub, pid, 10000), 0);
	crs_pub_close(pub);
}

/* Take exactly five messages, then say so and make no further call. */
static int five_then_silent(void *arg, int chan)
{
	crs_sub *sub;
	CHECK_EQ(tu_sub_open(arg, 128, &sub), 0);
	CHECK_EQ(tu_send(chan, 1, 0), 0);
	for (uint64_t seq = 0; seq < 5; seq++) {
		struct crs_msg m;
		CHECK_EQ(tu_sub_next(sub, &m, 10000), 1);
		crs_sub_release(sub);
	}
	CHECK_EQ(tu_send(chan, 2, 0), 0);
	uint64_t tag;
	tu_recv(chan, &tag, NULL, 30000); /* until the parent is done */
	crs_sub_close(sub);
	return 0;
}

static void test_consumed_without_further_call(void **state)
{
	(void)state;
	char name[64];
	int chan;
	tu_name(name, sizeof(name), "five");
	crs_pub *pub = tu_make_pub(name, 1 << 16);
	pid_t pid = tu_spawn(five_then_silent, name, &chan, 60);
	assert_int_equal(tu_pub_await_count(pub, 1, 10000), 0);
	assert_int_equal(tu_expect(chan, 1, NULL, 10000), 0);
	for (uint64_t seq = 0; seq < 5; seq++)
		assert_int_equal(tu_pub_send(pub, seq, 32, 10000), 0);
	assert_int_equal(tu_expect(chan, 2, NULL, 10000), 0);
	assert_int_equal(crs_pub_wait_consumed(pub, 5000), 0);
	assert_int_equal(tu_send(chan, 3, 0), 0);
	close(chan);
	assert_int_equal(tu_serve_wait_child(pub, pid, 10000), 0);
	crs_pub_close(pub);
}

/* Subscribe after a pause, read one message, leave. */
static int late_reader(void *arg, int chan)
{
	(void)chan;
	tu_sleep_ms(200); /* let the publisher fall asleep first */
	crs_sub *sub;
	CHECK_EQ(tu_sub_open(arg, 4, &sub), 0);
	struct crs_msg m;
	CHECK_EQ(tu_sub_next(sub, &m, 10000), 1);
	CHECK_EQ(m.seq, 0);
	crs_sub_release(sub);
	crs_sub_close(sub);
	return 0;
}

static void test_wait_until_connected(void **state)
{
	(void)state;
	char name[64];
	tu_name(name, sizeof(name), "autoconn");
	struct crs_pub_opts o;
	crs_pub_opts_init(&o);
	o.auto_connect = 1;
	crs_pub *pub;
	assert_int_equal(crs_pub_create(name, &o, &pub), 0);
	void *buf;
	assert_int_equal(crs_pub_claim(pub, 8, &buf), -ENOTCONN);
	pid_t pid = tu_spawn(late_reader, name, NULL, 60);
	/* Sleeps, serving, until the subscriber connects the stream and
	 * its demand arrives. */
	assert_int_equal(crs_pub_wait(pub, 8, 20000), 0);
	assert_int_equal(crs_pub_epoch(pub), 1);
	assert_int_equal(tu_pub_send(pub, 0, 8, 10000), 0);
	assert_int_equal(crs_pub_wait_consumed(pub, 10000), 0);
	assert_int_equal(tu_serve_wait_child(pub, pid, 10000), 0);
	/* autoConnect fired once: after a disconnect only crs_pub_connect
	 * can connect, so waiting would be for nothing. */
	assert_int_equal(crs_pub_disconnect(pub, 1), 0);
	assert_int_equal(crs_pub_wait(pub, 8, 20000), -ENOTCONN);
	crs_pub_close(pub);

	struct crs_pub_opts m;
	crs_pub_opts_init(&m);
	m.auto_connect = CRS_CONNECT_MANUAL;
	tu_name(name, sizeof(name), "manual");
	assert_int_equal(crs_pub_create(name, &m, &pub), 0);
	assert_int_equal(crs_pub_wait(pub, 8, 20000), -ENOTCONN);
	crs_pub_close(pub);
}

int main(void)
{
	tu_init();
	const struct CMUnitTest tests[] = {
		TU_TEST(test_steady_consumer_kept),
		TU_TEST(test_consumed_without_further_call),
		TU_TEST(test_wait_until_connected),
	};
	return cmocka_run_group_tests(tests, NULL, NULL);
}
