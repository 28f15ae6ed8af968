/*
 * test_epoch.c - a subscriber belongs to one connection epoch, across
 * processes: once its epoch has ended (disconnect with any strategy,
 * completion, error) it never sees a message of the next epoch, the
 * ring space it still holds stays protected until it releases it, and
 * its stream ends as documented: with its epoch's terminal signal, or,
 * after a NO_EVENT disconnect, with nothing until the publisher closes
 * (EPIPE) or dies (EPIPE) - never with a protocol error.
 *
 * Subscribers are children ("readers") driven over a channel; every
 * message carries the tu_fill() pattern of its sequence number, which
 * readers verify, also on a view they hold while the publisher runs on.
 */
#include <errno.h>
#include <string.h>

#include "crs/inspect.h"
#include "util.h"

#define LEN 600	   /* frame 608: a 4 KiB ring holds six */
#define RING 4096

enum {
	C_RECV = 200, /* receive and release val messages; ACK: next seq */
	C_HOLD,	      /* receive one and keep it; ACK: its seq */
	C_VERIFY,     /* ACK: 1 if the held view still has its pattern */
	C_NOMORE,     /* nothing may come within val ms; ACK: 0, else
			 1000000 + the seq that came */
	C_END,	      /* wait for the end; ACK: its code, or 1000000 + the
			 seq of a message that came instead */
	C_EXIT,
	C_ACK,
};

#define CAME_INSTEAD 1000000u

static int reader(void *arg, int chan)
{
	const char *name = arg;
	crs_sub *sub;
	CHECK_EQ(tu_sub_open(name, 16, &sub), 0);
	CHECK_EQ(tu_send(chan, C_ACK, 0), 0);
	struct crs_msg m, held = { 0 };
	for (;;) {
		uint64_t cmd, val, reply = 0;
		CHECK_EQ(tu_recv(chan, &cmd, &val, 60000), 0);
		switch (cmd) {
		case C_RECV:
			for (uint64_t i = 0; i < val; i++) {
				CHECK_EQ(tu_sub_next(sub, &m, 20000), 1);
				CHECK_EQ(m.len, LEN);
				CHECK(tu_verify(m.data, m.len, m.seq) == -1);
				reply = m.seq + 1;
				crs_sub_release(sub);
			}
			break;
		case C_HOLD:
			CHECK_EQ(tu_sub_next(sub, &held, 20000), 1);
			CHECK(tu_verify(held.data, held.len, held.seq) == -1);
			reply = held.seq;
			break;
		case C_VERIFY:
			reply = tu_verify(held.data, held.len, held.seq) == -1;
			break;
		case C_NOMORE: {
			int r = tu_sub_next(sub, &m, (int)val);
			CHECK(r >= 0);
			reply = r == 1 ? CAME_INSTEAD + m.seq : 0;
			break;
		}
		case C_END: {
			int r = tu_sub_next(sub, &m, 20000);
			CHECK(r != 0);
			reply = r == 1 ? CAME_INSTEAD + m.seq
				       : (uint64_t)crs_sub_end(sub)->code;
			break;
		}
		case C_EXIT:
			crs_sub_close(sub);
			CHECK_EQ(tu_send(chan, C_ACK, 0), 0);
			return 0;
		default:
			CHECK(0);
		}
		CHECK_EQ(tu_send(chan, C_ACK, reply), 0);
	}
}

/* Start a reader and serve pub until it is admitted. */
static pid_t start_reader(crs_pub *pub, const char *name, int *chan)
{
	int before = crs_pub_subscribers(pub);
	pid_t pid = tu_spawn(reader, (void *)name, chan, 60);
	assert_true(pid > 0);
	assert_int_equal(tu_serve_expect(pub, *chan, C_ACK, NULL, 10000), 0);
	assert_int_equal(tu_pub_await_count(pub, before + 1, 10000), 0);
	return pid;
}

static uint64_t cmd(int chan, uint64_t c, uint64_t val)
{
	uint64_t reply = UINT64_MAX;
	assert_int_equal(tu_send(chan, c, val), 0);
	assert_int_equal(tu_expect(chan, C_ACK, &reply, 30000), 0);
	return reply;
}

