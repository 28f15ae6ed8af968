/*
 * serve.c - the publisher's control part (serve.h): accept connections,
 * read and check HELLOs, admit subscribers (a control memfd each, sent
 * with the data memfd), drop subscribers that hung up, cancelled, broke
 * the protocol or held the stream back too long, and recompute demand
 * and room over them. Runs from claim (about once a millisecond), waits
 * and crs_pub_serve(); never from a subscriber's thread.
 */
#include <errno.h>
#include <poll.h>
#include <stdarg.h>
#include <stdio.h>
#include <string.h>
#include <sys/epoll.h>
#include <unistd.h>

#include "atomics.h"
#include "credit.h"
#include "epoch.h"
#include "handshake.h"
#include "ipc/clock.h"
#include "ipc/epoll.h"
#include "ipc/memfd.h"
#include "ipc/sock.h"
#include "ipc/waitset.h"
#include "park.h"
#include "pubring.h"
#include "serve.h"
#include "terminal.h"

/* The subscriber set changed: the active list, the park words commit
 * reads, and the limits (recomputed from the new set). */
static void rebuild_active(struct pub_control *c)
{
	struct crs_ctl *ctls[CRS_SUBSCRIBERS_MAX];
	int n = 0;
	for (uint32_t i = 0; i < c->max_subscribers; i++) {
		if (c->slots[i].used) {
			c->active[n] = (uint8_t)i;
			ctls[n++] = c->slots[i].ctl;
		}
	}
	c->nactive = n;
	c->slot_gen++;
	shm_store_relaxed(&c->ring->hdr->stats.subscribers, (uint32_t)n);
	pubring_set_parked(c->ring, n, ctls);
	pubring_hold(c->ring);
}

void control_drop(struct pub_control *c, int i, int code)
{
	struct pub_slot *s = &c->slots[i];
	if (!s->used)
		return;
	if (code) {
		/* Tell the subscriber why before it sees the hangup. Its
		 * record may hold the end of its epoch, which it may be
		 * reading now: the reason goes beside it (terminal.h). */
		terminal_evict(s->ctl, code,
			       code == ETIMEDOUT
				       ? "evicted: held the stream back "
					 "without demand or progress"
				       : "publisher cut this subscription "
					 "off for a protocol violation");
		shm_inc(&c->ring->hdr->stats.evicted);
	}
	ipc_epoll_del(c->ep, s->fd);
	ipc_close(s->fd);
	ipc_unmap(s->ctl, CRS_CTL_SIZE);
	ipc_close(s->ctl_fd);
	shm_store_relaxed(&c->ring->hdr->subs[i].active, 0);
	epoch_member_drop(c->epoch, (uint32_t)i);
	memset(s, 0, sizeof(*s));
	s->fd = s->ctl_fd = -1;
	rebuild_active(c);
}

void control_close(struct pub_control *c)
{
	for (uint32_t i = 0; i < c->max_subscribers; i++)
		control_drop(c, (int)i, 0);
	for (int i = 0; i < PUB_MAX_PENDING; i++) {
		if (c->pending[i].fd >= 0)
			ipc_close(c->pending[i].fd);
		c->pending[i].fd = -1;
	}
	ipc_close(c->timer_fd);
	ipc_close(c->reserve_fd);
	c->timer_fd = c->reserve_fd = -1;
}

static int serve_init(struct pub_control *c)
{
	c->accept_tokens = PUB_ACCEPT_BURST;
	c->tokens_ns = ipc_now_ns();
	c->reserve_fd = -1;
	c->timer_fd = ipc_timer_new();
	if (c->timer_fd < 0)
		return c->timer_fd;
	int err = ipc_epoll_add(c->ep, c->timer_fd, PUB_EV_TIMER);
	if (!err) {
		c->reserve_fd = ipc_fd_dup(c->listen_fd);
		err = c->reserve_fd < 0 ? c->reserve_fd : 0;
	}
	if (err) {
		ipc_close(c->timer_fd);
		c->timer_fd = -1;
	}
	return err;
}

