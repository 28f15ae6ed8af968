/*
 * serve.h - the publisher's control part: the listener, the handshake
 * table, the subscriber slots (liveness socket, control segment, the
 * last demand and position read from it) and the limits recomputed over
 * them. Above the epoch part (epoch.h) and the hot part (pubring.h),
 * which it tells of subscribers coming and going (epoch_member_add,
 * pubring_set_parked) and of the limits (pubring_set_limits); below the API
 * (pub.h). Only serve.c writes struct pub_control.
 */
#ifndef CRS_SERVE_H
#define CRS_SERVE_H

#include <stdint.h>
#include <sys/types.h>

#include "crs/crs.h"
#include "epoch.h"
#include "ipc/compiler.h"
#include "ipc/sock.h"
#include "ipc/waitset.h"
#include "layout.h"
#include "pubring.h"

#define PUB_MAX_PENDING 32
#define PUB_SERVE_NS 1000000 /* serve control at most every 1 ms */
#define PUB_HELLO_TIMEOUT_NS 5000000000LL
/* Connections accepted: at most PUB_ACCEPT_BURST at once and one per
 * PUB_ACCEPT_COST_NS on average (4000/s), so connect/close churn cannot
 * take the publisher's time from its data path. */
#define PUB_ACCEPT_BURST 64
#define PUB_ACCEPT_COST_NS 250000LL
/* Out of descriptors: try accepting again after this. */
#define PUB_FD_BACKOFF_NS 50000000LL

struct pub_slot {
	int used;
	int fd;	    /* liveness socket */
	int ctl_fd; /* control memfd */
	struct crs_ctl *ctl;
	pid_t pid;
	uid_t uid;
	uint64_t requested; /* last valid values read from ctl */
	uint64_t consumed;
	uint64_t consumed_seq; /* as the subscriber reports it (stats only) */
	int64_t moved_ns;      /* when it last requested or consumed, or
				  began to hold the stream back */
	int holding;	       /* held the stream back at the last look */
	int asked;	       /* progress asked for since it last moved */
};

struct pub_pending {
	int fd;
	int64_t since_ns;
	struct ipc_peer peer; /* checked at accept */
};

struct pub_control {
	struct pub_ring *ring;
	struct pub_epoch *epoch;
	int64_t untethered_ns; /* evict stalled subscribers after; 0 never */
	int64_t next_serve_ns;
	int data_fd; /* the caller's: sent to every subscriber */
	uint64_t data_size;
	int listen_fd;	   /* the caller's */
	int ep;		   /* the caller's epoll set: listen socket, timer,
			      pending and slot sockets */
	int listen_paused; /* out of the epoll set until timer_fd fires */
	int timer_fd;	   /* in ep: resumes a paused listener */
	int reserve_fd;	   /* given back to refuse peers when out of fds */
	int accept_tokens; /* connections we may accept now */
	int64_t tokens_ns; /* when accept_tokens was last refilled */
	uint32_t max_subscribers;
	struct crs_pub_opts access; /* the allow_* fields decide admission */
	int nactive;
	uint8_t active[CRS_SUBSCRIBERS_MAX]; /* slots in use, nactive of them */
	uint32_t slot_gen; /* bumped whenever the subscriber set changes */
	struct pub_slot slots[CRS_SUBSCRIBERS_MAX];
	struct pub_pending pending[PUB_MAX_PENDING];
};

/* epoll data tags for ep. */
#define PUB_EV_LISTEN 0
#define PUB_EV_TIMER 1
#define PUB_EV_PENDING(i) (1000 + (uint64_t)(i))
#define PUB_EV_SLOT(i) (2000 + (uint64_t)(i))

/* Serve listen_fd (watched in ep from now on) to subscribers, sending
 * them data_fd; o is checked. Creates the timer and reserve fds, which
 * control_close releases with every subscriber. 0 or -errno. */
CRS_MUST_USE int control_init(struct pub_control *c, struct pub_ring *ring,
			      struct pub_epoch *epoch,
			      const struct crs_pub_opts *o, int data_fd,
			      uint64_t data_size, int listen_fd, int ep);
void control_close(struct pub_control *c);
/* One round of control work. Returns the number of subscribers, or
 * -errno if the epoll set could not be read: nothing was served, and
 * the next round (within PUB_SERVE_NS) tries again, so the data path
 * may ignore the result. */
int control_serve(struct pub_control *c);
/* Is a round due at now (CLOCK_MONOTONIC ns)? */
int control_serve_due(const struct pub_control *c, int64_t now);
/* End slot i (code: why, told to the subscriber; 0: it left). */
void control_drop(struct pub_control *c, int i, int code);
/* Re-read every subscriber's demand and consumed position and set the
 * ring's limits. A subscriber whose words went backwards or past what
 * was published is cut off with CRS_EPROTO; one that cancelled is
 * dropped; one that held the stream back too long is evicted. */
void control_recompute(struct pub_control *c);
/* 1 if every subscriber consumed all it will be sent (by the last
 * recompute). */
int control_all_consumed(const struct pub_control *c);
/* The progress word of every slot (0 for unused slots); whether one
 * moved from seen. */
void control_progress(const struct pub_control *c, uint32_t *progress);
int control_progress_changed(const struct pub_control *c, const uint32_t *seen);
/* Arm ws: key base for ep, base+1+slot for each progress word expected
 * at progress[slot] (unused slots disarmed). Returns PARK_* flags. */
int control_arm(const struct pub_control *c, struct ipc_waitset *ws,
		uint64_t base, const uint32_t *progress);

#endif
