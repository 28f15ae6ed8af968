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
 * The publisher's commit is the hot path, so when it registered for
 * membarrier(MEMBARRIER_CMD_GLOBAL_EXPEDITED) it skips the store-load
 * fence (b is a compiler fence) unless a subscriber asks for it. A
 * subscriber asks by setting CRS_PARK_FENCE in its park word, kept
 * there across sleeps, and runs membarrier() once after first setting
 * it, before its re-check (3); then it relies on the publisher's fence
 * at every later sleep. Why that is enough, for a commit C and a sleep
 * P of that subscriber: membarrier() runs a full barrier B on the
 * publisher's CPU (or finds it switched out, which has the same
 * effect) between the store of the flag and the syscall's return. If
 * C's header store comes before B, it is visible before P's re-check,
 * which follows the membarrier. If it comes after B, so does C's load
 * of the park word, which then sees the flag: C fences and reloads the
 * word, and a and b above are the full Dekker half again. Each park
 * word is covered on its own, whatever C loaded before its fence. The
 * subscriber drops the flag (the publisher stops fencing for it) once
 * it took FENCE_ASK_KEEP messages without a sleep, and asks anew (one
 * membarrier) at its next sleep: a sleeping subscriber pays one
 * membarrier, about a cross-CPU interrupt, per FENCE_ASK_KEEP messages
 * at most, a busy one nothing, and the publisher a fence per commit
 * only while someone sleeps. A publisher that could not register
 * fences every commit and says so (CRS_SEG_PUB_FENCES): no flag, no
 * membarrier; one too old to be asked (no CRS_SEG_PUB_FENCE_ASK) gets
 * a membarrier before every sleep. Where membarrier is refused to the
 * parker, or a wait could not be armed, the parker cannot rely on
 * being woken: it sleeps in bounded naps (PARK_FIRST_NAP_NS doubling
 * up to PARK_MAX_NAP_NS) and re-checks after each, so a wakeup may
 * come late but is never lost.
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
 * Each subscriber's announcement is its park word, CRS_PARK_ASLEEP |
 * the value of data_signal it sleeps on (| CRS_PARK_FENCE), which the
 * publisher's commit reads (pubring_wake_if_parked in pubring.h); the
 * membarrier and the flag are sub_announce's. The publisher's is
 * pub_parked, which a subscriber reads after publishing its demand
 * (sub_publish in sub.c).
 * The sleeps themselves are ipc/waitset.h: one-shot entries, so an
 * entry that fired is re-armed by the next announce.
 */
#ifndef CRS_PARK_H
#define CRS_PARK_H

#include <stdint.h>

#include "atomics.h"
#include "ipc/waitset.h"

/* Bounded naps of a parker that cannot rely on being woken. */
#define PARK_FIRST_NAP_NS 200000LL /* 200 us */
#define PARK_MAX_NAP_NS 20000000LL /* 20 ms */

/* What announce returns: 0, or this. */
#define PARK_NAP                                                               \
	1 /* a wait could not be armed, or a membarrier() was                  \
	     refused: nap and re-check */

struct park_hooks {
	/* Step 1: store the announcements (and run any membarrier() they
	 * need), then arm ws. Returns 0 or PARK_NAP, which an arm or a
	 * membarrier that fails must return. */
	int (*announce)(void *ctx, struct ipc_waitset *ws);
	/* Step 3: 1 if the caller would find work now (never sleeps). */
	int (*has_work)(void *ctx);
	/* Step 5. */
	void (*withdraw)(void *ctx);
};

/* Steps 1-3: announce, fence, re-check. Returns 1
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
 * pairs with the fence in park_begin(); else a compiler fence only: the
 * waker is registered for membarrier and fences where a park word asks
 * (pubring_wake_from), and a parker that has not asked yet runs
 * membarrier(). */
static inline void park_waker_fence(int full)
{
	if (full)
		shm_fence_full();
	else
		shm_fence_compiler();
}

#endif
