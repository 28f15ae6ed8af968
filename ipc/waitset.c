/*
 * waitset.c - the two engines behind waitset.h.
 *
 * io_uring: an armed entry is one pending request (IORING_OP_FUTEX_WAIT,
 * written by hand since liburing 2.3 has no helper, or POLL_ADD). Its
 * user_data is generation << 32 | key, so a completion of a request that
 * was cancelled or replaced is recognised as stale and ignored. Changes
 * are only queued as SQEs; they reach the kernel with the next wait.
 * Deadlines are a pending IORING_OP_TIMEOUT shared by the waits that end
 * later (timer_before), not a timeout per wait. The ring belongs to one
 * thread (RING_SOLO) until its fd is handed out; another task that uses
 * it gets a ring of its own (uring_refused).
 *
 * poll: futex_waitv(2) over the armed futex words and poll(2) over the
 * armed fds. futex: the same where futex_waitv is missing (kernels
 * before 5.16, strict seccomp profiles), sleeping in plain FUTEX_WAIT on
 * one word at a time. Both sleep on all their words until the deadline
 * when they can (no fds, words within what one call takes); else in
 * slices, looking at every word and fd between two slices and moving
 * the window of words they sleep on: SLICE_NS when only fds are left
 * out, ROTATE_NS when words are.
 *
 * For a pollable fd without io_uring (ipc_waitset_fd), a watcher thread
 * runs the same wait over a copy of the armed entries, handed over by
 * ipc_waitset_submit, and writes an eventfd when one fires. Every other
 * call takes the entries back first (watch_stop): the watcher is woken
 * through a word of its own in its futex window and a second eventfd in
 * its poll set, and the handover is under a mutex.
 */
#include "waitset.h"

#include <errno.h>
#include <liburing.h>
#include <limits.h>
#include <linux/futex.h>
#include <poll.h>
#include <pthread.h>
#include <stdatomic.h>
#include <stdlib.h>
#include <string.h>
#include <sys/eventfd.h>
#include <sys/syscall.h>
#include <unistd.h>

#include "clock.h"
#include "futex.h"

#define RING_ENTRIES 256
/* A ring set up for the one task that submits to it: the task work of a
 * completion (a futex wake, a hangup) then runs inside the waiter's own
 * io_uring_enter instead of interrupting its sleep, about 0.2 us less
 * per blocking round trip of 4 us in a VM (crs-block-uring / raw-futex
 * 1.56 against 1.64 in a same-run A/B, 32 rounds each; the sleep alone,
 * crs-bench raw-uring-defer-ro against raw-uring-ro, 1.21 against 1.31:
 * bench/results/2026-12-07-s15). The price: any other task (a thread the
 * handle moved to, a forked child) is refused with EEXIST, and then sets
 * up a ring of its own. A ring whose fd is handed out goes without:
 * whoever polls the fd must see completions that no io_uring_enter of
 * ours has run. Kernels before 6.1 refuse the flags and get a plain
 * ring. */
#define RING_SOLO                                                              \
	(IORING_SETUP_SINGLE_ISSUER | IORING_SETUP_DEFER_TASKRUN |             \
	 IORING_SETUP_TASKRUN_FLAG)
#define OP_FUTEX_WAIT 51 /* IORING_OP_FUTEX_WAIT */
#define FUTEX2_U32 0x02	 /* FUTEX2_SIZE_U32, shared (no FUTEX2_PRIVATE) */
#define UD_CANCEL (1ULL << 63)
#define UD_TIMER (1ULL << 62) /* | the timer's generation */
#define SLICE_NS (20 * 1000000LL)
#define ROTATE_NS (1 * 1000000LL)
#define MAX_WAITV 128 /* futex_waitv's limit */

enum kind { K_NONE, K_FUTEX, K_POLL };

struct entry {
	int kind;
	int armed;   /* the caller wants to hear about it */
	int pending; /* io_uring: a request for `gen` is in flight */
	uint32_t gen;
	const void *addr;
	uint32_t val;
	int fd;
	short events;
};

