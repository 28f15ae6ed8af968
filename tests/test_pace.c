/*
 * test_pace.c - a streaming subscriber keeps its distance from the writer
 * (sub_keep_distance), and only a streaming one: a subscriber answering
 * requests that come two at a time, which catches up after every pair,
 * never waits (a message follows half its releases). The
 * writer's mirrored position it paces by is untrusted: a publisher that
 * scribbles on it (a counter that stays below the reader, so that the
 * writer always looks behind) costs the subscriber bounded waits and
 * nothing else: every message arrives, in
 * order and intact, then the end (the scribbles go through the
 * publisher's own mapping: struct crs_pub, src/pub.h). The subscriber's count
 * of waits (line 6 of its control page, read through its memfd) tells which
 * path ran; an inspector shows the same count (crs_sub_info.paced).
 * Separate processes; run on both wait engines.
 */
#include <errno.h>
#include <pthread.h>
#include <sched.h>
#include <string.h>
#include <sys/mman.h>

#include "crs/inspect.h"
#include "util.h"

#include "src/layout.h"
#include "src/pub.h"

#define MSG_LEN 32
#define STREAM_MSGS 100000 /* 4 MB of frames: all fit in the ring */
#define PINGS 2000

enum { GO = 1, PACED, INSPECTED, ACK };

/* This subscriber's count of waits for the writer. */
static uint64_t paced_count(void)
{
	int fd = tu_find_fd("memfd:crs-ctl");
	CHECK(fd >= 0);
	void *map = mmap(NULL, CRS_CTL_SIZE, PROT_READ, MAP_SHARED, fd, 0);
	CHECK(map != MAP_FAILED);
	const struct crs_ctl *c = map;
	CHECK_EQ(c->magic, CRS_CTL_MAGIC);
	uint64_t n = atomic_load_explicit(&c->paced, memory_order_relaxed);
	munmap(map, CRS_CTL_SIZE);
	return n;
}

/* Read n messages (seq 0..n-1, each checked). */
static void read_all(crs_sub *sub, uint64_t n)
{
	for (uint64_t seq = 0; seq < n; seq++) {
		struct crs_msg m;
		CHECK_EQ(tu_sub_next(sub, &m, 20000), 1);
		CHECK_EQ(m.seq, seq);
		CHECK_EQ(m.len, MSG_LEN);
		CHECK_EQ(tu_verify(m.data, m.len, seq), -1);
		crs_sub_release(sub);
	}
}

/* Wait until the parent has published everything, then stream it. */
static int streamer(void *arg, int chan)
{
	crs_sub *sub;
	CHECK_EQ(tu_sub_open(arg, 1u << 20, &sub), 0);
	CHECK_EQ(tu_expect(chan, GO, NULL, 30000), 0);
	read_all(sub, STREAM_MSGS);
	uint64_t paced = paced_count();
	CHECK_EQ(tu_send(chan, PACED, paced), 0);
	/* What an inspector shows of us (the publisher serves meanwhile,
	 * which mirrors our count). */
	crs_inspector *in;
	CHECK_EQ(crs_inspect_open(arg, &in), 0);
	struct crs_stream_info info;
	struct crs_sub_info subs[4];
	int n = crs_inspect_read(in, &info, subs, 4);
	CHECK_EQ(n, 1);
	CHECK_EQ(subs[0].pid, (int)getpid());
	crs_inspect_close(in);
	CHECK_EQ(tu_send(chan, INSPECTED, subs[0].paced), 0);
	struct crs_msg m;
	CHECK_EQ(tu_sub_next(sub, &m, 20000), -CRS_EEND);
	crs_sub_close(sub);
	return 0;
}

struct scribbler {
	_Atomic uint64_t *position;
	_Atomic int started;
	_Atomic int stop;
	pthread_t thread;
};

/* A position that moves all the time and is never ahead of the reader. */
static void *scribble(void *arg)
{
	struct scribbler *s = arg;
	for (uint64_t v = 0; !atomic_load(&s->stop); v++) {
		atomic_store_explicit(s->position, v & 0xffff,
				      memory_order_relaxed);
		if (!v)
			atomic_store(&s->started, 1);
	}
	return NULL;
}

