/*
 * futex.h - futex words shared between processes, and the asymmetric
 * process-wide barrier (membarrier) that lets a hot path skip its fence.
 */
#ifndef CRS_IPC_FUTEX_H
#define CRS_IPC_FUTEX_H

#include <stdint.h>

#include "compiler.h"

/* Wake up to n waiters parked on the 32-bit word at addr (shared, not
 * private: the word lives in memory mapped by several processes). */
void ipc_futex_wake(const void *addr, int n);

/* Register this process for membarrier(GLOBAL_EXPEDITED). Returns 0 once
 * registered (a registered process may drop the store-load fence from its
 * hot path: src/park.h says when), -errno when the kernel refuses. */
CRS_MUST_USE int ipc_membarrier_register(void);

/* Run a full memory barrier on every running thread of every registered
 * process. 0 or -errno. Costs microseconds: for slow paths only. */
CRS_MUST_USE int ipc_membarrier(void);

#endif