static void finish(crs_pub *pub, pid_t pid, int chan)
{
	assert_int_equal(tu_send(chan, C_EXIT, 0), 0);
	if (pub)
		assert_int_equal(tu_serve_wait_child(pub, pid, 10000), 0);
	else
		assert_int_equal(tu_wait_child(pid, 10000), 0);
	close(chan);
}

static crs_pub *make_pub(const char *name, uint32_t mode, uint32_t strategy)
{
	struct crs_pub_opts o;
	crs_pub_opts_init(&o);
	o.ring_bytes = RING;
	o.mode = mode;
	o.on_disconnect = strategy;
	crs_pub *pub;
	assert_int_equal(crs_pub_create(name, &o, &pub), 0);
	return pub;
}

static void send_seq(crs_pub *pub, uint64_t seq)
{
	assert_int_equal(tu_pub_send(pub, seq, LEN, 20000), 0);
}

/* The contract suite's case: A reads epoch 1 and holds its last view;
 * after a NO_EVENT disconnect and a new connect, epoch 2 runs for B.
 * A gets nothing of epoch 2, its view is never overwritten (the
 * publisher runs out of room instead), and A ends with EPIPE when the
 * publisher closes. */
static void no_event_isolates(uint32_t mode)
{
	char name[64];
	tu_name(name, sizeof(name), "noevent");
	crs_pub *pub = make_pub(name, mode, CRS_DISCONNECT_NO_EVENT);
	int ca, cb;
	pid_t pa = start_reader(pub, name, &ca);
	uint64_t seq = 0;
	for (; seq < 5; seq++)
		send_seq(pub, seq);
	assert_int_equal(cmd(ca, C_RECV, 4), 4);
	assert_int_equal(cmd(ca, C_HOLD, 0), 4);

	int64_t epoch = crs_pub_epoch(pub);
	assert_int_equal(crs_pub_disconnect(pub, epoch), 0);
	pid_t pb = start_reader(pub, name, &cb); /* waits for epoch 2 */
	assert_int_equal(crs_pub_connect(pub), epoch + 1);

	/* Publish epoch 2 until the ring is full: A's held message pins
	 * it (B has read nothing yet either, but B started later). */
	uint64_t first2 = seq;
	void *buf;
	int r;
	while ((r = crs_pub_claim(pub, LEN, &buf)) == 0) {
		tu_fill(buf, LEN, seq++);
		assert_int_equal(crs_pub_commit(pub, LEN), 0);
		assert_true(seq - first2 < 16); /* it must stop */
	}
	assert_int_equal(r, -CRS_ENOROOM);
	assert_true(seq - first2 >= 3);
	assert_int_equal(cmd(ca, C_VERIFY, 0), 1);
	/* Releasing it (the poll does) shows nothing of epoch 2. */
	assert_int_equal(cmd(ca, C_NOMORE, 200), 0);
	assert_int_equal(cmd(cb, C_RECV, seq - first2), seq);

	/* A no longer pins anything: epoch 2 runs on through the ring. */
	assert_int_equal(tu_send(cb, C_RECV, 20), 0);
	for (uint64_t end = seq + 20; seq < end; seq++)
		send_seq(pub, seq);
	uint64_t next = 0;
	assert_int_equal(tu_expect(cb, C_ACK, &next, 30000), 0);
	assert_int_equal(next, seq);
	assert_int_equal(cmd(ca, C_NOMORE, 100), 0);
	assert_int_equal(crs_pub_complete(pub), 0);
	assert_int_equal(cmd(cb, C_END, 0), 0);
	assert_int_equal(cmd(ca, C_NOMORE, 100), 0); /* not A's completion */

	crs_pub_close(pub);
	assert_int_equal(cmd(ca, C_END, 0), EPIPE);
	finish(NULL, pa, ca);
	finish(NULL, pb, cb);
}

static void test_no_event_publish(void **state)
{
	(void)state;
	no_event_isolates(CRS_MODE_PUBLISH);
}

static void test_no_event_replay(void **state)
{
	(void)state;
	no_event_isolates(CRS_MODE_REPLAY);
}

/* A reader that lags behind the end of its epoch gets exactly its
 * epoch's messages and then its epoch's signal, although the next
 * epoch's messages follow right behind them in the ring. */
