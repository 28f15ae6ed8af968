/*
 * epoll.c - thin wrapper; the one place that knows struct epoll_event.
 */
#include "epoll.h"

#include <errno.h>
#include <stddef.h>
#include <sys/epoll.h>
#include <sys/timerfd.h>
#include <unistd.h>

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

int ipc_timer_new(void)
{
	int fd = timerfd_create(CLOCK_MONOTONIC, TFD_NONBLOCK | TFD_CLOEXEC);
	return fd < 0 ? -errno : fd;
}

int ipc_timer_at(int fd, int64_t when_ns)
{
	if (when_ns <= 0)
		when_ns = 1; /* 0 would disarm it */
	struct itimerspec t = { .it_value = { when_ns / 1000000000,
					      when_ns % 1000000000 } };
	return timerfd_settime(fd, TFD_TIMER_ABSTIME, &t, NULL) < 0 ? -errno
								    : 0;
}

void ipc_timer_ack(int fd)
{
	uint64_t n;
	if (read(fd, &n, sizeof(n)) < 0)
		return; /* not fired yet (EAGAIN): nothing to consume */
}
