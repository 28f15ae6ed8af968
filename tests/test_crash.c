/*
 * test_crash.c - processes that die. A publisher SIGKILLed mid-stream or
 * in the middle of writing a message: every subscriber receives only
 * whole messages, then the end with EPIPE, within a bounded wait. A
 * subscriber SIGKILLed (busy, parked, or sitting on ring space): the
 * publisher notices while it waits, the others keep flowing, and its
 * demand and room no longer hold anyone back. Streams that do not exist
 * yet (-ENOENT at once, or waited for with wait_ms), stale sockets of a
 * dead publisher, a second live publisher (-EEXIST), and a publisher
 * that never answers or dies during the handshake.
 */
#include "util.h"

#include <errno.h>
#include <sys/mman.h>
#include <signal.h>
#include <string.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/un.h>
#include <sys/wait.h>

#include "src/layout.h"

#define MAXLEN 2000
#define END_WAIT_MS 10000 /* a dead publisher must be noticed by then */

enum { PUB_READY = 1, PROGRESS, REPORT, CLAIMED };

/* ---- publisher killed ---------------------------------------------------- */

struct pub_arg {
	const char *name;
	int subscribers;
	uint64_t count;	   /* messages before stopping */
	int claim_after;   /* then: hold a half-written claim */
};

/* Child publisher: publish count messages (UINT64_MAX: forever), then
 * optionally claim and half-write one more, report, and wait to die. */
static int child_publisher(void *p, int chan)
{
	struct pub_arg *a = p;
	struct crs_pub_opts o;
	crs_pub_opts_init(&o);
	o.ring_bytes = 1 << 16;
	o.max_message = 0;
	crs_pub *pub;
	CHECK_EQ(crs_pub_create(a->name, &o, &pub), 0);
	CHECK_EQ(crs_pub_wait_subscribers(pub, a->subscribers, 20000), 0);
	CHECK_EQ(tu_send(chan, PUB_READY, 0), 0);
	for (uint64_t seq = 0; seq < a->count; seq++) {
		int r = tu_pub_send(pub, seq, tu_len(seq, MAXLEN), 60000);
		CHECK_EQ(r, 0);
	}
	if (a->claim_after) {
		void *buf;
		int r;
		while ((r = crs_pub_claim(pub, 3000, &buf)) != 0)
			CHECK_EQ(crs_pub_wait(pub, 3000, 20000), 0);
		/* Half the payload written, never committed. */
		memset(buf, 0x5a, 1500);
		CHECK_EQ(tu_send(chan, CLAIMED, 0), 0);
	}
	for (;;)
		pause(); /* until SIGKILL */
}

/* Child subscriber for the free-running case: receive and check until
 * the end; tell the parent once it is well into the stream. */
static int child_crash_sub(void *p, int chan)
{
	const char *name = p;
	crs_sub *sub;
	CHECK_EQ(tu_sub_open(name, 128, &sub), 0);
	CHECK_EQ(tu_send(chan, TU_READY, 0), 0);
	struct crs_msg m;
	uint64_t n = 0;
	int r;
	for (;;) {
		r = tu_sub_next(sub, &m, END_WAIT_MS);
		if (r != 1)
			break;
		CHECK_EQ(m.seq, n);
		CHECK_EQ(m.len, tu_len(n, MAXLEN));
		CHECK_EQ(tu_verify(m.data, m.len, n), -1);
		crs_sub_release(sub);
		if (++n == 2000)
			CHECK_EQ(tu_send(chan, PROGRESS, n), 0);
	}
	if (r == 0)
		fprintf(stderr, "[sub %d] no message and no end for %d ms "
				"after %llu messages\n",
			(int)getpid(), END_WAIT_MS, (unsigned long long)n);
	CHECK_EQ(r, -CRS_EEND);
	const struct crs_end *e = crs_sub_end(sub);
	if (e->code != EPIPE)
		fprintf(stderr, "[sub %d] end %d (%s)\n", (int)getpid(), e->code,
			e->message);
	CHECK_EQ(e->code, EPIPE);
	CHECK_EQ(crs_sub_poll(sub, &m), -CRS_EEND);
	CHECK_EQ(tu_send(chan, REPORT, n), 0);
	crs_sub_close(sub);
	return 0;
}

