/*
 * serve.c - the publisher's control work: accept connections, read and
 * check HELLOs, admit subscribers (a control memfd each, sent with the
 * data memfd), and drop subscribers that hung up, cancelled or broke the
 * protocol. Runs from claim (about once a millisecond), waits and
 * crs_pub_poll(); never from a subscriber's thread.
 */
#include <errno.h>
#include <poll.h>
#include <stdio.h>
#include <string.h>
#include <sys/epoll.h>
#include <unistd.h>

#include "atomics.h"
#include "handshake.h"
#include "ipc/clock.h"
#include "ipc/epoll.h"
#include "ipc/memfd.h"
#include "ipc/sock.h"
#include "pub.h"
#include "terminal.h"

void pub_rebuild_parked(struct crs_pub *pub)
{
	int n = 0;
	for (uint32_t i = 0; i < pub->max_subscribers; i++) {
		if (pub->slots[i].used) {
			pub->active[n] = (uint8_t)i;
			pub->parked[n++] = &pub->slots[i].ctl->parked;
		}
	}
	pub->nparked = n;
	pub->nactive = n;
	pub->slot_gen++;
	crs_store_relaxed(&pub->hdr->stats.subscribers, (uint32_t)n);
	/* Demand and room must be recomputed from the new set. */
	pub->credit_limit = 0;
	pub->room_limit = 0;
}

void pub_drop_slot(struct crs_pub *pub, int i, int code)
{
	struct pub_slot *s = &pub->slots[i];
	if (!s->used)
		return;
	if (code) {
		/* Tell the subscriber why before it sees the hangup. */
		crs_terminal_put(&s->ctl->term, CRS_TERM_EVICTED, code,
				 pub->pos, pub->seq,
				 code == ETIMEDOUT
					 ? "evicted: held the stream back "
					   "without demand or progress"
					 : "publisher cut this subscription off "
					   "for a protocol violation");
		crs_store_relaxed(&pub->hdr->stats.evicted,
				  crs_load_relaxed(&pub->hdr->stats.evicted) +
					  1);
	}
	ipc_epoll_del(pub->ep, s->fd);
	ipc_close(s->fd);
	ipc_unmap(s->ctl, CRS_CTL_SIZE);
	ipc_close(s->ctl_fd);
	crs_store_relaxed(&pub->hdr->subs[i].active, 0);
	memset(s, 0, sizeof(*s));
	s->fd = s->ctl_fd = -1;
	pub_rebuild_parked(pub);
}

void pub_drop_all(struct crs_pub *pub)
{
	for (uint32_t i = 0; i < pub->max_subscribers; i++)
		pub_drop_slot(pub, (int)i, 0);
	for (int i = 0; i < PUB_MAX_PENDING; i++) {
		if (pub->pending[i].fd >= 0)
			ipc_close(pub->pending[i].fd);
		pub->pending[i].fd = -1;
	}
}

static void reject(int fd, int code, const char *reason)
{
	struct crs_hs_reject m;
	crs_hs_reject_init(&m, code, reason);
	ipc_sock_send(fd, &m, sizeof(m), NULL, 0);
}

static int free_slot(struct crs_pub *pub)
{
	for (uint32_t i = 0; i < pub->max_subscribers; i++)
		if (!pub->slots[i].used)
			return (int)i;
	return -1;
}

static void welcome_init(const struct crs_pub *pub, struct crs_hs_welcome *w)
{
	crs_hs_welcome_init(w);
	w->layout_version = CRS_LAYOUT_VERSION;
	w->data_size = pub->data_size;
	w->start_pos = pub->pos;
	w->start_seq = pub->seq;
}

/* An inspector gets the data segment alone, read-only: it takes no slot,
 * adds no demand and is not waited for. */
static void welcome_inspector(struct crs_pub *pub, int fd)
{
	struct crs_hs_welcome w;
	welcome_init(pub, &w);
	w.slot = UINT32_MAX;
	ipc_sock_send(fd, &w, sizeof(w), &pub->data_fd, 1);
}

/* Give the subscriber on fd a slot, a control segment and the fds. The
 * new subscriber starts at the current position: it is owed nothing
 * published before it arrived. Returns 0 or -errno (fd not consumed). */
