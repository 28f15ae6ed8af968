/*
 * epoll.h - a set of fds with one readiness fd: the publisher puts its
 * listening socket and every subscriber socket here, so one poll of one
 * fd (its own, or the caller's event loop) tells whether control work is
 * waiting.
 */
#ifndef CRS_IPC_EPOLL_H
#define CRS_IPC_EPOLL_H

#include <stdint.h>

#include "compiler.h"

struct ipc_event {
	uint64_t data;
	uint32_t events; /* EPOLLIN, EPOLLHUP, EPOLLRDHUP, EPOLLERR */
};

CRS_MUST_USE int ipc_epoll_new(void);
CRS_MUST_USE int ipc_epoll_add(int ep, int fd, uint64_t data);
void ipc_epoll_del(int ep, int fd);
/* Up to max ready events within timeout_ms (0: do not block). Returns
 * the count or -errno. */
CRS_MUST_USE int ipc_epoll_ready(int ep, struct ipc_event *ev, int max,
				 int timeout_ms);

/* A one-shot CLOCK_MONOTONIC timer fd (non-blocking), to put in a set
 * when work must resume at a given time. */
CRS_MUST_USE int ipc_timer_new(void);
/* Fire once at when_ns (ipc_now_ns() time). 0 or -errno. */
CRS_MUST_USE int ipc_timer_at(int fd, int64_t when_ns);
/* Consume a firing. */
void ipc_timer_ack(int fd);

#endif
