/*
 * test_scale.c - 64 streams x 64 subscribers: one process serves 64
 * full publishers from one crs_loop (4096 progress words, far beyond the
 * 128 words one futex_waitv takes), 64 subscriber processes each read
 * all 64 streams from one loop. Every message arrives, in order, on
 * both wait engines (suite nouring: the fallback waits in slices).
 */
#include <errno.h>
#include <stdlib.h>
#include <string.h>
#include <sys/resource.h>
#include <sys/wait.h>

#include "util.h"

#define STREAMS 64
#define SUBS 64
#define MSGS 50
#define LEN 24

struct stream {
	char name[64];
	uint64_t sent;
	int completed;
};

static struct stream streams[STREAMS];

static void on_ready(void *ctx, crs_pub *pub)
{
	struct stream *s = ctx;
	while (s->sent < MSGS) {
		void *buf;
		if (crs_pub_claim(pub, LEN, &buf))
			break; /* not connected yet, no demand or no room */
		tu_fill(buf, LEN, s->sent);
		assert_int_equal(crs_pub_commit(pub, LEN), 0);
		s->sent++;
	}
	if (s->sent == MSGS && !s->completed) {
		assert_int_equal(crs_pub_complete(pub), 0);
		s->completed = 1;
	}
}

struct reading {
	uint64_t next;
	int done; /* 1 completed, -code failed */
	int bad;
};

static void on_next(void *ctx, const struct crs_msg *m)
{
	struct reading *r = ctx;
	if (m->seq != r->next || m->len != LEN ||
	    tu_verify(m->data, m->len, r->next) >= 0)
		r->bad++;
	r->next++;
}

static void on_complete(void *ctx)
{
	((struct reading *)ctx)->done = 1;
}

static void on_error(void *ctx, int code, const char *message)
{
	(void)message;
	((struct reading *)ctx)->done = -code;
}

/* A subscriber process: all 64 streams in one loop. */
static int reader(void *arg, int chan)
{
	(void)arg;
	(void)chan;
	static struct reading rd[STREAMS];
	static crs_sub *subs[STREAMS];
	struct crs_sub_callbacks cb = { .on_next = on_next,
					.on_complete = on_complete,
					.on_error = on_error };
	crs_loop *loop;
	CHECK_EQ(crs_loop_create(&loop), 0);
	struct crs_sub_opts o;
	crs_sub_opts_init(&o);
	o.wait_ms = 30000;
	o.handshake_ms = 30000;
	o.prefetch = 16;
	for (int i = 0; i < STREAMS; i++) {
		CHECK_EQ(crs_sub_open(streams[i].name, &o, &subs[i]), 0);
		CHECK_EQ(crs_loop_add_sub(loop, subs[i], &cb, &rd[i]), 0);
	}
	int64_t deadline = tu_now_ms() + 100000;
	for (int done = 0; done < STREAMS && tu_now_ms() < deadline;) {
		int r = crs_loop_run(loop, 1000);
		CHECK(r >= 0 || r == -EINTR);
		done = 0;
		for (int i = 0; i < STREAMS; i++)
			done += rd[i].done != 0;
	}
	for (int i = 0; i < STREAMS; i++) {
		CHECK_EQ(rd[i].done, 1);
		CHECK_EQ(rd[i].bad, 0);
		CHECK_EQ(rd[i].next, MSGS);
	}
	crs_loop_close(loop);
	for (int i = 0; i < STREAMS; i++)
		crs_sub_close(subs[i]);
	return 0;
}

static void test_64_by_64(void **state)
{
	(void)state;
	struct rlimit rl;
	getrlimit(RLIMIT_NOFILE, &rl);
	if (rl.rlim_max != RLIM_INFINITY && rl.rlim_max < 12000)
		skip(); /* the publisher needs two fds per subscriber */
	rl.rlim_cur = rl.rlim_max == RLIM_INFINITY ? 12000 : rl.rlim_max;
	assert_int_equal(setrlimit(RLIMIT_NOFILE, &rl), 0);
	crs_loop *loop;
	assert_int_equal(crs_loop_create(&loop), 0);
	static crs_pub *pubs[STREAMS];
	for (int i = 0; i < STREAMS; i++) {
		tu_name(streams[i].name, sizeof(streams[i].name), "scale");
		struct crs_pub_opts o;
		crs_pub_opts_init(&o);
		o.ring_bytes = 1 << 14;
		o.auto_connect = SUBS; /* everyone gets every message */
		assert_int_equal(crs_pub_create(streams[i].name, &o, &pubs[i]),
				 0);
		assert_int_equal(
			crs_loop_add_pub(loop, pubs[i], on_ready, &streams[i]),
			0);
	}
	pid_t pid[SUBS];
	for (int k = 0; k < SUBS; k++) {
		pid[k] = tu_spawn(reader, NULL, NULL, 110);
		assert_true(pid[k] > 0);
	}
	int64_t deadline = tu_now_ms() + 110000;
	int left = SUBS, failed = 0;
	while (left && tu_now_ms() < deadline) {
		int r = crs_loop_run(loop, 100);
		assert_true(r >= 0 || r == -EINTR);
		for (int k = 0; k < SUBS; k++) {
			int st;
			if (pid[k] > 0 && waitpid(pid[k], &st, WNOHANG) == pid[k]) {
				if (!WIFEXITED(st) || WEXITSTATUS(st) != 0)
					failed++;
				pid[k] = 0;
				left--;
			}
		}
	}
	assert_int_equal(left, 0);
	assert_int_equal(failed, 0);
	for (int i = 0; i < STREAMS; i++) {
		assert_int_equal(streams[i].sent, MSGS);
		assert_true(streams[i].completed);
	}
	crs_loop_close(loop);
	for (int i = 0; i < STREAMS; i++)
		crs_pub_close(pubs[i]);
}

int main(void)
{
	tu_init();
	const struct CMUnitTest tests[] = {
		TU_TEST(test_64_by_64),
	};
	return cmocka_run_group_tests(tests, NULL, NULL);
}