static void test_publisher_killed_mid_stream(void **state)
{
	(void)state;
	char name[64];
	tu_name(name, sizeof(name), "pubkill");
	int sc[2], pc;
	pid_t sp[2];
	for (int i = 0; i < 2; i++)
		sp[i] = tu_spawn_engine(child_crash_sub, name, &sc[i], 60, i);
	struct pub_arg a = { name, 2, UINT64_MAX, 0 };
	pid_t pp = tu_spawn(child_publisher, &a, &pc, 60);
	assert_int_equal(tu_expect(pc, PUB_READY, NULL, 20000), 0);
	for (int i = 0; i < 2; i++) {
		assert_int_equal(tu_expect(sc[i], TU_READY, NULL, 10000), 0);
		assert_int_equal(tu_expect(sc[i], PROGRESS, NULL, 20000), 0);
	}
	tu_kill(pp); /* while it is publishing flat out */
	for (int i = 0; i < 2; i++) {
		uint64_t n;
		assert_int_equal(tu_expect(sc[i], REPORT, &n, 30000), 0);
		assert_true(n >= 2000);
		assert_int_equal(tu_wait_child(sp[i], 10000), 0);
		close(sc[i]);
	}
	close(pc);
}

static void test_publisher_killed_mid_message(void **state)
{
	(void)state;
	char name[64];
	tu_name(name, sizeof(name), "halfmsg");
	/* Agent 0: prefetch 128; agent 1: manual demand, 101 (the claim
	 * of the 101st needs demand). */
	struct tu_agent_arg arg128 = { name, 128, 0, MAXLEN };
	struct tu_agent_arg arg0 = { name, 0, 0, MAXLEN };
	struct tu_agents g0, g1;
	assert_int_equal(tu_agents_start(&g0, 1, &arg128), 0);
	assert_int_equal(tu_agents_start(&g1, 1, &arg0), 0);
	struct pub_arg a = { name, 2, 100, 1 };
	int pc;
	pid_t pp = tu_spawn(child_publisher, &a, &pc, 60);
	assert_int_equal(tu_agents_ready(&g0, NULL), 0);
	assert_int_equal(tu_agents_ready(&g1, NULL), 0);
	assert_int_equal(tu_agents_cmd(&g1, TU_CMD_REQUEST, 101, NULL), 0);
	assert_int_equal(tu_expect(pc, PUB_READY, NULL, 20000), 0);
	assert_int_equal(tu_expect(pc, CLAIMED, NULL, 20000), 0);
	/* Both have their 100 whole messages available. */
	assert_int_equal(tu_agents_cmd(&g0, TU_CMD_RECV, 100, NULL), 0);
	assert_int_equal(tu_agents_cmd(&g1, TU_CMD_RECV, 100, NULL), 0);
	/* Park them, then kill the publisher holding a half-written claim:
	 * nothing more is delivered, only EPIPE. */
	assert_int_equal(tu_agents_send(&g0, TU_CMD_NOMORE, 100), 0);
	assert_int_equal(tu_agents_send(&g1, TU_CMD_NOMORE, 100), 0);
	assert_int_equal(tu_agents_collect(&g0, NULL, 10000), 0);
	assert_int_equal(tu_agents_collect(&g1, NULL, 10000), 0);
	tu_kill(pp);
	uint64_t n;
	assert_int_equal(tu_agents_cmd(&g0, TU_CMD_END, EPIPE, &n), 0);
	assert_int_equal(n, 100);
	assert_int_equal(tu_agents_cmd(&g1, TU_CMD_END, EPIPE, &n), 0);
	assert_int_equal(n, 100);
	assert_int_equal(tu_agents_finish(&g0, NULL), 0);
	assert_int_equal(tu_agents_finish(&g1, NULL), 0);
	close(pc);
}

