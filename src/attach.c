/*
 * attach.c - connect, handshake, check and map. Every field received
 * from the publisher is checked here before anything else uses it: the
 * memfds must carry the seals that make our mappings safe (fixed size,
 * data read-only) and the layout header must describe exactly the
 * segment we received.
 */
#include "attach.h"

#include <errno.h>
#include <poll.h>
#include <string.h>
#include <unistd.h>

#include "crs/crs.h"
#include "errmsg.h"
#include "frame.h"
#include "ipc/clock.h"
#include "ipc/memfd.h"
#include "ipc/sock.h"
#include "name.h"

#define APPEAR_RETRY_NS 10000000LL
#define BACKLOG_RETRY_NS 1000000LL
/* A subscriber has the ring of a stream present at open if it is at most
 * this big (ipc_prefault: about 1 ms per 8 MiB on the VM of
 * bench/results/2026-12-05, well under on bare metal). One of a bigger
 * ring may read little of it, and a late joiner that reads it all pays
 * as it goes. Inspectors, which read the header and a few frames, have
 * none present. */
#define PREFAULT_RING_MAX ((uint64_t)64 << 20)

/* A member stream's name is never published again (pub.c makes each one
 * fresh), so a member socket that refuses while nobody holds its lock is
 * a dead publisher's leftover for good: waiting for it is pointless. So
 * is one whose lock is gone: a publisher takes its lock before it binds
 * and unlinks its socket before its lock, so only a sweep (pub.c)
 * removes a lock first. A socket between its publisher's bind and
 * listen refuses too, but its lock is held. */
static int member_orphaned(const char *name, const struct name_paths *p)
{
	if (!name_member(name))
		return 0;
	int fd = ipc_lock_orphan(p->dir.fd, p->lock);
	ipc_close(fd);
	return fd >= 0 || fd == -ENOENT;
}

int attach_connect(const char *name, char *dir, size_t dir_size)
{
	struct name_paths paths;
	int fd = name_paths_for(name, 0, &paths);
	if (fd)
		return fd;
	if (dir)
		strlcpy(dir, paths.dir.path, dir_size);
	fd = ipc_sock_connect(paths.dir.fd, paths.dir.path, paths.sock);
	if (fd == -ECONNREFUSED && member_orphaned(name, &paths))
		fd = errmsg_set(-ESTALE,
				"member stream '%s' in %s is stale: its "
				"publisher died, and member names are never "
				"published again",
				name, paths.dir.path);
	else if (fd < 0 && fd != -EAGAIN && fd != -ENOENT &&
		 fd != -ECONNREFUSED)
		errmsg_set(fd, "cannot connect to %s/%s: %s", paths.dir.path,
			   paths.sock, crs_strerror(fd));
	else if (fd == -ENOENT || fd == -ECONNREFUSED)
		errmsg_set(fd,
			   fd == -ENOENT ? "no stream '%s' in %s"
					 : "stream '%s' in %s is "
					   "stale: its publisher died",
			   name, paths.dir.path);
	name_paths_close(&paths);
	return fd;
}

/* Connect to stream `name`. A missing or stale socket is retried until
 * wait_ms has passed; a full listen backlog (a publisher that is stopped
 * or swamped and does not accept) until the handshake deadline, which
 * starts at the first attempt that found the socket and is stored in
 * *hs_deadline for the rest of the handshake. */
static int connect_stream(const char *name, int wait_ms, int handshake_ms,
			  int64_t *hs_deadline)
{
	int64_t appear = ipc_deadline(wait_ms);
	int backlog_full = 0;
	for (;;) {
		int fd = attach_connect(name, NULL, 0);
		if ((fd >= 0 || fd == -EAGAIN) && !backlog_full) {
			*hs_deadline = ipc_deadline(handshake_ms);
			backlog_full = fd == -EAGAIN;
		}
		if (fd >= 0 ||
		    (fd != -EAGAIN && fd != -ENOENT && fd != -ECONNREFUSED))
			return fd;
		int64_t left;
		if (fd == -EAGAIN) {
			left = ipc_left_ns(*hs_deadline);
			if (left == 0)
				return errmsg_set(
					-ETIMEDOUT,
					"the publisher of '%s' "
					"accepted no connection within "
					"%d ms (its backlog is full: "
					"stopped or swamped)",
					name, handshake_ms);
			if (left > BACKLOG_RETRY_NS)
				left = BACKLOG_RETRY_NS;
		} else {
			/* A refused connection is a stale socket: a stream
			 * whose publisher died. Wait for a new one, or say
			 * which it was. */
			left = ipc_left_ns(appear);
			if (left == 0)
				return fd;
			if (left > APPEAR_RETRY_NS)
				left = APPEAR_RETRY_NS;
		}
		ipc_nap_ns(left);
	}
}

