/*
 * test_multipub.c - shared streams: several publisher processes into one
 * merged subscription. 1, 2 and 8 publishers into 1 and 3 subscribers
 * (subscriber i on the fallback wait engine when i is odd): every message
 * exactly once, each publisher's in order, never more handed out than
 * requested in total, completion once every publisher completed. And a
 * publisher SIGKILLed holding a half-written claim while the others go
 * on: its committed messages arrive whole, the others' all arrive, and
 * the merge ends with EPIPE (at once, or after the others with
 * delay_errors). And the leftovers of publishers that died: given up on
 * at once, and removed by the next publisher.
 */
#include "util.h"

#include "crs/inspect.h"

#include <dirent.h>
#include <errno.h>
#include <signal.h>
#include <stdlib.h>
#include <string.h>

#define PER_PUB 3000 /* messages per publisher */
#define MAX_PUBS 8
#define CHUNK 7 /* the subscriber's request(n) */

enum { PUB_READY = 1, PUB_GO, CLAIMED, SUB_COUNT, SUB_END, SUB_IDS,
       SUBSCRIBED, HALF };

struct pub_arg {
	const char *name;
	int index;
	int subscribers;
	int victim; /* publish 10, then die holding a half-written claim */
	int pause;  /* publish half, wait for PUB_GO, then the rest */
	int half;   /* pausing: say HALF first */
	int error;  /* end with crs_pub_error(error) instead of completing */
};

/* Paused: keep serving (an inspector may open us) until PUB_GO. */
static void serve_until_go(crs_pub *pub, int chan)
{
	for (;;) {
		CHECK(crs_pub_serve(pub) >= 0);
		uint64_t tag;
		int r = tu_recv(chan, &tag, NULL, 10);
		if (r == 0) {
			CHECK_EQ(tag, PUB_GO);
			return;
		}
		CHECK_EQ(r, -ETIMEDOUT);
	}
}

struct payload {
	uint64_t pub, k;
};

static int child_pub(void *argp, int chan)
{
	struct pub_arg *a = argp;
	struct crs_pub_opts o;
	crs_pub_opts_init(&o);
	o.shared = 1;
	o.ring_bytes = 64 * 1024;
	crs_pub *pub;
	CHECK_EQ(crs_pub_create(a->name, &o, &pub), 0);
	CHECK_EQ(tu_send(chan, PUB_READY, 0), 0);
	CHECK_EQ(crs_pub_wait_subscribers(pub, a->subscribers, 20000), 0);
	if (a->pause) /* the victim dies only once we have them all */
		CHECK_EQ(tu_send(chan, SUBSCRIBED, 0), 0);
	uint64_t n = a->victim ? 10 : PER_PUB;
	for (uint64_t k = 0; k < n; k++) {
		if (a->pause && k == n / 2) {
			if (a->half)
				CHECK_EQ(tu_send(chan, HALF, 0), 0);
			serve_until_go(pub, chan);
		}
		struct payload p = {(uint64_t)a->index, k};
		void *buf;
		CHECK_EQ(crs_pub_wait(pub, sizeof(p), 20000), 0);
		CHECK_EQ(crs_pub_claim(pub, sizeof(p), &buf), 0);
		memcpy(buf, &p, sizeof(p));
		CHECK_EQ(crs_pub_commit(pub, sizeof(p)), 0);
	}
	if (a->victim) {
		void *buf;
		CHECK_EQ(crs_pub_wait(pub, sizeof(struct payload), 20000), 0);
		CHECK_EQ(crs_pub_claim(pub, sizeof(struct payload), &buf), 0);
		memset(buf, 0xee, sizeof(struct payload) / 2);
		CHECK_EQ(tu_send(chan, CLAIMED, 0), 0);
		for (;;)
			pause(); /* SIGKILLed here */
	}
	if (a->error)
		CHECK_EQ(crs_pub_error(pub, a->error, "worker failed"), 0);
	else
		CHECK_EQ(crs_pub_complete(pub), 0);
	CHECK_EQ(crs_pub_wait_consumed(pub, 20000), 0);
	crs_pub_close(pub);
	return 0;
}

struct sub_arg {
	const char *name;
	int pubs;
	int delay_errors;
	int victim; /* publisher index that dies after 10 messages, or -1 */
	int loop;   /* read through a crs_loop (prefetch 16) */
	int shared; /* open as shared before any publisher marked it */
	int failing; /* publisher index that ends with an error, or -1 */
};