static void test_publisher_killed_while_subscribers_sleep(void **state)
{
	(void)state;
	/* Subscribers parked in crs_sub_wait (both wait engines), some with
	 * demand left and some without, when the publisher dies: they wake
	 * up with EPIPE. */
	char name[64];
	tu_name(name, sizeof(name), "sleepers");
	struct tu_agent_arg arg = { name, 128, 0, MAXLEN };
	struct tu_agent_arg arg0 = { name, 0, 0, MAXLEN };
	struct tu_agents g, g0;
	assert_int_equal(tu_agents_start(&g, 2, &arg), 0);
	assert_int_equal(tu_agents_start(&g0, 2, &arg0), 0);
	struct pub_arg a = { name, 4, 10, 0 };
	int pc;
	pid_t pp = tu_spawn(child_publisher, &a, &pc, 60);
	assert_int_equal(tu_agents_ready(&g, NULL), 0);
	assert_int_equal(tu_agents_ready(&g0, NULL), 0);
	assert_int_equal(tu_agents_cmd(&g0, TU_CMD_REQUEST, 10, NULL), 0);
	assert_int_equal(tu_expect(pc, PUB_READY, NULL, 20000), 0);
	assert_int_equal(tu_agents_cmd(&g, TU_CMD_RECV, 10, NULL), 0);
	assert_int_equal(tu_agents_cmd(&g0, TU_CMD_RECV, 10, NULL), 0);
	/* END waits up to 20 s: they sleep until the death is noticed. */
	assert_int_equal(tu_agents_send(&g, TU_CMD_END, EPIPE), 0);
	assert_int_equal(tu_agents_send(&g0, TU_CMD_END, EPIPE), 0);
	tu_sleep_ms(50);
	tu_kill(pp);
	assert_int_equal(tu_agents_collect(&g, NULL, 30000), 0);
	assert_int_equal(tu_agents_collect(&g0, NULL, 30000), 0);
	assert_int_equal(tu_agents_finish(&g, NULL), 0);
	assert_int_equal(tu_agents_finish(&g0, NULL), 0);
	close(pc);
}

/* Replay publisher: publish 20 messages (ahead of demand), report, and
 * wait to be killed without a terminal signal. */
static int child_replay_publisher(void *p, int chan)
{
	struct crs_pub_opts o;
	crs_pub_opts_init(&o);
	o.mode = CRS_MODE_REPLAY;
	o.ring_bytes = 1 << 16;
	crs_pub *pub;
	CHECK_EQ(crs_pub_create(p, &o, &pub), 0);
	CHECK_EQ(crs_pub_wait_subscribers(pub, 1, 20000), 0);
	CHECK_EQ(tu_expect(chan, TU_READY, NULL, 20000), 0);
	for (uint64_t seq = 0; seq < 20; seq++)
		CHECK_EQ(tu_pub_send(pub, seq, tu_len(seq, MAXLEN), 20000), 0);
	CHECK_EQ(tu_send(chan, PUB_READY, 0), 0);
	for (;;)
		pause();
}

