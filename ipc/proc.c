/*
 * proc.c - pidfds. A pidfd polls readable once its process has exited.
 */
#include "proc.h"

#include <errno.h>
#include <poll.h>
#include <sys/syscall.h>
#include <unistd.h>

int ipc_pidfd_open(pid_t pid)
{
	long fd = syscall(SYS_pidfd_open, pid, 0);
	return fd < 0 ? -errno : (int)fd;
}

int ipc_pidfd_alive(int pidfd)
{
	struct pollfd p = { .fd = pidfd, .events = POLLIN };
	return poll(&p, 1, 0) == 0;
}