int control_init(struct pub_control *c, struct pub_ring *ring,
		 struct pub_epoch *epoch, const struct crs_pub_opts *o,
		 int data_fd, uint64_t data_size, int listen_fd, int ep)
{
	memset(c, 0, sizeof(*c));
	c->ring = ring;
	c->epoch = epoch;
	c->access = *o;
	c->max_subscribers = o->max_subscribers;
	c->untethered_ns = (int64_t)o->untethered_ms * 1000000;
	c->data_fd = data_fd;
	c->data_size = data_size;
	c->listen_fd = listen_fd;
	c->ep = ep;
	c->timer_fd = c->reserve_fd = -1;
	for (int i = 0; i < CRS_SUBSCRIBERS_MAX; i++)
		c->slots[i].fd = c->slots[i].ctl_fd = -1;
	for (int i = 0; i < PUB_MAX_PENDING; i++)
		c->pending[i].fd = -1;
	int err = ipc_epoll_add(ep, listen_fd, PUB_EV_LISTEN);
	return err ? err : serve_init(c);
}

static void reject(int fd, int code, const char *reason)
{
	struct hs_reject m;
	hs_reject_init(&m, code, reason);
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
	char why[HS_REASON_MAX + 1];
	va_list ap;
	va_start(ap, fmt);
	vsnprintf(why, sizeof(why), fmt, ap);
	va_end(ap);
	reject(fd, code, why);
}

static void count_refused(struct pub_control *c)
{
	shm_inc(&c->ring->hdr->stats.refused);
}

static int free_slot(struct pub_control *c)
{
	for (uint32_t i = 0; i < c->max_subscribers; i++)
		if (!c->slots[i].used)
			return (int)i;
	return -1;
}

static void welcome_init(const struct pub_control *c, struct hs_welcome *w)
{
	hs_welcome_init(w);
	w->layout_version = CRS_LAYOUT_VERSION;
	w->data_size = c->data_size;
	w->start_pos = c->ring->pos;
	w->start_seq = c->ring->seq;
}

/* An inspector gets the data segment alone, read-only: it takes no slot,
 * adds no demand and is not waited for. */
static void welcome_inspector(struct pub_control *c, int fd)
{
	struct hs_welcome w;
	welcome_init(c, &w);
	w.slot = UINT32_MAX;
	int err = ipc_sock_send(fd, &w, sizeof(w), &c->data_fd, 1);
	/* The connection is closed right after either way: an inspector
	 * keeps only what it received, and one that got no WELCOME sees the
	 * hangup and fails to open. */
	(void)err;
}

/* Is there a slot for peer: a free one, within the per-process and
 * per-uid quotas? If not, tell the peer which limit it hit. */
static int slot_for(struct pub_control *c, int fd, const struct ipc_peer *peer)
{
	const char *name = c->ring->hdr->seg.name;
	int i = free_slot(c);
	if (i < 0) {
		rejectf(fd, EUSERS, "stream '%s' has all %u slots taken", name,
			c->max_subscribers);
		return -EUSERS;
	}
	uint32_t by_pid = 0, by_uid = 0;
	for (uint32_t k = 0; k < c->max_subscribers; k++) {
		const struct pub_slot *s = &c->slots[k];
		by_pid += s->used && s->pid == peer->pid;
		by_uid += s->used && s->uid == peer->uid;
	}
	if (by_pid >= c->access.max_per_process) {
		rejectf(fd, EDQUOT,
			"pid %d holds %u of the slots of stream '%s', its "
			"max_per_process",
			(int)peer->pid, by_pid, name);
		return -EDQUOT;
	}
	if (by_uid >= c->access.max_per_uid) {
		rejectf(fd, EDQUOT,
			"uid %u holds %u of the slots of stream '%s', its "
			"max_per_uid",
			(unsigned)peer->uid, by_uid, name);
		return -EDQUOT;
	}
	return i;
}

/* The one place a new subscriber's control segment is written, before
 * the subscriber can map it: who it is, where it starts (epoch_join's
 * decision j), and the terminal record of the replay it joins, if its
 * epoch has ended already. */