static void test_dead_publisher_idle_subscriber_sleeps(void **state)
{
	(void)state;
	/* The publisher died with committed messages beyond this
	 * subscriber's demand: poll has nothing to give (no demand), so
	 * crs_sub_wait must sleep until its timeout, not spin; with more
	 * demand the rest arrives, then EPIPE. */
	char name[64];
	tu_name(name, sizeof(name), "deadidle");
	int pc;
	pid_t pp = tu_spawn(child_replay_publisher, name, &pc, 60);
	crs_sub *sub;
	assert_int_equal(tu_sub_open(name, 0, &sub), 0);
	assert_int_equal(crs_sub_request(sub, 5), 0);
	assert_int_equal(tu_send(pc, TU_READY, 0), 0);
	assert_int_equal(tu_expect(pc, PUB_READY, NULL, 20000), 0);
	struct crs_msg m;
	for (uint64_t i = 0; i < 5; i++) {
		assert_int_equal(tu_sub_next(sub, &m, 10000), 1);
		assert_int_equal(m.seq, i);
	}
	tu_kill(pp);
	close(pc);
	tu_sleep_ms(20);
	assert_int_equal(crs_sub_poll(sub, &m), 0);
	/* Count the subscriber's wakeups from sleep (its own counter in
	 * the control segment). Sleeping through 300 ms takes a handful. */
	int fd = tu_find_fd("memfd:crs-ctl");
	assert_true(fd >= 0);
	const struct crs_ctl *c =
		mmap(NULL, CRS_CTL_SIZE, PROT_READ, MAP_SHARED, fd, 0);
	assert_true(c != MAP_FAILED);
	uint64_t w0 = atomic_load(&c->wakeups);
	assert_int_equal(crs_sub_wait(sub, 300), -ETIMEDOUT);
	uint64_t woke = atomic_load(&c->wakeups) - w0;
	munmap((void *)c, CRS_CTL_SIZE);
	if (woke > 200) {
		crs_sub_close(sub);
		fail_msg("crs_sub_wait spun: %llu wakeups in a 300 ms wait",
			 (unsigned long long)woke);
	}
	assert_int_equal(crs_sub_poll(sub, &m), 0);
	assert_int_equal(crs_sub_request(sub, 100), 0);
	for (uint64_t i = 5; i < 20; i++) {
		assert_int_equal(tu_sub_next(sub, &m, 10000), 1);
		assert_int_equal(m.seq, i);
		assert_int_equal(tu_verify(m.data, m.len, i), -1);
	}
	assert_int_equal(tu_sub_next(sub, &m, 10000), -CRS_EEND);
	assert_int_equal(crs_sub_end(sub)->code, EPIPE);
	crs_sub_close(sub);
}

/* ---- subscriber killed ------------------------------------------------------ */

static void test_subscriber_killed_releases_demand(void **state)
{
	(void)state;
	char name[64];
	tu_name(name, sizeof(name), "subkill");
	struct tu_agent_arg arg = { name, 0, 0, MAXLEN };
	struct tu_agents g; /* 0: victim (io_uring), 1: survivor, 2: victim
			       (fallback engine) */
	assert_int_equal(tu_agents_start(&g, 3, &arg), 0);
	crs_pub *pub = tu_make_pub(name, 1 << 16);
	assert_int_equal(tu_agents_ready(&g, pub), 0);
	uint64_t v;
	assert_int_equal(tu_cmd(g.chan[0], TU_CMD_REQUEST, 10, &v, 10000), 0);
	assert_int_equal(tu_cmd(g.chan[1], TU_CMD_REQUEST, CRS_UNBOUNDED, &v,
				10000),
			 0);
	assert_int_equal(tu_cmd(g.chan[2], TU_CMD_REQUEST, 20, &v, 10000), 0);
	uint64_t seq = 0;
	for (; seq < 10; seq++)
		assert_int_equal(tu_pub_send(pub, seq, tu_len(seq, MAXLEN),
					     10000),
				 0);
	assert_true(crs_pub_demand(pub) == 0);
	/* Victim 0 is busy waiting for more (parked), victim 2 idle. */
	assert_int_equal(tu_send(g.chan[0], TU_CMD_RECV, 11), 0);
	tu_sleep_ms(20);
	tu_kill(g.pid[0]);
	/* The publisher, waiting, notices the death and the demand of the
	 * next slowest (victim 2: 20) applies. */
	assert_int_equal(crs_pub_wait(pub, 100, 10000), 0);
	assert_int_equal(tu_pub_await_count(pub, 2, 10000), 0);
	assert_true(crs_pub_demand(pub) == 10);
	tu_kill(g.pid[2]);
	assert_int_equal(tu_pub_await_count(pub, 1, 10000), 0);
	assert_true(crs_pub_demand(pub) == CRS_UNBOUNDED);
	/* The survivor receives everything. */
	assert_int_equal(tu_send(g.chan[1], TU_CMD_RECV, 2000), 0);
	for (; seq < 2000; seq++)
		assert_int_equal(tu_pub_send(pub, seq, tu_len(seq, MAXLEN),
					     10000),
				 0);
	assert_int_equal(tu_expect(g.chan[1], TU_ACK, &v, 20000), 0);
	assert_int_equal(v, 2000);
	assert_int_equal(crs_pub_complete(pub), 0);
	assert_int_equal(tu_cmd(g.chan[1], TU_CMD_END, 0, NULL, 20000), 0);
	/* Only the survivor is left to finish. */
	struct tu_agents rest = { .n = 1 };
	rest.pid[0] = g.pid[1];
	rest.chan[0] = g.chan[1];
	close(g.chan[0]);
	close(g.chan[2]);
	assert_int_equal(tu_agents_finish(&rest, pub), 0);
	crs_pub_close(pub);
}

