/*
 * sock.h - unix SOCK_SEQPACKET sockets: message boundaries are kept, so
 * every handshake message arrives whole or not at all; fds travel with
 * SCM_RIGHTS; peers are identified with SO_PEERCRED.
 */
#ifndef CRS_IPC_SOCK_H
#define CRS_IPC_SOCK_H

#include <stddef.h>
#include <sys/types.h>

#include "compiler.h"

#define IPC_MAX_FDS 4

struct ipc_peer {
	pid_t pid;
	uid_t uid;
	gid_t gid;
};

/* Sockets live in a directory held open at dirfd (dir: its path, used
 * only where /proc is not mounted) under the name leaf. Addresses go
 * through /proc/self/fd/<dirfd>/<leaf>: the kernel resolves the very
 * directory we checked, and every leaf fits sun_path whatever the
 * directory's path length. */

/* Bind and listen on leaf (non-blocking). Returns fd or -errno
 * (-EADDRINUSE if leaf exists). */
CRS_MUST_USE int ipc_sock_listen(int dirfd, const char *dir, const char *leaf);
/* Start connecting to leaf without blocking. Returns a connected,
 * non-blocking fd, -EAGAIN when the listener's backlog is full (try
 * again later), or -errno (-ENOENT, -ECONNREFUSED). */
CRS_MUST_USE int ipc_sock_connect(int dirfd, const char *dir, const char *leaf);
/* Accept one pending connection (non-blocking). fd, -EAGAIN or -errno. */
CRS_MUST_USE int ipc_sock_accept(int listen_fd);
/* Send one message with up to IPC_MAX_FDS fds. 0 or -errno. */
CRS_MUST_USE int ipc_sock_send(int fd, const void *buf, size_t len,
			       const int *fds, int nfds);
/* Receive one message without blocking. Returns its length, 0 when the
 * peer hung up, -EAGAIN when nothing is pending, -EMSGSIZE when it was
 * longer than cap or carried too many fds (the fds are closed), -EMFILE
 * when this process had no descriptors left for the fds. Received
 * fds are stored in fds[0..*nfds) with close-on-exec set. */
CRS_MUST_USE int ipc_sock_recv(int fd, void *buf, size_t cap, int *fds,
			       int *nfds);
CRS_MUST_USE int ipc_sock_peer(int fd, struct ipc_peer *peer);
/* poll() one fd: revents, 0 on timeout, -errno. */
CRS_MUST_USE int ipc_fd_poll(int fd, short events, int timeout_ms);
/* A duplicate of fd (close-on-exec), e.g. to hold a descriptor in
 * reserve for when the table is full. fd or -errno. */
CRS_MUST_USE int ipc_fd_dup(int fd);
/* Shut the socket down both ways: the peer sees a hangup at once. */
void ipc_sock_shutdown(int fd);
void ipc_unlink_at(int dirfd, const char *leaf);

#endif
