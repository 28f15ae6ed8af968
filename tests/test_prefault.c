/*
 * test_prefault.c - both ends have the data segment mapped in full before
 * the first message: the publisher's mapping is resident when
 * crs_pub_create returns, a subscriber's when its open returns, for a
 * ring of at most 64 MiB (that one included). A subscriber of a bigger
 * ring maps pages as it reads them, and so does an inspector of any
 * (ipc/memfd.c and src/attach.c say why). Residency is the Rss of the
 * mapping in /proc/self/smaps, read in the publisher's process and in a
 * forked subscriber's or inspector's. Messages flow as usual afterwards.
 */
#include "util.h"

#include <string.h>

#include "crs/inspect.h"

#define SMALL_RING (1u << 20)
#define BIG_RING (128u << 20)
#define READ_TOUCH_MAX (64u << 20) /* the largest ring a reader touches */

/* Size and Rss, in KiB, of this process's writable or read-only mapping
 * of the data segment of stream name; 0 if found. (A forked subscriber
 * also holds the publisher's writable one, inherited.) */
static int data_rss(const char *name, int writable, unsigned long *size_kib,
		    unsigned long *rss_kib)
{
	FILE *f = fopen("/proc/self/smaps", "r");
	if (!f)
		return -1;
	char line[512], want[128];
	snprintf(want, sizeof(want), "memfd:%s ", name);
	int found = 0, err = -1;
	while (fgets(line, sizeof(line), f)) {
		char perms[8];
		if (strstr(line, want) &&
		    sscanf(line, "%*x-%*x %7s", perms) == 1) {
			found = (perms[1] == 'w') == !!writable;
			continue;
		}
		if (found && sscanf(line, "Size: %lu kB", size_kib) == 1)
			continue;
		if (found && sscanf(line, "Rss: %lu kB", rss_kib) == 1) {
			err = 0;
			break;
		}
	}
	fclose(f);
	return err;
}

/* In a child: send the Size and Rss of our read-only mapping of name's
 * data segment. */
static void send_rss(const char *name, int chan)
{
	unsigned long size = 0, rss = 0;
	CHECK_EQ(data_rss(name, 0, &size, &rss), 0);
	CHECK_EQ(tu_send(chan, TU_READY, size), 0);
	CHECK_EQ(tu_send(chan, TU_READY, rss), 0);
}

static int child_reader(void *arg, int chan)
{
	const char *name = arg;
	crs_sub *sub;
	CHECK_EQ(tu_sub_open(name, 128, &sub), 0);
	send_rss(name, chan);
	struct crs_msg m;
	for (uint64_t seq = 0; seq < 100; seq++) {
		CHECK_EQ(tu_sub_next(sub, &m, 10000), 1);
		CHECK_EQ(m.seq, seq);
		CHECK_EQ(tu_verify(m.data, m.len, seq), -1);
	}
	CHECK_EQ(tu_sub_next(sub, &m, 10000), -CRS_EEND);
	crs_sub_close(sub);
	return 0;
}

static int child_inspector(void *arg, int chan)
{
	const char *name = arg;
	crs_inspector *in;
	CHECK_EQ(crs_inspect_open(name, &in), 0);
	send_rss(name, chan);
	crs_inspect_close(in);
	return 0;
}

/* A publisher of a ring of ring bytes and one subscriber (or inspector):
 * the Size and Rss of its mapping, after checking the publisher's. */
static void run_with(uint64_t ring, tu_child_fn child, unsigned long *size,
		     unsigned long *rss)
{
	char name[64];
	tu_name(name, sizeof(name), "prefault");
	crs_pub *pub = tu_make_pub(name, ring);
	unsigned long psize = 0, prss = 0;
	assert_int_equal(data_rss(name, 1, &psize, &prss), 0);
	assert_true(psize * 1024 > ring);
	assert_int_equal(prss, psize);
	int chan;
	pid_t pid = tu_spawn(child, name, &chan, 60);
	uint64_t v;
	assert_int_equal(tu_serve_expect(pub, chan, TU_READY, &v, 20000), 0);
	*size = (unsigned long)v;
	assert_int_equal(tu_serve_expect(pub, chan, TU_READY, &v, 20000), 0);
	*rss = (unsigned long)v;
	assert_int_equal(*size, psize);
	if (child == child_reader) {
		for (uint64_t seq = 0; seq < 100; seq++)
			assert_int_equal(tu_pub_send(pub, seq, 200, 10000), 0);
		assert_int_equal(crs_pub_complete(pub), 0);
	}
	assert_int_equal(tu_serve_wait_child(pub, pid, 20000), 0);
	close(chan);
	crs_pub_close(pub);
}

static void run(uint64_t ring, unsigned long *size, unsigned long *rss)
{
	run_with(ring, child_reader, size, rss);
}

static void test_small_ring_mapped_in_full(void **state)
{
	(void)state;
	unsigned long size, rss;
	run(SMALL_RING, &size, &rss);
	assert_int_equal(rss, size);
}

static void test_big_ring_mapped_as_read(void **state)
{
	(void)state;
	unsigned long size, rss;
	run(BIG_RING, &size, &rss);
	/* The header and what the open read, nowhere near the bound. */
	assert_true(size * 1024 > BIG_RING);
	assert_true(rss * 1024 < READ_TOUCH_MAX / 16);
}

/* The bound counts the ring, not the segment (8 KiB of header more). */
static void test_largest_ring_mapped_in_full(void **state)
{
	(void)state;
	unsigned long size, rss;
	run(READ_TOUCH_MAX, &size, &rss);
	assert_int_equal(rss, size);
}

/* An inspector reads the header and at most a few frames: it maps no
 * more than that, whatever the ring. */
static void test_inspector_maps_as_read(void **state)
{
	(void)state;
	unsigned long size, rss;
	run_with(SMALL_RING, child_inspector, &size, &rss);
	assert_true(size * 1024 > SMALL_RING);
	assert_true(rss * 1024 < SMALL_RING / 4);
}

int main(void)
{
	tu_init();
	const struct CMUnitTest tests[] = {
		TU_TEST(test_small_ring_mapped_in_full),
		TU_TEST(test_big_ring_mapped_as_read),
		TU_TEST(test_largest_ring_mapped_in_full),
		TU_TEST(test_inspector_maps_as_read),
	};
	return cmocka_run_group_tests_name("prefault", tests, NULL, NULL);
}