struct loop_state {
	int pubs;
	uint64_t next[MAX_PUBS];
	int ended, code;
};

static void loop_next(void *ctx, const struct crs_msg *m)
{
	struct loop_state *st = ctx;
	struct payload p;
	CHECK_EQ(m->len, sizeof(p));
	memcpy(&p, m->data, sizeof(p));
	CHECK(p.pub < (uint64_t)st->pubs);
	CHECK_EQ(p.k, st->next[p.pub]);
	st->next[p.pub]++;
}

static void loop_complete(void *ctx)
{
	struct loop_state *st = ctx;
	st->ended++;
}

static void loop_error(void *ctx, int code, const char *message)
{
	struct loop_state *st = ctx;
	(void)message;
	st->ended++;
	st->code = code;
}

/* The same through a crs_loop: the merge as one registration. */
static int loop_sub(struct sub_arg *a, int chan)
{
	struct crs_sub_opts o;
	crs_sub_opts_init(&o);
	o.prefetch = 16;
	o.handshake_ms = -1;
	crs_sub *sub;
	crs_loop *loop;
	CHECK_EQ(crs_sub_open(a->name, &o, &sub), 0);
	CHECK_EQ(crs_loop_create(&loop), 0);
	struct loop_state st = {.pubs = a->pubs};
	struct crs_sub_callbacks cb = {loop_next, loop_complete, loop_error,
				       NULL};
	CHECK_EQ(crs_loop_add_sub(loop, sub, &cb, &st), 0);
	CHECK_EQ(tu_send(chan, PUB_READY, 0), 0);
	int64_t deadline = tu_now_ms() + 30000;
	while (!st.ended && tu_now_ms() < deadline)
		CHECK(crs_loop_run(loop, 1000) >= 0);
	CHECK_EQ(st.ended, 1);
	uint64_t total = 0;
	for (int i = 0; i < a->pubs; i++)
		total += st.next[i];
	CHECK_EQ(tu_send(chan, SUB_COUNT, total), 0);
	CHECK_EQ(tu_send(chan, SUB_END, (uint64_t)st.code), 0);
	crs_loop_close(loop);
	crs_sub_close(sub);
	return 0;
}

static int child_sub(void *argp, int chan)
{
	struct sub_arg *a = argp;
	if (a->loop)
		return loop_sub(a, chan);
	struct crs_sub_opts o;
	crs_sub_opts_init(&o);
	o.prefetch = 0; /* demand by hand: the total bound is ours */
	o.delay_errors = a->delay_errors;
	o.shared = a->shared;
	o.handshake_ms = -1; /* a loaded machine never fails an open */
	crs_sub *sub;
	CHECK_EQ(crs_sub_open(a->name, &o, &sub), 0);
	CHECK_EQ(tu_send(chan, PUB_READY, 0), 0);
	uint64_t next[MAX_PUBS] = {0}, ids[MAX_PUBS] = {0};
	uint64_t requested = 0, received = 0;
	int r;
	for (;;) {
		if (received == requested) {
			/* Everything asked for came: nothing more may. */
			struct crs_msg m;
			r = crs_sub_poll(sub, &m);
			CHECK(r <= 0);
			if (r < 0)
				break;
			CHECK_EQ(crs_sub_request(sub, CHUNK), 0);
			requested += CHUNK;
		}
		struct crs_msg m;
		CHECK_EQ(crs_sub_wait(sub, 20000), 0);
		r = crs_sub_poll(sub, &m);
		if (r < 0)
			break;
		if (r == 0)
			continue;
		received++;
		CHECK(received <= requested);
		CHECK_EQ(m.len, sizeof(struct payload));
		struct payload p;
		memcpy(&p, m.data, sizeof(p));
		CHECK(p.pub < (uint64_t)a->pubs);
		CHECK_EQ(p.k, next[p.pub]); /* per publisher: in order, once */
		CHECK_EQ(m.seq, p.k);
		CHECK(m.stream_id != 0);
		if (!ids[p.pub])
			ids[p.pub] = m.stream_id;
		CHECK_EQ(m.stream_id, ids[p.pub]);
		next[p.pub]++;
		crs_sub_release(sub);
	}
	CHECK_EQ(r, -CRS_EEND);
	CHECK_EQ(crs_sub_received(sub), received);
	for (int i = 0; i < a->pubs; i++)
		for (int j = 0; j < i; j++)
			CHECK(!ids[i] || ids[i] != ids[j]);
	uint64_t total = 0;
	for (int i = 0; i < a->pubs; i++) {
		if (a->failing >= 0 && !a->delay_errors)
			; /* ended at the error: the others' counts vary */
		else if (a->delay_errors || a->victim < 0 || i == a->victim)
			CHECK_EQ(next[i],
				 i == a->victim ? 10 : PER_PUB);
		total += next[i];
	}
	CHECK_EQ(tu_send(chan, SUB_COUNT, total), 0);
	CHECK_EQ(tu_send(chan, SUB_END, (uint64_t)crs_sub_end(sub)->code), 0);
	crs_sub_close(sub);
	return 0;
}

