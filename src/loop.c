/*
 * loop.c - crs_loop: one thread serving many subscriptions, publishers
 * and fds, sleeping in one wait (ipc/waitset.h) when none has work.
 *
 * Each registration owns a block of waitset keys:
 *   subscriber  +0 data_signal futex, +1 liveness socket
 *   publisher   +0 its control epoll fd, +1+slot each subscriber's
 *               progress futex
 *   fd          +0 the fd
 * Sleeping is park.h over every registration at once: the loop's hooks
 * (loop_announce, have_work, loop_withdraw) call the same per-handle
 * hooks a blocking wait of that handle uses.
 */
#include <errno.h>
#include <poll.h>
#include <stdlib.h>
#include <string.h>

#include "crs/crs.h"
#include "ipc/clock.h"
#include "ipc/futex.h"
#include "ipc/sock.h"
#include "ipc/waitset.h"
#include "park.h"
#include "pub.h"
#include "sub.h"

#define KEYS_PER_ENTRY (CRS_SUBSCRIBERS_MAX + 2)
#define SUB_BUDGET 256 /* messages per subscription per round */
#define MAX_FIRED 256

enum kind { L_FREE = 0, L_SUB, L_PUB, L_FD };

struct loop_entry {
	int kind;
	int announced; /* park.h: announced and not yet withdrawn */
	void *ctx;
	/* L_SUB */
	crs_sub *sub;
	struct crs_sub_callbacks cb;
	uint32_t sub_gen; /* its stream_gen when its waits were armed */
	/* L_PUB */
	crs_pub *pub;
	crs_pub_ready_fn on_ready;
	int announce; /* call on_ready at the next dispatch */
	int serve;    /* control fd fired */
	uint32_t seen_gen;
	uint32_t armed_gen; /* slot_gen when its waits were last armed */
	uint32_t seen_progress[CRS_SUBSCRIBERS_MAX];
	/* L_FD */
	int fd;
	short events;
	short revents;
	crs_fd_ready_fn fd_cb;
};

struct crs_loop {
	struct ipc_waitset *ws;
	struct loop_entry *e;
	int n;
	int running;
	int fd_mode;
	uint64_t fired[MAX_FIRED];
};

int crs_loop_create(crs_loop **out)
{
	struct crs_loop *loop = calloc(1, sizeof(*loop));
	if (!loop)
		return -ENOMEM;
	int err = ipc_waitset_new(&loop->ws);
	if (err) {
		free(loop);
		return err;
	}
	*out = loop;
	return 0;
}

static void entry_forget(struct crs_loop *loop, int i)
{
	for (uint64_t k = 0; k < KEYS_PER_ENTRY; k++)
		ipc_waitset_forget(loop->ws, (uint64_t)i * KEYS_PER_ENTRY + k);
}

static void loop_withdraw(void *loop);

void crs_loop_close(crs_loop *loop)
{
	if (!loop)
		return;
	loop_withdraw(loop);
	ipc_waitset_free(loop->ws);
	free(loop->e);
	free(loop);
}

const char *crs_loop_engine(const crs_loop *loop)
{
	return ipc_waitset_engine(loop->ws);
}

static int entry_new(struct crs_loop *loop)
{
	for (int i = 0; i < loop->n; i++)
		if (loop->e[i].kind == L_FREE)
			return i;
	struct loop_entry *e = realloc(loop->e,
				       sizeof(*e) * (size_t)(loop->n + 1));
	if (!e)
		return -ENOMEM;
	loop->e = e;
	memset(&e[loop->n], 0, sizeof(*e));
	return loop->n++;
}

static void announce_for_fd(struct crs_loop *loop);

/* A registration added between runs while the caller sleeps on
 * crs_loop_fd(): announce it now, or nothing would wake that fd for it
 * (within a run, the run's end announces it). */
static int added(struct crs_loop *loop)
{
	if (loop->fd_mode && !loop->running)
		announce_for_fd(loop);
	return 0;
}

static int find(const struct crs_loop *loop, int kind, const void *h, int fd)
{
	for (int i = 0; i < loop->n; i++) {
		const struct loop_entry *e = &loop->e[i];
		if (e->kind == kind &&
		    (kind == L_SUB   ? (const void *)e->sub == h
		     : kind == L_PUB ? (const void *)e->pub == h
				     : e->fd == fd))
			return i;
	}
	return -1;
}

int crs_loop_add_sub(crs_loop *loop, crs_sub *sub,
		     const struct crs_sub_callbacks *cb, void *ctx)
{
	if (find(loop, L_SUB, sub, -1) >= 0)
		return -EEXIST;
	int i = entry_new(loop);
	if (i < 0)
		return i;
	loop->e[i] = (struct loop_entry){
		.kind = L_SUB, .ctx = ctx, .sub = sub, .cb = *cb
	};
	return added(loop);
}

