/*
 * test_inspect_figures.c - what an inspector in another process shows of
 * a publisher that committed a few messages and then stopped serving
 * (it sleeps elsewhere): every message and byte, although the publisher
 * mirrors its figures only every few commits.
 */
#include <string.h>

#include "crs/inspect.h"
#include "util.h"

#define COUNT 10 /* fewer than the commits between two mirrors */
#define LEN 40

enum { ATTACHED = 1, PUBLISHED, SEEN_MSGS, SEEN_BYTES };

/* Child: attach an inspector, wait until told the messages are out, then
 * report the figures it reads. */
static int inspect(void *arg, int chan)
{
	crs_inspector *in;
	CHECK_EQ(crs_inspect_open(arg, &in), 0);
	CHECK_EQ(tu_send(chan, ATTACHED, 0), 0);
	uint64_t v;
	CHECK_EQ(tu_expect(chan, PUBLISHED, &v, 20000), 0);
	struct crs_stream_info info;
	CHECK(crs_inspect_read(in, &info, NULL, 0) >= 0);
	CHECK_EQ(tu_send(chan, SEEN_MSGS, info.published), 0);
	CHECK_EQ(tu_send(chan, SEEN_BYTES, info.bytes), 0);
	crs_inspect_close(in);
	return 0;
}

static void test_figures_of_a_quiet_publisher(void **state)
{
	(void)state;
	char name[64];
	tu_name(name, sizeof(name), "fig");
	struct crs_pub_opts o;
	crs_pub_opts_init(&o);
	o.mode = CRS_MODE_REPLAY; /* publishes with no subscriber */
	o.ring_bytes = 1 << 16;
	crs_pub *pub;
	assert_int_equal(crs_pub_create(name, &o, &pub), 0);
	int chan;
	pid_t pid = tu_spawn(inspect, name, &chan, 30);
	uint64_t v;
	/* Serving: the inspector's handshake. */
	assert_int_equal(tu_serve_expect(pub, chan, ATTACHED, NULL, 20000), 0);
	/* From here on the publisher never serves: only its commits can
	 * tell the inspector what it did. */
	for (int i = 0; i < COUNT; i++) {
		void *buf;
		assert_int_equal(crs_pub_claim(pub, LEN, &buf), 0);
		memset(buf, i, LEN);
		assert_int_equal(crs_pub_commit(pub, LEN), 0);
	}
	assert_int_equal(tu_send(chan, PUBLISHED, COUNT), 0);
	assert_int_equal(tu_expect(chan, SEEN_MSGS, &v, 20000), 0);
	assert_int_equal(v, COUNT);
	assert_int_equal(tu_expect(chan, SEEN_BYTES, &v, 20000), 0);
	assert_int_equal(v, COUNT * LEN);
	assert_int_equal(tu_wait_child(pid, 10000), 0);
	close(chan);
	crs_pub_close(pub);
}

int main(void)
{
	tu_init();
	const struct CMUnitTest tests[] = {
		TU_TEST(test_figures_of_a_quiet_publisher),
	};
	return cmocka_run_group_tests(tests, NULL, NULL);
}