/* Wait for the publisher's answer until deadline: a WELCOME with nfds
 * fds, or a REJECT whose code we return negated (its reason goes to
 * crs_errmsg()). */
static int await_welcome(struct attach *a, const char *name, int64_t deadline,
			 int nfds, int fds[2])
{
	union hs_msg m;
	char buf[sizeof(m) + 1];
	int got[IPC_MAX_FDS], ngot;
	int p;
	do { /* past the deadline: one last look */
		int64_t left = ipc_left_ns(deadline);
		int ms = left == INT64_MAX ? -1
					   : (int)((left + 999999) / 1000000);
		p = ipc_fd_poll(a->sock, POLLIN, ms);
	} while (p == -EINTR);
	if (p < 0)
		return p;
	if (p == 0)
		return errmsg_set(-ETIMEDOUT,
				  "the publisher of '%s' did not answer the "
				  "handshake in time",
				  name);
	int n = ipc_sock_recv(a->sock, buf, sizeof(buf), got, &ngot);
	/* A publisher that closed with our HELLO unread leaves a reset
	 * pending ahead of its REJECT: the next read gets the REJECT. */
	if (n == -ECONNRESET)
		n = ipc_sock_recv(a->sock, buf, sizeof(buf), got, &ngot);
	if (n == 0 || n == -ECONNRESET || n == -EAGAIN)
		return errmsg_set(-ECONNRESET,
				  "the publisher of '%s' hung up during the "
				  "handshake",
				  name);
	if (n == -EMFILE)
		return errmsg_set(n,
				  "out of file descriptors: could not "
				  "receive the memfds of stream '%s' "
				  "(RLIMIT_NOFILE)",
				  name);
	if (n < 0)
		return n;
	int type = hs_decode(buf, (size_t)n, &m);
	if (type == HS_WELCOME && ngot == nfds) {
		a->welcome = m.welcome;
		memcpy(fds, got, sizeof(int) * (size_t)nfds);
		return 0;
	}
	for (int i = 0; i < ngot; i++)
		ipc_close(got[i]);
	if (type == HS_REJECT)
		return errmsg_set(-m.reject.code,
				  "the publisher of '%s' refused: %s", name,
				  m.reject.reason);
	return errmsg_set(type < 0 ? type : -CRS_EPROTO,
			  "the publisher of '%s' answered the handshake with "
			  "a malformed message",
			  name);
}

static int check_layout(const struct crs_seg_header *h, uint64_t data_size)
{
	if (h->magic != CRS_LAYOUT_MAGIC)
		return -CRS_EPROTO;
	if (h->version != CRS_LAYOUT_VERSION)
		return -CRS_EVERSION;
	uint64_t ring = h->ring_size;
	if (h->ring_offset != CRS_RING_OFFSET || ring < CRS_RING_MIN ||
	    ring > CRS_RING_MAX || (ring & (ring - 1)) ||
	    h->segment_size != data_size ||
	    CRS_RING_OFFSET + ring != data_size || h->max_message > ring / 4 ||
	    h->max_subscribers > CRS_SUBSCRIBERS_MAX)
		return -CRS_EPROTO;
	return 0;
}