/* The fallback engines' fd: a thread waiting for a copy of the entries. */
enum { W_IDLE, W_WATCH, W_QUIT };
struct watcher {
	pthread_t thread;
	pthread_mutex_t mu;
	pthread_cond_t cv;
	int state;	       /* W_*, under mu */
	_Atomic uint32_t stop; /* 1: give the entries back (a futex word) */
	int intr;	       /* eventfd in the watcher's poll set */
	int efd;	       /* the fd ipc_waitset_fd returns */
	struct entry *snap;    /* owned by the watcher while W_WATCH */
	uint32_t nsnap;
};

struct ipc_waitset {
	int uring_ok;
	int solo;	   /* the ring was set up with RING_SOLO */
	int rehome;	   /* RING_SOLO refused us before (uring_refused) */
	struct watcher *w; /* fallback engines, once ipc_waitset_fd ran */
	int waitv_ok;	 /* futex_waitv works (poll engine), else plain futex */
	uint32_t rotate; /* first word of the next sleeping window */
	struct io_uring ring;
	/* io_uring: the pending deadline timer (IORING_OP_TIMEOUT), shared
	 * by the waits whose deadline is at or after it; 0 when none. */
	int64_t timer_at;
	uint32_t timer_gen;
	struct __kernel_timespec timer_ts; /* read by the kernel at submit */
	struct entry *e;
	uint32_t cap;
	/* The fallback engines' working arrays, kept from wait to wait so
	 * that a blocking wait allocates nothing: cap + 1 of each (the
	 * watcher's fd comes first). Used by one poll_entries at a time:
	 * the caller's, or the watcher's while it holds the entries. */
	struct pollfd *pfd;
	uint32_t *pkey, *fkey;
	uint32_t scratch;
};

/* Does futex_waitv exist here? An empty vector is EINVAL where it does,
 * ENOSYS where the kernel (or a seccomp filter) has none. */
static int waitv_works(void)
{
	return !(syscall(SYS_futex_waitv, NULL, 0, 0, NULL, CLOCK_MONOTONIC) <
			 0 &&
		 errno == ENOSYS);
}

/* Set up the ring, with flags if the kernel takes them. 0 or -errno. */
static int uring_init(struct ipc_waitset *ws, unsigned flags)
{
	ws->solo = flags &&
		   io_uring_queue_init(RING_ENTRIES, &ws->ring, flags) == 0;
	return ws->solo ? 0 : io_uring_queue_init(RING_ENTRIES, &ws->ring, 0);
}

int ipc_waitset_new(struct ipc_waitset **out)
{
	struct ipc_waitset *ws = calloc(1, sizeof(*ws));
	if (!ws)
		return -ENOMEM;
	const char *no = getenv("CRS_NO_URING");
	if (!(no && *no && strcmp(no, "0") != 0))
		ws->uring_ok = uring_init(ws, RING_SOLO) == 0;
	ws->waitv_ok = waitv_works();
	*out = ws;
	return 0;
}

static void watcher_free(struct ipc_waitset *ws);

void ipc_waitset_free(struct ipc_waitset *ws)
{
	if (!ws)
		return;
	watcher_free(ws);
	if (ws->uring_ok)
		io_uring_queue_exit(&ws->ring);
	free(ws->e);
	free(ws->pfd);
	free(ws->pkey);
	free(ws->fkey);
	free(ws);
}

const char *ipc_waitset_engine(const struct ipc_waitset *ws)
{
	return ws->uring_ok ? "io_uring" : ws->waitv_ok ? "poll" : "futex";
}

static int watcher_start(struct ipc_waitset *ws);

static int uring_rebuild(struct ipc_waitset *ws, unsigned flags);

int ipc_waitset_fd(struct ipc_waitset *ws)
{
	if (ws->uring_ok && ws->solo) {
		int err = uring_rebuild(ws, 0);
		if (err)
			return err;
	}
	if (ws->uring_ok)
		return ws->ring.ring_fd;
	if (!ws->w) {
		int err = watcher_start(ws);
		if (err)
			return err;
	}
	return ws->w->efd;
}