static void ctl_init(struct crs_ctl *ctl, uint32_t slot,
		     const struct epoch_join *j)
{
	ctl->magic = CRS_CTL_MAGIC;
	ctl->version = CRS_LAYOUT_VERSION;
	ctl->slot = slot;
	ctl->start_pos = j->pos;
	ctl->start_seq = j->seq;
	shm_store_relaxed(&ctl->consumed, j->pos);
	shm_store_relaxed(&ctl->consumed_seq, j->seq);
	if (j->end_pos != UINT64_MAX)
		terminal_put(&ctl->term, j->end.state, j->end.code, j->end.pos,
			     j->end.seq, j->end.message);
}

/* Give the subscriber on fd a slot, a control segment and the fds. The
 * new subscriber starts at the current position: it is owed nothing
 * published before it arrived. Returns 0 or -errno (fd not consumed;
 * the peer has been told why). */
static int admit(struct pub_control *c, int fd, const struct ipc_peer *peer)
{
	int i = slot_for(c, fd, peer);
	if (i < 0)
		return i;
	struct pub_slot *s = &c->slots[i];
	void *map = NULL;
	int ctl_fd = ipc_memfd_create("crs-ctl", CRS_CTL_SIZE);
	int err = ctl_fd < 0 ? ctl_fd : ipc_memfd_seal(ctl_fd, 0);
	if (!err)
		err = ipc_map(ctl_fd, CRS_CTL_SIZE, 1, &map);
	if (!err)
		ipc_prefault(map, CRS_CTL_SIZE, 1);
	if (err) {
		/* Out of descriptors or memory: say so, do not just hang up. */
		rejectf(fd, -err,
			"the publisher of stream '%s' cannot create your "
			"control segment: %s",
			c->ring->hdr->seg.name, crs_strerror(err));
		ipc_close(ctl_fd);
		return err;
	}
	struct crs_ctl *ctl = map;
	struct epoch_join j = epoch_join(c->epoch);
	ctl_init(ctl, (uint32_t)i, &j);

	struct hs_welcome w;
	welcome_init(c, &w);
	w.slot = (uint32_t)i;
	w.ctl_size = CRS_CTL_SIZE;
	w.start_pos = j.pos;
	w.start_seq = j.seq;
	int fds[2] = { c->data_fd, ctl_fd };
	err = ipc_sock_send(fd, &w, sizeof(w), fds, 2);
	if (!err)
		err = ipc_epoll_add(c->ep, fd, PUB_EV_SLOT(i));
	if (err) {
		ipc_unmap(map, CRS_CTL_SIZE);
		ipc_close(ctl_fd);
		return err;
	}
	*s = (struct pub_slot){ .used = 1,
				.fd = fd,
				.ctl_fd = ctl_fd,
				.ctl = ctl,
				.pid = peer->pid,
				.uid = peer->uid,
				.consumed = j.pos,
				.consumed_seq = j.seq,
				.moved_ns = ipc_now_ns() };
	epoch_member_add(c->epoch, (uint32_t)i, ctl, &j);
	struct crs_sub_stats *st = &c->ring->hdr->subs[i];
	st->pid = peer->pid;
	shm_store_relaxed(&st->join_seq, j.seq);
	shm_store_relaxed(&st->requested, 0);
	shm_store_relaxed(&st->consumed, j.pos);
	shm_store_relaxed(&st->consumed_seq, j.seq);
	shm_store_relaxed(&st->active, 1);
	rebuild_active(c);
	epoch_auto_connect(c->epoch);
	return 0;
}

static int allowed(const struct crs_pub_opts *a, const struct ipc_peer *p)
{
	if (p->uid == getuid() || a->allow_uid_any ||
	    (a->allow_group && p->gid == a->allow_gid))
		return 1;
	for (uint32_t i = 0; i < a->n_allow_uids && i < CRS_ALLOW_UIDS_MAX; i++)
		if (a->allow_uids[i] == p->uid)
			return 1;
	return 0;
}

