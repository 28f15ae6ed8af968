/*
 * wait.c - the wait engines behind ipc_wait().
 *
 * io_uring: one FUTEX_WAITV request for all futex words plus one POLL_ADD
 * per fd, submitted and waited for with a single io_uring_enter; requests
 * still pending when one completes are cancelled before returning.
 *
 * poll fallback: futex_waitv(2) in slices of at most FALLBACK_SLICE_NS,
 * with a non-blocking poll(2) of the fds between slices, since no single
 * classic syscall sleeps on both a futex and an fd.
 */
#include "wait.h"

#include "clock.h"

#include <errno.h>
#include <linux/futex.h>
#include <liburing.h>
#include <poll.h>
#include <stdlib.h>
#include <string.h>
#include <sys/syscall.h>
#include <unistd.h>

#define IPC_WAIT_MAX_FD 128
#define FALLBACK_SLICE_NS (20 * 1000000LL)
#define OP_FUTEX_WAITV 53 /* IORING_OP_FUTEX_WAITV; liburing 2.3 lacks it */
#define FUTEX_SIZE_U32 0x02
#define UD_FUTEX 0
#define UD_CANCEL (UINT64_MAX - 1)
#define UD_LIBURING UINT64_MAX /* liburing's own timeout, old kernels */
#define UD_FD(i) ((uint64_t)(i) + 1)

struct ipc_waiter {
	int uring_ok;
	struct io_uring ring;
	struct futex_waitv vec[IPC_WAIT_MAX_FUTEX];
};

int ipc_waiter_new(struct ipc_waiter **out)
{
	struct ipc_waiter *w = calloc(1, sizeof(*w));
	if (!w)
		return -ENOMEM;
	const char *no = getenv("CRS_NO_URING");
	if (!(no && *no && strcmp(no, "0") != 0))
		w->uring_ok = io_uring_queue_init(IPC_WAIT_MAX_FD + 4, &w->ring,
						  0) == 0;
	*out = w;
	return 0;
}

void ipc_waiter_free(struct ipc_waiter *w)
{
	if (!w)
		return;
	if (w->uring_ok)
		io_uring_queue_exit(&w->ring);
	free(w);
}

const char *ipc_waiter_engine(const struct ipc_waiter *w)
{
	return w->uring_ok ? "io_uring" : "poll";
}

static void fill_vec(struct ipc_waiter *w, const struct ipc_futex_wait *fx,
		     int nfx)
{
	for (int i = 0; i < nfx; i++) {
		w->vec[i] = (struct futex_waitv){
			.val = fx[i].val,
			.uaddr = (uint64_t)(uintptr_t)fx[i].addr,
			.flags = FUTEX_SIZE_U32,
		};
	}
}

/* ---- poll fallback ---------------------------------------------------- */

static int fds_ready(struct ipc_fd_wait *fds, int nfd, int timeout_ms)
{
	struct pollfd p[IPC_WAIT_MAX_FD];
	for (int i = 0; i < nfd; i++)
		p[i] = (struct pollfd){ .fd = fds[i].fd,
					.events = fds[i].events };
	int n = poll(p, (nfds_t)nfd, timeout_ms);
	if (n < 0)
		return errno == EINTR ? 1 : -errno;
	for (int i = 0; i < nfd; i++)
		fds[i].revents = p[i].revents;
	return n > 0;
}

static int wait_fallback(struct ipc_waiter *w, int nfx,
			 struct ipc_fd_wait *fds, int nfd, int64_t deadline)
{
	for (;;) {
		if (nfd) {
			int r = fds_ready(fds, nfd, 0);
			if (r)
				return r;
		}
		int64_t left = ipc_left_ns(deadline);
		if (left == 0)
			return 0;
		if (!nfx) {
			int ms = left == INT64_MAX ? -1
			       : (int)((left + 999999) / 1000000);
			return fds_ready(fds, nfd, ms);
		}
		int64_t slice = nfd && left > FALLBACK_SLICE_NS
				      ? FALLBACK_SLICE_NS
				      : left;
		struct timespec abs, *tp = NULL;
		if (slice != INT64_MAX) {
			int64_t t = ipc_now_ns() + slice;
			abs.tv_sec = t / 1000000000;
			abs.tv_nsec = t % 1000000000;
			tp = &abs;
		}
		long r = syscall(SYS_futex_waitv, w->vec, nfx, 0, tp,
				 CLOCK_MONOTONIC);
		if (r >= 0 || errno == EAGAIN || errno == EINTR)
			return 1;
		if (errno != ETIMEDOUT)
			return -errno;
	}
}

