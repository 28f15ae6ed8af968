/*
 * test_drain.c - a subscriber that drains its epoch after the epoch has
 * ended follows its terminal record, which it reads on the hot path up to
 * the record's position (sub_record_allows in src/sub.c; how fast is for
 * crs-hotpath's "ended" mode to say, not for a test). The record is
 * shared memory, so it is untrusted: the child reads part of its epoch,
 * rewrites its own record (it maps its control memfd a second time, as a
 * hostile publisher could write it), reads on, and reports how many
 * messages came and how the stream ended. The next epoch's messages lie
 * right behind the record's position in the ring (another subscriber
 * reads them). Whatever the record says, every message before the
 * position first seen arrives in order and intact, none after it, and
 * the stream ends (a record taken back: at the publisher's close). No
 * crash, no hang.
 */
#include "util.h"

#include <errno.h>
#include <string.h>
#include <sys/mman.h>

#include "src/layout.h"

#define LEN 100
#define FRAME 112 /* LEN + header, 8-aligned */
#define COUNT 400 /* 44800 bytes: a 64 KiB ring holds them all */
#define NEXT 10	  /* the next epoch's, right behind them */
#define BEFORE 150 /* read before the record is rewritten */
#define EVICT_CODE EOWNERDEAD

enum kind {
	AS_IS = 1,   /* untouched: everything, then completion */
	TO_ERROR,    /* COMPLETE becomes ERROR (ECANCELED) */
	MOVED,	     /* its position moved back: the first one stays */
	MOVED_ERROR, /* moved back and become ERROR: that one stays too */
	MOVED_AHEAD, /* moved forward: the first one stays, then EPROTO */
	GARBAGE,     /* a state that means nothing */
	ERASED,	     /* the record taken back: nothing, then EPIPE */
	EVICTED,     /* cut off: nothing more at once */
};

enum { GO = 1, READ, CLOSED, DONE, HELD };

struct drain_arg {
	const char *name;
	enum kind kind;
	int take; /* read with crs_sub_take, else crs_sub_poll */
};

/* Read up to limit messages from *seq on, each checked; returns what
 * the last call returned (1: limit reached, 0: none came in timeout_ms,
 * < 0: the end). */
static int read_on(crs_sub *sub, int take, uint64_t *seq, uint64_t limit,
		   int timeout_ms)
{
	struct crs_msg m[16];
	while (*seq < limit) {
		int n;
		if (take) {
			size_t max = limit - *seq < 16 ? limit - *seq : 16;
			int64_t deadline = tu_now_ms() + timeout_ms;
			while ((n = crs_sub_take(sub, m, max, 0)) == 0 &&
			       tu_now_ms() < deadline)
				crs_sub_wait(sub, 50);
		} else {
			n = tu_sub_next(sub, &m[0], timeout_ms);
		}
		if (n <= 0)
			return n;
		for (int i = 0; i < n; i++, (*seq)++) {
			CHECK_EQ(m[i].seq, *seq);
			CHECK_EQ(m[i].len, LEN);
			CHECK_EQ(tu_verify(m[i].data, m[i].len, *seq), -1);
		}
		crs_sub_release(sub);
	}
	return 1;
}

static void rewrite(enum kind k, struct crs_ctl *c)
{
	switch (k) {
	case AS_IS:
		break;
	case TO_ERROR:
		c->term.code = ECANCELED;
		atomic_store(&c->term.state, CRS_TERM_ERROR);
		break;
	case MOVED:
		c->term.pos -= 200 * FRAME;
		break;
	case MOVED_AHEAD:
		c->term.pos += 200 * FRAME;
		break;
	case MOVED_ERROR:
		c->term.pos -= 200 * FRAME;
		c->term.code = ECANCELED;
		atomic_store(&c->term.state, CRS_TERM_ERROR);
		break;
	case GARBAGE:
		atomic_store(&c->term.state, 0x77u);
		break;
	case ERASED:
		atomic_store(&c->term.state, CRS_TERM_NONE);
		break;
	case EVICTED:
		c->evict.code = EVICT_CODE;
		atomic_store(&c->term.state, CRS_TERM_EVICTED);
		break;
	}
}

/* A child's subscription of name with unbounded demand, once the
 * parent said GO (within timeout_ms). */
static crs_sub *subscribe_on_go(const char *name, int chan, int timeout_ms)
{
	crs_sub *sub;
	CHECK_EQ(tu_sub_open(name, 0, &sub), 0);
	CHECK_EQ(crs_sub_request(sub, CRS_UNBOUNDED), 0);
	CHECK_EQ(tu_send(chan, TU_READY, 0), 0);
	CHECK_EQ(tu_expect(chan, GO, NULL, timeout_ms), 0);
	return sub;
}

