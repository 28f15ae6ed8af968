/*
 * waitset.h - a long-lived set of things to wait for, for event loops:
 * futex words (wake when the word differs from a value or is woken) and
 * fds (poll events). Entries are one-shot: once reported as fired they are
 * disarmed until the caller arms them again.
 *
 * The io_uring engine keeps every armed entry pending in the kernel as a
 * FUTEX_WAIT or POLL_ADD request, so the ring fd (ipc_waitset_fd) polls
 * readable as soon as anything fires and a loop can sit inside another
 * loop's epoll. The fallback engines (no io_uring, or CRS_NO_URING=1)
 * wait with futex_waitv (or plain FUTEX_WAIT) and poll; their fd is an
 * eventfd written by a watcher thread that waits on a copy of the armed
 * entries between ipc_waitset_submit and the next call.
 */
#ifndef CRS_IPC_WAITSET_H
#define CRS_IPC_WAITSET_H

#include <stdint.h>

#include "compiler.h"

struct ipc_waitset;

CRS_MUST_USE int ipc_waitset_new(struct ipc_waitset **out);
void ipc_waitset_free(struct ipc_waitset *ws);
const char *ipc_waitset_engine(const struct ipc_waitset *ws);
/* Pollable fd that turns readable when an entry fired (the fallback
 * engines: starts the watcher thread), or -errno. */
int ipc_waitset_fd(struct ipc_waitset *ws);

/* Arm key to fire when *addr != val or on a wake. Re-arming an armed key
 * with the same word and value keeps the pending wait. 0 or -errno. */
CRS_MUST_USE int ipc_waitset_futex(struct ipc_waitset *ws, uint64_t key,
				   const void *addr, uint32_t val);
/* Arm key to fire when fd has any of events (POLLIN, POLLRDHUP...). */
CRS_MUST_USE int ipc_waitset_poll(struct ipc_waitset *ws, uint64_t key, int fd,
				  short events);
/* Disarm and forget key (its fd or word may go away after this). */
void ipc_waitset_forget(struct ipc_waitset *ws, uint64_t key);

/* Hand queued arms to the kernel without waiting (io_uring; the
 * fallback: to the watcher thread, once the fd was asked for), and make
 * the fd readable at once if kick (a completion that reports nothing). */
int ipc_waitset_submit(struct ipc_waitset *ws, int kick);

/* Submit what is armed and wait until something fires or the deadline
 * (CLOCK_MONOTONIC ns; INT64_MAX none; 0 or a past deadline: do not
 * block). Stores up to max fired keys; returns their count, 0 at the
 * deadline, -EINTR when a signal arrived first, or -errno. */
CRS_MUST_USE int ipc_waitset_wait(struct ipc_waitset *ws, int64_t deadline,
				  uint64_t *fired, int max);

#endif