/* pubs publishers (one of them the victim if victim >= 0) into subs
 * subscribers; each subscriber's end code must be want_end[i]. */
static int use_loop;

static void run(int pubs, int subs, int victim, const int *delay,
		const int *want_end)
{
	char name[48];
	tu_name(name, sizeof(name), "mp");
	struct pub_arg pa[MAX_PUBS];
	pid_t pp[MAX_PUBS];
	int pc[MAX_PUBS];
	for (int i = 0; i < pubs; i++) {
		pa[i] = (struct pub_arg){name, i, subs, i == victim,
					 victim >= 0 && i != victim, 0, 0};
		pp[i] = tu_spawn_engine(child_pub, &pa[i], &pc[i], 60, i & 1);
		assert_int_equal(tu_expect(pc[i], PUB_READY, NULL, 20000), 0);
	}
	/* Every member exists now: the subscribers find them all at once,
	 * so none can complete before the last has joined. */
	struct sub_arg sa[3];
	pid_t sp[3];
	int sc[3];
	for (int i = 0; i < subs; i++) {
		sa[i] = (struct sub_arg){name, pubs, delay ? delay[i] : 0,
					 victim, use_loop, 0, -1};
		sp[i] = tu_spawn_engine(child_sub, &sa[i], &sc[i], 60, i & 1);
		assert_int_equal(tu_expect(sc[i], PUB_READY, NULL, 20000), 0);
	}
	if (victim >= 0) {
		/* A subscriber without delay_errors leaves every member
		 * when the victim dies: only after each survivor counted
		 * it, or that survivor would wait for it forever. */
		for (int i = 0; i < pubs; i++)
			if (i != victim)
				assert_int_equal(tu_expect(pc[i], SUBSCRIBED,
							   NULL, 20000), 0);
		assert_int_equal(tu_expect(pc[victim], CLAIMED, NULL, 20000), 0);
		tu_kill(pp[victim]);
		for (int i = 0; i < pubs; i++)
			if (i != victim)
				assert_int_equal(tu_send(pc[i], PUB_GO, 0), 0);
	}
	for (int i = 0; i < subs; i++) {
		uint64_t total, code;
		assert_int_equal(tu_expect(sc[i], SUB_COUNT, &total, 30000), 0);
		assert_int_equal(tu_expect(sc[i], SUB_END, &code, 30000), 0);
		assert_int_equal(code, want_end ? want_end[i] : 0);
		if (victim < 0 || (delay && delay[i]))
			assert_int_equal(total, victim < 0
					 ? (uint64_t)pubs * PER_PUB
					 : (uint64_t)(pubs - 1) * PER_PUB + 10);
		assert_int_equal(tu_wait_child(sp[i], 20000), 0);
	}
	for (int i = 0; i < pubs; i++) {
		if (i != victim) {
			/* A publisher cut off by a subscriber that ended
			 * early still exits. */
			int st = tu_wait_child(pp[i], 30000);
			assert_true(st == 0 || st == TU_CHILD_FAIL);
		}
		close(pc[i]);
	}
	for (int i = 0; i < subs; i++)
		close(sc[i]);
}

static pid_t spawn_pub(struct pub_arg *a, int *chan, int engine)
{
	pid_t pid = tu_spawn_engine(child_pub, a, chan, 60, engine);
	assert_int_equal(tu_expect(*chan, PUB_READY, NULL, 20000), 0);
	return pid;
}

/* The member streams of name the inspector lists: each must be one of
 * pids, with one subscriber. Returns how many. */
