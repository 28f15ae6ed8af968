/*
 * wait.h - one blocking wait for futex words, file descriptors and a
 * deadline together. Two engines sit behind it: io_uring (futex waits
 * and polls in one io_uring_enter) and a fallback on futex_waitv and poll,
 * chosen at run time (CRS_NO_URING=1 forces the fallback).
 */
#ifndef CRS_IPC_WAIT_H
#define CRS_IPC_WAIT_H

#include <stdint.h>

#define IPC_WAIT_MAX_FUTEX 128

struct ipc_futex_wait {
	const void *addr; /* 32-bit word in shared memory */
	uint32_t val;	  /* sleep only while *addr == val */
};

struct ipc_fd_wait {
	int fd;
	short events;  /* POLLIN, POLLRDHUP, ... */
	short revents; /* filled by ipc_wait */
};

struct ipc_waiter;

/* Returns 0 and a waiter, or -errno (-ENOMEM). */
int ipc_waiter_new(struct ipc_waiter **out);
void ipc_waiter_free(struct ipc_waiter *w);
/* "io_uring" or "poll". */
const char *ipc_waiter_engine(const struct ipc_waiter *w);

/* Sleep until a futex word differs from its value or is woken, an fd is
 * ready, or the CLOCK_MONOTONIC deadline (ns, INT64_MAX: none) passes.
 * Returns 1 when woken (fds' revents say which are ready; spurious wakes
 * are possible, callers re-check), 0 at the deadline, -errno on error. */
int ipc_wait(struct ipc_waiter *w, const struct ipc_futex_wait *fx, int nfx,
	     struct ipc_fd_wait *fds, int nfd, int64_t deadline_ns);

#endif
