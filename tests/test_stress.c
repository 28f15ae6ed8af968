/*
 * test_stress.c - cross-process stress: a publisher publishes a long run
 * of variable-length messages (0..max_message bytes), each carrying its
 * sequence number and a checksum of its payload, mixing offer,
 * claim/commit, commits shorter than the claim, and aborted claims. Two
 * subscriber processes (one polling with the io_uring wait engine, one
 * dispatching callbacks with the fallback engine and a small prefetch)
 * check every message and count torn, lost, duplicated or reordered
 * ones; all counts must be zero and every message must arrive.
 *
 * CRS_STRESS_MESSAGES overrides the number of messages.
 */
#include "util.h"

#include <errno.h>
#include <string.h>

#define RING (1u << 16)
#define MAXMSG (RING / 4)
#define HEAD 12 /* seq (8) + crc (4) */

#if defined(__SANITIZE_ADDRESS__)
#define DEFAULT_MESSAGES 1000000
#elif defined(__has_feature)
#if __has_feature(address_sanitizer)
#define DEFAULT_MESSAGES 1000000
#endif
#endif
#ifndef DEFAULT_MESSAGES
#define DEFAULT_MESSAGES 2000000
#endif

static uint64_t messages(void)
{
	const char *s = getenv("CRS_STRESS_MESSAGES");
	if (s && *s)
		return strtoull(s, NULL, 10);
	return DEFAULT_MESSAGES;
}

/* Mostly small, one in 128 up to the maximum, some empty. */
static size_t stress_len(uint64_t seq)
{
	uint64_t r = tu_mix(seq * 31 + 7);
	if (r % 128 == 0)
		return (size_t)((r >> 16) % (MAXMSG + 1));
	if (r % 128 == 1)
		return 0;
	return (size_t)((r >> 16) % 160);
}

static void write_message(uint8_t *p, size_t len, uint64_t seq)
{
	if (len < HEAD) {
		tu_fill(p, len, seq);
		return;
	}
	tu_fill(p + HEAD, len - HEAD, seq);
	uint32_t crc = tu_crc(p + HEAD, len - HEAD);
	memcpy(p, &seq, 8);
	memcpy(p + 8, &crc, 4);
}

/* ---- subscriber side ---------------------------------------------------- */

struct tally {
	uint64_t received, expected;
	uint64_t lost, dup, torn, badlen, badseq;
};

enum { R_RECEIVED = 1, R_LOST, R_DUP, R_TORN, R_BADLEN, R_BADSEQ, R_END };

static void report_one(struct tally *t, const char *what, uint64_t seq)
{
	uint64_t n = t->lost + t->dup + t->torn + t->badlen + t->badseq;
	if (n <= 10)
		fprintf(stderr, "[pid %d] %s at message %llu\n", (int)getpid(),
			what, (unsigned long long)seq);
}

static void check_message(struct tally *t, const struct crs_msg *m)
{
	const uint8_t *p = m->data;
	uint64_t seq = m->seq;
	t->received++;
	if (m->len >= HEAD) {
		uint64_t own;
		uint32_t crc;
		memcpy(&own, p, 8);
		memcpy(&crc, p + 8, 4);
		if (own != m->seq) {
			t->badseq++;
			report_one(t, "stream seq differs from payload seq",
				   m->seq);
		}
		seq = own;
		if (crc != tu_crc(p + HEAD, m->len - HEAD) ||
		    tu_verify(p + HEAD, m->len - HEAD, seq) != -1) {
			t->torn++;
			report_one(t, "torn payload", seq);
		}
	} else if (tu_verify(p, m->len, seq) != -1) {
		t->torn++;
		report_one(t, "torn short payload", seq);
	}
	if (seq > t->expected) {
		t->lost += seq - t->expected;
		report_one(t, "lost messages before", seq);
	} else if (seq < t->expected) {
		t->dup++;
		report_one(t, "duplicate or reordered", seq);
	}
	if (m->len != stress_len(seq)) {
		t->badlen++;
		report_one(t, "wrong length", seq);
	}
	if (seq >= t->expected)
		t->expected = seq + 1;
}