static int inspect_members(const char *name, const pid_t *pids, int n)
{
	char names[64][CRS_NAME_MAX + 1];
	int k = crs_inspect_list(names, 64);
	assert_true(k >= 0 && k <= 64);
	size_t len = strlen(name);
	int found = 0, seen[8] = {0};
	for (int i = 0; i < k; i++) {
		if (strncmp(names[i], name, len) || names[i][len] != '~')
			continue;
		crs_inspector *in;
		struct crs_stream_info info;
		assert_int_equal(crs_inspect_open(names[i], &in), 0);
		assert_int_equal(crs_inspect_read(in, &info, NULL, 0), 1);
		crs_inspect_close(in);
		int j = 0;
		while (j < n && pids[j] != info.pub_pid)
			j++;
		assert_true(j < n && !seen[j]); /* one member each */
		seen[j] = 1;
		found++;
	}
	return found;
}

/* Publishers join and leave while a subscriber reads: the subscriber
 * opens (shared) before any publisher exists; P0 joins, publishes half
 * and pauses; P1 joins mid-stream and pauses too (the inspector then
 * shows both members, each with its publisher's pid), completes and
 * leaves while P0 still has half to go. The merge must not end there:
 * all of both arrives, each in order, then the completion. */
static void test_join_and_leave(void **s)
{
	(void)s;
	char name[48];
	tu_name(name, sizeof(name), "mpj");
	struct sub_arg sa = {name, 2, 0, -1, 0, 1, -1};
	int sc, pc[2];
	pid_t sp = tu_spawn_engine(child_sub, &sa, &sc, 60, 0);
	assert_int_equal(tu_expect(sc, PUB_READY, NULL, 20000), 0);
	struct pub_arg pa[2];
	pid_t pp[2];
	for (int i = 0; i < 2; i++) {
		pa[i] = (struct pub_arg){name, i, 1, 0, 1, 1, 0};
		pp[i] = spawn_pub(&pa[i], &pc[i], i);
		assert_int_equal(tu_expect(pc[i], SUBSCRIBED, NULL, 20000), 0);
		assert_int_equal(tu_expect(pc[i], HALF, NULL, 20000), 0);
	}
	assert_int_equal(inspect_members(name, pp, 2), 2);
	assert_int_equal(tu_send(pc[1], PUB_GO, 0), 0);
	assert_int_equal(tu_wait_child(pp[1], 30000), 0); /* P1 left */
	assert_int_equal(inspect_members(name, pp, 2), 1);
	assert_int_equal(tu_send(pc[0], PUB_GO, 0), 0);
	uint64_t total, code;
	assert_int_equal(tu_expect(sc, SUB_COUNT, &total, 30000), 0);
	assert_int_equal(tu_expect(sc, SUB_END, &code, 30000), 0);
	assert_int_equal(total, 2 * PER_PUB);
	assert_int_equal(code, 0);
	assert_int_equal(tu_wait_child(sp, 20000), 0);
	assert_int_equal(tu_wait_child(pp[0], 30000), 0);
	close(sc);
	close(pc[0]);
	close(pc[1]);
}

/* One of two publishers ends with crs_pub_error (after all of its
 * messages): a subscriber ends with that code at once (not before the
 * failing publisher's messages), one with delay_errors only after every
 * message of the other publisher too. */
static void test_publisher_error(void **s)
{
	(void)s;
	char name[48];
	tu_name(name, sizeof(name), "mpe");
	struct pub_arg pa[2];
	pid_t pp[2];
	int pc[2], sc[2];
	for (int i = 0; i < 2; i++) {
		pa[i] = (struct pub_arg){name, i, 2, 0, 1, 0, i ? 77 : 0};
		pp[i] = spawn_pub(&pa[i], &pc[i], i);
	}
	struct sub_arg sa[2];
	pid_t sp[2];
	for (int i = 0; i < 2; i++) {
		sa[i] = (struct sub_arg){name, 2, i, -1, 0, 0, 1};
		sp[i] = tu_spawn_engine(child_sub, &sa[i], &sc[i], 60, i);
		assert_int_equal(tu_expect(sc[i], PUB_READY, NULL, 20000), 0);
	}
	/* Both counted both subscribers: the one that ends first may
	 * leave P0 early without stalling it. */
	for (int i = 0; i < 2; i++)
		assert_int_equal(tu_expect(pc[i], SUBSCRIBED, NULL, 20000), 0);
	for (int i = 0; i < 2; i++)
		assert_int_equal(tu_send(pc[i], PUB_GO, 0), 0);
	for (int i = 0; i < 2; i++) {
		uint64_t total, code;
		assert_int_equal(tu_expect(sc[i], SUB_COUNT, &total, 30000), 0);
		assert_int_equal(tu_expect(sc[i], SUB_END, &code, 30000), 0);
		assert_int_equal(code, 77);
		if (i == 1) /* delay_errors: everything first */
			assert_int_equal(total, 2 * PER_PUB);
		assert_int_equal(tu_wait_child(sp[i], 20000), 0);
	}
	for (int i = 0; i < 2; i++) {
		int st = tu_wait_child(pp[i], 30000);
		assert_true(st == 0 || st == TU_CHILD_FAIL);
		close(pc[i]);
		close(sc[i]);
	}
}