static void watch_stop(struct ipc_waitset *ws);

/* Keys index an array that doubles: below 2^31 its size cannot wrap. */
#define KEY_MAX (1u << 31)
static struct entry *entry_for(struct ipc_waitset *ws, uint64_t key)
{
	if (key >= KEY_MAX)
		return NULL;
	if (key >= ws->cap) {
		uint32_t cap = ws->cap ? ws->cap : 16;
		while (cap <= key)
			cap *= 2;
		struct entry *e = realloc(ws->e, sizeof(*e) * cap);
		if (!e)
			return NULL;
		memset(e + ws->cap, 0, sizeof(*e) * (cap - ws->cap));
		ws->e = e;
		ws->cap = cap;
	}
	return &ws->e[key];
}

static struct io_uring_sqe *get_sqe(struct ipc_waitset *ws)
{
	struct io_uring_sqe *sqe = io_uring_get_sqe(&ws->ring);
	if (!sqe) {
		io_uring_submit(&ws->ring); /* SQ full: flush, then retry */
		sqe = io_uring_get_sqe(&ws->ring);
	}
	return sqe;
}

/* Bits 32-61: the entry's generation (30 bits, clear of UD_TIMER and
 * UD_CANCEL); 0-31: its key. */
#define UD_GEN_MASK 0x3fffffffu
static uint64_t user_data(uint64_t key, const struct entry *e)
{
	return (uint64_t)(e->gen & UD_GEN_MASK) << 32 | key;
}

static int cancel(struct ipc_waitset *ws, uint64_t key, struct entry *e)
{
	if (!e->pending)
		return 0;
	struct io_uring_sqe *sqe = get_sqe(ws);
	if (!sqe)
		return -EBUSY;
	io_uring_prep_cancel64(sqe, user_data(key, e), 0);
	io_uring_sqe_set_data64(sqe, UD_CANCEL);
	e->pending = 0;
	e->gen++;
	return 0;
}

static int queue(struct ipc_waitset *ws, uint64_t key, struct entry *e)
{
	struct io_uring_sqe *sqe = get_sqe(ws);
	if (!sqe)
		return -EBUSY;
	if (e->kind == K_FUTEX) {
		io_uring_prep_rw(OP_FUTEX_WAIT, sqe, FUTEX2_U32, e->addr, 0,
				 e->val);
		sqe->addr3 = 0xffffffffu; /* wake mask: any */
	} else {
		io_uring_prep_poll_add(sqe, e->fd, (unsigned)e->events);
	}
	io_uring_sqe_set_data64(sqe, user_data(key, e));
	e->pending = 1;
	return 0;
}

/* Replace the ring with a new one set up by this task (with flags if
 * the kernel takes them), and queue every armed entry on it: the old
 * ring's requests end with it, and a completion it held that was not
 * reaped comes back at once (a futex word that moved, a readable fd).
 * The old ring's futex waits stay queued on their words until the
 * kernel cancels them, later (or never, while a forked child keeps its
 * fd), and so do those whose cancel was queued but never submitted: a
 * wake of one waiter could go to them instead of the new ring's. Waking
 * every waiter on our words first makes that impossible; the others
 * wake for nothing, which every waiter is ready for. Without a new ring
 * the poll engine takes over. 0 or -errno. */
static int uring_rebuild(struct ipc_waitset *ws, unsigned flags)
{
	io_uring_queue_exit(&ws->ring);
	ws->timer_at = 0;
	for (uint32_t key = 0; key < ws->cap; key++) {
		struct entry *e = &ws->e[key];
		if (e->kind == K_FUTEX)
			ipc_futex_wake(e->addr, INT_MAX);
		e->pending = 0;
	}
	ws->uring_ok = uring_init(ws, flags) == 0;
	int err = 0;
	for (uint32_t key = 0; key < ws->cap && ws->uring_ok && !err; key++)
		if (ws->e[key].armed)
			err = queue(ws, key, &ws->e[key]);
	return err;
}

