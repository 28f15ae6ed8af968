/*
 * merge.c - a merged subscription over the members of a shared stream.
 *
 * Each publisher of a shared stream NAME writes its own ring, the member
 * stream NAME~<id> (name.h), so every word keeps one writer and a
 * publisher that dies affects its own member only. A merged subscription
 * opens one ordinary subscription per member (asynchronously, so that
 * nothing here blocks) and hands out their messages round-robin:
 *
 *  - Demand: the application's request(n) bounds what the merge hands
 *    out from all members together. Each member subscription has its own
 *    credit, a prefetch window W (the merged prefetch, or 128 when that
 *    is 0), replenished as the merge releases: the internal prefetch of
 *    a merge operator. So in lockstep mode a member publisher runs at
 *    most W messages ahead of what this subscriber has taken from it;
 *    in replay mode it runs ahead as far as its ring allows, as always.
 *  - Order: a member's messages keep their order; between members there
 *    is none beyond the fairness of the round-robin.
 *  - Termination: complete once at least one member has joined and
 *    every member found has completed. A member's error (EPIPE for one
 *    that died or closed without completing: dying counts as an error)
 *    ends the merge at once, or, with delay_errors, once every other
 *    member has ended. A member whose socket refuses or is missing for
 *    MEMBER_WAIT_MS (ENOENT) never joined. Not at once: a joining
 *    publisher's socket file appears at bind(), and refuses until its
 *    listen(). But one that refuses while nobody holds its lock is a
 *    dead publisher's leftover, given up on at once (attach_connect);
 *    the next publisher of the stream removes it (pub.c).
 *  - Discovery: an inotify watch on the runtime directory, read at most
 *    once a millisecond while the merge finds nothing to hand out, and
 *    slept on by crs_sub_wait.
 *  - Waiting: what a wait arms depends on each member's state (an open
 *    under way: the opener's fds; open: its data_signal and socket). A
 *    member found, or one whose open finished, inside the re-check of
 *    park.h was not armed by the announce before it: the merge then
 *    bumps its own stream_gen, so that crs_sub_wait and crs_loop look
 *    again instead of sleeping on stale waits (and no publisher would
 *    know to wake us: we never told it we park).
 */

#include <errno.h>
#include <fcntl.h>
#include <poll.h>
#include <stdlib.h>
#include <string.h>
#include <sys/inotify.h>
#include <unistd.h>

#include "credit.h"
#include "ipc/clock.h"
#include "ipc/memfd.h"
#include "ipc/rundir.h"
#include "ipc/sock.h"
#include "ipc/waitset.h"
#include "name.h"
#include "park.h"
#include "sub.h"

#define DEFAULT_WINDOW 128
#define MEMBER_WAIT_MS 1000   /* a member socket that refuses: see the top */
#define DISCOVER_NS 1000000LL /* look for new members at most every 1 ms */
#define SPIN_BACKOFF_MAX 64

struct member {
	char name[CRS_NAME_MAX + 1];
	crs_sub *sub;	      /* NULL once it ended */
	uint64_t stream_id;   /* once open */
	struct crs_msg stash; /* taken from the member, not handed out */
	int stashed;
	uint32_t gen; /* sub->stream_gen when we last looked */
};

struct sub_merge {
	crs_sub *owner; /* the merged subscription */
	char name[CRS_NAME_MAX + 1];
	size_t name_len;
	struct crs_sub_opts member_opts;
	int delay_errors;
	struct ipc_rundir dir;
	int watch_fd;
	int64_t next_discover_ns;
	int rescan; /* a scan missed members: the next discover() scans */
	struct member *m;
	int n, cap;
	int live;      /* members not ended */
	int completed; /* members that joined and completed */
	int next;      /* round-robin start */
	int held;      /* member whose messages are handed out, or -1 */
	uint32_t held_n;
	struct crs_end first_error;  /* delay_errors: code 0 until one */
	struct ipc_waitset *ws;	     /* keys 0: directory; 2 + 2i, 3 + 2i */
	struct ipc_waitset *loop_ws; /* the same keys, for a crs_loop */
};

