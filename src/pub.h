/*
 * pub.h - the publisher's private state, shared by its source files:
 * pub.c (create, claim/commit, demand, waits), serve.c (accepting,
 * admitting and dropping subscribers) and epoch.c (connect, disconnect,
 * terminal signals, where a new subscriber joins); loop.c uses the
 * park.h hooks declared at the end.
 */
#ifndef CRS_PUB_H
#define CRS_PUB_H

#include <stdint.h>
#include <sys/types.h>

#include "crs/crs.h"
#include "ipc/compiler.h"
#include "ipc/sock.h"
#include "ipc/waitset.h"
#include "layout.h"
#include "name.h"
#include "retain.h"

#define PUB_MAX_PENDING 32
#define PUB_SERVE_NS 1000000	    /* serve control at most every 1 ms */
#define PUB_SERVE_EVERY 16	    /* commits between clock checks */
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
	uint64_t join_seq;
	uint64_t requested; /* last valid values read from ctl */
	uint64_t consumed;
	uint64_t consumed_seq; /* as the subscriber reports it (stats only) */
	uint64_t epoch;	       /* the connection epoch it belongs to */
	uint64_t end_pos;      /* where its epoch ended for it; UINT64_MAX
				  while the epoch runs */
	int64_t moved_ns;      /* when it last requested or consumed, or
				  began to hold the stream back */
	int holding;	       /* held the stream back at the last look */
	int asked;	       /* progress asked for since it last moved */
	uint64_t woke_consumed; /* its consumed position when its park
				   word last made us wake (wake_due) */
	uint32_t woke_gen;      /* slot_gen then: valid while equal */
};

/* Publisher states: unconnected (before connect, after disconnect),
 * connected (publishing in an epoch), terminated (epoch completed or
 * failed; a new connect starts the next one). */
enum pub_state { PUB_IDLE = 0, PUB_CONNECTED, PUB_TERMINATED };

struct pub_pending {
	int fd;
	int64_t since_ns;
	struct ipc_peer peer; /* checked at accept */
};

struct crs_pub {
	/* Hot: claim and commit. */
	uint8_t *ring;
	uint64_t ring_size;
	uint64_t mask;
	uint64_t pos;		/* next frame's position */
	uint64_t seq;		/* next message's sequence */
	uint64_t credit_limit;	/* may publish while seq < credit_limit */
	uint64_t room_limit;	/* frames must end 8 bytes before this */
	uint64_t claim_pos;
	uint64_t claim_len;
	int claimed;
	int more;		/* deferred frames wait for crs_pub_flush */
	uint64_t more_pos;	/* the first one: its header is stored last */
	uint64_t more_word;	/* and is this */
	uint64_t more_count;	/* deferred messages and their bytes */
	uint64_t more_bytes;
	int state; /* enum pub_state */
	int fences; /* full fence per commit: membarrier unavailable */
	uint32_t max_message;
	uint32_t signal; /* our copy of data_signal */
	int until_serve;
	int nparked;
	_Atomic uint64_t *parked[CRS_SUBSCRIBERS_MAX];
	struct crs_data_header *hdr;