static void test_subscriber_killed_releases_room(void **state)
{
	(void)state;
	char name[64];
	tu_name(name, sizeof(name), "roomkill");
	struct tu_agent_arg arg = { name, 0, 0, MAXLEN };
	struct tu_agents g; /* 0: reads nothing, 1: reads everything */
	assert_int_equal(tu_agents_start(&g, 2, &arg), 0);
	crs_pub *pub = tu_make_pub(name, 1 << 14);
	assert_int_equal(tu_agents_ready(&g, pub), 0);
	assert_int_equal(tu_agents_cmd(&g, TU_CMD_REQUEST, CRS_UNBOUNDED, NULL),
			 0);
	assert_int_equal(tu_send(g.chan[1], TU_CMD_RECV, 3000), 0);
	uint64_t seq = 0;
	int r;
	void *p;
	while ((r = crs_pub_claim(pub, tu_len(seq, MAXLEN), &p)) == 0 ||
	       r == -CRS_ENOROOM) {
		if (r == 0) {
			tu_fill(p, tu_len(seq, MAXLEN), seq);
			assert_int_equal(crs_pub_commit(pub, tu_len(seq, MAXLEN)),
					 0);
			seq++;
			continue;
		}
		/* Out of room: agent 0 holds it. Make sure that is stable. */
		if (crs_pub_wait(pub, tu_len(seq, MAXLEN), 100) == -ETIMEDOUT)
			break;
	}
	assert_int_equal(r, -CRS_ENOROOM);
	tu_kill(g.pid[0]);
	for (; seq < 3000; seq++)
		assert_int_equal(tu_pub_send(pub, seq, tu_len(seq, MAXLEN),
					     10000),
				 0);
	assert_int_equal(tu_expect(g.chan[1], TU_ACK, NULL, 20000), 0);
	assert_int_equal(crs_pub_subscribers(pub), 1);
	assert_int_equal(crs_pub_complete(pub), 0);
	assert_int_equal(tu_cmd(g.chan[1], TU_CMD_END, 0, NULL, 20000), 0);
	struct tu_agents rest = { .n = 1 };
	rest.pid[0] = g.pid[1];
	rest.chan[0] = g.chan[1];
	close(g.chan[0]);
	assert_int_equal(tu_agents_finish(&rest, pub), 0);
	crs_pub_close(pub);
}

/* ---- streams that are not there (yet) ---------------------------------------- */

static int child_late_publisher(void *p, int chan)
{
	(void)chan;
	const char *name = p;
	tu_sleep_ms(300);
	crs_pub *pub;
	CHECK_EQ(crs_pub_create(name, NULL, &pub), 0);
	CHECK_EQ(crs_pub_wait_subscribers(pub, 1, 20000), 0);
	for (uint64_t seq = 0; seq < 5; seq++)
		CHECK_EQ(tu_pub_send(pub, seq, tu_len(seq, MAXLEN), 20000), 0);
	CHECK_EQ(crs_pub_complete(pub), 0);
	CHECK_EQ(crs_pub_wait_consumed(pub, 20000), 0);
	crs_pub_close(pub);
	return 0;
}