int merge_wanted(const char *name, const struct crs_sub_opts *o)
{
	if (name_member(name))
		return 0;
	if (o->shared)
		return 1;
	struct ipc_rundir d;
	if (ipc_rundir_open(&d, 0))
		return 0;
	char marker[CRS_NAME_MAX + 2];
	snprintf(marker, sizeof(marker), "%s~", name);
	int marked = faccessat(d.fd, marker, F_OK, AT_SYMLINK_NOFOLLOW) == 0;
	ipc_rundir_close(&d);
	return marked;
}

/* Is leaf (a runtime directory entry) the socket of one of our members?
 * Then copy the member name out. */
static int member_leaf(const struct sub_merge *mg, const char *leaf, char *out)
{
	size_t n = strlen(leaf);
	if (n != mg->name_len + CRS_MEMBER_SUFFIX + 5 ||
	    memcmp(leaf, mg->name, mg->name_len) ||
	    strcmp(leaf + n - 5, ".sock"))
		return 0;
	memcpy(out, leaf, n - 5);
	out[n - 5] = 0;
	return name_member(out) == mg->name_len;
}

/* What the waits of the merge were armed on changed: see the top. */
static void merge_stale(struct sub_merge *mg)
{
	mg->owner->stream_gen++;
}

static void member_add(struct sub_merge *mg, const char *name)
{
	for (int i = 0; i < mg->n; i++)
		if (!strcmp(mg->m[i].name, name))
			return;
	if (mg->n == mg->cap) {
		int cap = mg->cap ? mg->cap * 2 : 8;
		struct member *m = realloc(mg->m, (size_t)cap * sizeof(*m));
		if (!m) {
			mg->rescan = 1; /* found again by the next scan */
			return;
		}
		mg->m = m;
		mg->cap = cap;
	}
	struct member *m = &mg->m[mg->n];
	memset(m, 0, sizeof(*m));
	strlcpy(m->name, name, sizeof(m->name));
	if (crs_sub_open(name, &mg->member_opts, &m->sub)) {
		mg->rescan = 1; /* out of memory or fds: try again later */
		return;
	}
	m->gen = m->sub->stream_gen;
	mg->n++;
	mg->live++;
	merge_stale(mg); /* not armed yet */
}

/* Every member socket in the directory now, however many sockets of
 * other streams (or leftovers of dead publishers) it holds. What could
 * not be looked at (out of memory) is looked for again at the next
 * discover(). */
static void scan(struct sub_merge *mg)
{
	enum { SIZE = CRS_NAME_MAX + 8 };
	char *names;
	int k = ipc_dir_list_all(mg->dir.fd, ".sock", SIZE, &names);
	mg->rescan = k < 0;
	for (int i = 0; i < k; i++) {
		char leaf[SIZE + 8], name[CRS_NAME_MAX + 1];
		snprintf(leaf, sizeof(leaf), "%s.sock",
			 names + (size_t)i * SIZE);
		if (member_leaf(mg, leaf, name))
			member_add(mg, name);
	}
	free(names);
}

/* New members, from the directory's events (rate-limited unless force). */
static void discover(struct sub_merge *mg, int force)
{
	int64_t now = ipc_now_ns();
	if (!force && now < mg->next_discover_ns)
		return;
	mg->next_discover_ns = now + DISCOVER_NS;
	if (mg->watch_fd < 0 || mg->rescan) {
		scan(mg); /* no watch, or missed some: look at everything */
		if (mg->watch_fd < 0)
			return;
	}
	uint64_t buf[512]; /* aligned for struct inotify_event */
	ssize_t r;
	while ((r = read(mg->watch_fd, buf, sizeof(buf))) > 0) {
		for (char *p = (char *)buf; p < (char *)buf + r;) {
			struct inotify_event *e = (struct inotify_event *)p;
			char name[CRS_NAME_MAX + 1];
			if (e->len && member_leaf(mg, e->name, name))
				member_add(mg, name);
			p += sizeof(*e) + e->len;
		}
	}
	if (r < 0 && errno == EAGAIN)
		return;
	scan(mg); /* overflowed or broken: look at everything */
}

static void merge_end(crs_sub *sub, int code, const char *message)
{
	if (sub->ended)
		return;
	sub->ended = 1;
	sub->end.code = code;
	memset(sub->end.message, 0, sizeof(sub->end.message));
	if (message)
		strlcpy(sub->end.message, message, sizeof(sub->end.message));
}