static int map_segments(struct attach *a)
{
	const struct hs_welcome *w = &a->welcome;
	if (w->layout_version != CRS_LAYOUT_VERSION)
		return -CRS_EVERSION;
	if (w->data_size < CRS_RING_OFFSET + CRS_RING_MIN ||
	    w->data_size > CRS_RING_OFFSET + CRS_RING_MAX ||
	    w->ctl_size != (a->ctl_fd >= 0 ? CRS_CTL_SIZE : 0) ||
	    !frame_aligned(w->start_pos))
		return -CRS_EPROTO;
	a->data_size = w->data_size;
	int err = ipc_memfd_check(a->data_fd, a->data_size, 1);
	if (!err && a->ctl_fd >= 0)
		err = ipc_memfd_check(a->ctl_fd, CRS_CTL_SIZE, 0);
	if (err)
		return err == -EPERM || err == -EINVAL ? -CRS_EPROTO : err;
	void *map;
	err = ipc_map(a->data_fd, a->data_size, 0, &map);
	if (err)
		return err;
	a->hdr = map;
	/* Check a copy and use only the copy: the publisher can still write
	 * the original after we looked. */
	memcpy(&a->seg, &a->hdr->seg, sizeof(a->seg));
	err = check_layout(&a->seg, a->data_size);
	if (err || a->ctl_fd < 0)
		return err;
	/* Loads only: they may map pages of a sparse segment a hostile
	 * publisher sent, no more than reading its ring would. */
	if (a->seg.ring_size <= PREFAULT_RING_MAX)
		ipc_prefault((void *)a->hdr, a->data_size, 0);
	err = ipc_map(a->ctl_fd, CRS_CTL_SIZE, 1, &map);
	if (err)
		return err;
	ipc_prefault(map, CRS_CTL_SIZE, 1);
	a->ctl = map;
	const struct crs_ctl *c = a->ctl;
	if (c->magic != CRS_CTL_MAGIC || c->start_pos != w->start_pos ||
	    c->start_seq != w->start_seq)
		return -CRS_EPROTO;
	return 0;
}

int attach_hello(struct attach *a, int sock, uint32_t role, const char *name)
{
	memset(a, 0, sizeof(*a));
	a->data_fd = a->ctl_fd = -1;
	a->sock = sock;
	struct ipc_peer peer;
	int err = ipc_sock_peer(a->sock, &peer);
	if (!err && peer.uid != getuid() && peer.uid != 0)
		/* neither ours nor root's: do not trust it */
		err = errmsg_set(-EACCES,
				 "the socket of stream '%s' is "
				 "served by uid %u, neither you nor root",
				 name, (unsigned)peer.uid);
	struct hs_hello hello;
	hs_hello_init(&hello, role, name);
	if (!err)
		err = ipc_sock_send(a->sock, &hello, sizeof(hello), NULL, 0);
	/* A publisher that refuses us at accept (credentials, no room)
	 * hangs up before our HELLO: its REJECT is still queued for us. */
	if (err == -EPIPE || err == -ECONNRESET)
		err = 0;
	if (err)
		attach_close(a);
	return err;
}

int attach_welcome(struct attach *a, const char *name, uint32_t role,
		   int64_t deadline)
{
	int nfds = role == HS_ROLE_SUBSCRIBER ? 2 : 1;
	int fds[2] = { -1, -1 };
	int err = await_welcome(a, name, deadline, nfds, fds);
	if (!err) {
		a->data_fd = fds[0];
		a->ctl_fd = fds[1];
		err = map_segments(a);
	}
	if (err)
		attach_close(a);
	return err;
}

int attach_open(const char *name, uint32_t role, int wait_ms, int handshake_ms,
		struct attach *a)
{
	errmsg_begin();
	memset(a, 0, sizeof(*a));
	a->sock = a->data_fd = a->ctl_fd = -1;
	int err = crs_name_check(name);
	if (err)
		return err;
	int64_t hs_deadline;
	int sock = connect_stream(name, wait_ms, handshake_ms, &hs_deadline);
	if (sock < 0)
		return errmsg_code(sock);
	err = attach_hello(a, sock, role, name);
	if (!err)
		err = attach_welcome(a, name, role, hs_deadline);
	return errmsg_code(err);
}

void attach_close(struct attach *a)
{
	if (a->hdr)
		ipc_unmap((void *)a->hdr, a->data_size);
	ipc_unmap(a->ctl, CRS_CTL_SIZE);
	ipc_close(a->data_fd);
	ipc_close(a->ctl_fd);
	ipc_close(a->sock);
	memset(a, 0, sizeof(*a));
	a->sock = a->data_fd = a->ctl_fd = -1;
}