/* Read and answer the HELLO of an accepted peer (pending: its entry in
 * the handshake table, or -1). Returns 0 if nothing has arrived yet (fd
 * untouched), 1 once the handshake is over (fd admitted or closed). */
static int handshake(struct pub_control *c, int fd, const struct ipc_peer *peer,
		     int pending)
{
	union hs_msg m;
	char buf[sizeof(m) + 1];
	int fds[IPC_MAX_FDS], nfds;
	int n = ipc_sock_recv(fd, buf, sizeof(buf), fds, &nfds);
	if (n == -EAGAIN)
		return 0;
	if (pending >= 0) {
		ipc_epoll_del(c->ep, fd);
		c->pending[pending].fd = -1;
	}
	for (int k = 0; k < nfds; k++)
		ipc_close(fds[k]);
	int type = n > 0 ? hs_decode(buf, (size_t)n, &m) : n;
	if (n <= 0 || nfds) {
		/* hung up, or a HELLO must not carry fds */
		if (n > 0)
			reject(fd, CRS_EPROTO, "unexpected file descriptors");
	} else if (type == -CRS_EVERSION) {
		reject(fd, CRS_EVERSION, "unsupported protocol version");
	} else if (type != HS_HELLO) {
		reject(fd, CRS_EPROTO, "expected a HELLO");
	} else if (m.hello.role == HS_ROLE_INSPECTOR) {
		welcome_inspector(c, fd);
	} else if (admit(c, fd, peer) == 0) {
		return 1; /* fd now belongs to the slot */
	}
	ipc_close(fd);
	return 1;
}

/* A pending connection spoke (or hung up). */
static void pending_ready(struct pub_control *c, int i)
{
	struct pub_pending p = c->pending[i];
	if (p.fd >= 0)
		handshake(c, p.fd, &p.peer, i);
}

/* A free entry of the handshake table. When all hold peers that
 * connected and said nothing, the one silent for longest is dropped:
 * honest peers say HELLO right after connecting, so a table filled by
 * silent (or slowloris) peers never delays them. */
static int pending_entry(struct pub_control *c)
{
	int oldest = 0;
	for (int i = 0; i < PUB_MAX_PENDING; i++) {
		if (c->pending[i].fd < 0)
			return i;
		if (c->pending[i].since_ns < c->pending[oldest].since_ns)
			oldest = i;
	}
	struct pub_pending *p = &c->pending[oldest];
	reject(p->fd, ETIMEDOUT,
	       "handshake table full: the longest-silent peer is dropped");
	ipc_epoll_del(c->ep, p->fd);
	ipc_close(p->fd);
	p->fd = -1;
	return oldest;
}

/* A connection just accepted. Credentials are the kernel's, fixed at
 * connect: a peer that may not subscribe is refused before it can hold
 * anything. Then its HELLO, which an honest peer has usually sent
 * already; if not yet, it waits in the handshake table. */
static void newcomer(struct pub_control *c, int fd, int64_t now)
{
	struct ipc_peer peer;
	if (ipc_sock_peer(fd, &peer) < 0) {
		reject(fd, EPERM, "peer credentials unavailable");
		ipc_close(fd);
		return;
	}
	if (!allowed(&c->access, &peer)) {
		rejectf(fd, EACCES, "uid %u may not subscribe to stream '%s'",
			(unsigned)peer.uid, c->ring->hdr->seg.name);
		count_refused(c);
		ipc_close(fd);
		return;
	}
	if (handshake(c, fd, &peer, -1))
		return;
	int i = pending_entry(c);
	if (ipc_epoll_add(c->ep, fd, PUB_EV_PENDING(i)) < 0) {
		reject(fd, EAGAIN, "cannot track this handshake");
		ipc_close(fd);
		return;
	}
	c->pending[i] = (struct pub_pending){ fd, now, peer };
}

/* Stop watching the listener until when_ns: new peers wait in the
 * listen backlog meanwhile. */
static void listen_pause(struct pub_control *c, int64_t when_ns)
{
	if (ipc_timer_at(c->timer_fd, when_ns) < 0)
		return; /* without a timer we could not resume: keep going */
	if (!c->listen_paused)
		ipc_epoll_del(c->ep, c->listen_fd);
	c->listen_paused = 1;
}