/* After EEXIST from a solo ring: another task set it up. Set up one of
 * our own, solo the first time (a handle made in one thread and used in
 * another), plain from the second on (a handle that keeps moving, as in
 * a thread pool, would pay for a new ring at every move). */
static int uring_refused(struct ipc_waitset *ws)
{
	return uring_rebuild(ws, ws->rehome++ ? 0 : RING_SOLO);
}

/* Arm key for what `want` describes; an identical pending wait stays. */
static int arm(struct ipc_waitset *ws, uint64_t key, const struct entry *want)
{
	watch_stop(ws);
	struct entry *e = entry_for(ws, key);
	if (!e)
		return -ENOMEM;
	int same = e->kind == want->kind &&
		   (want->kind == K_FUTEX
			    ? e->addr == want->addr && e->val == want->val
			    : e->fd == want->fd && e->events == want->events);
	e->armed = 1;
	if (same && (e->pending || !ws->uring_ok))
		return 0;
	if (ws->uring_ok) {
		int err = cancel(ws, key, e);
		if (err)
			return err;
	}
	e->kind = want->kind;
	e->addr = want->addr;
	e->val = want->val;
	e->fd = want->fd;
	e->events = want->events;
	return ws->uring_ok ? queue(ws, key, e) : 0;
}

int ipc_waitset_futex(struct ipc_waitset *ws, uint64_t key, const void *addr,
		      uint32_t val)
{
	struct entry want = { .kind = K_FUTEX, .addr = addr, .val = val };
	return arm(ws, key, &want);
}

int ipc_waitset_poll(struct ipc_waitset *ws, uint64_t key, int fd, short events)
{
	struct entry want = { .kind = K_POLL, .fd = fd, .events = events };
	return arm(ws, key, &want);
}

void ipc_waitset_forget(struct ipc_waitset *ws, uint64_t key)
{
	watch_stop(ws);
	if (key >= ws->cap)
		return;
	struct entry *e = &ws->e[key];
	if (ws->uring_ok)
		cancel(ws, key, e);
	uint32_t gen = e->gen;
	memset(e, 0, sizeof(*e));
	e->gen = gen + 1; /* completions in flight are stale now */
}

/* ---- io_uring --------------------------------------------------------- */

static int reap(struct ipc_waitset *ws, uint64_t *fired, int max)
{
	struct io_uring_cqe *cqe;
	unsigned head, seen = 0;
	int n = 0;
	io_uring_for_each_cqe(&ws->ring, head, cqe)
	{
		seen++;
		uint64_t ud = io_uring_cqe_get_data64(cqe);
		if (ud & UD_CANCEL)
			continue;
		if (ud & UD_TIMER) { /* it fired, or was removed */
			if ((uint32_t)ud == ws->timer_gen)
				ws->timer_at = 0;
			continue;
		}
		uint64_t key = ud & 0xffffffffu;
		if (key >= ws->cap)
			continue;
		struct entry *e = &ws->e[key];
		if (!e->pending || (e->gen & UD_GEN_MASK) != (ud >> 32))
			continue; /* stale: cancelled or replaced */
		e->pending = 0;
		if (cqe->res == -ECANCELED || !e->armed)
			continue;
		if (n == max) {
			queue(ws, key, e); /* no room to report: fires again */
			continue;
		}
		e->armed = 0;
		fired[n++] = key;
	}
	io_uring_cq_advance(&ws->ring, seen);
	return n;
}

/* Have a deadline timer pending at or before deadline, queued as a
 * request that fires on its own: a wait then needs no timeout of its
 * own, whose hrtimer the kernel would arm and cancel around every
 * sleep (0.7-1 us per blocking round trip in a VM). One timer serves
 * every wait with a later deadline (a loop of crs_sub_wait(sub, 1000)
 * arms one a second); a wait it wakes early arms the next. 0, or
 * -EBUSY with the submission queue full (wait with a timeout then). */