int crs_loop_add_pub(crs_loop *loop, crs_pub *pub, crs_pub_ready_fn on_ready,
		     void *ctx)
{
	if (find(loop, L_PUB, pub, -1) >= 0)
		return -EEXIST;
	int i = entry_new(loop);
	if (i < 0)
		return i;
	loop->e[i] = (struct loop_entry){ .kind = L_PUB,
					  .ctx = ctx,
					  .pub = pub,
					  .on_ready = on_ready,
					  .announce = 1,
					  .serve = 1,
					  .armed_gen = UINT32_MAX };
	return added(loop);
}

int crs_loop_add_fd(crs_loop *loop, int fd, short events, crs_fd_ready_fn cb,
		    void *ctx)
{
	if (find(loop, L_FD, NULL, fd) >= 0)
		return -EEXIST;
	int i = entry_new(loop);
	if (i < 0)
		return i;
	loop->e[i] = (struct loop_entry){ .kind = L_FD,
					  .ctx = ctx,
					  .fd = fd,
					  .events = events,
					  .fd_cb = cb };
	return added(loop);
}

static int remove_at(struct crs_loop *loop, int i)
{
	if (i < 0)
		return -ENOENT;
	struct loop_entry *e = &loop->e[i];
	if (e->announced && e->kind == L_SUB)
		sub_withdraw(e->sub);
	if (e->announced && e->kind == L_PUB)
		pub_withdraw(e->pub);
	entry_forget(loop, i);
	memset(e, 0, sizeof(*e));
	/* Forgetting took every entry back from the fallback engine's
	 * watcher (ipc_waitset_forget): between runs, hand the rest over
	 * again, or nothing would signal crs_loop_fd() for them. */
	return added(loop);
}

int crs_loop_remove_sub(crs_loop *loop, crs_sub *sub)
{
	return remove_at(loop, find(loop, L_SUB, sub, -1));
}

int crs_loop_remove_pub(crs_loop *loop, crs_pub *pub)
{
	return remove_at(loop, find(loop, L_PUB, pub, -1));
}

int crs_loop_remove_fd(crs_loop *loop, int fd)
{
	return remove_at(loop, find(loop, L_FD, NULL, fd));
}

/* ---- publishers ------------------------------------------------------- */

/* Did any subscriber move, arrive or leave since on_ready last ran? */
static int pub_changed(const struct loop_entry *e)
{
	return e->announce || e->seen_gen != pub_slot_gen(e->pub) ||
	       pub_progress_changed(e->pub, e->seen_progress);
}

static void pub_remember(struct loop_entry *e)
{
	e->announce = 0;
	e->seen_gen = pub_slot_gen(e->pub);
	pub_progress(e->pub, e->seen_progress);
}

static int dispatch_pub(struct crs_loop *loop, int i)
{
	struct loop_entry *e = &loop->e[i];
	crs_pub *pub = e->pub;
	pub_serve_step(pub, e->serve);
	e->serve = 0;
	if (!pub_changed(e))
		return 0;
	pub_remember(e);
	if (e->on_ready)
		e->on_ready(e->ctx, pub);
	return 1;
}

/* ---- subscribers and fds ---------------------------------------------- */

static int dispatch_sub(struct crs_loop *loop, int i)
{
	/* Copies: callbacks may add entries and move loop->e. */
	struct crs_sub_callbacks cb = loop->e[i].cb;
	crs_sub *sub = loop->e[i].sub;
	/* Read before: a terminal callback may close sub (unless it
	 * follows the name: then it stays registered). */
	int silent = sub_end_told(sub); /* cancelled, or delivered before */
	int follows = sub_follows(sub);
	int r = crs_sub_dispatch(sub, &cb, loop->e[i].ctx, SUB_BUDGET);
	if (r == -CRS_EGAP)
		return 1; /* on_gap */
	if (r != -CRS_EEND)
		return r > 0 ? r : 0;
	if (follows && sub_follows(sub))
		return silent ? 0 : 1; /* waits for the next publisher */
	/* The callbacks may have removed or replaced this entry. */
	if (i < loop->n && loop->e[i].kind == L_SUB && loop->e[i].sub == sub)
		remove_at(loop, i);
	return silent ? 0 : 1; /* the terminal callback, if it was made */
}

static int dispatch_fd(struct crs_loop *loop, int i)
{
	struct loop_entry *e = &loop->e[i];
	if (!e->revents)
		return 0;
	short revents = e->revents;
	e->revents = 0;
	e->fd_cb(e->ctx, e->fd, revents);
	return 1;
}

/* ---- the loop ----------------------------------------------------------- */

static int dispatch_all(struct crs_loop *loop)
{
	int total = 0;
	for (int i = 0; i < loop->n; i++) {
		switch (loop->e[i].kind) {
		case L_SUB:
			total += dispatch_sub(loop, i);
			break;
		case L_PUB:
			total += dispatch_pub(loop, i);
			break;
		case L_FD:
			total += dispatch_fd(loop, i);
			break;
		}
	}
	return total;
}

