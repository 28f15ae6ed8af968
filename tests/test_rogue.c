/*
 * test_rogue.c - a subscriber that scribbles on its own control segment
 * (it can: the control memfd is mapped read-write by both sides; the test
 * maps it a second time through its fd, found as "memfd:crs-ctl" in
 * /proc/self/fd) or talks on its liveness socket. The publisher must
 * survive, keep serving the well-behaved subscriber, which receives
 * everything, and end the rogue's subscription (CRS_EPROTO) when the
 * garbage breaks the protocol: consumed beyond what was published,
 * consumed going backwards or unaligned, requested going backwards. Words
 * only the subscriber's own side uses (park word, counters) may hold
 * garbage without harm to anyone.
 */
#include "util.h"

#include <errno.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/socket.h>
#include <sys/un.h>

#include "src/layout.h"

#define MAXLEN 300

enum kind {
	CONSUMED_AHEAD = 1, /* far beyond the published position */
	CONSUMED_AHEAD_8,   /* one frame header beyond it */
	CONSUMED_BACK,	    /* below what it reported before */
	CONSUMED_UNALIGNED, /* within range, not 8-aligned */
	REQUESTED_BACK,	    /* demand total going down */
	LINE_RANDOM,	    /* its whole demand/progress line random */
	PAGE_RANDOM,	    /* the whole control page random */
	SOCKET_TALK,	    /* bytes on the liveness socket */
	HARMLESS,	    /* park word, counters, futex word: garbage */
};

enum { RECEIVED = 1, SCRIBBLE, SCRIBBLED, CHECK_END, DONE };

struct rogue_arg {
	const char *name;
};

static int find_liveness_socket(void)
{
	for (int fd = 3; fd < 1024; fd++) {
		struct sockaddr_un sa;
		socklen_t len = sizeof(sa);
		if (getpeername(fd, (struct sockaddr *)&sa, &len) == 0 &&
		    sa.sun_family == AF_UNIX && len > sizeof(sa_family_t) &&
		    strstr(sa.sun_path, ".sock"))
			return fd;
	}
	return -1;
}

static void scribble(enum kind k, struct crs_ctl *c)
{
	uint64_t cons = atomic_load(&c->consumed);
	uint8_t *line1 = (uint8_t *)c + offsetof(struct crs_ctl, requested);
	switch (k) {
	case CONSUMED_AHEAD:
		atomic_store(&c->consumed, cons + (1ULL << 40));
		break;
	case CONSUMED_AHEAD_8:
		atomic_store(&c->consumed, cons + 8);
		break;
	case CONSUMED_BACK:
		CHECK(cons >= 8);
		atomic_store(&c->consumed, cons - 8);
		break;
	case CONSUMED_UNALIGNED:
		atomic_store(&c->consumed, cons + 4);
		break;
	case REQUESTED_BACK:
		atomic_store(&c->requested, atomic_load(&c->requested) - 7);
		break;
	case LINE_RANDOM:
		for (size_t i = 0; i < CRS_CACHELINE; i += 8) {
			uint64_t w = tu_mix(i + 1) | (1ULL << 62);
			memcpy(line1 + i, &w, 8);
		}
		break;
	case PAGE_RANDOM:
		for (size_t i = 0; i < CRS_CTL_SIZE; i += 8) {
			uint64_t w = tu_mix(i + 99) | (1ULL << 62);
			memcpy((uint8_t *)c + i, &w, 8);
		}
		break;
	case SOCKET_TALK: {
		int fd = find_liveness_socket();
		CHECK(fd >= 0);
		CHECK_EQ(send(fd, "hello?", 6, MSG_NOSIGNAL), 6);
		break;
	}
	case HARMLESS:
		atomic_store(&c->parked, 0xdeadbeefcafef00dULL);
		atomic_store(&c->wakeups, UINT64_MAX);
		atomic_store(&c->progress, 0x12345678u);
		atomic_store(&c->consumed_seq, 0xabcdefULL);
		break;
	}
}