static void listen_resume(struct pub_control *c)
{
	ipc_timer_ack(c->timer_fd);
	if (c->listen_paused &&
	    ipc_epoll_add(c->ep, c->listen_fd, PUB_EV_LISTEN) == 0)
		c->listen_paused = 0;
}

/* Out of descriptors: queued peers cannot even be accepted, and the
 * listener stays readable, so accepting again at once would spin. Give
 * the reserve descriptor back to refuse the queued peers with a reason,
 * take it again, and retry after a pause. */
static void out_of_fds(struct pub_control *c, int err, int64_t now)
{
	if (c->reserve_fd >= 0) {
		ipc_close(c->reserve_fd);
		while (c->accept_tokens > 0) {
			int fd = ipc_sock_accept(c->listen_fd);
			if (fd < 0)
				break;
			c->accept_tokens--;
			rejectf(fd, -err,
				"the publisher of stream '%s' is out of file "
				"descriptors",
				c->ring->hdr->seg.name);
			ipc_close(fd);
		}
		c->reserve_fd = ipc_fd_dup(c->listen_fd);
	}
	listen_pause(c, now + PUB_FD_BACKOFF_NS);
}

/* Accept what the budget allows (see PUB_ACCEPT_BURST); the rest wait in
 * the listen backlog. */
static void accept_some(struct pub_control *c, int64_t now)
{
	/* One token per PUB_ACCEPT_COST_NS since the last refill, up to a
	 * burst; the remainder of a period carries over. */
	int64_t earned = (now - c->tokens_ns) / PUB_ACCEPT_COST_NS;
	if (earned > 0) {
		c->tokens_ns += earned * PUB_ACCEPT_COST_NS;
		int64_t have = c->accept_tokens + earned;
		c->accept_tokens = have > PUB_ACCEPT_BURST ? PUB_ACCEPT_BURST
							   : (int)have;
	}
	while (c->accept_tokens > 0) {
		int fd = ipc_sock_accept(c->listen_fd);
		if (fd == -EAGAIN)
			return;
		if (fd == -EMFILE || fd == -ENFILE) {
			out_of_fds(c, fd, now);
			return;
		}
		if (fd == -ENOMEM || fd == -ENOBUFS) {
			listen_pause(c, now + PUB_FD_BACKOFF_NS);
			return;
		}
		/* A failed accept (that peer gave up: ECONNABORTED; or an
		 * error that would repeat, as an LSM's denial) costs a token
		 * too, so that no error can keep this loop turning. */
		c->accept_tokens--;
		if (fd >= 0)
			newcomer(c, fd, now);
	}
	listen_pause(c, c->tokens_ns + PUB_ACCEPT_COST_NS);
}

/* A subscriber socket became readable: a hangup (the subscriber left or
 * died) or bytes it must not send. Either way the slot ends. */
static void slot_ready(struct pub_control *c, int i, uint32_t events)
{
	struct pub_slot *s = &c->slots[i];
	if (!s->used)
		return;
	if (events & (EPOLLHUP | EPOLLRDHUP | EPOLLERR)) {
		control_drop(c, i, 0);
		return;
	}
	char b[64];
	int fds[IPC_MAX_FDS], nfds;
	int n = ipc_sock_recv(s->fd, b, sizeof(b), fds, &nfds);
	for (int k = 0; k < nfds; k++)
		ipc_close(fds[k]);
	if (n != -EAGAIN)
		control_drop(c, i, n == 0 ? 0 : CRS_EPROTO);
}

static void expire_pending(struct pub_control *c, int64_t now)
{
	for (int i = 0; i < PUB_MAX_PENDING; i++) {
		struct pub_pending *p = &c->pending[i];
		if (p->fd >= 0 && now - p->since_ns > PUB_HELLO_TIMEOUT_NS) {
			reject(p->fd, ETIMEDOUT, "no HELLO in time");
			ipc_epoll_del(c->ep, p->fd);
			ipc_close(p->fd);
			p->fd = -1;
		}
	}
}

