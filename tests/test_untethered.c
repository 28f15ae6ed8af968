/*
 * test_untethered.c - the slow-consumer policy: a subscriber that holds
 * a lockstep stream back without requesting or consuming anything for
 * longer than untethered_ms is evicted with ETIMEDOUT, and the others
 * flow again. Without the option, nobody is ever evicted. A subscriber
 * evicted after its epoch ended keeps that end's record as it was.
 */
#include <errno.h>
#include <string.h>

#include "util.h"

#include "src/sub.h"
#include "src/terminal.h"

struct sub_args {
	char name[64];
	uint32_t prefetch;
	int expect_code;
	uint64_t expect_count;
};

/* Read until the end; check how it ended and how much arrived. */
static int subscriber(void *arg, int chan)
{
	struct sub_args *a = arg;
	crs_sub *sub;
	CHECK_EQ(tu_sub_open(a->name, a->prefetch, &sub), 0);
	CHECK_EQ(tu_send(chan, 1, 0), 0);
	struct crs_msg m;
	uint64_t n = 0;
	int r;
	while ((r = tu_sub_next(sub, &m, 30000)) == 1) {
		CHECK(tu_verify(m.data, m.len, m.seq) < 0);
		n++;
	}
	CHECK_EQ(r, -CRS_EEND);
	CHECK_EQ(crs_sub_end(sub)->code, a->expect_code);
	CHECK_EQ(n, a->expect_count);
	crs_sub_close(sub);
	return 0;
}

static void run(uint32_t untethered_ms)
{
	char name[64];
	tu_name(name, sizeof(name), "untethered");
	struct crs_pub_opts o;
	crs_pub_opts_init(&o);
	o.untethered_ms = untethered_ms;
	crs_pub *pub;
	assert_int_equal(crs_pub_create(name, &o, &pub), 0);
	struct sub_args fast = { .prefetch = 16, .expect_code = 0,
				 .expect_count = 200 };
	struct sub_args idle = { .prefetch = 0, .expect_code = ETIMEDOUT };
	strcpy(fast.name, name);
	strcpy(idle.name, name);
	int cf, ci;
	pid_t pf = tu_spawn(subscriber, &fast, &cf, 60);
	pid_t pi = tu_spawn(subscriber, &idle, &ci, 60);
	assert_int_equal(tu_pub_await_count(pub, 2, 10000), 0);
	for (uint64_t seq = 0; seq < 200; seq++) {
		int r = tu_pub_send(pub, seq, 64, untethered_ms ? 20000 : 500);
		if (!untethered_ms) {
			/* Nobody is evicted: the idle one holds everyone. */
			assert_int_equal(r, -CRS_ENODEMAND);
			assert_int_equal(crs_pub_subscribers(pub), 2);
			tu_kill(pi);
			tu_kill(pf);
			close(cf);
			close(ci);
			crs_pub_close(pub);
			return;
		}
		assert_int_equal(r, 0);
	}
	assert_int_equal(crs_pub_subscribers(pub), 1);
	assert_int_equal(crs_pub_complete(pub), 0);
	assert_int_equal(tu_serve_wait_child(pub, pf, 20000), 0);
	assert_int_equal(tu_serve_wait_child(pub, pi, 20000), 0);
	close(cf);
	close(ci);
	crs_pub_close(pub);
}

static void test_evicts_idle_subscriber(void **state)
{
	(void)state;
	run(1000); /* long enough that no healthy process stalls that long */
}

static void test_default_never_evicts(void **state)
{
	(void)state;
	struct crs_pub_opts o;
	crs_pub_opts_init(&o);
	assert_int_equal(o.untethered_ms, 0);
	run(0);
}

/* A healthy subscriber is never evicted, however long the publisher
 * stays quiet between messages: the clock only runs while it holds the
 * stream back without moving. */
static void test_quiet_publisher_keeps_healthy_subscriber(void **state)
{
	(void)state;
	char name[64];
	tu_name(name, sizeof(name), "quiet");
	struct crs_pub_opts o;
	crs_pub_opts_init(&o);
	o.untethered_ms = 500;
	crs_pub *pub;
	assert_int_equal(crs_pub_create(name, &o, &pub), 0);
	struct sub_args reader = { .prefetch = 16, .expect_code = 0,
				   .expect_count = 3 };
	strcpy(reader.name, name);
	int chan;
	pid_t pid = tu_spawn(subscriber, &reader, &chan, 60);
	assert_int_equal(tu_pub_await_count(pub, 1, 10000), 0);
	for (uint64_t seq = 0; seq < 3; seq++) {
		assert_int_equal(tu_pub_send(pub, seq, 64, 10000), 0);
		assert_int_equal(crs_pub_wait_consumed(pub, 10000), 0);
		tu_sleep_ms(1000); /* longer than untethered_ms */
	}
	assert_int_equal(crs_pub_subscribers(pub), 1);
	assert_int_equal(crs_pub_complete(pub), 0);
	assert_int_equal(tu_serve_wait_child(pub, pid, 20000), 0);
	close(chan);
	crs_pub_close(pub);
}

/* A subscriber whose epoch ended before it read anything. It snapshots
 * its terminal record, then reads nothing while it is evicted for
 * holding that ring space back; afterwards the record differs in its
 * state alone (a record that may be read is never rewritten), and the
 * end it reports carries the eviction's reason. */
