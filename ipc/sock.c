/*
 * sock.c - unix socket plumbing for the handshake and liveness channel.
 */
#include "sock.h"

#include <errno.h>
#include <fcntl.h>
#include <poll.h>
#include <stdio.h>
#include <string.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/un.h>
#include <unistd.h>

static int sock_addr(int dirfd, const char *dir, const char *leaf,
		     struct sockaddr_un *sa)
{
	memset(sa, 0, sizeof(*sa));
	sa->sun_family = AF_UNIX;
	int n;
	if (access("/proc/self/fd", X_OK) == 0)
		n = snprintf(sa->sun_path, sizeof(sa->sun_path),
			     "/proc/self/fd/%d/%s", dirfd, leaf);
	else /* no /proc: the path, as checked a moment ago */
		n = snprintf(sa->sun_path, sizeof(sa->sun_path), "%s/%s", dir,
			     leaf);
	return n < 0 || (size_t)n >= sizeof(sa->sun_path) ? -ENAMETOOLONG : 0;
}

/* A non-blocking seqpacket socket and the address of leaf in dir, for
 * listen and connect alike. Returns the socket or -errno. */
static int sock_open(int dirfd, const char *dir, const char *leaf,
		     struct sockaddr_un *sa)
{
	int err = sock_addr(dirfd, dir, leaf, sa);
	if (err)
		return err;
	int fd = socket(AF_UNIX, SOCK_SEQPACKET | SOCK_NONBLOCK | SOCK_CLOEXEC,
			0);
	return fd < 0 ? -errno : fd;
}

int ipc_sock_listen(int dirfd, const char *dir, const char *leaf)
{
	struct sockaddr_un sa;
	int err;
	int fd = sock_open(dirfd, dir, leaf, &sa);
	if (fd < 0)
		return fd;
	/* Reachable for any local peer the directory lets in: who may
	 * subscribe is decided by peer credentials, not file modes. The
	 * directory is ours alone, so the node we chmod is the one bound. */
	if (bind(fd, (struct sockaddr *)&sa, sizeof(sa)) < 0 ||
	    fchmodat(dirfd, leaf, 0666, 0) < 0 || listen(fd, 128) < 0) {
		err = -errno;
		close(fd);
		return err;
	}
	return fd;
}

int ipc_sock_connect(int dirfd, const char *dir, const char *leaf)
{
	struct sockaddr_un sa;
	int err;
	int fd = sock_open(dirfd, dir, leaf, &sa);
	if (fd < 0)
		return fd;
	/* Non-blocking: a wedged publisher with a full backlog gives
	 * EAGAIN at once instead of holding us past our timeout. */
	if (connect(fd, (struct sockaddr *)&sa, sizeof(sa)) < 0) {
		err = errno == EWOULDBLOCK || errno == EINPROGRESS ? -EAGAIN
								   : -errno;
		close(fd);
		return err;
	}
	return fd;
}

int ipc_sock_accept(int listen_fd)
{
	int fd = accept4(listen_fd, NULL, NULL, SOCK_NONBLOCK | SOCK_CLOEXEC);
	if (fd < 0)
		return errno == EWOULDBLOCK ? -EAGAIN : -errno;
	return fd;
}

int ipc_sock_send(int fd, const void *buf, size_t len, const int *fds, int nfds)
{
	union {
		char buf[CMSG_SPACE(sizeof(int) * IPC_MAX_FDS)];
		struct cmsghdr align;
	} ctl;
	struct iovec iov = { .iov_base = (void *)buf, .iov_len = len };
	struct msghdr msg = { .msg_iov = &iov, .msg_iovlen = 1 };
	if (nfds < 0 || nfds > IPC_MAX_FDS)
		return -EINVAL;
	if (nfds > 0) {
		memset(&ctl, 0, sizeof(ctl));
		msg.msg_control = ctl.buf;
		msg.msg_controllen = CMSG_SPACE(sizeof(int) * (size_t)nfds);
		struct cmsghdr *c = CMSG_FIRSTHDR(&msg);
		c->cmsg_level = SOL_SOCKET;
		c->cmsg_type = SCM_RIGHTS;
		c->cmsg_len = CMSG_LEN(sizeof(int) * (size_t)nfds);
		memcpy(CMSG_DATA(c), fds, sizeof(int) * (size_t)nfds);
	}
	ssize_t n = sendmsg(fd, &msg, MSG_NOSIGNAL | MSG_DONTWAIT);
	if (n < 0)
		return -errno;
	return (size_t)n == len ? 0 : -EMSGSIZE;
}