static int timer_before(struct ipc_waitset *ws, int64_t deadline)
{
	if (ws->timer_at && ws->timer_at <= deadline)
		return 0;
	struct io_uring_sqe *sqe = get_sqe(ws);
	if (!sqe)
		return -EBUSY;
	if (ws->timer_at) { /* too late for this wait: replace it */
		io_uring_prep_timeout_remove(sqe, UD_TIMER | ws->timer_gen, 0);
		io_uring_sqe_set_data64(sqe, UD_CANCEL);
		ws->timer_at = 0;
		sqe = get_sqe(ws);
		if (!sqe)
			return -EBUSY;
	}
	ws->timer_gen++;
	ws->timer_ts.tv_sec = deadline / 1000000000;
	ws->timer_ts.tv_nsec = deadline % 1000000000;
	io_uring_prep_timeout(sqe, &ws->timer_ts, 0, IORING_TIMEOUT_ABS);
	io_uring_sqe_set_data64(sqe, UD_TIMER | ws->timer_gen);
	ws->timer_at = deadline;
	return 0;
}

static int wait_poll(struct ipc_waitset *ws, int64_t deadline, uint64_t *fired,
		     int max);

static int wait_uring(struct ipc_waitset *ws, int64_t deadline, uint64_t *fired,
		      int max)
{
	for (;;) {
		int n = reap(ws, fired, max);
		if (n)
			return n;
		int64_t left = ipc_left_ns(deadline);
		struct io_uring_cqe *cqe;
		int err;
		if (left == 0) {
			/* A solo ring posts completions only inside an
			 * io_uring_enter of ours: the kernel flags those it
			 * holds (TASKRUN_FLAG), and liburing then enters
			 * even with nothing to submit. */
			err = io_uring_submit(&ws->ring);
		} else {
			struct __kernel_timespec ts, *tp = NULL;
			if (left != INT64_MAX &&
			    timer_before(ws, deadline) != 0) {
				ts.tv_sec = left / 1000000000;
				ts.tv_nsec = left % 1000000000;
				tp = &ts;
			}
			err = io_uring_submit_and_wait_timeout(&ws->ring, &cqe,
							       1, tp, NULL);
		}
		if (err == -EEXIST && ws->solo) {
			err = uring_refused(ws);
			if (err)
				return err;
			if (!ws->uring_ok)
				return wait_poll(ws, deadline, fired, max);
			continue;
		}
		if (left == 0) {
			n = reap(ws, fired, max); /* disarmed: report them */
			return n || err >= 0 ? n : err;
		}
		if (err == -EINTR) { /* a signal: let the caller look */
			n = reap(ws, fired, max);
			return n ? n : -EINTR;
		}
		if (err < 0 && err != -ETIME)
			return err;
	}
}

/* ---- poll fallback ---------------------------------------------------- */

/* Sleep on up to n words (all the same to the caller: any may fire)
 * until the absolute CLOCK_MONOTONIC time tp (NULL: none). Returns the
 * index of a word woken, -1 for nothing (timeout, a wake without
 * index), -EAGAIN when a word differed from its value, or -errno. */
static int sleep_words(struct ipc_waitset *ws, struct futex_waitv *vec, int n,
		       const struct timespec *tp)
{
	if (ws->waitv_ok) {
		long r = syscall(SYS_futex_waitv, vec, n, 0, tp,
				 CLOCK_MONOTONIC);
		if (r >= 0)
			return (int)r;
		if (errno == ENOSYS) {
			ws->waitv_ok = 0; /* gone after all: plain futex */
			return -1;
		}
		return errno == ETIMEDOUT ? -1 : -errno; /* -EAGAIN: moved */
	}
	/* FUTEX_WAIT takes a relative timeout; WAIT_BITSET an absolute one
	 * on CLOCK_MONOTONIC, which keeps the deadline exact. */
	long r = syscall(SYS_futex, (void *)(uintptr_t)vec[0].uaddr,
			 FUTEX_WAIT_BITSET, (uint32_t)vec[0].val, tp, NULL,
			 FUTEX_BITSET_MATCH_ANY);
	if (r == 0)
		return 0;
	return errno == ETIMEDOUT ? -1 : -errno; /* -EAGAIN: moved */
}

/* ws->pfd, pkey and fkey for n entries; 0 or -ENOMEM. They only grow,
 * so after the first waits a wait allocates nothing. */