static void send_tally(int chan, const struct tally *t, int end_code)
{
	tu_send(chan, R_RECEIVED, t->received);
	tu_send(chan, R_LOST, t->lost);
	tu_send(chan, R_DUP, t->dup);
	tu_send(chan, R_TORN, t->torn);
	tu_send(chan, R_BADLEN, t->badlen);
	tu_send(chan, R_BADSEQ, t->badseq);
	tu_send(chan, R_END, (uint64_t)(int64_t)end_code);
}

/* Subscriber 1: poll/release, default prefetch; every other message is
 * left for the next poll to release. */
static int child_poller(void *arg, int chan)
{
	crs_sub *sub;
	CHECK_EQ(tu_sub_open(arg, 128, &sub), 0);
	CHECK_EQ(tu_send(chan, TU_READY, 0), 0);
	struct tally t = { 0 };
	struct crs_msg m;
	int r;
	for (;;) {
		r = crs_sub_poll(sub, &m);
		if (r == 1) {
			check_message(&t, &m);
			if (t.received & 1)
				crs_sub_release(sub);
			continue;
		}
		if (r < 0)
			break;
		if (crs_sub_wait(sub, 30000) == -ETIMEDOUT) {
			fprintf(stderr, "poller: stalled after %llu\n",
				(unsigned long long)t.received);
			break;
		}
	}
	const struct crs_end *e = crs_sub_end(sub);
	send_tally(chan, &t, e ? e->code : -1);
	crs_sub_close(sub);
	return 0;
}

struct dctx {
	struct tally t;
	int done, code;
};

static void d_next(void *ctx, const struct crs_msg *m)
{
	check_message(&((struct dctx *)ctx)->t, m);
}

static void d_complete(void *ctx)
{
	((struct dctx *)ctx)->done++;
}

static void d_error(void *ctx, int code, const char *msg)
{
	(void)msg;
	((struct dctx *)ctx)->done++;
	((struct dctx *)ctx)->code = code;
}

/* Subscriber 2: callbacks, prefetch 32 (replenishes every 24). */
static int child_dispatcher(void *arg, int chan)
{
	crs_sub *sub;
	CHECK_EQ(tu_sub_open(arg, 32, &sub), 0);
	CHECK_EQ(tu_send(chan, TU_READY, 0), 0);
	struct dctx c = { { 0 }, 0, 0 };
	struct crs_sub_callbacks cb = { d_next, d_complete, d_error, NULL };
	int r;
	while ((r = crs_sub_dispatch(sub, &cb, &c, 1000)) >= 0) {
		if (r == 0 && crs_sub_wait(sub, 30000) == -ETIMEDOUT) {
			fprintf(stderr, "dispatcher: stalled after %llu\n",
				(unsigned long long)c.t.received);
			break;
		}
	}
	CHECK_EQ(c.done, r == -CRS_EEND ? 1 : 0);
	send_tally(chan, &c.t, r == -CRS_EEND ? c.code : -1);
	crs_sub_close(sub);
	return 0;
}

/* ---- publisher side ------------------------------------------------------- */

/* Claim len bytes, waiting for demand and room. */
static void *claim(crs_pub *pub, size_t len)
{
	void *buf;
	int64_t deadline = tu_now_ms() + 30000;
	for (;;) {
		int r = crs_pub_claim(pub, len, &buf);
		if (r == 0)
			return buf;
		if (r != -CRS_ENODEMAND && r != -CRS_ENOROOM)
			fail_msg("claim %zu: %s", len, crs_strerror(r));
		if (tu_now_ms() > deadline)
			fail_msg("no demand or room for 30 s");
		r = crs_pub_wait(pub, len, 1000);
		if (r && r != -ETIMEDOUT)
			fail_msg("wait: %s", crs_strerror(r));
	}
}