int ipc_sock_recv(int fd, void *buf, size_t cap, int *fds, int *nfds)
{
	union {
		char buf[CMSG_SPACE(sizeof(int) * IPC_MAX_FDS)];
		struct cmsghdr align;
	} ctl;
	struct iovec iov = { .iov_base = buf, .iov_len = cap };
	struct msghdr msg = { .msg_iov = &iov,
			      .msg_iovlen = 1,
			      .msg_control = ctl.buf,
			      .msg_controllen = sizeof(ctl.buf) };
	*nfds = 0;
	ssize_t n = recvmsg(fd, &msg, MSG_DONTWAIT | MSG_CMSG_CLOEXEC);
	if (n < 0)
		return errno == EWOULDBLOCK ? -EAGAIN : -errno;
	int bad = (msg.msg_flags & (MSG_TRUNC | MSG_CTRUNC)) != 0;
	for (struct cmsghdr *c = CMSG_FIRSTHDR(&msg); c;
	     c = CMSG_NXTHDR(&msg, c)) {
		if (c->cmsg_level != SOL_SOCKET || c->cmsg_type != SCM_RIGHTS)
			continue;
		size_t count = (c->cmsg_len - CMSG_LEN(0)) / sizeof(int);
		int got[IPC_MAX_FDS];
		if (count > IPC_MAX_FDS)
			count = IPC_MAX_FDS;
		memcpy(got, CMSG_DATA(c), count * sizeof(int));
		for (size_t i = 0; i < count; i++) {
			if (*nfds < IPC_MAX_FDS && fds)
				fds[(*nfds)++] = got[i];
			else {
				close(got[i]);
				bad = 1;
			}
		}
	}
	if (bad) {
		/* Truncated fds with room in the buffer: the kernel could not
		 * install them, this process is out of descriptors. Probe
		 * before closing the ones we got. */
		int out_of_fds = 0;
		if ((msg.msg_flags & MSG_CTRUNC) &&
		    !(msg.msg_flags & MSG_TRUNC)) {
			int probe = fcntl(fd, F_DUPFD_CLOEXEC, 0);
			if (probe < 0)
				out_of_fds = errno == EMFILE || errno == ENFILE;
			else
				close(probe);
		}
		for (int i = 0; i < *nfds; i++)
			close(fds[i]);
		*nfds = 0;
		return out_of_fds ? -EMFILE : -EMSGSIZE;
	}
	return (int)n;
}

int ipc_sock_peer(int fd, struct ipc_peer *peer)
{
	struct ucred cred;
	socklen_t len = sizeof(cred);
	if (getsockopt(fd, SOL_SOCKET, SO_PEERCRED, &cred, &len) < 0)
		return -errno;
	peer->pid = cred.pid;
	peer->uid = cred.uid;
	peer->gid = cred.gid;
	return 0;
}

int ipc_fd_poll(int fd, short events, int timeout_ms)
{
	struct pollfd p = { .fd = fd, .events = events };
	int n = poll(&p, 1, timeout_ms);
	if (n < 0)
		return -errno;
	return n ? p.revents : 0;
}

void ipc_unlink_at(int dirfd, const char *leaf)
{
	unlinkat(dirfd, leaf, 0);
}

void ipc_sock_shutdown(int fd)
{
	shutdown(fd, SHUT_RDWR);
}

int ipc_fd_dup(int fd)
{
	int d = fcntl(fd, F_DUPFD_CLOEXEC, 0);
	return d < 0 ? -errno : d;
}