static int scratch_reserve(struct ipc_waitset *ws, uint32_t n)
{
	if (n <= ws->scratch)
		return 0;
	struct pollfd *pfd = realloc(ws->pfd, sizeof(*pfd) * n);
	if (pfd)
		ws->pfd = pfd;
	uint32_t *pkey = realloc(ws->pkey, sizeof(*pkey) * n);
	if (pkey)
		ws->pkey = pkey;
	uint32_t *fkey = realloc(ws->fkey, sizeof(*fkey) * n);
	if (fkey)
		ws->fkey = fkey;
	if (!pfd || !pkey || !fkey)
		return -ENOMEM;
	ws->scratch = n;
	return 0;
}

/* Wait for entries es[0, cap) (ws's own, or the watcher's copy; w is
 * then the watcher, whose stop word and intr fd end the wait with 0). */
static int poll_entries(struct ipc_waitset *ws, struct entry *es, uint32_t cap,
			struct watcher *w, int64_t deadline, uint64_t *fired,
			int max)
{
	struct futex_waitv vec[MAX_WAITV];
	uint32_t vkey[MAX_WAITV];
	int n = 0, err = scratch_reserve(ws, cap + 1);
	if (err)
		return err;
	struct pollfd *pfd = ws->pfd;
	uint32_t *pkey = ws->pkey, *fkey = ws->fkey;
	for (;;) {
		uint32_t nf = 0;
		int np = 0;
		/* The watcher's own word and fd come first: a stop request
		 * is seen before anything else, and interrupts the sleep. */
		if (w && atomic_load(&w->stop))
			goto out;
		if (w) {
			pfd[np] = (struct pollfd){ w->intr, POLLIN, 0 };
			pkey[np++] = UINT32_MAX;
		}
		for (uint32_t k = 0; k < cap && n < max; k++) {
			struct entry *e = &es[k];
			if (!e->armed)
				continue;
			if (e->kind == K_FUTEX && w) {
				/* The watcher runs while its caller may unmap
				 * a word (a slot dropped, a stream left, both
				 * between runs): only the kernel reads them
				 * here (moved: -EAGAIN; gone: -EFAULT). */
				fkey[nf++] = k;
			} else if (e->kind == K_FUTEX) {
				/* Pairs with the waker's release store of the
				 * word (pub_wake_all, sub_publish in src/). */
				uint32_t now = __atomic_load_n(
					(const uint32_t *)e->addr,
					__ATOMIC_ACQUIRE);
				if (now != e->val) {
					e->armed = 0;
					fired[n++] = k;
				} else {
					fkey[nf++] = k;
				}
			} else if (e->kind == K_POLL) {
				pfd[np] = (struct pollfd){ e->fd, e->events,
							   0 };
				pkey[np++] = k;
			}
		}
		if (np && n < max && poll(pfd, (nfds_t)np, 0) > 0) {
			for (int i = 0; i < np && n < max; i++) {
				if (pfd[i].revents && pkey[i] == UINT32_MAX)
					goto out; /* the watcher is stopped */
				if (pfd[i].revents) {
					es[pkey[i]].armed = 0;
					fired[n++] = pkey[i];
				}
			}
		}
		int64_t left = ipc_left_ns(deadline);
		if (n || left == 0)
			goto out;
		/* The watcher sleeps on its stop word too (vec[0]); with
		 * plain FUTEX_WAIT it has no room for it and looks at the
		 * word between slices instead. */
		uint32_t extra = w && ws->waitv_ok;
		uint32_t room = ws->waitv_ok ? MAX_WAITV - extra : 1;
		int watch_np = w != NULL; /* the intr fd is not the caller's */
		int64_t slice = nf > room || (w && !extra && nf) ? ROTATE_NS
				: np > watch_np && nf		 ? SLICE_NS
								 : left;
		if (slice > left)
			slice = left;
		if (!nf) {
			int ms = slice == INT64_MAX
					 ? -1
					 : (int)((slice + 999999) / 1000000);
			if (poll(pfd, (nfds_t)np, ms) < 0) {
				err = -errno; /* -EINTR: let the caller look */
				goto out;
			}
			continue;
		}
		/* The window of words to sleep on, moving every slice so
		 * that each word gets its turn. */
		uint32_t nv = nf < room ? nf : room;
		uint32_t first = nf > room ? ws->rotate % nf : 0;
		ws->rotate = first + nv;
		if (extra) {
			vec[0] = (struct futex_waitv){
				.val = 0,
				.uaddr = (uintptr_t)&w->stop,
				.flags = FUTEX2_U32
			};
			vkey[0] = UINT32_MAX;
		}
		for (uint32_t i = 0; i < nv; i++) {
			const struct entry *e = &es[fkey[(first + i) % nf]];
			vec[extra + i] = (struct futex_waitv){
				.val = e->val,
				.uaddr = (uintptr_t)e->addr,
				.flags = FUTEX2_U32
			};
			vkey[extra + i] = fkey[(first + i) % nf];
		}
		nv += extra;
		struct timespec abs, *tp = NULL;
		if (slice != INT64_MAX) {
			int64_t t = ipc_now_ns() + slice;
			abs.tv_sec = t / 1000000000;
			abs.tv_nsec = t % 1000000000;
			tp = &abs;
		}
		int r = sleep_words(ws, vec, (int)nv, tp);
		if (r >= 0 && (uint32_t)r < nv && vkey[r] == UINT32_MAX)
			continue; /* the stop word: seen at the top */
		if (r >= 0 && (uint32_t)r < nv) {
			es[vkey[r]].armed = 0;
			fired[n++] = vkey[r];
			goto out;
		}
		if (r == -EAGAIN && (!w || atomic_load(&w->stop)))
			continue;   /* the next look finds what moved */
		if (r == -EAGAIN) { /* a word of the window moved */
			es[vkey[extra]].armed = 0;
			fired[n++] = vkey[extra];
			goto out;
		}
		if (r == -EINTR) {
			err = -EINTR;
			goto out;
		}
		if (r < -1) {
			err = r;
			goto out;
		}
	}
out:
	return err ? err : n;
}