/* The child's own control segment, mapped a second time with prot. */
static struct crs_ctl *map_own_ctl(int prot)
{
	int fd = tu_find_fd("memfd:crs-ctl");
	CHECK(fd >= 0);
	struct crs_ctl *c = mmap(NULL, CRS_CTL_SIZE, prot, MAP_SHARED, fd, 0);
	CHECK(c != MAP_FAILED);
	CHECK_EQ(c->magic, CRS_CTL_MAGIC);
	return c;
}

static int child_drain(void *p, int chan)
{
	const struct drain_arg *a = p;
	crs_sub *sub = subscribe_on_go(a->name, chan, 20000);
	struct crs_ctl *c = map_own_ctl(PROT_READ | PROT_WRITE);
	/* Our epoch ended before GO (a disconnect that sends completion):
	 * the record is out. */
	CHECK_EQ(atomic_load(&c->term.state), CRS_TERM_COMPLETE);
	CHECK_EQ(c->term.pos, c->start_pos + COUNT * FRAME);

	uint64_t seq = 0;
	CHECK_EQ(read_on(sub, a->take, &seq, BEFORE, 10000), 1);
	rewrite(a->kind, c);
	/* Everything is in the ring already: a wait means nothing comes. */
	int r = read_on(sub, a->take, &seq, UINT64_MAX, 1000);
	CHECK(r <= 0);
	if (r == 0) {
		/* Nothing more, no end: the publisher must close first. */
		CHECK_EQ(tu_send(chan, READ, seq), 0);
		CHECK_EQ(tu_expect(chan, CLOSED, NULL, 20000), 0);
		r = read_on(sub, a->take, &seq, UINT64_MAX, 10000);
		CHECK(r < 0);
	} else {
		CHECK_EQ(tu_send(chan, READ, seq), 0);
	}
	CHECK_EQ(r, -CRS_EEND);
	const struct crs_end *e = crs_sub_end(sub);
	CHECK(e != NULL);
	munmap(c, CRS_CTL_SIZE);
	CHECK_EQ(tu_send(chan, DONE, (uint64_t)e->code), 0);
	crs_sub_close(sub);
	return 0;
}

/* The subscriber of the next epoch: it takes the NEXT messages behind
 * the drained epoch's end (demand for them) and leaves when told. */
static int child_next(void *p, int chan)
{
	crs_sub_close(subscribe_on_go(p, chan, 30000));
	return 0;
}

/* The drained epoch's publisher: its COUNT messages fit in the ring,
 * and a disconnect sends completion. */
static crs_pub *drain_pub(const char *name)
{
	struct crs_pub_opts o;
	crs_pub_opts_init(&o);
	o.ring_bytes = 1 << 16;
	o.on_disconnect = CRS_DISCONNECT_SEND_COMPLETED;
	crs_pub *pub;
	assert_int_equal(crs_pub_create(name, &o, &pub), 0);
	return pub;
}

/* End the epoch at *seq (its records come out), start the next one with
 * child_next as its subscriber, and publish NEXT messages in it. */
static pid_t next_epoch(crs_pub *pub, const char *name, uint64_t *seq,
			int *next_ch)
{
	uint64_t v;
	assert_int_equal(crs_pub_disconnect(pub, 1), 0);
	pid_t next_pid = tu_spawn(child_next, (void *)name, next_ch, 60);
	assert_int_equal(tu_serve_expect(pub, *next_ch, TU_READY, &v, 20000),
			 0);
	assert_int_equal(crs_pub_connect(pub), 2);
	for (uint64_t end = *seq + NEXT; *seq < end; (*seq)++)
		assert_int_equal(tu_pub_send(pub, *seq, LEN, 10000), 0);
	return next_pid;
}

/* Runs kind k with both read calls; want: messages read, end code. */
static void run_drain(enum kind k, uint64_t want_read, int want_code)
{
	for (int take = 0; take < 2; take++) {
		char name[64];
		tu_name(name, sizeof(name), "drain");
		struct drain_arg a = { name, k, take };
		crs_pub *pub = drain_pub(name);
		int ch, next_ch;
		pid_t pid = tu_spawn(child_drain, &a, &ch, 60);
		assert_int_equal(tu_pub_await_count(pub, 1, 10000), 0);
		assert_int_equal(tu_expect(ch, TU_READY, NULL, 10000), 0);
		uint64_t seq = 0;
		for (; seq < COUNT; seq++)
			assert_int_equal(tu_pub_send(pub, seq, LEN, 10000), 0);
		pid_t next_pid = next_epoch(pub, name, &seq, &next_ch);

		assert_int_equal(tu_send(ch, GO, 0), 0);
		uint64_t got = 0, code = 0;
		assert_int_equal(tu_serve_expect(pub, ch, READ, &got, 20000), 0);
		assert_int_equal(got, want_read);
		if (k == ERASED) {
			crs_pub_close(pub);
			pub = NULL;
			assert_int_equal(tu_send(ch, CLOSED, 0), 0);
		}
		assert_int_equal(tu_expect(ch, DONE, &code, 20000), 0);
		assert_int_equal((int)code, want_code);
		assert_int_equal(tu_send(next_ch, GO, 0), 0);
		if (pub) {
			assert_int_equal(tu_serve_wait_child(pub, pid, 10000),
					 0);
			assert_int_equal(
				tu_serve_wait_child(pub, next_pid, 10000), 0);
			crs_pub_close(pub);
		} else {
			assert_int_equal(tu_wait_child(pid, 10000), 0);
			assert_int_equal(tu_wait_child(next_pid, 10000), 0);
		}
		close(ch);
		close(next_ch);
	}
}