static int admit(struct crs_pub *pub, int fd, const struct ipc_peer *peer)
{
	int i = free_slot(pub);
	if (i < 0) {
		reject(fd, EUSERS, "publisher has no free slot");
		return -EUSERS;
	}
	struct pub_slot *s = &pub->slots[i];
	int ctl_fd = ipc_memfd_create("crs-ctl", CRS_CTL_SIZE);
	if (ctl_fd < 0)
		return ctl_fd;
	void *map;
	int err = ipc_memfd_seal(ctl_fd, 0);
	if (!err)
		err = ipc_map(ctl_fd, CRS_CTL_SIZE, 1, &map);
	if (err) {
		ipc_close(ctl_fd);
		return err;
	}
	struct crs_ctl *ctl = map;
	struct pub_slot joined = { 0 };
	ctl->magic = CRS_CTL_MAGIC;
	ctl->version = CRS_LAYOUT_VERSION;
	ctl->slot = (uint32_t)i;
	pub_join(pub, &joined, ctl);

	struct crs_hs_welcome w;
	welcome_init(pub, &w);
	w.slot = (uint32_t)i;
	w.ctl_size = CRS_CTL_SIZE;
	w.start_pos = ctl->start_pos;
	w.start_seq = ctl->start_seq;
	int fds[2] = { pub->data_fd, ctl_fd };
	err = ipc_sock_send(fd, &w, sizeof(w), fds, 2);
	if (!err)
		err = ipc_epoll_add(pub->ep, fd, PUB_EV_SLOT(i));
	if (err) {
		ipc_unmap(map, CRS_CTL_SIZE);
		ipc_close(ctl_fd);
		return err;
	}
	*s = joined;
	s->used = 1;
	s->fd = fd;
	s->ctl_fd = ctl_fd;
	s->ctl = ctl;
	s->pid = peer->pid;
	s->moved_ns = ipc_now_ns();
	struct crs_sub_stats *st = &pub->hdr->subs[i];
	st->pid = peer->pid;
	crs_store_relaxed(&st->join_seq, s->join_seq);
	crs_store_relaxed(&st->requested, 0);
	crs_store_relaxed(&st->consumed, s->consumed);
	crs_store_relaxed(&st->consumed_seq, s->consumed_seq);
	crs_store_relaxed(&st->active, 1);
	pub_rebuild_parked(pub);
	pub_auto_connect(pub);
	return 0;
}

static int allowed(const struct crs_pub_opts *a, const struct ipc_peer *p)
{
	if (p->uid == getuid() || a->allow_uid_any ||
	    (a->allow_group && p->gid == a->allow_gid))
		return 1;
	for (uint32_t i = 0; i < a->n_allow_uids && i < 8; i++)
		if (a->allow_uids[i] == p->uid)
			return 1;
	return 0;
}

/* A handshake slot was freed: watch the listener again. */
static void pending_freed(struct crs_pub *pub)
{
	if (pub->listen_paused &&
	    ipc_epoll_add(pub->ep, pub->listen_fd, PUB_EV_LISTEN) == 0)
		pub->listen_paused = 0;
}

/* A pending connection spoke (or hung up): decode its HELLO. */
static void pending_ready(struct crs_pub *pub, int i)
{
	int fd = pub->pending[i].fd;
	union crs_hs_msg m;
	char buf[sizeof(m) + 1];
	int fds[IPC_MAX_FDS], nfds;
	int n = ipc_sock_recv(fd, buf, sizeof(buf), fds, &nfds);
	if (n == -EAGAIN)
		return;
	ipc_epoll_del(pub->ep, fd);
	pub->pending[i].fd = -1;
	pending_freed(pub);
	for (int k = 0; k < nfds; k++)
		ipc_close(fds[k]);
	int type = n > 0 ? crs_hs_decode(buf, (size_t)n, &m) : n;
	struct ipc_peer peer;
	if (n <= 0 || nfds) {
		/* hung up, or a HELLO must not carry fds */
		if (n > 0)
			reject(fd, EPROTO, "unexpected file descriptors");
	} else if (type == -CRS_EVERSION) {
		reject(fd, CRS_EVERSION, "unsupported protocol version");
	} else if (type != CRS_HS_HELLO) {
		reject(fd, EPROTO, "expected a HELLO");
	} else if (ipc_sock_peer(fd, &peer) < 0) {
		reject(fd, EPERM, "peer credentials unavailable");
	} else if (!allowed(&pub->access, &peer)) {
		char why[CRS_HS_REASON_MAX];
		snprintf(why, sizeof(why),
			 "uid %u may not subscribe to stream '%s'",
			 (unsigned)peer.uid, pub->hdr->seg.name);
		reject(fd, EACCES, why);
		crs_store_relaxed(&pub->hdr->stats.refused,
				  crs_load_relaxed(&pub->hdr->stats.refused) +
					  1);
	} else if (m.hello.role == CRS_ROLE_INSPECTOR) {
		welcome_inspector(pub, fd);
	} else if (admit(pub, fd, &peer) == 0) {
		return; /* fd now belongs to the slot */
	}
	ipc_close(fd);
}

/* Accept while there is room to track handshakes; the rest wait in the
 * listen backlog (never refused for arriving together). */