static int wait_poll(struct ipc_waitset *ws, int64_t deadline, uint64_t *fired,
		     int max)
{
	return poll_entries(ws, ws->e, ws->cap, NULL, deadline, fired, max);
}

/* ---- the fallback engines' fd: a watcher thread ------------------------ */

static void *watcher_main(void *arg)
{
	struct ipc_waitset *ws = arg;
	struct watcher *w = ws->w;
	pthread_mutex_lock(&w->mu);
	for (;;) {
		while (w->state == W_IDLE)
			pthread_cond_wait(&w->cv, &w->mu);
		if (w->state == W_QUIT)
			break;
		pthread_mutex_unlock(&w->mu);
		uint64_t key;
		int n = poll_entries(ws, w->snap, w->nsnap, w, INT64_MAX, &key,
				     1);
		if (n != 0) { /* fired, or an error the loop will see too */
			uint64_t one = 1;
			if (write(w->efd, &one, sizeof(one)) < 0) {
				/* the counter is full: readable already */
			}
		}
		pthread_mutex_lock(&w->mu);
		if (w->state == W_WATCH)
			w->state = W_IDLE; /* until the next handover */
		pthread_cond_broadcast(&w->cv);
	}
	pthread_mutex_unlock(&w->mu);
	return NULL;
}

static int watcher_start(struct ipc_waitset *ws)
{
	struct watcher *w = calloc(1, sizeof(*w));
	if (!w)
		return -ENOMEM;
	w->efd = eventfd(0, EFD_NONBLOCK | EFD_CLOEXEC);
	w->intr = eventfd(0, EFD_NONBLOCK | EFD_CLOEXEC);
	int err = w->efd < 0 || w->intr < 0 ? -errno : 0;
	if (!err) {
		pthread_mutex_init(&w->mu, NULL);
		pthread_cond_init(&w->cv, NULL);
		ws->w = w;
		err = -pthread_create(&w->thread, NULL, watcher_main, ws);
		if (err) {
			pthread_mutex_destroy(&w->mu);
			pthread_cond_destroy(&w->cv);
			ws->w = NULL;
		}
	}
	if (err) {
		if (w->efd >= 0)
			close(w->efd);
		if (w->intr >= 0)
			close(w->intr);
		free(w);
	}
	return err;
}