static void publish_one(crs_pub *pub, uint64_t seq, uint8_t *scratch)
{
	size_t len = stress_len(seq);
	uint64_t r = tu_mix(seq ^ 0xc0ffee);
	uint8_t *p;
	switch (seq % 4) {
	case 0: /* copy; offer would block for good (BLOCK overflow) if the
		   subscribers stalled, so wait with a deadline first */
		write_message(scratch, len, seq);
		if (crs_pub_wait(pub, len, 30000) != 0)
			fail_msg("no demand or room for 30 s (message %llu)",
				 (unsigned long long)seq);
		assert_int_equal(crs_pub_offer(pub, scratch, len), 0);
		return;
	case 1: /* in place */
		p = claim(pub, len);
		write_message(p, len, seq);
		assert_int_equal(crs_pub_commit(pub, len), 0);
		return;
	case 2: { /* claim more, commit less */
		size_t more = len + (size_t)(r % (MAXMSG - len + 1));
		p = claim(pub, more);
		write_message(p, len, seq);
		assert_int_equal(crs_pub_commit(pub, len), 0);
		return;
	}
	default: /* a claim abandoned, then the real one */
		p = claim(pub, (size_t)(r % (MAXMSG + 1)));
		memset(p, 0xa5, (size_t)(r % (MAXMSG + 1)) / 2);
		crs_pub_abort(pub);
		p = claim(pub, len);
		write_message(p, len, seq);
		assert_int_equal(crs_pub_commit(pub, len), 0);
		return;
	}
}

static void collect(int chan, const char *who, uint64_t n)
{
	uint64_t v[R_END + 1];
	for (int tag = R_RECEIVED; tag <= R_END; tag++)
		assert_int_equal(tu_expect(chan, (uint64_t)tag, &v[tag], 120000),
				 0);
	print_message("%s: received %llu of %llu, lost %llu, duplicated or "
		      "reordered %llu, torn %llu, wrong length %llu, wrong "
		      "seq %llu, end code %lld\n",
		      who, (unsigned long long)v[R_RECEIVED],
		      (unsigned long long)n, (unsigned long long)v[R_LOST],
		      (unsigned long long)v[R_DUP], (unsigned long long)v[R_TORN],
		      (unsigned long long)v[R_BADLEN],
		      (unsigned long long)v[R_BADSEQ], (long long)v[R_END]);
	assert_int_equal(v[R_LOST], 0);
	assert_int_equal(v[R_DUP], 0);
	assert_int_equal(v[R_TORN], 0);
	assert_int_equal(v[R_BADLEN], 0);
	assert_int_equal(v[R_BADSEQ], 0);
	assert_int_equal(v[R_RECEIVED], n);
	assert_int_equal(v[R_END], 0);
}

static void test_stress_two_subscribers(void **state)
{
	(void)state;
	char name[64];
	tu_name(name, sizeof(name), "stress");
	uint64_t n = messages();
	int c1, c2;
	pid_t p1 = tu_spawn_engine(child_poller, name, &c1, 200, 0);
	pid_t p2 = tu_spawn_engine(child_dispatcher, name, &c2, 200, 1);
	struct crs_pub_opts o;
	crs_pub_opts_init(&o);
	o.ring_bytes = RING;
	o.max_message = MAXMSG;
	crs_pub *pub;
	assert_int_equal(crs_pub_create(name, &o, &pub), 0);
	assert_int_equal(crs_pub_wait_subscribers(pub, 2, 10000), 0);
	assert_int_equal(tu_expect(c1, TU_READY, NULL, 10000), 0);
	assert_int_equal(tu_expect(c2, TU_READY, NULL, 10000), 0);
	uint8_t *scratch = malloc(MAXMSG);
	assert_non_null(scratch);
	int64_t t0 = tu_now_ms();
	for (uint64_t seq = 0; seq < n; seq++)
		publish_one(pub, seq, scratch);
	free(scratch);
	assert_int_equal(crs_pub_complete(pub), 0);
	collect(c1, "poller", n);
	collect(c2, "dispatcher", n);
	print_message("%llu messages in %lld ms\n", (unsigned long long)n,
		      (long long)(tu_now_ms() - t0));
	assert_int_equal(tu_wait_child(p1, 10000), 0);
	assert_int_equal(tu_wait_child(p2, 10000), 0);
	close(c1);
	close(c2);
	crs_pub_close(pub);
}

int main(void)
{
	tu_init();
	const struct CMUnitTest tests[] = {
		TU_TEST(test_stress_two_subscribers),
	};
	return cmocka_run_group_tests_name("stress", tests, NULL, NULL);
}