static void expect_stream(crs_sub *sub, uint64_t count)
{
	struct crs_msg m;
	for (uint64_t i = 0; i < count; i++) {
		assert_int_equal(tu_sub_next(sub, &m, 10000), 1);
		assert_int_equal(m.seq, i);
		assert_int_equal(tu_verify(m.data, m.len, i), -1);
	}
	assert_int_equal(tu_sub_next(sub, &m, 10000), -CRS_EEND);
	assert_int_equal(crs_sub_end(sub)->code, 0);
}

static void test_stream_not_found(void **state)
{
	(void)state;
	char name[64];
	tu_name(name, sizeof(name), "absent");
	crs_sub *sub = NULL;
	struct crs_sub_opts o;
	crs_sub_opts_init(&o);
	assert_int_equal(crs_sub_open(name, &o, &sub), -ENOENT);
	assert_int_equal(crs_sub_open(name, NULL, &sub), -ENOENT);
	o.wait_ms = 50;
	assert_int_equal(crs_sub_open(name, &o, &sub), -ENOENT);

	/* Waited for: a publisher appears later. */
	pid_t pid = tu_spawn(child_late_publisher, name, NULL, 60);
	o.wait_ms = 10000;
	assert_int_equal(crs_sub_open(name, &o, &sub), 0);
	expect_stream(sub, 5);
	crs_sub_close(sub);
	assert_int_equal(tu_wait_child(pid, 20000), 0);

	/* Gone again: its files were removed. */
	char path[256];
	snprintf(path, sizeof(path), "%s/%s.sock", tu_dir(), name);
	assert_int_equal(access(path, F_OK), -1);
	snprintf(path, sizeof(path), "%s/%s.lock", tu_dir(), name);
	assert_int_equal(access(path, F_OK), -1);
	o.wait_ms = 0;
	assert_int_equal(crs_sub_open(name, &o, &sub), -ENOENT);
}

static int child_create_eexist(void *p, int chan)
{
	(void)chan;
	crs_pub *pub;
	CHECK_EQ(crs_pub_create(p, NULL, &pub), -EEXIST);
	return 0;
}

static void test_stale_socket_and_eexist(void **state)
{
	(void)state;
	char name[64];
	tu_name(name, sizeof(name), "stale");
	struct pub_arg a = { name, 0, 0, 0 };
	int pc;
	pid_t pp = tu_spawn(child_publisher, &a, &pc, 60);
	assert_int_equal(tu_expect(pc, PUB_READY, NULL, 20000), 0);

	/* A second live publisher of the same name: -EEXIST, here and in
	 * another process. */
	crs_pub *pub = NULL;
	assert_int_equal(crs_pub_create(name, NULL, &pub), -EEXIST);
	tu_kill(pp);
	close(pc);

	char sock[256];
	snprintf(sock, sizeof(sock), "%s/%s.sock", tu_dir(), name);
	struct stat st;
	assert_int_equal(stat(sock, &st), 0); /* left behind */
	assert_true(S_ISSOCK(st.st_mode));
	crs_sub *sub = NULL;
	assert_int_equal(crs_sub_open(name, NULL, &sub), -ENOENT);

	/* The stale stream is replaced at once. */
	assert_int_equal(crs_pub_create(name, NULL, &pub), 0);
	crs_pub *second = NULL;
	assert_int_equal(crs_pub_create(name, NULL, &second), -EEXIST);
	pp = tu_spawn(child_create_eexist, name, NULL, 60);
	assert_int_equal(tu_wait_child(pp, 20000), 0);

	/* And it works. */
	struct tu_agent_arg arg = { name, 128, 0, MAXLEN };
	struct tu_agents g;
	assert_int_equal(tu_agents_start(&g, 1, &arg), 0);
	assert_int_equal(tu_agents_ready(&g, pub), 0);
	for (uint64_t seq = 0; seq < 50; seq++)
		assert_int_equal(tu_pub_send(pub, seq, tu_len(seq, MAXLEN),
					     10000),
				 0);
	assert_int_equal(tu_agents_cmd(&g, TU_CMD_RECV, 50, NULL), 0);
	assert_int_equal(crs_pub_complete(pub), 0);
	assert_int_equal(tu_agents_cmd(&g, TU_CMD_END, 0, NULL), 0);
	assert_int_equal(tu_agents_finish(&g, pub), 0);
	crs_pub_close(pub);
}

