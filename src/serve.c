/*
 * serve.c - the publisher's control work: accept connections, read and
 * check HELLOs, admit subscribers (a control memfd each, sent with the
 * data memfd), and drop subscribers that hung up, cancelled or broke the
 * protocol. Runs from claim (about once a millisecond), waits and
 * crs_pub_serve(); never from a subscriber's thread.
 */
#include <errno.h>
#include <poll.h>
#include <stdarg.h>
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
		/* Tell the subscriber why before it sees the hangup. Its
		 * record may hold the end of its epoch, which it may be
		 * reading now: the reason goes beside it (terminal.h). */
		crs_terminal_evict(s->ctl, code,
				   code == ETIMEDOUT
					   ? "evicted: held the stream back "
					     "without demand or progress"
					   : "publisher cut this subscription "
					     "off for a protocol violation");
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
	ipc_close(pub->timer_fd);
	ipc_close(pub->reserve_fd);
	pub->timer_fd = pub->reserve_fd = -1;
}

int pub_serve_init(struct crs_pub *pub)
{
	pub->accept_tokens = PUB_ACCEPT_BURST;
	pub->tokens_ns = ipc_now_ns();
	pub->reserve_fd = -1;
	pub->timer_fd = ipc_timer_new();
	if (pub->timer_fd < 0)
		return pub->timer_fd;
	int err = ipc_epoll_add(pub->ep, pub->timer_fd, PUB_EV_TIMER);
	if (!err) {
		pub->reserve_fd = ipc_fd_dup(pub->listen_fd);
		err = pub->reserve_fd < 0 ? pub->reserve_fd : 0;
	}
	if (err) {
		ipc_close(pub->timer_fd);
		pub->timer_fd = -1;
	}
	return err;
}

static void reject(int fd, int code, const char *reason)
{
	struct crs_hs_reject m;
	crs_hs_reject_init(&m, code, reason);
	int err = ipc_sock_send(fd, &m, sizeof(m), NULL, 0);
	/* Best effort: the connection is closed right after, and a peer
	 * that could not take the answer (gone, or its buffer full) learns
	 * of the refusal from the hangup. */
	(void)err;
}

static void rejectf(int fd, int code, const char *fmt, ...)
	__attribute__((format(printf, 3, 4)));
static void rejectf(int fd, int code, const char *fmt, ...)
{
	char why[CRS_HS_REASON_MAX + 1];
	va_list ap;
	va_start(ap, fmt);
	vsnprintf(why, sizeof(why), fmt, ap);
	va_end(ap);
	reject(fd, code, why);
}

static void count_refused(struct crs_pub *pub)
{
	crs_store_relaxed(&pub->hdr->stats.refused,
			  crs_load_relaxed(&pub->hdr->stats.refused) + 1);
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
	int err = ipc_sock_send(fd, &w, sizeof(w), &pub->data_fd, 1);
	/* The connection is closed right after either way: an inspector
	 * keeps only what it received, and one that got no WELCOME sees the
	 * hangup and fails to open. */
	(void)err;
}

/* Is there a slot for peer: a free one, within the per-process and
 * per-uid quotas? If not, tell the peer which limit it hit. */
static int slot_for(struct crs_pub *pub, int fd, const struct ipc_peer *peer)
{
	const char *name = pub->hdr->seg.name;
	int i = free_slot(pub);
	if (i < 0) {
		rejectf(fd, EUSERS, "stream '%s' has all %u slots taken", name,
			pub->max_subscribers);
		return -EUSERS;
	}
	uint32_t by_pid = 0, by_uid = 0;
	for (uint32_t k = 0; k < pub->max_subscribers; k++) {
		const struct pub_slot *s = &pub->slots[k];
		by_pid += s->used && s->pid == peer->pid;
		by_uid += s->used && s->uid == peer->uid;
	}
	if (by_pid >= pub->access.max_per_process) {
		rejectf(fd, EDQUOT,
			"pid %d holds %u of the slots of stream '%s', its "
			"max_per_process", (int)peer->pid, by_pid, name);
		return -EDQUOT;
	}
	if (by_uid >= pub->access.max_per_uid) {
		rejectf(fd, EDQUOT,
			"uid %u holds %u of the slots of stream '%s', its "
			"max_per_uid", (unsigned)peer->uid, by_uid, name);
		return -EDQUOT;
	}
	return i;
}

/* Give the subscriber on fd a slot, a control segment and the fds. The
 * new subscriber starts at the current position: it is owed nothing
 * published before it arrived. Returns 0 or -errno (fd not consumed;
 * the peer has been told why). */