static void lagging_reader(int complete, uint32_t strategy, int want)
{
	char name[64];
	tu_name(name, sizeof(name), "lag");
	crs_pub *pub = make_pub(name, CRS_MODE_PUBLISH, strategy);
	int ca, cb;
	pid_t pa = start_reader(pub, name, &ca);
	uint64_t seq = 0;
	for (; seq < 3; seq++)
		send_seq(pub, seq);
	if (complete)
		assert_int_equal(crs_pub_complete(pub), 0);
	else
		assert_int_equal(crs_pub_disconnect(pub, 1), 0);
	pid_t pb = start_reader(pub, name, &cb);
	assert_int_equal(crs_pub_connect(pub), 2);
	for (; seq < 5; seq++)
		send_seq(pub, seq);
	assert_int_equal(cmd(cb, C_RECV, 2), 5);
	assert_int_equal(cmd(ca, C_RECV, 3), 3);
	assert_int_equal(cmd(ca, C_END, 0), (uint64_t)want);
	finish(pub, pa, ca);
	finish(pub, pb, cb);
	crs_pub_close(pub);
}

static void test_lagging_send_error(void **state)
{
	(void)state;
	lagging_reader(0, CRS_DISCONNECT_SEND_ERROR, ECANCELED);
}

static void test_lagging_send_completed(void **state)
{
	(void)state;
	lagging_reader(0, CRS_DISCONNECT_SEND_COMPLETED, 0);
}

static void test_lagging_no_event(void **state)
{
	(void)state;
	/* Nothing at all after its 3 messages; EPIPE at the close. */
	char name[64];
	tu_name(name, sizeof(name), "lagne");
	crs_pub *pub = make_pub(name, CRS_MODE_PUBLISH,
				CRS_DISCONNECT_NO_EVENT);
	int ca, cb;
	pid_t pa = start_reader(pub, name, &ca);
	uint64_t seq = 0;
	for (; seq < 3; seq++)
		send_seq(pub, seq);
	assert_int_equal(crs_pub_disconnect(pub, 1), 0);
	pid_t pb = start_reader(pub, name, &cb);
	assert_int_equal(crs_pub_connect(pub), 2);
	for (; seq < 5; seq++)
		send_seq(pub, seq);
	assert_int_equal(cmd(cb, C_RECV, 2), 5);
	assert_int_equal(cmd(ca, C_RECV, 3), 3);
	assert_int_equal(cmd(ca, C_NOMORE, 200), 0);
	crs_pub_close(pub);
	assert_int_equal(cmd(ca, C_END, 0), EPIPE);
	assert_int_equal(cmd(cb, C_END, 0), EPIPE);
	finish(NULL, pa, ca);
	finish(NULL, pb, cb);
}

static void test_lagging_completion(void **state)
{
	(void)state;
	lagging_reader(1, CRS_DISCONNECT_SEND_ERROR, 0); /* complete */
}

/* A publisher process that disconnects with NO_EVENT, runs a replay
 * epoch 2 and dies: a subscriber that read nothing yet gets the five
 * messages of its epoch and then EPIPE, none of epoch 2. */
static int dying_publisher(void *arg, int chan)
{
	const char *name = arg;
	struct crs_pub_opts o;
	crs_pub_opts_init(&o);
	o.ring_bytes = RING;
	o.mode = CRS_MODE_REPLAY;
	o.on_disconnect = CRS_DISCONNECT_NO_EVENT;
	crs_pub *pub;
	CHECK_EQ(crs_pub_create(name, &o, &pub), 0);
	CHECK_EQ(tu_send(chan, C_ACK, 0), 0);
	CHECK_EQ(tu_pub_await_count(pub, 1, 10000), 0);
	uint64_t seq = 0;
	for (; seq < 5; seq++)
		CHECK_EQ(tu_pub_send(pub, seq, LEN, 10000), 0);
	CHECK_EQ(crs_pub_disconnect(pub, 1), 0);
	CHECK_EQ(crs_pub_connect(pub), 2);
	for (; seq < 6; seq++) /* what the ring has room for */
		CHECK_EQ(tu_pub_send(pub, seq, LEN, 10000), 0);
	CHECK_EQ(tu_send(chan, C_ACK, seq), 0);
	uint64_t tag, val;
	tu_recv(chan, &tag, &val, 10000); /* die when told */
	_exit(0);
}