/* Mirror subscriber state into the stats region for inspectors. */
static void mirror_stats(struct pub_control *c, int64_t now)
{
	for (uint32_t i = 0; i < c->max_subscribers; i++) {
		struct pub_slot *s = &c->slots[i];
		if (!s->used)
			continue;
		struct crs_sub_stats *st = &c->ring->hdr->subs[i];
		/* Straight from the subscriber's words (figures only: the
		 * checked values that steer the publisher are in the slot). */
		shm_store_relaxed(&st->requested,
				  shm_load_relaxed(&s->ctl->requested));
		shm_store_relaxed(&st->consumed,
				  shm_load_relaxed(&s->ctl->consumed));
		shm_store_relaxed(&st->consumed_seq,
				  shm_load_relaxed(&s->ctl->consumed_seq));
		shm_store_relaxed(&st->wakeups,
				  shm_load_relaxed(&s->ctl->wakeups));
		shm_store_relaxed(&st->paced, shm_load_relaxed(&s->ctl->paced));
	}
	shm_store_relaxed(&c->ring->hdr->stats.served_ns, (uint64_t)now);
	epoch_mirror(c->epoch);
	pubring_mirror(c->ring);
}

int control_serve(struct pub_control *c)
{
	struct ipc_event ev[64];
	int n = ipc_epoll_ready(c->ep, ev, 64, 0);
	if (n < 0)
		return n;
	int64_t now = ipc_now_ns();
	/* Figures first: an inspector answered below reads them at once, and
	 * nothing may have mirrored them since the last commits. */
	if (n > 0)
		mirror_stats(c, now);
	for (int k = 0; k < n; k++) {
		uint64_t tag = ev[k].data;
		if (tag == PUB_EV_LISTEN) {
			accept_some(c, now);
		} else if (tag == PUB_EV_TIMER) {
			listen_resume(c);
			accept_some(c, now);
		} else if (tag >= PUB_EV_SLOT(0)) {
			slot_ready(c, (int)(tag - PUB_EV_SLOT(0)),
				   ev[k].events);
		} else {
			pending_ready(c, (int)(tag - PUB_EV_PENDING(0)));
		}
	}
	expire_pending(c, now);
	mirror_stats(c, now);
	c->next_serve_ns = now + PUB_SERVE_NS;
	return c->nactive;
}

int control_serve_due(const struct pub_control *c, int64_t now)
{
	return now >= c->next_serve_ns;
}

/* Ask subscribers to publish their consumed position at their next
 * release. */
static void want_progress(struct pub_control *c)
{
	pubring_want_progress(c->ring);
}

/* Holding the stream back (no demand left in lockstep, or unread
 * messages) and silent for longer than the untethered timeout? */
static int untethered(struct pub_control *c, struct pub_slot *s, int holding,
		      int moved)
{
	int64_t now = ipc_now_ns();
	/* The clock starts when we first see it holding back without
	 * moving, and runs only while that stays so. */
	if (moved || !holding || !s->holding) {
		s->moved_ns = now;
		s->holding = holding;
		s->asked = 0;
		return 0;
	}
	/* Halfway: its consumption may only be hidden in its batch, so
	 * ask every subscriber for its position (answered at its next
	 * release, which wakes us). Only the silent ones are evicted. */
	if (!s->asked && now - s->moved_ns > c->untethered_ns / 2) {
		s->asked = 1;
		want_progress(c);
	}
	return now - s->moved_ns > c->untethered_ns;
}