static int child_rogue(void *p, int chan)
{
	struct rogue_arg *a = p;
	crs_sub *sub;
	CHECK_EQ(tu_sub_open(a->name, 0, &sub), 0);
	CHECK_EQ(crs_sub_request(sub, 10), 0);
	CHECK_EQ(tu_send(chan, TU_READY, 0), 0);
	struct crs_msg m;
	for (uint64_t i = 0; i < 10; i++) {
		CHECK_EQ(tu_sub_next(sub, &m, 10000), 1);
		CHECK_EQ(m.seq, i);
		CHECK_EQ(tu_verify(m.data, m.len, i), -1);
		crs_sub_release(sub);
	}
	CHECK_EQ(crs_sub_poll(sub, &m), 0); /* idle: reports progress */
	CHECK_EQ(tu_send(chan, RECEIVED, 10), 0);

	uint64_t k;
	CHECK_EQ(tu_expect(chan, SCRIBBLE, &k, 20000), 0);
	int fd = tu_find_fd("memfd:crs-ctl");
	CHECK(fd >= 0);
	void *map = mmap(NULL, CRS_CTL_SIZE, PROT_READ | PROT_WRITE,
			 MAP_SHARED, fd, 0);
	CHECK(map != MAP_FAILED);
	struct crs_ctl *c = map;
	CHECK_EQ(c->magic, CRS_CTL_MAGIC);
	scribble((enum kind)k, c);
	CHECK_EQ(tu_send(chan, SCRIBBLED, 0), 0);

	uint64_t code;
	CHECK_EQ(tu_expect(chan, CHECK_END, &code, 20000), 0);
	if (k == HARMLESS) {
		/* Still subscribed and served: everything arrives. */
		CHECK_EQ(crs_sub_request(sub, CRS_UNBOUNDED), 0);
		for (uint64_t i = 10; i < 1010; i++) {
			CHECK_EQ(tu_sub_next(sub, &m, 10000), 1);
			CHECK_EQ(m.seq, i);
			CHECK_EQ(tu_verify(m.data, m.len, i), -1);
		}
		CHECK_EQ(tu_sub_next(sub, &m, 10000), -CRS_EEND);
		CHECK_EQ(crs_sub_end(sub)->code, 0);
	} else {
		/* Cut off: the end comes, nothing else. */
		int r = tu_sub_next(sub, &m, 10000);
		if (r == 1)
			fprintf(stderr, "rogue got message %llu\n",
				(unsigned long long)m.seq);
		CHECK_EQ(r, -CRS_EEND);
		const struct crs_end *e = crs_sub_end(sub);
		if (code != TU_ANY && (uint64_t)e->code != code)
			fprintf(stderr, "rogue ended with %d (%s)\n", e->code,
				e->message);
		if (code != TU_ANY)
			CHECK_EQ(e->code, code);
	}
	munmap(map, CRS_CTL_SIZE);
	crs_sub_close(sub);
	CHECK_EQ(tu_send(chan, DONE, 0), 0);
	return 0;
}