static int ended_reader(void *arg, int chan)
{
	const char *name = arg;
	crs_sub *sub;
	CHECK_EQ(tu_sub_open(name, 16, &sub), 0);
	CHECK_EQ(tu_send(chan, 1, 0), 0);
	const struct crs_ctl *ctl = ((struct crs_sub *)sub)->ctl;
	struct terminal_view before, after;
	uint64_t v;
	CHECK_EQ(tu_expect(chan, 2, &v, 30000), 0); /* the epoch failed */
	CHECK_EQ(terminal_get(&ctl->term, &before), CRS_TERM_ERROR);
	CHECK_EQ(before.code, 42);
	CHECK_EQ(before.seq, 3);
	CHECK(strcmp(before.message, "boom") == 0);
	CHECK_EQ(tu_send(chan, 3, 0), 0);
	CHECK_EQ(tu_expect(chan, 4, &v, 30000), 0); /* we were evicted */
	CHECK_EQ(terminal_get(&ctl->term, &after), CRS_TERM_EVICTED);
	CHECK_EQ(after.code, before.code);
	CHECK_EQ(after.pos, before.pos);
	CHECK_EQ(after.seq, before.seq);
	CHECK(strcmp(after.message, before.message) == 0);
	/* Evicted: the unread messages are no longer protected, so none
	 * is delivered. */
	struct crs_msg m;
	CHECK_EQ(tu_sub_next(sub, &m, 30000), -CRS_EEND);
	CHECK_EQ(crs_sub_end(sub)->code, ETIMEDOUT);
	CHECK(strstr(crs_sub_end(sub)->message, "held the stream back"));
	crs_sub_close(sub);
	return 0;
}

/* The publisher's side of the eviction tests: 3 messages for reader
 * (then an error if end, whose record the reader must keep), the
 * reader idle until untethered_ms evicts it, then its verdict. */
static void run_evicted(const char *tag, uint32_t untethered_ms,
			int (*reader)(void *, int), int end)
{
	char name[64];
	tu_name(name, sizeof(name), tag);
	struct crs_pub_opts o;
	crs_pub_opts_init(&o);
	o.untethered_ms = untethered_ms;
	crs_pub *pub;
	assert_int_equal(crs_pub_create(name, &o, &pub), 0);
	int chan;
	pid_t pid = tu_spawn(reader, name, &chan, 60);
	assert_int_equal(tu_pub_await_count(pub, 1, 10000), 0);
	assert_int_equal(tu_expect(chan, 1, NULL, 10000), 0);
	for (uint64_t seq = 0; seq < 3; seq++)
		assert_int_equal(tu_pub_send(pub, seq, 64, 10000), 0);
	if (end)
		assert_int_equal(crs_pub_error(pub, 42, "boom"), 0);
	/* Nothing is evicted while we do not serve: the reader does its
	 * part (a read, a release, a snapshot) before the eviction. */
	assert_int_equal(tu_send(chan, 2, 0), 0);
	assert_int_equal(tu_expect(chan, 3, NULL, 30000), 0);
	assert_int_equal(tu_pub_await_count(pub, 0, 30000), 0);
	assert_int_equal(tu_send(chan, 4, 0), 0);
	assert_int_equal(tu_serve_wait_child(pub, pid, 30000), 0);
	close(chan);
	crs_pub_close(pub);
}

static void test_eviction_keeps_ended_record(void **state)
{
	(void)state;
	run_evicted("ended", 500, ended_reader, 1);
}

/* A subscriber that released a message while the next one was already
 * committed, and is then evicted, learns it at its next poll and is
 * handed nothing more (its release had looked at that next message). */
static int released_reader(void *arg, int chan)
{
	const char *name = arg;
	crs_sub *sub;
	CHECK_EQ(tu_sub_open(name, 16, &sub), 0);
	CHECK_EQ(tu_send(chan, 1, 0), 0);
	uint64_t v;
	CHECK_EQ(tu_expect(chan, 2, &v, 30000), 0); /* 3 messages are there */
	struct crs_msg m;
	CHECK_EQ(tu_sub_next(sub, &m, 30000), 1);
	crs_sub_release(sub); /* it looked at the next, committed one */
	CHECK_EQ(tu_send(chan, 3, 0), 0);
	CHECK_EQ(tu_expect(chan, 4, &v, 30000), 0); /* we were evicted */
	int r = crs_sub_poll(sub, &m);
	CHECK_EQ(r, -CRS_EEND);
	CHECK_EQ(crs_sub_end(sub)->code, ETIMEDOUT);
	crs_sub_close(sub);
	return 0;
}

static void test_evicted_after_release(void **state)
{
	(void)state;
	run_evicted("evrel", 300, released_reader, 0);
}

int main(void)
{
	tu_init();
	const struct CMUnitTest tests[] = {
		TU_TEST(test_evicts_idle_subscriber),
		TU_TEST(test_default_never_evicts),
		TU_TEST(test_quiet_publisher_keeps_healthy_subscriber),
		TU_TEST(test_eviction_keeps_ended_record),
		TU_TEST(test_evicted_after_release),
	};
	return cmocka_run_group_tests(tests, NULL, NULL);
}