static void test_no_event_publisher_dies(void **state)
{
	(void)state;
	char name[64];
	tu_name(name, sizeof(name), "dies");
	int chan;
	pid_t pid = tu_spawn(dying_publisher, name, &chan, 30);
	assert_int_equal(tu_expect(chan, C_ACK, NULL, 10000), 0);
	crs_sub *sub;
	assert_int_equal(tu_sub_open(name, 16, &sub), 0);
	assert_int_equal(tu_expect(chan, C_ACK, NULL, 10000), 0);
	assert_int_equal(tu_send(chan, C_EXIT, 0), 0);
	assert_int_equal(tu_wait_child(pid, 10000), 0);
	struct crs_msg m;
	for (uint64_t seq = 0; seq < 5; seq++) {
		assert_int_equal(tu_sub_next(sub, &m, 10000), 1);
		assert_int_equal(m.seq, seq);
		assert_int_equal(tu_verify(m.data, m.len, m.seq), -1);
	}
	assert_int_equal(tu_sub_next(sub, &m, 10000), -CRS_EEND);
	assert_int_equal(crs_sub_end(sub)->code, EPIPE);
	crs_sub_close(sub);
	close(chan);
}

/* Child: an inspector of the stream named arg that answers each W_READ
 * with the state it reads (W_STATE), until anything else arrives. */
enum { W_READY = 300, W_READ, W_STATE };

static int watcher(void *arg, int chan)
{
	crs_inspector *in;
	CHECK_EQ(crs_inspect_open(arg, &in), 0);
	CHECK_EQ(tu_send(chan, W_READY, 0), 0);
	uint64_t tag, val;
	while (tu_recv(chan, &tag, &val, 30000) == 0 && tag == W_READ) {
		struct crs_stream_info info;
		CHECK(crs_inspect_read(in, &info, NULL, 0) >= 0);
		CHECK_EQ(tu_send(chan, W_STATE, (uint64_t)info.state), 0);
	}
	crs_inspect_close(in);
	return 0;
}

static int watched_state(int chan)
{
	uint64_t state = UINT64_MAX;
	assert_int_equal(tu_send(chan, W_READ, 0), 0);
	assert_int_equal(tu_expect(chan, W_STATE, &state, 10000), 0);
	return (int)state;
}

/* What another process's inspector reads through an epoch's life: a
 * disconnected publisher is live (present, and it may connect again,
 * as before its first connect); closed means crs_pub_close() alone. */
static void test_inspected_states(void **state)
{
	(void)state;
	char name[64];
	tu_name(name, sizeof(name), "states");
	crs_pub *pub = tu_make_pub(name, RING);
	int chan;
	pid_t pid = tu_spawn(watcher, name, &chan, 60);
	/* Serving: the inspector's handshake. */
	assert_int_equal(tu_serve_expect(pub, chan, W_READY, NULL, 20000), 0);
	assert_int_equal(watched_state(chan), CRS_STREAM_LIVE);
	assert_int_equal(crs_pub_complete(pub), 0);
	assert_int_equal(watched_state(chan), CRS_STREAM_COMPLETED);
	assert_int_equal(crs_pub_connect(pub), 2);
	assert_int_equal(watched_state(chan), CRS_STREAM_LIVE);
	assert_int_equal(crs_pub_error(pub, 42, "boom"), 0);
	assert_int_equal(watched_state(chan), CRS_STREAM_FAILED);
	assert_int_equal(crs_pub_connect(pub), 3);
	assert_int_equal(crs_pub_disconnect(pub, 3), 0);
	assert_int_equal(watched_state(chan), CRS_STREAM_LIVE);
	crs_pub_close(pub);
	assert_int_equal(watched_state(chan), CRS_STREAM_CLOSED);
	assert_int_equal(tu_send(chan, C_EXIT, 0), 0);
	assert_int_equal(tu_wait_child(pid, 10000), 0);
	close(chan);
}

int main(void)
{
	tu_init();
	const struct CMUnitTest tests[] = {
		TU_TEST(test_no_event_publish),
		TU_TEST(test_no_event_replay),
		TU_TEST(test_lagging_send_error),
		TU_TEST(test_lagging_send_completed),
		TU_TEST(test_lagging_no_event),
		TU_TEST(test_lagging_completion),
		TU_TEST(test_no_event_publisher_dies),
		TU_TEST(test_inspected_states),
	};
	return cmocka_run_group_tests(tests, NULL, NULL);
}
