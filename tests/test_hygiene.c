/*
 * test_hygiene.c - resources: 10,000 publisher create/close cycles and
 * 10,000 subscriber open/close cycles against one publisher leave the
 * fd table and the memory map as they were (LeakSanitizer, in the
 * sanitizer build, checks the heap at exit); a clean exit leaves nothing
 * in the runtime directory; a killed publisher's leftovers are reclaimed
 * by the next publisher of the same name.
 */
#include <dirent.h>
#include <errno.h>
#include <string.h>

#include "util.h"

#define CYCLES 10000

static int count_fds(void)
{
	int n = 0;
	DIR *d = opendir("/proc/self/fd");
	struct dirent *e;
	while (d && (e = readdir(d)))
		n += e->d_name[0] != '.';
	if (d)
		closedir(d);
	return n - 1; /* the DIR's own fd */
}

/* Mappings of this process. AddressSanitizer maps memory of its own as
 * it goes, so there the count says nothing (LeakSanitizer checks the
 * heap instead) and this returns 0. */
static int count_maps(void)
{
#if defined(__SANITIZE_ADDRESS__)
	return 0;
#endif
	FILE *f = fopen("/proc/self/maps", "r");
	int n = 0, c;
	while (f && (c = fgetc(f)) != EOF)
		n += c == '\n';
	if (f)
		fclose(f);
	return n;
}

/* Entries of the runtime directory whose names start with prefix. */
static int dir_entries(const char *prefix)
{
	int n = 0;
	DIR *d = opendir(tu_dir());
	struct dirent *e;
	while (d && (e = readdir(d)))
		n += !strncmp(e->d_name, prefix, strlen(prefix));
	if (d)
		closedir(d);
	return n;
}

static void test_publisher_cycles(void **state)
{
	(void)state;
	char name[64];
	tu_name(name, sizeof(name), "cycle");
	crs_pub *pub;
	/* Warm up once: lazily created process state is not a leak. */
	assert_int_equal(crs_pub_create(name, NULL, &pub), 0);
	crs_pub_close(pub);
	int fds = count_fds(), maps = count_maps();
	for (int i = 0; i < CYCLES; i++) {
		assert_int_equal(crs_pub_create(name, NULL, &pub), 0);
		crs_pub_close(pub);
	}
	assert_int_equal(count_fds(), fds);
	assert_int_equal(count_maps(), maps);
	assert_int_equal(dir_entries(name), 0);
}

/* A subscriber process: open, read one message, close; CYCLES times.
 * Reports its fd and map counts after the first and the last cycle. */
static int cycling_subscriber(void *arg, int chan)
{
	const char *name = arg;
	int fds = 0, maps = 0;
	for (int i = 0; i < CYCLES; i++) {
		crs_sub *sub;
		CHECK_EQ(tu_sub_open(name, 1, &sub), 0);
		struct crs_msg m;
		CHECK_EQ(tu_sub_next(sub, &m, 10000), 1);
		crs_sub_close(sub);
		if (i == 0) {
			fds = count_fds();
			maps = count_maps();
		}
	}
	CHECK_EQ(count_fds(), fds);
	CHECK_EQ(count_maps(), maps);
	CHECK_EQ(tu_send(chan, 1, 0), 0);
	return 0;
}

static void test_subscriber_cycles(void **state)
{
	(void)state;
	char name[64];
	tu_name(name, sizeof(name), "subcycle");
	struct crs_pub_opts o;
	crs_pub_opts_init(&o);
	o.overflow = CRS_OVERFLOW_DROP; /* publish whenever someone's there */
	crs_pub *pub;
	assert_int_equal(crs_pub_create(name, &o, &pub), 0);
	int fds = count_fds(), maps = count_maps();
	int chan;
	pid_t pid = tu_spawn(cycling_subscriber, name, &chan, 120);
	int64_t deadline = tu_now_ms() + 110000;
	uint64_t tag = 0, val, seq = 0;
	while (tag != 1 && tu_now_ms() < deadline) {
		if (crs_pub_wait(pub, 8, 1) == 0 &&
		    crs_pub_offer(pub, &seq, sizeof(seq)) == 0)
			seq++;
		tu_recv(chan, &tag, &val, 0);
	}
	assert_int_equal(tag, 1);
	assert_int_equal(tu_serve_wait_child(pub, pid, 10000), 0);
	assert_int_equal(tu_pub_await_count(pub, 0, 10000), 0);
	/* Every subscriber's control segment and socket is gone again. */
	assert_int_equal(count_fds(), fds + 1); /* + the channel */
	assert_int_equal(count_maps(), maps);
	close(chan);
	crs_pub_close(pub);
	assert_int_equal(dir_entries(name), 0);
}

static int create_and_die(void *arg, int chan)
{
	(void)chan;
	crs_pub *pub;
	CHECK_EQ(crs_pub_create(arg, NULL, &pub), 0);
	CHECK_EQ(tu_send(chan, 1, 0), 0);
	for (;;)
		crs_pub_wait(pub, 8, -1);
}

static void test_stale_leftovers_reclaimed(void **state)
{
	(void)state;
	char name[64];
	tu_name(name, sizeof(name), "stale");
	int chan;
	pid_t pid = tu_spawn(create_and_die, name, &chan, 30);
	assert_int_equal(tu_expect(chan, 1, NULL, 10000), 0);
	crs_pub *pub;
	assert_int_equal(crs_pub_create(name, NULL, &pub), -EEXIST);
	tu_kill(pid);
	close(chan);
	assert_int_equal(dir_entries(name), 2); /* its socket and lock */
	assert_int_equal(crs_pub_create(name, NULL, &pub), 0);
	assert_int_equal(dir_entries(name), 2); /* reclaimed, not doubled */
	crs_pub_close(pub);
	assert_int_equal(dir_entries(name), 0);
}

static int opener(void *arg, int chan)
{
	(void)chan;
	crs_sub *sub;
	CHECK_EQ(tu_sub_open(arg, 1, &sub), 0);
	struct crs_msg m;
	CHECK_EQ(tu_sub_next(sub, &m, 20000), -CRS_EEND);
	crs_sub_close(sub);
	return 0;
}

/* Forty subscribers knock at once (more than the handshakes a publisher
 * tracks at a time): every one is admitted, none refused. */
static void many_at_once(int no_uring)
{
	enum { N = 40 };
	char name[64];
	tu_name(name, sizeof(name), "crowd");
	crs_pub *pub;
	assert_int_equal(crs_pub_create(name, NULL, &pub), 0);
	pid_t pids[N];
	for (int i = 0; i < N; i++)
		pids[i] = tu_spawn_engine(opener, name, NULL, 60, no_uring);
	assert_int_equal(crs_pub_wait_subscribers(pub, N, 30000), 0);
	assert_int_equal(crs_pub_complete(pub), 0);
	for (int i = 0; i < N; i++)
		assert_int_equal(tu_serve_wait_child(pub, pids[i], 20000), 0);
	crs_pub_close(pub);
}

static void test_many_at_once(void **state)
{
	(void)state;
	many_at_once(0);
}

static void test_many_at_once_poll(void **state)
{
	(void)state;
	many_at_once(1);
}

int main(void)
{
	tu_init();
	const struct CMUnitTest tests[] = {
		TU_TEST(test_publisher_cycles),
		TU_TEST(test_subscriber_cycles),
		TU_TEST(test_stale_leftovers_reclaimed),
		TU_TEST(test_many_at_once),
		TU_TEST(test_many_at_once_poll),
	};
	return cmocka_run_group_tests(tests, NULL, NULL);
}
