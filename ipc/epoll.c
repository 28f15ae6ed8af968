/*
 * epoll.c - thin wrapper; the one place that knows struct epoll_event.
 */
#include "epoll.h"

#include <errno.h>
#include <stddef.h>
#include <sys/epoll.h>

int ipc_epoll_new(void)
{
	int ep = epoll_create1(EPOLL_CLOEXEC);
	return ep < 0 ? -errno : ep;
}

int ipc_epoll_add(int ep, int fd, uint64_t data)
{
	struct epoll_event e = { .events = EPOLLIN | EPOLLRDHUP,
				 .data.u64 = data };
	return epoll_ctl(ep, EPOLL_CTL_ADD, fd, &e) < 0 ? -errno : 0;
}

void ipc_epoll_del(int ep, int fd)
{
	epoll_ctl(ep, EPOLL_CTL_DEL, fd, NULL);
}

int ipc_epoll_ready(int ep, struct ipc_event *ev, int max, int timeout_ms)
{
	struct epoll_event e[64];
	if (max > 64)
		max = 64;
	int n = epoll_wait(ep, e, max, timeout_ms);
	if (n < 0)
		return errno == EINTR ? 0 : -errno;
	for (int i = 0; i < n; i++) {
		ev[i].data = e[i].data.u64;
		ev[i].events = e[i].events;
	}
	return n;
}