/* Disarm member i's keys (what they watched may be gone). */
static void member_forget(struct sub_merge *mg, int i)
{
	ipc_waitset_forget(mg->ws, 2 + 2 * (uint64_t)i);
	ipc_waitset_forget(mg->ws, 3 + 2 * (uint64_t)i);
	if (mg->loop_ws) {
		ipc_waitset_forget(mg->loop_ws, 2 + 2 * (uint64_t)i);
		ipc_waitset_forget(mg->loop_ws, 3 + 2 * (uint64_t)i);
	}
}

/* After a call into member i: its open finished (or failed) there, so
 * its keys watch the opener's closed fds, not its stream. */
static void member_seen(struct sub_merge *mg, int i)
{
	struct member *m = &mg->m[i];
	if (m->sub->stream_gen == m->gen)
		return;
	m->gen = m->sub->stream_gen;
	member_forget(mg, i);
	merge_stale(mg);
}

static void member_close(struct sub_merge *mg, int i)
{
	struct member *m = &mg->m[i];
	if (!m->sub)
		return;
	member_forget(mg, i);
	crs_sub_close(m->sub);
	m->sub = NULL;
	m->stashed = 0;
	mg->live--;
}

static void close_all(struct sub_merge *mg)
{
	for (int i = 0; i < mg->n; i++)
		member_close(mg, i);
}

/* Member i's stream ended: left, completed, or failed. */
static void member_ended(crs_sub *sub, int i)
{
	struct sub_merge *mg = sub->merge;
	struct member *m = &mg->m[i];
	const struct crs_end *e = crs_sub_end(m->sub);
	int code = e ? e->code : EPROTO;
	if (code == 0 || (code == ENOENT && !m->stream_id)) {
		mg->completed += code == 0;
		member_close(mg, i); /* completed, or never joined */
		return;
	}
	/* Say which member: its name, then its own message (truncated). */
	char message[sizeof(sub->end.message)];
	size_t k = strlcpy(message, m->name, sizeof(message));
	if (e && k + 2 < sizeof(message)) {
		memcpy(message + k, ": ", 3);
		strlcpy(message + k + 2, e->message, sizeof(message) - k - 2);
	}
	member_close(mg, i);
	if (!mg->delay_errors) {
		merge_end(sub, code, message);
		close_all(mg);
	} else if (!mg->first_error.code) {
		mg->first_error.code = code;
		strlcpy(mg->first_error.message, message,
			sizeof(mg->first_error.message));
	}
}

/* Every member found has ended: so does the merge, once one of them
 * joined (or failed). Members that never joined (leftovers of dead
 * publishers) are as if never found: the merge waits for a live one. */
static void check_done(crs_sub *sub)
{
	struct sub_merge *mg = sub->merge;
	if (sub->ended || mg->live > 0 || mg->held >= 0)
		return;
	discover(mg, 1); /* one that joined just now keeps it going */
	if (mg->live > 0 || (!mg->completed && !mg->first_error.code))
		return;
	if (mg->first_error.code)
		merge_end(sub, mg->first_error.code, mg->first_error.message);
	else
		merge_end(sub, 0, NULL);
}

static int take_from(crs_sub *sub, int i, struct crs_msg *msgs, size_t max,
		     size_t max_bytes)
{
	struct sub_merge *mg = sub->merge;
	struct member *m = &mg->m[i];
	int r;
	if (m->stashed) {
		msgs[0] = m->stash;
		m->stashed = 0;
		r = 1;
	} else {
		r = crs_sub_take(m->sub, msgs, max, max_bytes);
		member_seen(mg, i);
		if (r < 0) {
			member_ended(sub, i);
			return 0;
		}
		if (r == 0)
			return 0;
	}
	if (!m->stream_id)
		m->stream_id = crs_sub_stream_id(m->sub);
	for (int k = 0; k < r; k++)
		msgs[k].stream_id = m->stream_id;
	mg->held = i;
	mg->held_n = (uint32_t)r;
	mg->next = i + 1 < mg->n ? i + 1 : 0;
	sub->received += (uint64_t)r;
	return r;
}

/* Without demand, still learn of members' ends: hold back one message
 * of each member that has one (the stash, handed out first later). */