	/* Cold. */
	uint32_t mode;		/* enum crs_mode */
	uint32_t overflow;	/* enum crs_overflow */
	uint32_t on_disconnect; /* enum crs_disconnect */
	int32_t auto_connect;	/* connect at this many subscribers; -1 no */
	int64_t untethered_ns;	/* evict stalled subscribers after; 0 never */
	int64_t spin_ns;	/* poll this long in waits before parking */
	int parkers;		/* announcements standing on pub_parked */
	uint64_t epoch;		/* current (or last) connection epoch */
	uint64_t bytes;		/* payload bytes committed */
	struct crs_retain retain;
	int64_t (*clock)(void *ctx);
	void *clock_ctx;
	void *latest; /* LATEST overflow: the newest message not yet sent */
	size_t latest_len;
	int latest_held;
	int64_t next_serve_ns;
	int data_fd;
	uint64_t data_size;
	int listen_fd;
	int listen_paused; /* out of the epoll set until timer_fd fires */
	int timer_fd;	   /* in ep: resumes a paused listener */
	int reserve_fd;	   /* given back to refuse peers when out of fds */
	int accept_tokens; /* connections we may accept now */
	int64_t tokens_ns; /* when accept_tokens was last refilled */
	int lock_fd;
	int ep; /* epoll set: listen socket, pending and slot sockets */
	uint32_t max_subscribers;
	struct crs_pub_opts access; /* the allow_* fields decide admission */
	int nactive;
	uint8_t active[CRS_SUBSCRIBERS_MAX]; /* slots in use, nactive of them */
	uint32_t slot_gen; /* bumped whenever the subscriber set changes */
	struct ipc_waitset *ws; /* for crs_pub_wait*: keys 0..64 */
	uint32_t ws_gen;	/* slot_gen when ws was last armed */
	struct crs_paths paths;
	struct pub_slot slots[CRS_SUBSCRIBERS_MAX];
	struct pub_pending pending[PUB_MAX_PENDING];
};

/* epoll data tags for pub->ep. */
#define PUB_EV_LISTEN 0
#define PUB_EV_TIMER 1
#define PUB_EV_PENDING(i) (1000 + (uint64_t)(i))
#define PUB_EV_SLOT(i) (2000 + (uint64_t)(i))

/* serve.c */
/* Serve's own descriptors (timer, reserve); 0 or -errno. pub_drop_all
 * releases them. */
CRS_MUST_USE int pub_serve_init(struct crs_pub *pub);
/* One round of control work. Returns the number of subscribers, or
 * -errno if the epoll set could not be read: nothing was served, and
 * the next round (within PUB_SERVE_NS) tries again, so the data path
 * may ignore the result. */
int pub_serve(struct crs_pub *pub);
void pub_drop_slot(struct crs_pub *pub, int i, int code);
void pub_drop_all(struct crs_pub *pub);
void pub_rebuild_parked(struct crs_pub *pub);

/* epoch.c */
/* Where a subscriber admitted now starts, and which epoch it joins;
 * writes its terminal record if it joins a terminated replay. */
void pub_join(struct crs_pub *pub, struct pub_slot *s, struct crs_ctl *ctl);
/* Connect if autoConnect's count of subscribers has been reached. */
void pub_auto_connect(struct crs_pub *pub);
int64_t pub_now(const struct crs_pub *pub);
/* Give everyone without a terminal record EPIPE (crs_pub_close). */
void pub_close_epochs(struct crs_pub *pub);

/* pub.c: store position and counters for inspectors (serve, flush and
 * every PUB_SERVE_EVERY commits). */
void pub_mirror(struct crs_pub *pub);
/* pub.c: wake every parked subscriber. */
void pub_wake_all(struct crs_pub *pub);
/* pub.c: LATEST overflow: publish the kept message if possible now. */
void pub_flush_latest(struct crs_pub *pub);

/* pub.c: park.h hooks, also used by loop.c. Announce that we sleep
 * (pub_parked, nested: counted in parkers) and arm ws: key base for the
 * control fd, base+1+slot for each progress word expected at
 * progress[slot]. Returns PARK_* flags. */
int pub_announce(struct crs_pub *pub, struct ipc_waitset *ws, uint64_t base,
		 const uint32_t *progress, uint32_t *armed_gen);
/* Withdraw one announcement; the last one clears pub_parked. */
void pub_withdraw(struct crs_pub *pub);
/* Disarm the progress words of every slot (keys base+1 ...). */
void pub_forget_slots(struct ipc_waitset *ws, uint64_t base);
/* Current progress word of every slot (0 for unused slots). */
void pub_progress(const struct crs_pub *pub, uint32_t *progress);

#endif