/* park.h hooks of the loop: every registration's own hooks at once. */
static int loop_announce(void *ctx, struct ipc_waitset *ws)
{
	struct crs_loop *loop = ctx;
	int how = 0;
	loop_withdraw(loop); /* never count one registration twice */
	for (int i = 0; i < loop->n; i++) {
		struct loop_entry *e = &loop->e[i];
		uint64_t base = (uint64_t)i * KEYS_PER_ENTRY;
		if (e->kind == L_SUB) {
			e->sub_gen = sub_stream_gen(e->sub);
			how |= sub_announce(e->sub, ws, base);
		} else if (e->kind == L_PUB)
			how |= pub_announce(e->pub, ws, base, e->seen_progress,
					    &e->armed_gen);
		else if (e->kind == L_FD &&
			 ipc_waitset_poll(ws, base, e->fd, e->events))
			how |= PARK_NAP;
		e->announced = e->kind == L_SUB || e->kind == L_PUB;
	}
	return how;
}

static void loop_withdraw(void *ctx)
{
	struct crs_loop *loop = ctx;
	for (int i = 0; i < loop->n; i++) {
		struct loop_entry *e = &loop->e[i];
		if (!e->announced)
			continue;
		e->announced = 0;
		if (e->kind == L_SUB)
			sub_withdraw(e->sub);
		else if (e->kind == L_PUB)
			pub_withdraw(e->pub);
	}
}

static int have_work(void *ctx)
{
	struct crs_loop *loop = ctx;
	for (int i = 0; i < loop->n; i++) {
		struct loop_entry *e = &loop->e[i];
		/* A subscription that left its stream here (following)
		 * must not be slept on: its words are unmapped. */
		if ((e->kind == L_SUB &&
		     (sub_has_work(e->sub) ||
		      e->sub_gen != sub_stream_gen(e->sub))) ||
		    (e->kind == L_PUB && (e->serve || pub_changed(e))) ||
		    (e->kind == L_FD && e->revents))
			return 1;
	}
	return 0;
}

/* Record what fired: hangups, control fds, and fd readiness. */
static void note_fired(struct crs_loop *loop, int n)
{
	for (int k = 0; k < n; k++) {
		int i = (int)(loop->fired[k] / KEYS_PER_ENTRY);
		uint64_t sub_key = loop->fired[k] % KEYS_PER_ENTRY;
		if (i >= loop->n)
			continue;
		struct loop_entry *e = &loop->e[i];
		if (e->kind == L_SUB && sub_key == 1)
			sub_hangup(e->sub);
		else if (e->kind == L_PUB && sub_key == 0)
			e->serve = 1;
		else if (e->kind == L_FD) {
			int r = ipc_fd_poll(e->fd, e->events, 0);
			e->revents = r > 0 ? (short)r : 0;
		}
	}
}

/* Subscribers of a registered publisher changed since its waits were
 * armed (outside the loop, too), or a subscription left its stream: the
 * words may be unmapped. Disarm them before anything waits or looks at
 * armed words. */
static void forget_stale(struct crs_loop *loop)
{
	for (int i = 0; i < loop->n; i++) {
		struct loop_entry *e = &loop->e[i];
		if (e->kind == L_SUB && e->sub_gen != sub_stream_gen(e->sub)) {
			entry_forget(loop, i);
			e->sub_gen = sub_stream_gen(e->sub);
		}
		if (e->kind == L_PUB && e->armed_gen != pub_slot_gen(e->pub)) {
			pub_forget_slots(loop->ws,
					 (uint64_t)i * KEYS_PER_ENTRY);
			e->armed_gen = UINT32_MAX;
		}
	}
}

static const struct park_hooks loop_hooks = {
	.announce = loop_announce,
	.has_work = have_work,
	.withdraw = loop_withdraw,
};

/* Stay announced while the caller sleeps on crs_loop_fd(), and make the
 * fd readable at once if it must not sleep: work is already pending, or
 * the protocol asks for a nap (membarrier refused, an arm failed), which
 * only a wakeup soon can give. */
static void announce_for_fd(struct crs_loop *loop)
{
	int64_t nap;
	int work = park_begin(&loop_hooks, loop, loop->ws, &nap);
	ipc_waitset_submit(loop->ws, work || nap);
}

int crs_loop_run(crs_loop *loop, int timeout_ms)
{
	if (loop->running)
		return -EBUSY;
	loop->running = 1;
	int64_t deadline = ipc_deadline(timeout_ms);
	int total = 0;
	forget_stale(loop);
	int n = ipc_waitset_wait(loop->ws, 0, loop->fired, MAX_FIRED);
	park_end(&loop_hooks, loop); /* announced for crs_loop_fd() */
	for (;;) {
		if (n < 0) {
			total = n;
			break;
		}
		note_fired(loop, n);
		total += dispatch_all(loop);
		if (total || ipc_now_ns() >= deadline)
			break;
		n = park_wait(&loop_hooks, loop, loop->ws, deadline,
			      loop->fired, MAX_FIRED);
	}
	if (loop->fd_mode && total >= 0)
		announce_for_fd(loop);
	loop->running = 0;
	return total;
}

int crs_loop_fd(crs_loop *loop)
{
	int fd = ipc_waitset_fd(loop->ws);
	if (fd >= 0 && !loop->fd_mode) {
		loop->fd_mode = 1;
		announce_for_fd(loop);
	}
	return fd;
}