static void test_hostile_position(void **state)
{
	(void)state;
	char name[64];
	tu_name(name, sizeof(name), "pace");
	crs_pub *pub = tu_make_pub(name, 8u << 20);
	int chan;
	pid_t pid = tu_spawn(streamer, name, &chan, 60);
	assert_int_equal(tu_pub_await_count(pub, 1, 10000), 0);
	for (uint64_t seq = 0; seq < STREAM_MSGS; seq++)
		assert_int_equal(tu_pub_send(pub, seq, MSG_LEN, 10000), 0);

	/* The data segment is sealed against new writable mappings: write
	 * through the publisher's own (its header, struct crs_pub). */
	struct crs_data_header *hdr = pub->ring.hdr;
	struct scribbler s = { .position = &hdr->stats.position };
	assert_int_equal(pthread_create(&s.thread, NULL, scribble, &s), 0);
	/* Until its first store the true position (far ahead) is there: on
	 * a loaded machine the thread may start late. */
	while (!atomic_load(&s.started))
		sched_yield();

	assert_int_equal(tu_send(chan, GO, 0), 0);
	/* Not serving meanwhile: a serve would mirror the true position. */
	uint64_t paced = 0;
	assert_int_equal(tu_expect(chan, PACED, &paced, 30000), 0);
	atomic_store(&s.stop, 1);
	pthread_join(s.thread, NULL);
	/* Serving: the inspector's handshake, and the mirror of paced. */
	uint64_t shown = 0;
	assert_int_equal(tu_serve_expect(pub, chan, INSPECTED, &shown, 20000),
			 0);
	assert_int_equal(shown, paced);
	assert_int_equal(crs_pub_complete(pub), 0);
	assert_int_equal(tu_serve_wait_child(pub, pid, 20000), 0);
	/* It streamed, and at nearly every look (one per 256 messages) the
	 * scribbled position said the writer was behind it: the true one
	 * would have only near the end. */
	fprintf(stderr, "waited for the writer %llu times\n",
		(unsigned long long)paced);
	assert_true(paced >= STREAM_MSGS / 256 / 2);
	assert_true(paced <= STREAM_MSGS / 256 + 1);
	close(chan);
	crs_pub_close(pub);
}

/* Requests come in pairs: at the release of the first of a pair the
 * second is committed (a message follows), and after the second the
 * reader finds nothing until it has answered. Release before answering,
 * so that the next pair cannot be committed yet when the release looks. */
static int ponger(void *arg, int chan)
{
	crs_sub *sub;
	CHECK_EQ(tu_sub_open(arg, 1u << 20, &sub), 0);
	for (uint64_t seq = 0; seq < PINGS; seq++) {
		struct crs_msg m;
		CHECK_EQ(tu_sub_next(sub, &m, 20000), 1);
		CHECK_EQ(m.seq, seq);
		crs_sub_release(sub);
		if (seq % 2)
			CHECK_EQ(tu_send(chan, ACK, seq), 0);
	}
	CHECK_EQ(tu_send(chan, PACED, paced_count()), 0);
	crs_sub_close(sub);
	return 0;
}

static void test_request_reply_never_waits(void **state)
{
	(void)state;
	char name[64];
	tu_name(name, sizeof(name), "pong");
	crs_pub *pub = tu_make_pub(name, 1u << 20);
	int chan;
	pid_t pid = tu_spawn(ponger, name, &chan, 60);
	assert_int_equal(tu_pub_await_count(pub, 1, 10000), 0);
	for (uint64_t seq = 0; seq < PINGS; seq += 2) {
		assert_int_equal(tu_pub_send(pub, seq, MSG_LEN, 10000), 0);
		assert_int_equal(tu_pub_send(pub, seq + 1, MSG_LEN, 10000), 0);
		uint64_t acked;
		assert_int_equal(tu_expect(chan, ACK, &acked, 10000), 0);
		assert_int_equal(acked, seq + 1);
	}
	uint64_t paced = 1;
	assert_int_equal(tu_expect(chan, PACED, &paced, 10000), 0);
	assert_int_equal(paced, 0);
	assert_int_equal(crs_pub_complete(pub), 0);
	assert_int_equal(tu_serve_wait_child(pub, pid, 20000), 0);
	close(chan);
	crs_pub_close(pub);
}

int main(void)
{
	tu_init();
	const struct CMUnitTest tests[] = {
		TU_TEST(test_hostile_position),
		TU_TEST(test_request_reply_never_waits),
	};
	return cmocka_run_group_tests(tests, NULL, NULL);
}