void control_recompute(struct pub_control *c)
{
	const struct pub_epoch *e = c->epoch;
	uint64_t pos = c->ring->pos, ring_size = c->ring->ring_size;
	uint64_t credit = CRS_UNBOUNDED, room = CRS_UNBOUNDED;
	int live = 0, n = c->nactive;
	uint8_t active[CRS_SUBSCRIBERS_MAX]; /* dropping slots edits c's */
	memcpy(active, c->active, (size_t)n);
	for (int k = 0; k < n; k++) {
		int i = active[k];
		struct pub_slot *s = &c->slots[i];
		const struct epoch_member *m = &e->members[i];
		struct crs_ctl *ctl = s->ctl;
		if (shm_load_relaxed(&ctl->cancelled)) {
			control_drop(c, i, 0);
			continue;
		}
		/* Pair with the release stores in sub_publish(): the
		 * demand and position read here are whole. */
		uint64_t req = shm_load_acquire(&ctl->requested);
		uint64_t cons = shm_load_acquire(&ctl->consumed);
		if (req < s->requested || cons < s->consumed || cons > pos ||
		    !frame_aligned(cons)) {
			control_drop(c, i, CRS_EPROTO);
			continue;
		}
		int moved = req != s->requested || cons != s->consumed;
		s->requested = req;
		s->consumed = cons;
		s->consumed_seq = shm_load_relaxed(&ctl->consumed_seq);
		if (m->end_pos != UINT64_MAX) {
			/* Its epoch ended: it holds back only the ring space
			 * it has yet to read, and may be evicted for that. */
			int unread = cons < m->end_pos;
			if (c->untethered_ns &&
			    untethered(c, s, unread, moved)) {
				control_drop(c, i, ETIMEDOUT);
				continue;
			}
			if (unread && cons + ring_size < room)
				room = cons + ring_size;
			continue;
		}
		if (m->epoch != e->epoch || e->state != PUB_CONNECTED)
			continue; /* waits for the next epoch */
		uint64_t limit = credit_seq_limit(m->join_seq, req);
		int holding = cons < pos || (e->mode == CRS_MODE_PUBLISH &&
					     limit <= c->ring->seq);
		if (c->untethered_ns && untethered(c, s, holding, moved)) {
			control_drop(c, i, ETIMEDOUT);
			continue;
		}
		live++;
		if (limit < credit)
			credit = limit;
		if (cons + ring_size < room)
			room = cons + ring_size;
	}
	if (e->mode == CRS_MODE_REPLAY)
		credit = CRS_UNBOUNDED; /* run ahead, bounded by the ring */
	else if (!live)
		credit = 0; /* no subscriber, no demand: hold */
	pubring_set_limits(c->ring, credit, room);
}

int control_all_consumed(const struct pub_control *c)
{
	uint64_t pos = c->ring->pos;
	for (uint32_t i = 0; i < c->max_subscribers; i++) {
		const struct pub_slot *s = &c->slots[i];
		uint64_t end_pos = c->epoch->members[i].end_pos;
		uint64_t end = end_pos < pos ? end_pos : pos;
		if (s->used && s->consumed < end)
			return 0;
	}
	return 1;
}

void control_progress(const struct pub_control *c, uint32_t *progress)
{
	for (uint32_t s = 0; s < c->max_subscribers; s++)
		/* Pairs with the release increment in sub_publish(). */
		progress[s] = c->slots[s].used
				      ? shm_load_acquire(
						&c->slots[s].ctl->progress)
				      : 0;
}

int control_progress_changed(const struct pub_control *c, const uint32_t *seen)
{
	for (uint32_t s = 0; s < c->max_subscribers; s++) {
		const struct pub_slot *slot = &c->slots[s];
		/* Pairs with the release increment in sub_publish(). */
		if (slot->used &&
		    shm_load_acquire(&slot->ctl->progress) != seen[s])
			return 1;
	}
	return 0;
}

int control_arm(const struct pub_control *c, struct ipc_waitset *ws,
		uint64_t base, const uint32_t *progress)
{
	int how = 0;
	if (ipc_waitset_poll(ws, base, c->ep, POLLIN))
		how |= PARK_NAP;
	for (uint32_t s = 0; s < CRS_SUBSCRIBERS_MAX; s++) {
		uint64_t key = base + 1 + s;
		if (s < c->max_subscribers && c->slots[s].used) {
			if (ipc_waitset_futex(ws, key,
					      &c->slots[s].ctl->progress,
					      progress[s]))
				how |= PARK_NAP;
		} else {
			ipc_waitset_forget(ws, key);
		}
	}
	return how;
}
