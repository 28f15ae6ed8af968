/*
 * futex.c - futex wake and membarrier, the two syscalls of the wakeup
 * protocol (src/park.h) besides the waits themselves (waitset.c).
 */
#include "futex.h"

#include <errno.h>
#include <linux/futex.h>
#include <linux/membarrier.h>
#include <stdatomic.h>
#include <sys/syscall.h>
#include <unistd.h>

void ipc_futex_wake(const void *addr, int n)
{
	syscall(SYS_futex, addr, FUTEX_WAKE, n, NULL, NULL, 0);
}

int ipc_membarrier_register(void)
{
	static _Atomic int state; /* 0 unknown, 1 registered, -errno refused */
	/* Acquire pairs with the release store below, in another thread
	 * of this process: a registration seen is complete. */
	int s = atomic_load_explicit(&state, memory_order_acquire);
	if (s == 0) {
		long r = syscall(SYS_membarrier,
				 MEMBARRIER_CMD_REGISTER_GLOBAL_EXPEDITED, 0,
				 0);
		s = r == 0 ? 1 : -errno;
		atomic_store_explicit(&state, s, memory_order_release);
	}
	return s == 1 ? 0 : s;
}

int ipc_membarrier(void)
{
	long r = syscall(SYS_membarrier, MEMBARRIER_CMD_GLOBAL_EXPEDITED, 0, 0);
	return r == 0 ? 0 : -errno;
}
