/*
 * atomics.h - every load and store of shared memory that another process
 * may touch goes through these names, so the ordering of each is visible.
 * Each release store or acquire load at a call site names its pair.
 */
#ifndef CRS_ATOMICS_H
#define CRS_ATOMICS_H

#include <stdatomic.h>
#include <stdint.h>

#define crs_load_acquire(p) atomic_load_explicit((p), memory_order_acquire)
#define crs_load_relaxed(p) atomic_load_explicit((p), memory_order_relaxed)
#define crs_store_release(p, v) \
	atomic_store_explicit((p), (v), memory_order_release)
#define crs_store_relaxed(p, v) \
	atomic_store_explicit((p), (v), memory_order_relaxed)
/* Full store-load fence: the Dekker half of the eventcount protocol. */
#define crs_fence_full() atomic_thread_fence(memory_order_seq_cst)
/* Compiler-only fence: the fast half when the peer uses membarrier. */
#define crs_fence_compiler() atomic_signal_fence(memory_order_seq_cst)

#endif
