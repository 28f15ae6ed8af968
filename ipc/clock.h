/* clock.h - monotonic time in nanoseconds (vDSO, no syscall). */
#ifndef CRS_IPC_CLOCK_H
#define CRS_IPC_CLOCK_H

#include <stddef.h>
#include <stdint.h>
#include <time.h>

static inline int64_t ipc_now_ns(void)
{
	struct timespec ts;
	clock_gettime(CLOCK_MONOTONIC, &ts);
	return (int64_t)ts.tv_sec * 1000000000 + ts.tv_nsec;
}

/* Deadline for a timeout in ms (< 0: never). */
static inline int64_t ipc_deadline(int timeout_ms)
{
	return timeout_ms < 0 ? INT64_MAX
			      : ipc_now_ns() + (int64_t)timeout_ms * 1000000;
}

/* Nanoseconds left until deadline, >= 0; INT64_MAX for never. */
static inline int64_t ipc_left_ns(int64_t deadline)
{
	if (deadline == INT64_MAX)
		return INT64_MAX;
	int64_t left = deadline - ipc_now_ns();
	return left > 0 ? left : 0;
}

/* Sleep for ns nanoseconds (interrupted sleeps are not resumed). */
static inline void ipc_nap_ns(int64_t ns)
{
	struct timespec ts = { ns / 1000000000, ns % 1000000000 };
	nanosleep(&ts, NULL);
}

#endif
