/*
 * test_stream_id.c - the stream id: every subscriber and inspector of one
 * publisher sees the id its publisher chose at creation, the same across
 * epochs; a new publisher of the same name chooses another one.
 */
#include <string.h>

#include "crs/inspect.h"
#include "util.h"

/* Child: subscribe, report crs_sub_stream_id() (tag 1) and what an
 * inspector shows (tag 2), then leave. */
static int report_ids(void *arg, int chan)
{
	crs_sub *sub;
	CHECK_EQ(tu_sub_open(arg, 4, &sub), 0);
	CHECK_EQ(tu_send(chan, 1, crs_sub_stream_id(sub)), 0);
	crs_inspector *in;
	CHECK_EQ(crs_inspect_open(arg, &in), 0);
	struct crs_stream_info info;
	CHECK(crs_inspect_read(in, &info, NULL, 0) >= 0);
	CHECK_EQ(tu_send(chan, 2, info.stream_id), 0);
	crs_inspect_close(in);
	crs_sub_close(sub);
	return 0;
}

/* The ids a child subscriber and inspector of pub's stream saw. */
static void ids_seen(crs_pub *pub, const char *name, uint64_t *sub_id,
		     uint64_t *insp_id)
{
	int chan;
	pid_t pid = tu_spawn(report_ids, (void *)name, &chan, 30);
	uint64_t tag = 0, val;
	int got = 0;
	int64_t deadline = tu_now_ms() + 20000;
	while (got < 2 && tu_now_ms() < deadline) {
		crs_pub_serve(pub); /* serve both handshakes */
		if (tu_recv(chan, &tag, &val, 5) == 0) {
			assert_true(tag == 1 || tag == 2);
			*(tag == 1 ? sub_id : insp_id) = val;
			got++;
		}
	}
	assert_int_equal(got, 2);
	assert_int_equal(tu_serve_wait_child(pub, pid, 10000), 0);
	close(chan);
}

static void test_id_per_publisher(void **state)
{
	(void)state;
	char name[64];
	tu_name(name, sizeof(name), "sid");
	crs_pub *pub = tu_make_pub(name, 1 << 16);
	uint64_t a_sub = 0, a_insp = 0, b_sub = 0, b_insp = 0;
	ids_seen(pub, name, &a_sub, &a_insp);
	assert_int_not_equal(a_sub, 0);
	assert_int_equal(a_sub, a_insp);

	/* A new epoch of the same publisher keeps its id. */
	assert_int_equal(crs_pub_complete(pub), 0);
	assert_true(crs_pub_connect(pub) >= 2);
	ids_seen(pub, name, &b_sub, &b_insp);
	assert_int_equal(b_sub, a_sub);
	assert_int_equal(b_insp, a_sub);
	crs_pub_close(pub);

	/* Another publisher of the name: another id. */
	pub = tu_make_pub(name, 1 << 16);
	ids_seen(pub, name, &b_sub, &b_insp);
	assert_int_not_equal(b_sub, 0);
	assert_int_not_equal(b_sub, a_sub);
	assert_int_equal(b_sub, b_insp);
	crs_pub_close(pub);
}

int main(void)
{
	tu_init();
	const struct CMUnitTest tests[] = {
		TU_TEST(test_id_per_publisher),
	};
	return cmocka_run_group_tests(tests, NULL, NULL);
}
