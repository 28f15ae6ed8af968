/*
 * opener.h - opening a subscription without blocking: the steps of
 * attach_open (attach.h) as a state machine that a poll, a wait or a loop
 * advances, and the fds to sleep on between steps.
 *
 * While the stream is absent it watches the runtime directory (inotify:
 * a publisher binding its socket creates a file there), so an idle
 * opener wakes nobody; a socket that refuses connections (a dead
 * publisher's leftovers, or a new one between bind and listen) is tried
 * again after a backoff of 10 ms doubling to 1 s. While the handshake
 * runs it waits for the socket. A timerfd wakes it for the next retry
 * and for its deadlines.
 */
#ifndef CRS_OPENER_H
#define CRS_OPENER_H

#include <stdint.h>

#include "attach.h"
#include "crs/crs.h"
#include "ipc/compiler.h"
#include "ipc/rundir.h"
#include "ipc/waitset.h"

struct opener {
	char name[CRS_NAME_MAX + 1];
	int handshake_ms;      /* -1: forever */
	int persist;	       /* retry after every failure, forever */
	int64_t wait_deadline; /* for the stream to appear */
	int64_t hs_deadline;   /* for the WELCOME */
	int64_t retry_at;      /* next attempt while absent (0: at an event) */
	int64_t backoff_ns;
	int handshaking;
	int found; /* an attempt found the socket: hs_deadline runs */
	char dir[IPC_RUNDIR_MAX]; /* the runtime directory, once known */
	int watch_fd;		  /* inotify on the runtime directory, or -1 */
	int timer_fd;		  /* -1 until a deadline needs it */
	struct attach at;
};

/* Start opening name (already checked). wait_ms: how long the stream
 * may take to appear (0: one attempt, -1: forever); handshake_ms as for
 * attach_open; persist: a failed attempt is retried (with backoff)
 * instead of reported, and the stream may take forever to appear. */
void opener_start(struct opener *op, const char *name, int wait_ms,
		  int handshake_ms, int persist);
/* Advance without blocking. Returns 0 (not yet), 1 (opened: *out holds
 * the attachment, now the caller's) or the failure as for attach_open
 * (-ENOENT for a stream that did not appear in time). */
CRS_MUST_USE int opener_step(struct opener *op, struct attach *out);
/* Arm ws to wake when a step may get further: keys base (directory or
 * socket) and base + 1 (timer). 0, or -errno when an arm failed (then
 * nap and step again). */
CRS_MUST_USE int opener_arm(struct opener *op, struct ipc_waitset *ws,
			    uint64_t base);
/* Close what is open (also after success: the attachment was moved). */
void opener_stop(struct opener *op);

#endif
