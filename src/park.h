/*
 * park.h - sleeping until another process has work for us: the one
 * wakeup (eventcount) protocol of crs, used by crs_sub_wait, the
 * publisher's waits (crs_pub_wait*) and crs_loop.
 *
 * Overview
 * --------
 * A parker sleeps on words that other processes change (a futex word
 * the waker bumps, or a word it already writes as part of its work)
 * and on fds. A waker changes such a word and then, to save a syscall
 * on the hot path, calls futex_wake only if a parker has announced
 * itself. The protocol is the classic eventcount, made cross-process:
 *
 *   parker                             waker
 *   1. read W (v); announce "I sleep   a. change the state the parker
 *      on W == v" in a word the           looks at (a frame, demand)
 *      waker reads; arm the waits      b. fence (park_waker_fence)
 *   2. fence (store-load)              c. read the announcement; if
 *   3. re-check the state: if there       the parker sleeps on the
 *      is work, do not sleep              current W, change W and
 *   4. sleep while W == v (the kernel     futex-wake it
 *      compares W with v atomically
 *      with queueing the sleeper)
 *   5. withdraw the announcement
 *
 * (The subscriber's W is data_signal, which the publisher bumps in c;
 * the publisher's W are the subscribers' progress words, which they
 * bump in a already.)
 *
 * Correctness argument. Steps 1-2 and a-b are the two halves of a
 * Dekker pair: with a store-load fence on both sides, either the waker's
 * read (c) sees the announcement and wakes, or the parker's re-check
 * (3) sees the change (a) and does not sleep; never neither. A wake
 * cannot be lost to timing either: W changes before the futex wake, and
 * the kernel compares W with v under the same lock that the wake takes,
 * so a parker reaching the kernel after the wake finds W != v and
 * returns at once. An announcement for an older value of W needs no
 * wake: W moved since v was read, so that sleep returns at once too.
 *
 * The publisher's commit is the hot path, so it may skip the
 * store-load fence (b is then a compiler fence) when it registered for
 * membarrier(MEMBARRIER_CMD_GLOBAL_EXPEDITED): the parker then issues
 * membarrier() between 2 and 3, which runs a full barrier on every CPU
 * running the waker, with the same effect as the waker's fence. A
 * publisher that could not register fences every commit and says so
 * (CRS_SEG_PUB_FENCES). Where membarrier is refused to the parker, or
 * a wait could not be armed, the parker cannot rely on being woken: it
 * sleeps in bounded naps (PARK_FIRST_NAP_NS doubling up to
 * PARK_MAX_NAP_NS) and re-checks after each, so a wakeup may come late
 * but is never lost.
 *
 * API
 * ---
 * A parker describes what it waits for with three hooks (struct
 * park_hooks): announce (store its announcements and arm its waits in
 * a waitset), has_work (the re-check: would its caller find work now?)
 * and withdraw (clear its announcements). A blocking wait of one handle
 * and a loop over many are the same thing: one set of hooks, over one
 * handle or over all of them. park_wait() runs steps 1-5; park_begin()
 * and park_end() split it for a parker that sleeps elsewhere (the fd of
 * crs_loop_fd, waited on by the application).
 *
 * Implementation notes
 * --------------------
 * Announcements nest: a handle announced by a loop between runs may be
 * announced again by a crs_sub_wait on it; each holder counts, and only
 * the last withdrawal clears the word (sub_withdraw, pub_withdraw).
 * Each subscriber's announcement is its park word, 1 << 32 | the value
 * of data_signal it sleeps on, which the publisher's commit reads
 * (pubring_wake_if_parked in pubring.h); the publisher's is pub_parked,
 * which a subscriber reads after publishing its demand (sub_publish in
 * sub.c).
 * The sleeps themselves are ipc/waitset.h: one-shot entries, so an
 * entry that fired is re-armed by the next announce.
 */
#ifndef CRS_PARK_H
#define CRS_PARK_H

#include <stdint.h>

#include "atomics.h"
#include "ipc/waitset.h"

/* Bounded naps of a parker that cannot rely on being woken. */
#define PARK_FIRST_NAP_NS 200000LL   /* 200 us */
#define PARK_MAX_NAP_NS 20000000LL   /* 20 ms */

/* What announce returns: 0, or an OR of these. */
#define PARK_MEMBARRIER 1 /* a waker skips its fence: run membarrier() */
#define PARK_NAP 2	  /* a wait could not be armed: nap and re-check */

struct park_hooks {
	/* Step 1: store the announcements, then arm ws. Returns 0 or
	 * PARK_* flags; an arm that fails must add PARK_NAP. */
	int (*announce)(void *ctx, struct ipc_waitset *ws);
	/* Step 3: 1 if the caller would find work now (never sleeps). */
	int (*has_work)(void *ctx);
	/* Step 5. */
	void (*withdraw)(void *ctx);
};

/* Steps 1-3: announce, fence, membarrier if asked, re-check. Returns 1
 * if there is work (still announced: call park_end), else 0 with *nap
 * set to 0 (sleeping until woken is safe) or to the first nap to take
 * (PARK_FIRST_NAP_NS: wake up by then and re-check). */
int park_begin(const struct park_hooks *h, void *ctx, struct ipc_waitset *ws,
	       int64_t *nap);
/* Step 5. */
void park_end(const struct park_hooks *h, void *ctx);

/* Steps 1-5: sleep in ws until something armed fires, has_work turns
 * true, or the deadline (CLOCK_MONOTONIC ns, INT64_MAX none). Stores up
 * to max fired keys; returns their count, 0 (work, or the deadline),
 * -EINTR (a signal) or another -errno of ipc_waitset_wait. */
int park_wait(const struct park_hooks *h, void *ctx, struct ipc_waitset *ws,
	      int64_t deadline, uint64_t *fired, int max);

/* Step b, the waker's half: after changing a word a parker may sleep on
 * and before reading its announcement. full: a store-load fence, which
 * pairs with the fence in park_begin(); else a compiler fence only,
 * which pairs with the membarrier() park_begin() runs for parkers whose
 * announce returned PARK_MEMBARRIER (the waker is registered for it). */
static inline void park_waker_fence(int full)
{
	if (full)
		crs_fence_full();
	else
		crs_fence_compiler();
}

#endif
