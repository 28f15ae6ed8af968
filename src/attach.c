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
#include "frame.h"
#include "ipc/clock.h"
#include "ipc/memfd.h"
#include "ipc/sock.h"
#include "name.h"

#define APPEAR_RETRY_NS 10000000LL

int crs_attach_connect(const char *name)
{
	struct crs_paths paths;
	int err = crs_paths_for(name, 0, &paths);
	return err ? err : ipc_sock_connect(paths.sock);
}

static int connect_stream(const char *name, int wait_ms)
{
	int64_t deadline = ipc_deadline(wait_ms);
	for (;;) {
		int fd = crs_attach_connect(name);
		if (fd >= 0 || (fd != -ENOENT && fd != -ECONNREFUSED))
			return fd;
		/* A refused connection is a stale socket: a stream whose
		 * publisher died. Wait for a new one, or say which it was. */
		int64_t left = ipc_left_ns(deadline);
		if (left == 0)
			return fd;
		ipc_nap_ns(left < APPEAR_RETRY_NS ? left : APPEAR_RETRY_NS);
	}
}

/* Wait for the publisher's answer: a WELCOME with nfds fds, or a REJECT
 * whose code we return negated. */
static int await_welcome(struct crs_attach *a, int timeout_ms, int nfds,
			 int fds[2])
{
	union crs_hs_msg m;
	char buf[sizeof(m) + 1];
	int got[IPC_MAX_FDS], ngot;
	int p = ipc_fd_poll(a->sock, POLLIN, timeout_ms);
	if (p < 0)
		return p;
	if (p == 0)
		return -ETIMEDOUT;
	int n = ipc_sock_recv(a->sock, buf, sizeof(buf), got, &ngot);
	if (n == 0)
		return -ECONNRESET;
	if (n < 0)
		return n;
	int type = crs_hs_decode(buf, (size_t)n, &m);
	if (type == CRS_HS_WELCOME && ngot == nfds) {
		a->welcome = m.welcome;
		memcpy(fds, got, sizeof(int) * (size_t)nfds);
		return 0;
	}
	for (int i = 0; i < ngot; i++)
		ipc_close(got[i]);
	if (type == CRS_HS_REJECT)
		return -m.reject.code;
	return type < 0 ? type : -CRS_EPROTO;
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
	    CRS_RING_OFFSET + ring != data_size ||
	    h->max_message > ring / 4 ||
	    h->max_subscribers > CRS_MAX_SUBSCRIBERS)
		return -CRS_EPROTO;
	return 0;
}

static int map_segments(struct crs_attach *a)
{
	const struct crs_hs_welcome *w = &a->welcome;
	if (w->layout_version != CRS_LAYOUT_VERSION)
		return -CRS_EVERSION;
	if (w->data_size < CRS_RING_OFFSET + CRS_RING_MIN ||
	    w->data_size > CRS_RING_OFFSET + CRS_RING_MAX ||
	    w->ctl_size != (a->ctl_fd >= 0 ? CRS_CTL_SIZE : 0) ||
	    (w->start_pos & (CRS_FRAME_ALIGN - 1)))
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
	err = ipc_map(a->ctl_fd, CRS_CTL_SIZE, 1, &map);
	if (err)
		return err;
	a->ctl = map;
	const struct crs_ctl *c = a->ctl;
	if (c->magic != CRS_CTL_MAGIC || c->start_pos != w->start_pos ||
	    c->start_seq != w->start_seq)
		return -CRS_EPROTO;
	return 0;
}

int crs_attach_hello(struct crs_attach *a, int sock, uint32_t role,
		     const char *name)
{
	memset(a, 0, sizeof(*a));
	a->data_fd = a->ctl_fd = -1;
	a->sock = sock;
	struct ipc_peer peer;
	int err = ipc_sock_peer(a->sock, &peer);
	if (!err && peer.uid != getuid() && peer.uid != 0)
		err = -EACCES; /* neither ours nor root's: do not trust it */
	struct crs_hs_hello hello;
	crs_hs_hello_init(&hello, role, name);
	if (!err)
		err = ipc_sock_send(a->sock, &hello, sizeof(hello), NULL, 0);
	if (err == -EPIPE)
		err = -ECONNRESET; /* the publisher went away meanwhile */
	if (err)
		crs_detach(a);
	return err;
}

int crs_attach_welcome(struct crs_attach *a, uint32_t role, int timeout_ms)
{
	int nfds = role == CRS_ROLE_SUBSCRIBER ? 2 : 1;
	int fds[2] = { -1, -1 };
	int err = await_welcome(a, timeout_ms, nfds, fds);
	if (!err) {
		a->data_fd = fds[0];
		a->ctl_fd = fds[1];
		err = map_segments(a);
	}
	if (err)
		crs_detach(a);
	return err;
}

int crs_attach(const char *name, uint32_t role, int wait_ms, int handshake_ms,
	       struct crs_attach *a)
{
	memset(a, 0, sizeof(*a));
	a->sock = a->data_fd = a->ctl_fd = -1;
	int err = crs_name_check(name);
	if (err)
		return err;
	int sock = connect_stream(name, wait_ms);
	if (sock < 0)
		return sock;
	err = crs_attach_hello(a, sock, role, name);
	return err ? err : crs_attach_welcome(a, role, handshake_ms);
}

void crs_detach(struct crs_attach *a)
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