static void test_as_is(void **state)
{
	(void)state;
	run_drain(AS_IS, COUNT, 0);
}

static void test_to_error(void **state)
{
	(void)state;
	run_drain(TO_ERROR, COUNT, ECANCELED);
}

static void test_moved(void **state)
{
	(void)state;
	/* All of its epoch as first seen; then the record, now behind the
	 * reader, is a protocol error. */
	run_drain(MOVED, COUNT, CRS_EPROTO);
}

static void test_moved_error(void **state)
{
	(void)state;
	/* The state changed, so the reader looks at the record again: the
	 * position it saw first still decides. */
	run_drain(MOVED_ERROR, COUNT, CRS_EPROTO);
}

static void test_moved_ahead(void **state)
{
	(void)state;
	/* It stops at the position it saw first, where the record no
	 * longer is: a protocol error, not a wait for messages that are
	 * not its own. */
	run_drain(MOVED_AHEAD, COUNT, CRS_EPROTO);
}

static void test_garbage(void **state)
{
	(void)state;
	run_drain(GARBAGE, COUNT, CRS_EPROTO);
}

static void test_erased(void **state)
{
	(void)state;
	run_drain(ERASED, COUNT, EPIPE);
}

static void test_evicted(void **state)
{
	(void)state;
	run_drain(EVICTED, BEFORE, EVICT_CODE);
}

/* The record comes out while the subscriber holds its epoch's last
 * message, and the next epoch's messages follow at once: the release of
 * that message must publish the consumed position (the publisher may be
 * waiting for it, crs_pub_wait_consumed), with no further call. */
static int child_last(void *p, int chan)
{
	crs_sub *sub = subscribe_on_go(p, chan, 20000);
	uint64_t seq = 0;
	CHECK_EQ(read_on(sub, 0, &seq, COUNT - 1, 10000), 1);
	struct crs_msg m;
	CHECK_EQ(tu_sub_next(sub, &m, 10000), 1);
	CHECK_EQ(m.seq, COUNT - 1);
	CHECK_EQ(tu_send(chan, HELD, 0), 0);
	CHECK_EQ(tu_expect(chan, GO, NULL, 20000), 0);
	crs_sub_release(sub);
	struct crs_ctl *c = map_own_ctl(PROT_READ);
	CHECK_EQ(atomic_load(&c->term.state), CRS_TERM_COMPLETE);
	CHECK_EQ(atomic_load(&c->consumed), c->start_pos + COUNT * FRAME);
	munmap(c, CRS_CTL_SIZE);
	CHECK_EQ(tu_send(chan, DONE, 0), 0);
	crs_sub_close(sub);
	return 0;
}

static void test_release_after_record(void **state)
{
	(void)state;
	char name[64];
	tu_name(name, sizeof(name), "drain");
	crs_pub *pub = drain_pub(name);
	int ch, next_ch;
	pid_t pid = tu_spawn(child_last, name, &ch, 60);
	assert_int_equal(tu_pub_await_count(pub, 1, 10000), 0);
	assert_int_equal(tu_expect(ch, TU_READY, NULL, 10000), 0);
	uint64_t seq = 0, v;
	for (; seq < COUNT; seq++)
		assert_int_equal(tu_pub_send(pub, seq, LEN, 10000), 0);
	assert_int_equal(tu_send(ch, GO, 0), 0);
	assert_int_equal(tu_serve_expect(pub, ch, HELD, &v, 20000), 0);
	pid_t next_pid = next_epoch(pub, name, &seq, &next_ch);
	assert_int_equal(tu_send(ch, GO, 0), 0);
	assert_int_equal(tu_serve_expect(pub, ch, DONE, &v, 20000), 0);
	assert_int_equal(tu_send(next_ch, GO, 0), 0);
	assert_int_equal(tu_serve_wait_child(pub, pid, 10000), 0);
	assert_int_equal(tu_serve_wait_child(pub, next_pid, 10000), 0);
	crs_pub_close(pub);
	close(ch);
	close(next_ch);
}

int main(void)
{
	tu_init();
	const struct CMUnitTest tests[] = {
		TU_TEST(test_as_is),  TU_TEST(test_to_error),
		TU_TEST(test_moved),  TU_TEST(test_moved_error),
		TU_TEST(test_moved_ahead), TU_TEST(test_garbage),
		TU_TEST(test_erased), TU_TEST(test_evicted),
		TU_TEST(test_release_after_record),
	};
	return cmocka_run_group_tests(tests, NULL, NULL);
}