static int admit(struct crs_pub *pub, int fd, const struct ipc_peer *peer)
{
	int i = slot_for(pub, fd, peer);
	if (i < 0)
		return i;
	struct pub_slot *s = &pub->slots[i];
	void *map = NULL;
	int ctl_fd = ipc_memfd_create("crs-ctl", CRS_CTL_SIZE);
	int err = ctl_fd < 0 ? ctl_fd : ipc_memfd_seal(ctl_fd, 0);
	if (!err)
		err = ipc_map(ctl_fd, CRS_CTL_SIZE, 1, &map);
	if (err) {
		/* Out of descriptors or memory: say so, do not just hang up. */
		rejectf(fd, -err,
			"the publisher of stream '%s' cannot create your "
			"control segment: %s", pub->hdr->seg.name,
			crs_strerror(err));
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
	s->uid = peer->uid;
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
	for (uint32_t i = 0; i < a->n_allow_uids && i < CRS_ALLOW_UIDS_MAX;
	     i++)
		if (a->allow_uids[i] == p->uid)
			return 1;
	return 0;
}

/* Read and answer the HELLO of an accepted peer (pending: its entry in
 * the handshake table, or -1). Returns 0 if nothing has arrived yet (fd
 * untouched), 1 once the handshake is over (fd admitted or closed). */
static int handshake(struct crs_pub *pub, int fd, const struct ipc_peer *peer,
		     int pending)
{
	union crs_hs_msg m;
	char buf[sizeof(m) + 1];
	int fds[IPC_MAX_FDS], nfds;
	int n = ipc_sock_recv(fd, buf, sizeof(buf), fds, &nfds);
	if (n == -EAGAIN)
		return 0;
	if (pending >= 0) {
		ipc_epoll_del(pub->ep, fd);
		pub->pending[pending].fd = -1;
	}
	for (int k = 0; k < nfds; k++)
		ipc_close(fds[k]);
	int type = n > 0 ? crs_hs_decode(buf, (size_t)n, &m) : n;
	if (n <= 0 || nfds) {
		/* hung up, or a HELLO must not carry fds */
		if (n > 0)
			reject(fd, CRS_EPROTO, "unexpected file descriptors");
	} else if (type == -CRS_EVERSION) {
		reject(fd, CRS_EVERSION, "unsupported protocol version");
	} else if (type != CRS_HS_HELLO) {
		reject(fd, CRS_EPROTO, "expected a HELLO");
	} else if (m.hello.role == CRS_ROLE_INSPECTOR) {
		welcome_inspector(pub, fd);
	} else if (admit(pub, fd, peer) == 0) {
		return 1; /* fd now belongs to the slot */
	}
	ipc_close(fd);
	return 1;
}

/* A pending connection spoke (or hung up). */
static void pending_ready(struct crs_pub *pub, int i)
{
	struct pub_pending p = pub->pending[i];
	if (p.fd >= 0)
		handshake(pub, p.fd, &p.peer, i);
}

/* A free entry of the handshake table. When all hold peers that
 * connected and said nothing, the one silent for longest is dropped:
 * honest peers say HELLO right after connecting, so a table filled by
 * silent (or slowloris) peers never delays them. */
static int pending_entry(struct crs_pub *pub)
{
	int oldest = 0;
	for (int i = 0; i < PUB_MAX_PENDING; i++) {
		if (pub->pending[i].fd < 0)
			return i;
		if (pub->pending[i].since_ns < pub->pending[oldest].since_ns)
			oldest = i;
	}
	struct pub_pending *p = &pub->pending[oldest];
	reject(p->fd, ETIMEDOUT,
	       "handshake table full: the longest-silent peer is dropped");
	ipc_epoll_del(pub->ep, p->fd);
	ipc_close(p->fd);
	p->fd = -1;
	return oldest;
}

/* A connection just accepted. Credentials are the kernel's, fixed at
 * connect: a peer that may not subscribe is refused before it can hold
 * anything. Then its HELLO, which an honest peer has usually sent
 * already; if not yet, it waits in the handshake table. */
static void newcomer(struct crs_pub *pub, int fd, int64_t now)
{
	struct ipc_peer peer;
	if (ipc_sock_peer(fd, &peer) < 0) {
		reject(fd, EPERM, "peer credentials unavailable");
		ipc_close(fd);
		return;
	}
	if (!allowed(&pub->access, &peer)) {
		rejectf(fd, EACCES, "uid %u may not subscribe to stream '%s'",
			(unsigned)peer.uid, pub->hdr->seg.name);
		count_refused(pub);
		ipc_close(fd);
		return;
	}
	if (handshake(pub, fd, &peer, -1))
		return;
	int i = pending_entry(pub);
	if (ipc_epoll_add(pub->ep, fd, PUB_EV_PENDING(i)) < 0) {
		reject(fd, EAGAIN, "cannot track this handshake");
		ipc_close(fd);
		return;
	}
	pub->pending[i] = (struct pub_pending){ fd, now, peer };
}

/* Stop watching the listener until when_ns: new peers wait in the
 * listen backlog meanwhile. */
static void listen_pause(struct crs_pub *pub, int64_t when_ns)
{
	if (ipc_timer_at(pub->timer_fd, when_ns) < 0)
		return; /* without a timer we could not resume: keep going */
	if (!pub->listen_paused)
		ipc_epoll_del(pub->ep, pub->listen_fd);
	pub->listen_paused = 1;
}

static void listen_resume(struct crs_pub *pub)
{
	ipc_timer_ack(pub->timer_fd);
	if (pub->listen_paused &&
	    ipc_epoll_add(pub->ep, pub->listen_fd, PUB_EV_LISTEN) == 0)
		pub->listen_paused = 0;
}

/* Out of descriptors: queued peers cannot even be accepted, and the
 * listener stays readable, so accepting again at once would spin. Give
 * the reserve descriptor back to refuse the queued peers with a reason,
 * take it again, and retry after a pause. */
static void out_of_fds(struct crs_pub *pub, int err, int64_t now)
{
	if (pub->reserve_fd >= 0) {
		ipc_close(pub->reserve_fd);
		while (pub->accept_tokens > 0) {
			int fd = ipc_sock_accept(pub->listen_fd);
			if (fd < 0)
				break;
			pub->accept_tokens--;
			rejectf(fd, -err,
				"the publisher of stream '%s' is out of file "
				"descriptors", pub->hdr->seg.name);
			ipc_close(fd);
		}
		pub->reserve_fd = ipc_fd_dup(pub->listen_fd);
	}
	listen_pause(pub, now + PUB_FD_BACKOFF_NS);
}

/* Accept what the budget allows (see PUB_ACCEPT_BURST); the rest wait in
 * the listen backlog. */
static void accept_some(struct crs_pub *pub, int64_t now)
{
	/* One token per PUB_ACCEPT_COST_NS since the last refill, up to a
	 * burst; the remainder of a period carries over. */
	int64_t earned = (now - pub->tokens_ns) / PUB_ACCEPT_COST_NS;
	if (earned > 0) {
		pub->tokens_ns += earned * PUB_ACCEPT_COST_NS;
		int64_t have = pub->accept_tokens + earned;
		pub->accept_tokens =
			have > PUB_ACCEPT_BURST ? PUB_ACCEPT_BURST : (int)have;
	}
	while (pub->accept_tokens > 0) {
		int fd = ipc_sock_accept(pub->listen_fd);
		if (fd == -EAGAIN)
			return;
		if (fd == -EMFILE || fd == -ENFILE) {
			out_of_fds(pub, fd, now);
			return;
		}
		if (fd == -ENOMEM || fd == -ENOBUFS) {
			listen_pause(pub, now + PUB_FD_BACKOFF_NS);
			return;
		}
		/* A failed accept (that peer gave up: ECONNABORTED; or an
		 * error that would repeat, as an LSM's denial) costs a token
		 * too, so that no error can keep this loop turning. */
		pub->accept_tokens--;
		if (fd >= 0)
			newcomer(pub, fd, now);
	}
	listen_pause(pub, pub->tokens_ns + PUB_ACCEPT_COST_NS);
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
			reject(p->fd, ETIMEDOUT, "no HELLO in time");
			ipc_epoll_del(pub->ep, p->fd);
			ipc_close(p->fd);
			p->fd = -1;
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
	pub_mirror(pub);
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
	int64_t now = ipc_now_ns();
	for (int k = 0; k < n; k++) {
		uint64_t tag = ev[k].data;
		if (tag == PUB_EV_LISTEN) {
			accept_some(pub, now);
		} else if (tag == PUB_EV_TIMER) {
			listen_resume(pub);
			accept_some(pub, now);
		} else if (tag >= PUB_EV_SLOT(0)) {
			slot_ready(pub, (int)(tag - PUB_EV_SLOT(0)),
				   ev[k].events);
		} else {
			pending_ready(pub, (int)(tag - PUB_EV_PENDING(0)));
		}
	}
	expire_pending(pub, now);
	mirror_stats(pub, now);
	pub->next_serve_ns = now + PUB_SERVE_NS;
	return pub->nactive;
}