/* ---- handshake with a publisher that never answers ----------------------- */

static int child_mute_listener(void *p, int chan)
{
	const char *name = p;
	struct sockaddr_un sa = { .sun_family = AF_UNIX };
	snprintf(sa.sun_path, sizeof(sa.sun_path), "%s/%s.sock", tu_dir(),
		 name);
	int fd = socket(AF_UNIX, SOCK_SEQPACKET, 0);
	CHECK(fd >= 0);
	CHECK_EQ(bind(fd, (struct sockaddr *)&sa, sizeof(sa)), 0);
	CHECK_EQ(listen(fd, 8), 0);
	CHECK_EQ(tu_send(chan, PUB_READY, 0), 0);
	/* Accept, never answer; exit when told. */
	int c = accept(fd, NULL, NULL);
	CHECK(c >= 0);
	uint64_t tag;
	tu_recv(chan, &tag, NULL, 30000);
	_exit(0);
}

static void test_handshake_unanswered(void **state)
{
	(void)state;
	char name[64];
	tu_name(name, sizeof(name), "mute");
	int pc;
	pid_t pp = tu_spawn(child_mute_listener, name, &pc, 60);
	assert_int_equal(tu_expect(pc, PUB_READY, NULL, 10000), 0);
	struct crs_sub_opts o;
	crs_sub_opts_init(&o);
	o.handshake_ms = 200;
	crs_sub *sub = NULL;
	assert_int_equal(crs_sub_open(name, &o, &sub), -ETIMEDOUT);
	tu_send(pc, 1, 0);
	assert_int_equal(tu_wait_child(pp, 10000), 0);
	close(pc);
	char path[256];
	snprintf(path, sizeof(path), "%s/%s.sock", tu_dir(), name);
	unlink(path);

	/* The "publisher" dies during the handshake: an error, no hang. */
	pp = tu_spawn(child_mute_listener, name, &pc, 60);
	assert_int_equal(tu_expect(pc, PUB_READY, NULL, 10000), 0);
	o.handshake_ms = 20000;
	pid_t killer = fork();
	if (killer == 0) {
		tu_sleep_ms(200);
		kill(pp, SIGKILL);
		_exit(0);
	}
	int r = crs_sub_open(name, &o, &sub);
	assert_true(r < 0);
	assert_true(r != -ETIMEDOUT);
	waitpid(killer, NULL, 0);
	assert_int_equal(tu_wait_child(pp, 10000), 128 + SIGKILL);
	close(pc);
	unlink(path);
}

int main(void)
{
	tu_init();
	const struct CMUnitTest tests[] = {
		TU_TEST(test_publisher_killed_mid_stream),
		TU_TEST(test_publisher_killed_mid_message),
		TU_TEST(test_publisher_killed_while_subscribers_sleep),
		TU_TEST(test_dead_publisher_idle_subscriber_sleeps),
		TU_TEST(test_subscriber_killed_releases_demand),
		TU_TEST(test_subscriber_killed_releases_room),
		TU_TEST(test_stream_not_found),
		TU_TEST(test_stale_socket_and_eexist),
		TU_TEST(test_handshake_unanswered),
	};
	return cmocka_run_group_tests_name("crash", tests, NULL, NULL);
}
