/*
 * proc.h - watching another process by pidfd: no pid-reuse surprises.
 */
#ifndef CRS_IPC_PROC_H
#define CRS_IPC_PROC_H

#include <sys/types.h>

#include "compiler.h"

/* A pidfd for pid, or -errno (-ESRCH if it is gone already). */
CRS_MUST_USE int ipc_pidfd_open(pid_t pid);
/* 1 if the process behind pidfd is still running, 0 if it exited. */
int ipc_pidfd_alive(int pidfd);

#endif