/* Take the entries back from a watching watcher, and wait until it let
 * go of its copy. */
static void watch_stop(struct ipc_waitset *ws)
{
	struct watcher *w = ws->w;
	if (!w)
		return;
	pthread_mutex_lock(&w->mu);
	if (w->state == W_WATCH) {
		atomic_store(&w->stop, 1);
		syscall(SYS_futex, &w->stop, FUTEX_WAKE, 1, NULL, NULL, 0);
		uint64_t one = 1;
		if (write(w->intr, &one, sizeof(one)) < 0) {
			/* full: readable already */
		}
		while (w->state == W_WATCH)
			pthread_cond_wait(&w->cv, &w->mu);
		uint64_t v;
		if (read(w->intr, &v, sizeof(v)) < 0) {
			/* nothing to drain */
		}
		atomic_store(&w->stop, 0);
	}
	pthread_mutex_unlock(&w->mu);
}

/* Hand a copy of the armed entries to the watcher. */
static int watch_start(struct ipc_waitset *ws)
{
	struct watcher *w = ws->w;
	watch_stop(ws);
	struct entry *snap = realloc(w->snap, sizeof(*snap) * (ws->cap + 1));
	if (!snap)
		return -ENOMEM;
	if (ws->cap)
		memcpy(snap, ws->e, sizeof(*snap) * ws->cap);
	pthread_mutex_lock(&w->mu);
	w->snap = snap;
	w->nsnap = ws->cap;
	w->state = W_WATCH;
	pthread_cond_broadcast(&w->cv);
	pthread_mutex_unlock(&w->mu);
	return 0;
}

static void watcher_free(struct ipc_waitset *ws)
{
	struct watcher *w = ws->w;
	if (!w)
		return;
	watch_stop(ws);
	pthread_mutex_lock(&w->mu);
	w->state = W_QUIT;
	pthread_cond_broadcast(&w->cv);
	pthread_mutex_unlock(&w->mu);
	pthread_join(w->thread, NULL);
	pthread_mutex_destroy(&w->mu);
	pthread_cond_destroy(&w->cv);
	close(w->efd);
	close(w->intr);
	free(w->snap);
	free(w);
	ws->w = NULL;
}

int ipc_waitset_submit(struct ipc_waitset *ws, int kick)
{
	if (!ws->uring_ok && ws->w) {
		uint64_t one = 1;
		if (kick)
			return write(ws->w->efd, &one, sizeof(one)) < 0 &&
					       errno != EAGAIN
				       ? -errno
				       : 0;
		return watch_start(ws);
	}
	if (!ws->uring_ok)
		return 0;
	if (kick) {
		struct io_uring_sqe *sqe = get_sqe(ws);
		if (!sqe)
			return -EBUSY;
		io_uring_prep_nop(sqe);
		io_uring_sqe_set_data64(sqe, UD_CANCEL); /* ignored by reap */
	}
	int err = io_uring_submit(&ws->ring);
	if (err == -EEXIST && ws->solo) {
		err = uring_refused(ws); /* queues the arms again */
		if (!err && ws->uring_ok)
			err = io_uring_submit(&ws->ring);
	}
	return err < 0 ? err : 0;
}

int ipc_waitset_wait(struct ipc_waitset *ws, int64_t deadline, uint64_t *fired,
		     int max)
{
	if (max <= 0)
		return -EINVAL;
	if (ws->uring_ok)
		return wait_uring(ws, deadline, fired, max);
	if (ws->w) {
		watch_stop(ws);
		uint64_t v; /* the fd reports new work from here on */
		if (read(ws->w->efd, &v, sizeof(v)) < 0) {
			/* nothing pending */
		}
	}
	return wait_poll(ws, deadline, fired, max);
}