static void test_two_pubs_one_sub(void **s)
{
	(void)s;
	run(2, 1, -1, NULL, NULL);
}

static void test_one_pub_one_sub(void **s)
{
	(void)s;
	run(1, 1, -1, NULL, NULL);
}

static void test_two_pubs_three_subs(void **s)
{
	(void)s;
	run(2, 3, -1, NULL, NULL);
}

static void test_eight_pubs_one_sub(void **s)
{
	(void)s;
	run(8, 1, -1, NULL, NULL);
}

static void test_eight_pubs_three_subs(void **s)
{
	(void)s;
	run(8, 3, -1, NULL, NULL);
}

static void test_one_pub_three_subs(void **s)
{
	(void)s;
	run(1, 3, -1, NULL, NULL);
}

static void test_publisher_killed_mid_claim(void **s)
{
	(void)s;
	/* Subscribers 0 and 2 delay errors: they get everything the
	 * others publish after the kill; 1 ends with EPIPE once it sees
	 * the death. */
	static const int delay[3] = {1, 0, 1};
	static const int end[3] = {EPIPE, EPIPE, EPIPE};
	run(3, 3, 1, delay, end);
}

/* Decoy socket files: many sockets of other streams (or leftovers of
 * dead publishers) in the runtime directory. */
#define DECOYS 8000
static void decoys(int create)
{
	char path[4200];
	for (int i = 0; i < DECOYS; i++) {
		snprintf(path, sizeof(path), "%s/decoy-%05d.sock", tu_dir(), i);
		if (create) {
			FILE *f = fopen(path, "w");
			assert_non_null(f);
			fclose(f);
		} else {
			assert_int_equal(unlink(path), 0);
		}
	}
}

/* The members are found however many sockets of other streams the
 * directory holds (a list of the first 1024 missed them). */
static void test_members_among_many_sockets(void **s)
{
	(void)s;
	decoys(1);
	run(2, 1, -1, NULL, NULL);
	decoys(0);
}

/* A publisher of name that is SIGKILLed once created: it leaves its
 * member's socket and lock behind. */
static int child_doomed(void *argp, int chan)
{
	struct crs_pub_opts o;
	crs_pub_opts_init(&o);
	o.shared = 1;
	o.ring_bytes = 64 * 1024;
	crs_pub *pub;
	CHECK_EQ(crs_pub_create(argp, &o, &pub), 0);
	CHECK_EQ(tu_send(chan, PUB_READY, 0), 0);
	for (;;)
		pause(); /* SIGKILLed here */
}

/* How many of name's member files ending in suffix the runtime
 * directory holds; the first max member names go to names. */
static int member_files(const char *name, const char *suffix,
			char (*names)[CRS_NAME_MAX + 1], int max)
{
	DIR *d = opendir(tu_dir());
	assert_non_null(d);
	size_t len = strlen(name), slen = strlen(suffix);
	int n = 0;
	struct dirent *e;
	while ((e = readdir(d))) {
		size_t k = strlen(e->d_name);
		if (k != len + 9 + slen || strncmp(e->d_name, name, len) ||
		    e->d_name[len] != '~' || strcmp(e->d_name + k - slen, suffix))
			continue;
		if (n < max) {
			memcpy(names[n], e->d_name, k - slen);
			names[n][k - slen] = 0;
		}
		n++;
	}
	closedir(d);
	return n;
}

/* Dead publishers' members (nobody publishes a member name again): a
 * subscriber gives up on one at its first attempt, saying why, instead
 * of waiting for it; a merged subscriber that finds nothing else waits
 * for a live publisher rather than completing; the next publisher of
 * the stream removes the leftovers and leaves live members alone, and
 * the merge then reads the live ones to their completion. */