/* ---- io_uring --------------------------------------------------------- */

static int uring_cancel_all(struct ipc_waiter *w, int pending,
			    struct ipc_fd_wait *fds, int *woken)
{
	struct io_uring_sqe *sqe = io_uring_get_sqe(&w->ring);
	if (!sqe)
		return -EBUSY;
	io_uring_prep_cancel64(sqe, 0, IORING_ASYNC_CANCEL_ANY);
	io_uring_sqe_set_data64(sqe, UD_CANCEL);
	pending++;
	int err = io_uring_submit(&w->ring);
	if (err < 0)
		return err;
	while (pending > 0) {
		struct io_uring_cqe *cqe;
		err = io_uring_wait_cqe(&w->ring, &cqe);
		if (err == -EINTR)
			continue;
		if (err < 0)
			return err;
		uint64_t ud = io_uring_cqe_get_data64(cqe);
		if (ud != UD_CANCEL && cqe->res != -ECANCELED) {
			*woken = 1;
			if (ud != UD_FUTEX && cqe->res > 0)
				fds[ud - 1].revents = (short)cqe->res;
		}
		io_uring_cqe_seen(&w->ring, cqe);
		pending--;
	}
	return 0;
}

static int wait_uring(struct ipc_waiter *w, int nfx, struct ipc_fd_wait *fds,
		      int nfd, int64_t deadline)
{
	int pending = 0;
	struct io_uring_sqe *sqe;
	if (nfx) {
		sqe = io_uring_get_sqe(&w->ring);
		io_uring_prep_rw(OP_FUTEX_WAITV, sqe, 0, w->vec, (unsigned)nfx,
				 0);
		io_uring_sqe_set_data64(sqe, UD_FUTEX);
		pending++;
	}
	for (int i = 0; i < nfd; i++) {
		sqe = io_uring_get_sqe(&w->ring);
		io_uring_prep_poll_add(sqe, fds[i].fd, (unsigned)fds[i].events);
		io_uring_sqe_set_data64(sqe, UD_FD(i));
		pending++;
	}
	struct __kernel_timespec ts, *tp = NULL;
	int64_t left = ipc_left_ns(deadline);
	if (left != INT64_MAX) {
		ts.tv_sec = left / 1000000000;
		ts.tv_nsec = left % 1000000000;
		tp = &ts;
	}
	struct io_uring_cqe *cqe;
	int err = io_uring_submit_and_wait_timeout(&w->ring, &cqe, 1, tp, NULL);
	if (err < 0 && err != -ETIME && err != -EINTR) {
		/* Submission itself failed: nothing is pending we know of. */
		return err;
	}
	int woken = 0;
	unsigned head;
	unsigned seen = 0;
	io_uring_for_each_cqe(&w->ring, head, cqe)
	{
		uint64_t ud = io_uring_cqe_get_data64(cqe);
		if (ud != UD_CANCEL && ud != UD_LIBURING) {
			pending--;
			woken = 1;
			if (ud != UD_FUTEX && cqe->res > 0)
				fds[ud - 1].revents = (short)cqe->res;
		}
		seen++;
	}
	io_uring_cq_advance(&w->ring, seen);
	if (pending > 0) {
		err = uring_cancel_all(w, pending, fds, &woken);
		if (err < 0)
			return err;
	}
	if (woken)
		return 1;
	return ipc_left_ns(deadline) == 0 ? 0 : 1;
}

int ipc_wait(struct ipc_waiter *w, const struct ipc_futex_wait *fx, int nfx,
	     struct ipc_fd_wait *fds, int nfd, int64_t deadline_ns)
{
	if (nfx < 0 || nfx > IPC_WAIT_MAX_FUTEX || nfd < 0 ||
	    nfd > IPC_WAIT_MAX_FD)
		return -EINVAL;
	for (int i = 0; i < nfd; i++)
		fds[i].revents = 0;
	fill_vec(w, fx, nfx);
	if (w->uring_ok)
		return wait_uring(w, nfx, fds, nfd, deadline_ns);
	return wait_fallback(w, nfx, fds, nfd, deadline_ns);
}