static void fill_stashes(crs_sub *sub)
{
	struct sub_merge *mg = sub->merge;
	for (int i = 0; i < mg->n && !sub->ended; i++) {
		struct member *m = &mg->m[i];
		if (!m->sub || m->stashed || i == mg->held)
			continue;
		int r = crs_sub_take(m->sub, &m->stash, 1, 0);
		member_seen(mg, i);
		if (r == 1) {
			m->stashed = 1;
			if (!m->stream_id)
				m->stream_id = crs_sub_stream_id(m->sub);
		} else if (r < 0) {
			member_ended(sub, i);
		}
	}
}

void merge_release(crs_sub *sub)
{
	struct sub_merge *mg = sub->merge;
	if (mg->held < 0)
		return;
	struct member *m = &mg->m[mg->held];
	if (m->sub)
		crs_sub_release(m->sub);
	if (sub->prefetch) {
		sub->since_request += mg->held_n;
		if (sub->since_request >= sub->replenish) {
			sub->requested = credit_add(sub->requested,
						    sub->since_request);
			sub->since_request = 0;
		}
	}
	mg->held = -1;
	mg->held_n = 0;
}

int merge_take(crs_sub *sub, struct crs_msg *msgs, size_t max, size_t max_bytes)
{
	struct sub_merge *mg = sub->merge;
	merge_release(sub);
	if (sub->ended)
		return -CRS_EEND;
	if (max == 0)
		return 0;
	discover(mg, 0);
	if (sub->received >= sub->requested) {
		fill_stashes(sub);
	} else {
		uint64_t left = sub->requested - sub->received;
		if (max > left)
			max = (size_t)left;
		for (int k = 0; k < mg->n && !sub->ended; k++) {
			int i = (mg->next + k) % mg->n;
			if (!mg->m[i].sub)
				continue;
			int r = take_from(sub, i, msgs, max, max_bytes);
			if (r > 0)
				return r;
		}
	}
	check_done(sub);
	return sub->ended ? -CRS_EEND : 0;
}

int merge_poll(crs_sub *sub, struct crs_msg *msgs, size_t max, size_t max_bytes)
{
	int r = merge_take(sub, msgs, max, max_bytes);
	if (r < 0)
		sub->end_delivered = 1; /* the application was told */
	return r;
}

int merge_request(crs_sub *sub, uint64_t n)
{
	if (sub->cancelled || sub->ended)
		return 0;
	if (n == 0) {
		merge_end(sub, EINVAL,
			  "request(0) violates Reactive Streams 3.9");
		close_all(sub->merge);
		return -EINVAL;
	}
	sub->requested = credit_add(sub->requested, n);
	return 0;
}

void merge_cancel(crs_sub *sub)
{
	if (sub->cancelled)
		return;
	sub->cancelled = 1;
	sub->merge->held = -1;
	close_all(sub->merge);
	merge_end(sub, ECANCELED, "cancelled");
	sub->end_delivered = 1;
}

/* 1 if merge_take would return non-zero now. */
int merge_has_work(crs_sub *sub)
{
	struct sub_merge *mg = sub->merge;
	if (sub->ended)
		return 1;
	discover(mg, 1);
	fill_stashes(sub);
	check_done(sub);
	if (sub->ended)
		return 1;
	if (sub->received >= sub->requested)
		return 0;
	for (int i = 0; i < mg->n; i++)
		if (mg->m[i].stashed)
			return 1;
	return 0;
}

static int wait_announce(void *ctx, struct ipc_waitset *ws)
{
	crs_sub *sub = ctx;
	struct sub_merge *mg = sub->merge;
	int how = 0;
	sub->wait_gen = sub->stream_gen;
	if (mg->watch_fd >= 0 && ipc_waitset_poll(ws, 0, mg->watch_fd, POLLIN))
		how |= PARK_NAP;
	if (mg->watch_fd < 0)
		how |= PARK_NAP; /* scanning: look again soon */
	for (int i = 0; i < mg->n; i++) {
		struct member *m = &mg->m[i];
		/* A stashed member waits for our demand, not its publisher. */
		if (m->sub && !m->stashed)
			how |= sub_announce(m->sub, ws, 2 + 2 * (uint64_t)i);
	}
	return how;
}

/* The re-check may find a member, or finish one's open: then what was
 * armed is stale, so look again instead of sleeping on it. */