static void test_dead_members_left_behind(void **s)
{
	(void)s;
	char name[48], dead[3][CRS_NAME_MAX + 1];
	tu_name(name, sizeof(name), "mpd");
	pid_t doomed[3];
	int chan[3];
	for (int i = 0; i < 3; i++) { /* all alive: none sweeps another */
		doomed[i] = tu_spawn(child_doomed, name, &chan[i], 60);
		assert_int_equal(tu_expect(chan[i], PUB_READY, NULL, 20000), 0);
	}
	for (int i = 0; i < 3; i++) {
		tu_kill(doomed[i]);
		close(chan[i]);
	}
	assert_int_equal(member_files(name, ".sock", dead, 3), 3);
	assert_int_equal(member_files(name, ".lock", NULL, 0), 3);

	struct crs_sub_opts o;
	crs_sub_opts_init(&o);
	o.wait_ms = 60000; /* a wait for a publisher to come back */
	crs_sub *sub;
	struct crs_msg m;
	for (int i = 0; i < 3; i++) {
		o.async = i < 2;
		int r = crs_sub_open(dead[i], &o, &sub);
		if (!o.async) {
			assert_int_equal(r, -ENOENT);
			assert_non_null(strstr(crs_errmsg(), dead[i]));
			assert_non_null(strstr(crs_errmsg(), "never published"));
			continue;
		}
		assert_int_equal(r, 0);
		assert_int_equal(crs_sub_poll(sub, &m), -CRS_EEND);
		const struct crs_end *end = crs_sub_end(sub);
		assert_int_equal(end->code, ENOENT);
		assert_non_null(strstr(end->message, "never published"));
		crs_sub_close(sub);
	}

	crs_sub_opts_init(&o);
	o.shared = 1;
	o.prefetch = 0;
	crs_sub *merged;
	assert_int_equal(crs_sub_open(name, &o, &merged), 0);
	assert_int_equal(crs_sub_request(merged, 2 * PER_PUB + 1), 0);
	for (int i = 0; i < 3; i++) /* finds the three: they do not end it */
		assert_int_equal(crs_sub_poll(merged, &m), 0);
	assert_null(crs_sub_end(merged));

	struct pub_arg pa[2];
	pid_t pp[2];
	int pc[2];
	for (int i = 0; i < 2; i++) {
		pa[i] = (struct pub_arg){name, i, 1, 0, 0, 0, 0};
		pp[i] = spawn_pub(&pa[i], &pc[i], i);
		/* Swept by each one's create; the first one's stays. */
		assert_int_equal(member_files(name, ".sock", NULL, 0), i + 1);
		assert_int_equal(member_files(name, ".lock", NULL, 0), i + 1);
	}
	uint64_t next[2] = {0, 0};
	int r;
	for (;;) {
		assert_int_equal(crs_sub_wait(merged, 20000), 0);
		r = crs_sub_poll(merged, &m);
		if (r < 0)
			break;
		if (r == 0)
			continue;
		struct payload p;
		assert_int_equal(m.len, sizeof(p));
		memcpy(&p, m.data, sizeof(p));
		assert_true(p.pub < 2);
		assert_int_equal(p.k, next[p.pub]);
		next[p.pub]++;
		crs_sub_release(merged);
	}
	assert_int_equal(crs_sub_end(merged)->code, 0);
	assert_int_equal(next[0], PER_PUB);
	assert_int_equal(next[1], PER_PUB);
	crs_sub_close(merged);
	for (int i = 0; i < 2; i++) {
		assert_int_equal(tu_wait_child(pp[i], 30000), 0);
		close(pc[i]);
	}
	assert_int_equal(member_files(name, ".sock", NULL, 0), 0);
}

static void test_four_pubs_loop(void **s)
{
	(void)s;
	use_loop = 1;
	run(4, 3, -1, NULL, NULL);
	use_loop = 0;
}

int main(void)
{
	tu_init();
	if (getenv("MULTIPUB_TEST")) /* one test, to repeat it alone */
		cmocka_set_test_filter(getenv("MULTIPUB_TEST"));
	const struct CMUnitTest tests[] = {
		TU_TEST(test_one_pub_one_sub),
		TU_TEST(test_one_pub_three_subs),
		TU_TEST(test_two_pubs_one_sub),
		TU_TEST(test_two_pubs_three_subs),
		TU_TEST(test_eight_pubs_one_sub),
		TU_TEST(test_eight_pubs_three_subs),
		TU_TEST(test_publisher_killed_mid_claim),
		TU_TEST(test_four_pubs_loop),
		TU_TEST(test_members_among_many_sockets),
		TU_TEST(test_dead_members_left_behind),
		TU_TEST(test_join_and_leave),
		TU_TEST(test_publisher_error),
	};
	return cmocka_run_group_tests_name("multipub", tests, NULL, NULL);
}