static void run_rogue(enum kind k, uint64_t want_code)
{
	char name[64];
	tu_name(name, sizeof(name), "rogue");
	struct rogue_arg ra = { name };
	int rc;
	pid_t rp = tu_spawn(child_rogue, &ra, &rc, 60);
	struct tu_agent_arg arg = { name, 0, 0, MAXLEN };
	struct tu_agents good;
	assert_int_equal(tu_agents_start(&good, 1, &arg), 0);
	struct crs_pub_opts o;
	crs_pub_opts_init(&o);
	o.ring_bytes = 1 << 14;
	o.max_message = 0;
	crs_pub *pub;
	assert_int_equal(crs_pub_create(name, &o, &pub), 0);
	assert_int_equal(tu_agents_ready(&good, pub), 0);
	assert_int_equal(crs_pub_wait_subscribers(pub, 2, 10000), 0);
	assert_int_equal(tu_expect(rc, TU_READY, NULL, 10000), 0);
	assert_int_equal(tu_agents_cmd(&good, TU_CMD_REQUEST, CRS_UNBOUNDED,
				       NULL),
			 0);
	assert_true(crs_pub_demand(pub) == 10);
	uint64_t seq = 0;
	for (; seq < 10; seq++)
		assert_int_equal(tu_pub_send(pub, seq, tu_len(seq, MAXLEN),
					     10000),
				 0);
	assert_int_equal(tu_expect(rc, RECEIVED, NULL, 10000), 0);
	assert_int_equal(tu_agents_cmd(&good, TU_CMD_RECV, 10, NULL), 0);
	assert_int_equal(tu_agents_cmd(&good, TU_CMD_NOMORE, 1, NULL), 0);
	/* The publisher has seen both subscribers' progress. */
	assert_int_equal(crs_pub_wait_consumed(pub, 10000), 0);

	assert_int_equal(tu_send(rc, SCRIBBLE, (uint64_t)k), 0);
	assert_int_equal(tu_expect(rc, SCRIBBLED, NULL, 10000), 0);
	if (k == HARMLESS) {
		for (int i = 0; i < 20; i++) {
			assert_int_equal(crs_pub_serve(pub), 2);
			tu_sleep_ms(1);
		}
		assert_int_equal(tu_send(rc, CHECK_END, 0), 0);
	} else {
		/* Dropped by the publisher; its demand (exhausted) no longer
		 * holds back the good one (unbounded). */
		assert_int_equal(tu_pub_await_count(pub, 1, 10000), 0);
		assert_true(crs_pub_demand(pub) == CRS_UNBOUNDED);
		assert_int_equal(tu_send(rc, CHECK_END, want_code), 0);
		assert_int_equal(tu_expect(rc, DONE, NULL, 20000), 0);
	}
	assert_int_equal(tu_send(good.chan[0], TU_CMD_RECV, 1000), 0);
	for (; seq < 1010; seq++)
		assert_int_equal(tu_pub_send(pub, seq, tu_len(seq, MAXLEN),
					     10000),
				 0);
	assert_int_equal(crs_pub_complete(pub), 0);
	assert_int_equal(tu_agents_collect(&good, NULL, 20000), 0);
	assert_int_equal(tu_agents_cmd(&good, TU_CMD_END, 0, NULL), 0);
	if (k == HARMLESS)
		assert_int_equal(tu_expect(rc, DONE, NULL, 20000), 0);
	assert_int_equal(tu_serve_wait_child(pub, rp, 10000), 0);
	assert_int_equal(tu_agents_finish(&good, pub), 0);
	close(rc);
	crs_pub_close(pub);
}

static void test_consumed_ahead(void **state)
{
	(void)state;
	run_rogue(CONSUMED_AHEAD, CRS_EPROTO);
}

static void test_consumed_ahead_8(void **state)
{
	(void)state;
	run_rogue(CONSUMED_AHEAD_8, CRS_EPROTO);
}

static void test_consumed_back(void **state)
{
	(void)state;
	run_rogue(CONSUMED_BACK, CRS_EPROTO);
}

static void test_consumed_unaligned(void **state)
{
	(void)state;
	run_rogue(CONSUMED_UNALIGNED, CRS_EPROTO);
}

static void test_requested_back(void **state)
{
	(void)state;
	run_rogue(REQUESTED_BACK, CRS_EPROTO);
}

static void test_line_random(void **state)
{
	(void)state;
	run_rogue(LINE_RANDOM, TU_ANY);
}

static void test_page_random(void **state)
{
	(void)state;
	run_rogue(PAGE_RANDOM, TU_ANY);
}

static void test_socket_talk(void **state)
{
	(void)state;
	run_rogue(SOCKET_TALK, CRS_EPROTO);
}

static void test_harmless_garbage(void **state)
{
	(void)state;
	run_rogue(HARMLESS, 0);
}

int main(void)
{
	tu_init();
	const struct CMUnitTest tests[] = {
		TU_TEST(test_consumed_ahead),
		TU_TEST(test_consumed_ahead_8),
		TU_TEST(test_consumed_back),
		TU_TEST(test_consumed_unaligned),
		TU_TEST(test_requested_back),
		TU_TEST(test_line_random),
		TU_TEST(test_page_random),
		TU_TEST(test_socket_talk),
		TU_TEST(test_harmless_garbage),
	};
	return cmocka_run_group_tests_name("rogue", tests, NULL, NULL);
}
