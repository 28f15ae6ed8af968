/*
 * atomics.h - every load and store of shared memory that another process
 * may touch goes through these names, so the ordering of each is visible.
 * Each release store or acquire load at a call site names its pair.
 */
#ifndef CRS_ATOMICS_H
#define CRS_ATOMICS_H

#include <stdatomic.h>
#include <stdint.h>

#define shm_load_acquire(p) atomic_load_explicit((p), memory_order_acquire)
#define shm_load_relaxed(p) atomic_load_explicit((p), memory_order_relaxed)
#define shm_store_release(p, v)                                                \
	atomic_store_explicit((p), (v), memory_order_release)
#define shm_store_relaxed(p, v)                                                \
	atomic_store_explicit((p), (v), memory_order_relaxed)
/* ThreadSanitizer models no fences, and gcc warns about each one under
 * it (-Wtsan). They stay (the hardware needs them); TSan checks the
 * atomic accesses themselves, which carry every ordering the payload
 * needs, so the warning is silenced in such builds only. */
#if defined(__SANITIZE_THREAD__) && !defined(__clang__)
#pragma GCC diagnostic ignored "-Wtsan"
#endif

/* Add one to a counter in shared memory that this process alone writes
 * (one writer per word): a load and a store, no read-modify-write.
 * Relaxed for figures nobody orders anything behind; _release for a
 * word whose new value publishes the stores before it. */
#define shm_inc(p) shm_store_relaxed((p), shm_load_relaxed(p) + 1)
#define shm_inc_release(p) shm_store_release((p), shm_load_relaxed(p) + 1)

/* Full store-load fence: the Dekker half of the eventcount protocol. */
#define shm_fence_full() atomic_thread_fence(memory_order_seq_cst)
/* Acquire fence: orders an earlier relaxed load before later loads. */
#define shm_fence_acquire() atomic_thread_fence(memory_order_acquire)
/* Release fence: orders earlier stores before later (relaxed) stores. */
#define shm_fence_release() atomic_thread_fence(memory_order_release)
/* Compiler-only fence: the fast half when the peer uses membarrier. */
#define shm_fence_compiler() atomic_signal_fence(memory_order_seq_cst)

/* Spin-wait hint: let the sibling hyperthread and the memory system
 * breathe while we poll a word another process will change. */
static inline void spin_relax(void)
{
#if defined(__x86_64__) || defined(__i386__)
	__builtin_ia32_pause();
#elif defined(__aarch64__)
	__asm__ __volatile__("yield" ::: "memory");
#else
	atomic_signal_fence(memory_order_seq_cst);
#endif
}

/* How long a wait polls before sleeping, from a spin_us option:
 * 0 the default (20 us), negative never, else that many microseconds. */
#define CRS_SPIN_DEFAULT_NS 20000
static inline int64_t spin_budget_ns(int spin_us)
{
	return spin_us < 0    ? 0
	       : spin_us == 0 ? CRS_SPIN_DEFAULT_NS
			      : (int64_t)spin_us * 1000;
}

/* Back off after an empty poll: 1, 2, 4 ... max relax hints, so that a
 * reader that has caught up stops pulling the cache lines its writer is
 * filling. *step starts at 1. */
static inline void spin_backoff(unsigned *step, unsigned max)
{
	for (unsigned i = 0; i < *step; i++)
		spin_relax();
	if (*step < max)
		*step *= 2;
}

#endif