static int wait_has_work(void *ctx)
{
	crs_sub *sub = ctx;
	return merge_has_work(sub) || sub->wait_gen != sub->stream_gen;
}

static void wait_withdraw(void *ctx)
{
	crs_sub *sub = ctx;
	struct sub_merge *mg = sub->merge;
	for (int i = 0; i < mg->n; i++)
		if (mg->m[i].sub)
			sub_withdraw(mg->m[i].sub);
}

/* The members' hangups among fired keys. */
static void note_fired(struct sub_merge *mg, const uint64_t *fired, int n)
{
	for (int k = 0; k < n; k++) {
		uint64_t key = fired[k];
		int i = (int)((key - 2) / 2);
		if (key >= 2 && (key & 1) && i < mg->n && mg->m[i].sub)
			sub_hangup(mg->m[i].sub);
	}
}

int merge_announce(crs_sub *sub, struct ipc_waitset *ws, uint64_t base)
{
	struct sub_merge *mg = sub->merge;
	if (!mg->loop_ws && ipc_waitset_new(&mg->loop_ws))
		return PARK_NAP;
	/* Take what fired (one-shot entries), then arm again. */
	uint64_t fired[16];
	int n;
	while ((n = ipc_waitset_wait(mg->loop_ws, 0, fired, 16)) > 0)
		note_fired(mg, fired, n);
	int how = wait_announce(sub, mg->loop_ws);
	int fd = ipc_waitset_fd(mg->loop_ws);
	if (fd < 0 || ipc_waitset_submit(mg->loop_ws, 0) ||
	    ipc_waitset_poll(ws, base, fd, POLLIN))
		how |= PARK_NAP;
	return how;
}

void merge_withdraw(crs_sub *sub)
{
	wait_withdraw(sub);
}

static const struct park_hooks wait_hooks = {
	.announce = wait_announce,
	.has_work = wait_has_work,
	.withdraw = wait_withdraw,
};

void merge_park(crs_sub *sub, int64_t deadline)
{
	struct sub_merge *mg = sub->merge;
	uint64_t fired[16];
	int n = park_wait(&wait_hooks, sub, mg->ws, deadline, fired, 16);
	note_fired(mg, fired, n);
}

int merge_open(crs_sub *sub, const char *name, const struct crs_sub_opts *o)
{
	struct sub_merge *mg = calloc(1, sizeof(*mg));
	if (!mg)
		return -ENOMEM;
	mg->owner = sub;
	mg->watch_fd = -1;
	mg->held = -1;
	mg->dir.fd = -1;
	strlcpy(mg->name, name, sizeof(mg->name));
	mg->name_len = strlen(mg->name);
	mg->delay_errors = o->delay_errors != 0;
	crs_sub_opts_init(&mg->member_opts);
	mg->member_opts.prefetch = o->prefetch ? o->prefetch : DEFAULT_WINDOW;
	mg->member_opts.handshake_ms = o->handshake_ms;
	mg->member_opts.wait_ms = MEMBER_WAIT_MS;
	mg->member_opts.spin_us = o->spin_us;
	mg->member_opts.async = 1;
	sub->merge = mg;
	int err = name_rundir_open(&mg->dir, 0);
	if (!err)
		err = ipc_waitset_new(&mg->ws);
	if (err) {
		merge_close(sub);
		return err;
	}
	/* Watch first, then scan: a member joining in between is in both. */
	mg->watch_fd = inotify_init1(IN_NONBLOCK | IN_CLOEXEC);
	if (mg->watch_fd >= 0 &&
	    inotify_add_watch(mg->watch_fd, mg->dir.path,
			      IN_CREATE | IN_MOVED_TO) < 0) {
		close(mg->watch_fd);
		mg->watch_fd = -1;
	}
	scan(mg);
	return 0;
}

void merge_close(crs_sub *sub)
{
	struct sub_merge *mg = sub->merge;
	if (!mg)
		return;
	if (mg->m)
		close_all(mg);
	free(mg->m);
	ipc_close(mg->watch_fd);
	if (mg->ws)
		ipc_waitset_free(mg->ws);
	if (mg->loop_ws)
		ipc_waitset_free(mg->loop_ws);
	ipc_rundir_close(&mg->dir);
	free(mg);
	sub->merge = NULL;
}