static void accept_all(struct crs_pub *pub)
{
	for (;;) {
		int i = 0;
		while (i < PUB_MAX_PENDING && pub->pending[i].fd >= 0)
			i++;
		if (i == PUB_MAX_PENDING) {
			/* Stop watching the listener until a handshake ends,
			 * or its readiness would wake us for nothing. */
			ipc_epoll_del(pub->ep, pub->listen_fd);
			pub->listen_paused = 1;
			return;
		}
		int fd = ipc_sock_accept(pub->listen_fd);
		if (fd < 0)
			return;
		if (ipc_epoll_add(pub->ep, fd, PUB_EV_PENDING(i)) < 0) {
			reject(fd, EAGAIN, "cannot track this handshake");
			ipc_close(fd);
			continue;
		}
		pub->pending[i] = (struct pub_pending){ fd, ipc_now_ns() };
	}
}

/* A subscriber socket became readable: a hangup (the subscriber left or
 * died) or bytes it must not send. Either way the slot ends. */
static void slot_ready(struct crs_pub *pub, int i, uint32_t events)
{
	struct pub_slot *s = &pub->slots[i];
	if (!s->used)
		return;
	if (events & (EPOLLHUP | EPOLLRDHUP | EPOLLERR)) {
		pub_drop_slot(pub, i, 0);
		return;
	}
	char b[64];
	int fds[IPC_MAX_FDS], nfds;
	int n = ipc_sock_recv(s->fd, b, sizeof(b), fds, &nfds);
	for (int k = 0; k < nfds; k++)
		ipc_close(fds[k]);
	if (n != -EAGAIN)
		pub_drop_slot(pub, i, n == 0 ? 0 : CRS_EPROTO);
}

static void expire_pending(struct crs_pub *pub, int64_t now)
{
	for (int i = 0; i < PUB_MAX_PENDING; i++) {
		struct pub_pending *p = &pub->pending[i];
		if (p->fd >= 0 && now - p->since_ns > PUB_HELLO_TIMEOUT_NS) {
			ipc_epoll_del(pub->ep, p->fd);
			ipc_close(p->fd);
			p->fd = -1;
			pending_freed(pub);
		}
	}
}

/* Mirror subscriber state into the stats region for inspectors. */
static void mirror_stats(struct crs_pub *pub, int64_t now)
{
	for (uint32_t i = 0; i < pub->max_subscribers; i++) {
		struct pub_slot *s = &pub->slots[i];
		if (!s->used)
			continue;
		struct crs_sub_stats *st = &pub->hdr->subs[i];
		/* Straight from the subscriber's words (figures only: the
		 * checked values that steer the publisher are in the slot). */
		crs_store_relaxed(&st->requested,
				  crs_load_relaxed(&s->ctl->requested));
		crs_store_relaxed(&st->consumed,
				  crs_load_relaxed(&s->ctl->consumed));
		crs_store_relaxed(&st->consumed_seq,
				  crs_load_relaxed(&s->ctl->consumed_seq));
		crs_store_relaxed(&st->wakeups,
				  crs_load_relaxed(&s->ctl->wakeups));
	}
	crs_store_relaxed(&pub->hdr->stats.served_ns, (uint64_t)now);
	if (pub->mode == CRS_MODE_REPLAY) {
		struct crs_pub_stats *ps = &pub->hdr->stats;
		int64_t clock = pub_now(pub);
		crs_retain_trim(&pub->retain, pub->ring, pub->ring_size,
				pub->pos, pub->seq, pub->bytes, clock, 0);
		crs_store_relaxed(&ps->retained,
				  pub->seq - pub->retain.tail_seq);
		crs_store_relaxed(&ps->retained_bytes,
				  pub->bytes - pub->retain.tail_bytes);
		crs_store_relaxed(&ps->retained_since_ns,
				  crs_retain_oldest_time(&pub->retain));
		crs_store_relaxed(&ps->clock_ns, clock);
	}
}

int pub_serve(struct crs_pub *pub)
{
	struct ipc_event ev[64];
	int n = ipc_epoll_ready(pub->ep, ev, 64, 0);
	if (n < 0)
		return n;
	for (int k = 0; k < n; k++) {
		uint64_t tag = ev[k].data;
		if (tag == PUB_EV_LISTEN)
			accept_all(pub);
		else if (tag >= PUB_EV_SLOT(0))
			slot_ready(pub, (int)(tag - PUB_EV_SLOT(0)),
				   ev[k].events);
		else
			pending_ready(pub, (int)(tag - PUB_EV_PENDING(0)));
	}
	int64_t now = ipc_now_ns();
	expire_pending(pub, now);
	mirror_stats(pub, now);
	pub->next_serve_ns = now + PUB_SERVE_NS;
	return pub->nactive;
}
