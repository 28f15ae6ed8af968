/*
 * test_threads.c - two handles in two threads of one process: a
 * publisher in one thread and a subscriber in another, both sleeping in
 * their waits, every message checked. Handles are used from one thread
 * each, but the library must keep no unsynchronised state between them:
 * run under ThreadSanitizer (-Db_sanitize=thread) this proves it.
 */
#include <errno.h>
#include <pthread.h>
#include <stdatomic.h>
#include <string.h>

#include "util.h"

#define MSGS 5000
#define MAX_LEN 300

static char name[64];
static atomic_int created;

static void *publisher(void *arg)
{
	(void)arg;
	struct crs_pub_opts o;
	crs_pub_opts_init(&o);
	o.ring_bytes = 1 << 14;
	o.spin_us = -1;
	crs_pub *pub;
	intptr_t err = crs_pub_create(name, &o, &pub);
	atomic_store(&created, err ? -1 : 1);
	if (err)
		return (void *)err;
	err = crs_pub_wait_subscribers(pub, 1, 20000);
	for (uint64_t seq = 0; !err && seq < MSGS; seq++)
		err = tu_pub_send(pub, seq, tu_len(seq, MAX_LEN), 20000);
	if (!err)
		err = crs_pub_complete(pub);
	if (!err)
		err = crs_pub_wait_consumed(pub, 20000);
	if (err)
		fprintf(stderr, "publisher: %d\n", (int)err);
	crs_pub_close(pub);
	return (void *)err;
}

static void *subscriber(void *arg)
{
	(void)arg;
	struct crs_sub_opts o;
	crs_sub_opts_init(&o);
	o.wait_ms = 10000;
	o.prefetch = 32;
	o.spin_us = -1;
	crs_sub *sub;
	intptr_t err = crs_sub_open(name, &o, &sub);
	if (err)
		return (void *)err;
	uint64_t seq = 0;
	for (;;) {
		struct crs_msg m;
		int r = crs_sub_poll(sub, &m);
		if (r == 0) {
			err = crs_sub_wait(sub, 20000);
			if (err)
				break;
			continue;
		}
		if (r < 0)
			break;
		if (m.seq != seq || m.len != tu_len(seq, MAX_LEN) ||
		    tu_verify(m.data, m.len, seq) >= 0) {
			err = -EBADMSG;
			break;
		}
		crs_sub_release(sub);
		seq++;
	}
	if (!err && (crs_sub_end(sub)->code != 0 || seq != MSGS)) {
		fprintf(stderr, "subscriber: %llu messages, end %d (%s)\n",
			(unsigned long long)seq, crs_sub_end(sub)->code,
			crs_sub_end(sub)->message);
		err = -EPROTO;
	}
	crs_sub_close(sub);
	return (void *)err;
}

static void test_two_threads(void **state)
{
	(void)state;
	tu_name(name, sizeof(name), "threads");
	pthread_t p, s;
	assert_int_equal(pthread_create(&p, NULL, publisher, NULL), 0);
	while (!atomic_load(&created))
		tu_sleep_ms(1);
	assert_int_equal(atomic_load(&created), 1);
	assert_int_equal(pthread_create(&s, NULL, subscriber, NULL), 0);
	void *rs, *rp;
	assert_int_equal(pthread_join(s, &rs), 0);
	assert_int_equal(pthread_join(p, &rp), 0);
	assert_int_equal((intptr_t)rs, 0);
	assert_int_equal((intptr_t)rp, 0);
}

int main(void)
{
	tu_init();
	const struct CMUnitTest tests[] = {
		TU_TEST(test_two_threads),
	};
	return cmocka_run_group_tests(tests, NULL, NULL);
}
