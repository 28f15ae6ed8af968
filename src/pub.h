/*
 * pub.h - the publisher handle: three parts, each written by one file,
 * stacked so that calls and includes only go down:
 *
 *   pub.c      the API (crs_pub_*), blocking waits, LATEST, the loop's
 *              hooks: ties the parts together          (struct crs_pub)
 *   serve.c    control: accept, handshake, admit, drop, demand over
 *              the subscribers                      (struct pub_control)
 *   epoch.c    epochs: connect, disconnect, terminal signals, joining,
 *              retention                              (struct pub_epoch)
 *   pubring.h  the hot part: claim, commit, flush, wakeups after a
 *   pubring.c  commit                                  (struct pub_ring)
 *
 * A part reads the parts below it and changes them only through their
 * functions; it never calls or includes a part above it
 * (tests/check_includes.py checks both). loop.c uses the hooks and
 * accessors declared here, never the fields.
 */
#ifndef CRS_PUB_H
#define CRS_PUB_H

#include <stdint.h>

#include "crs/crs.h"
#include "epoch.h"
#include "ipc/waitset.h"
#include "name.h"
#include "pubring.h"
#include "serve.h"

struct crs_pub {
	struct pub_ring ring; /* first: the hot lines */
	struct pub_epoch epoch;
	struct pub_control control;
	/* The API's own. */
	uint32_t overflow; /* enum crs_overflow */
	int64_t spin_ns;   /* poll this long in waits before parking */
	int parkers;	   /* announcements standing on pub_parked */
	void *latest; /* LATEST overflow: the newest message not yet sent */
	size_t latest_len;
	int latest_held;
	int data_fd;
	uint64_t data_size;
	int listen_fd;
	int lock_fd;
	int ep;			/* epoll set (serve.h) */
	struct ipc_waitset *ws; /* for crs_pub_wait*: keys 0..64 */
	uint32_t ws_gen;	/* slot_gen when ws was last armed */
	struct name_paths paths;
};

/* For loop.c. Serve control now if forced or due; then send the LATEST
 * message kept, if it can go now. */
void pub_serve_step(struct crs_pub *pub, int force);
/* Changes whenever the subscriber set changes. */
uint32_t pub_slot_gen(const struct crs_pub *pub);
/* Current progress word of every slot (0 for unused slots); whether
 * one moved from seen. */
void pub_progress(const struct crs_pub *pub, uint32_t *progress);
int pub_progress_changed(const struct crs_pub *pub, const uint32_t *seen);

/* park.h hooks, also used by loop.c. Announce that we sleep
 * (pub_parked, nested: counted in parkers) and arm ws: key base for the
 * control fd, base+1+slot for each progress word expected at
 * progress[slot]. Returns PARK_* flags. */
int pub_announce(struct crs_pub *pub, struct ipc_waitset *ws, uint64_t base,
		 const uint32_t *progress, uint32_t *armed_gen);
/* Withdraw one announcement; the last one clears pub_parked. */
void pub_withdraw(struct crs_pub *pub);
/* Disarm the progress words of every slot (keys base+1 ...). */
void pub_forget_slots(struct ipc_waitset *ws, uint64_t base);

#endif
