/*
 * pub.c - the publisher: stream creation, the claim/commit hot path,
 * lockstep demand over all subscribers and blocking waits. Control work
 * (subscribers coming and going) lives in serve.c, epochs and terminal
 * signals in epoch.c.
 *
 * Wakeups follow park.h. As a waker, commit stores the frame header and
 * then reads each subscriber's park word (wake_if_parked); the
 * store-load order this needs comes from a full fence (pub->fences) or,
 * when this process is registered for membarrier, from the membarrier()
 * a parking subscriber runs, which keeps the fence off this hot path.
 * As a parker, this file gives its hooks (pub_announce, pub_withdraw)
 * and the blocking waits (pub_wait_for).
 */
#include <errno.h>
#include <limits.h>
#include <poll.h>
#include <stdlib.h>
#include <string.h>
#include <sys/random.h>
#include <time.h>
#include <unistd.h>

#include "atomics.h"
#include "credit.h"
#include "errmsg.h"
#include "frame.h"
#include "ipc/clock.h"
#include "ipc/epoll.h"
#include "ipc/futex.h"
#include "ipc/memfd.h"
#include "ipc/rundir.h"
#include "ipc/sock.h"
#include "ipc/waitset.h"
#include "park.h"
#include "pub.h"
#include "ring.h"
#include "terminal.h"

#define DEFAULT_RING (1ULL << 20)

void crs_pub_opts_init(struct crs_pub_opts *o)
{
	memset(o, 0, sizeof(*o));
	o->mode = CRS_MODE_PUBLISH;
	o->ring_bytes = DEFAULT_RING;
	o->max_message = 0; /* ring_bytes / 4, whatever the ring */
	o->max_subscribers = CRS_SUBSCRIBERS_MAX;
}

static int opts_check(struct crs_pub_opts *o)
{
	if (!o->ring_bytes)
		o->ring_bytes = DEFAULT_RING;
	if (o->ring_bytes < CRS_RING_MIN || o->ring_bytes > CRS_RING_MAX ||
	    (o->ring_bytes & (o->ring_bytes - 1)))
		return -EINVAL;
	if (!o->max_message)
		o->max_message = (uint32_t)(o->ring_bytes / 4);
	if (o->max_message > o->ring_bytes / 4)
		return -EINVAL;
	if (!o->max_subscribers)
		o->max_subscribers = CRS_SUBSCRIBERS_MAX;
	if (o->max_subscribers > CRS_SUBSCRIBERS_MAX)
		return -EINVAL;
	if (!o->max_per_process) /* no process may lock the others out */
		o->max_per_process = (o->max_subscribers + 1) / 2;
	if (!o->max_per_uid)
		o->max_per_uid = o->max_subscribers;
	if (o->mode > CRS_MODE_REPLAY || o->overflow > CRS_OVERFLOW_LATEST ||
	    o->on_disconnect > CRS_DISCONNECT_SEND_COMPLETED ||
	    o->auto_connect < CRS_CONNECT_MANUAL ||
	    o->auto_connect > (int32_t)o->max_subscribers ||
	    o->replay_age_ms > INT64_MAX / 1000000)
		return -EINVAL;
	if (o->n_allow_uids > CRS_ALLOW_UIDS_MAX)
		return -EINVAL;
	if (o->mode != CRS_MODE_REPLAY &&
	    (o->replay_count || o->replay_bytes || o->replay_age_ms))
		return -EINVAL; /* retention means nothing without replay */
	return 0;
}

/* A random 64-bit id for a new stream (never 0). Without entropy (an
 * old kernel), the creation time mixed with the pid still differs from
 * the previous publisher of the name. */
static uint64_t stream_id_new(uint64_t created_ns)
{
	uint64_t id = 0;
	if (getrandom(&id, sizeof(id), GRND_NONBLOCK) != sizeof(id))
		id = created_ns ^ ((uint64_t)getpid() << 40) ^
		     0x9e3779b97f4a7c15ULL;
	return id ? id : 1;
}

static void header_init(struct crs_pub *pub, const char *name,
			const struct crs_pub_opts *o)
{
	struct crs_seg_header *h = &pub->hdr->seg;
	struct timespec now;
	clock_gettime(CLOCK_REALTIME, &now);
	h->magic = CRS_LAYOUT_MAGIC;
	h->version = CRS_LAYOUT_VERSION;
	h->segment_size = pub->data_size;
	h->ring_offset = CRS_RING_OFFSET;
	h->ring_size = o->ring_bytes;
	h->max_message = o->max_message;
	h->max_subscribers = o->max_subscribers;
	h->mode = o->mode;
	h->flags = CRS_SEG_PUB_FENCE_ASK | (pub->fences ? CRS_SEG_PUB_FENCES : 0);
	h->pub_pid = getpid();
	h->pub_uid = getuid();
	h->created_ns = (uint64_t)now.tv_sec * 1000000000 + (uint64_t)now.tv_nsec;
	strlcpy(h->name, name, sizeof(h->name));
	h->stream_id = stream_id_new(h->created_ns);
}

/* Bind the stream's socket, replacing one left by a dead publisher. We
 * hold the lock, so any socket file there is stale. */
static int listen_on(struct crs_pub *pub)
{
	const struct crs_paths *p = &pub->paths;
	int fd = ipc_sock_listen(p->dir.fd, p->dir.path, p->sock);
	if (fd == -EADDRINUSE) {
		ipc_unlink_at(p->dir.fd, p->sock);
		fd = ipc_sock_listen(p->dir.fd, p->dir.path, p->sock);
	}
	if (fd < 0)
		crs_err_set(fd, "cannot listen on %s/%s: %s", p->dir.path,
			    p->sock, crs_strerror(fd));
	return fd;
}

/* A live publisher owns the name: say which process. */
static int pub_lock_error(const struct crs_pub *pub, const char *name,
			  int err)
{
	const struct crs_paths *p = &pub->paths;
	if (err != -EEXIST)
		return crs_err_set(err, "cannot take the lock %s/%s: %s",
				   p->dir.path, p->lock, crs_strerror(err));
	int owner = ipc_lock_owner(p->dir.fd, p->lock);
	if (owner)
		return crs_err_set(err, "stream '%s' is already published by "
				   "pid %d (lock %s/%s)", name, owner,
				   p->dir.path, p->lock);
	return crs_err_set(err, "stream '%s' is already published by a live "
			   "process (lock %s/%s)", name, p->dir.path, p->lock);
}

static int pub_setup(struct crs_pub *pub, const char *name,
		     struct crs_pub_opts *o)
{
	int err = crs_paths_for(name, 1, &pub->paths);
	if (err)
		return err;
	pub->lock_fd = ipc_lock_take(pub->paths.dir.fd, pub->paths.lock);
	if (pub->lock_fd < 0)
		return pub_lock_error(pub, name, pub->lock_fd);
	pub->fences = ipc_membarrier_register() != 0;
	pub->data_size = CRS_RING_OFFSET + o->ring_bytes;
	pub->data_fd = ipc_memfd_create(name, pub->data_size);
	if (pub->data_fd < 0)
		return pub->data_fd;
	void *map;
	err = ipc_map(pub->data_fd, pub->data_size, 1, &map);
	if (err)
		return err;
	pub->hdr = map;
	pub->ring = (uint8_t *)map + CRS_RING_OFFSET;
	pub->ring_size = o->ring_bytes;
	pub->mask = o->ring_bytes - 1;
	pub->max_message = o->max_message;
	pub->max_subscribers = o->max_subscribers;
	pub->access = *o;
	pub->mode = o->mode;
	pub->overflow = o->overflow;
	pub->on_disconnect = o->on_disconnect;
	pub->auto_connect = o->auto_connect;
	pub->untethered_ns = (int64_t)o->untethered_ms * 1000000;
	pub->spin_ns = crs_spin_ns(o->spin_us);
	pub->clock = o->clock;
	pub->clock_ctx = o->clock_ctx;
	err = crs_retain_init(&pub->retain, o->replay_count, o->replay_bytes,
			      (int64_t)o->replay_age_ms * 1000000,
			      o->ring_bytes);
	if (err)
		return err;
	if (o->overflow == CRS_OVERFLOW_LATEST) {
		pub->latest = malloc(o->max_message ? o->max_message : 1);
		if (!pub->latest)
			return -ENOMEM;
	}
	header_init(pub, name, o);
	/* Seal after mapping: our mapping stays writable, nobody else can
	 * ever map it for writing or change its size. */
	err = ipc_memfd_seal(pub->data_fd, 1);
	if (err)
		return err;
	err = ipc_waitset_new(&pub->ws);
	if (err)
		return err;
	pub->ep = ipc_epoll_new();
	if (pub->ep < 0)
		return pub->ep;
	pub->listen_fd = listen_on(pub);
	if (pub->listen_fd < 0)
		return pub->listen_fd;
	err = ipc_epoll_add(pub->ep, pub->listen_fd, PUB_EV_LISTEN);
	if (err)
		return err;
	err = pub_serve_init(pub);
	if (err)
		return err;
	pub_auto_connect(pub); /* autoConnect(0): connected from the start */
	return 0;
}

int crs_pub_create(const char *name, const struct crs_pub_opts *opts,
		   crs_pub **out)
{
	crs_err_begin();
	struct crs_pub_opts o;
	if (opts)
		o = *opts;
	else
		crs_pub_opts_init(&o);
	int err = opts_check(&o);
	if (err)
		return crs_err_set(err, "invalid crs_pub_opts for stream '%.64s'",
				   name ? name : "");
	struct crs_pub *pub = calloc(1, sizeof(*pub));
	if (!pub)
		return crs_err_code(-ENOMEM);
	pub->paths.dir.fd = -1;
	pub->data_fd = pub->listen_fd = pub->lock_fd = pub->ep = -1;
	for (int i = 0; i < CRS_SUBSCRIBERS_MAX; i++)
		pub->slots[i].fd = pub->slots[i].ctl_fd = -1;
	for (int i = 0; i < PUB_MAX_PENDING; i++)
		pub->pending[i].fd = -1;
	pub->until_serve = PUB_SERVE_EVERY;
	pub->ws_gen = UINT32_MAX;
	err = pub_setup(pub, name, &o);
	if (err) {
		int owned = pub->lock_fd >= 0;
		if (pub->listen_fd >= 0)
			ipc_unlink_at(pub->paths.dir.fd, pub->paths.sock);
		ipc_close(pub->listen_fd);
		ipc_close(pub->ep);
		ipc_waitset_free(pub->ws);
		if (pub->hdr)
			ipc_unmap(pub->hdr, pub->data_size);
		ipc_close(pub->data_fd);
		if (owned)
			ipc_unlink_at(pub->paths.dir.fd, pub->paths.lock);
		ipc_close(pub->lock_fd);
		crs_paths_close(&pub->paths);
		crs_retain_free(&pub->retain);
		free(pub->latest);
		free(pub);
		return crs_err_code(err);
	}
	*out = pub;
	return 0;
}

/* Ask subscribers to publish their consumed position at their next
 * release (crs_sub_release reads progress_wanted; relaxed: nothing is
 * read behind it). */
static void pub_want_progress(struct crs_pub *pub)
{
	_Atomic uint32_t *w = &pub->hdr->signal.progress_wanted;
	crs_store_relaxed(w, crs_load_relaxed(w) + 1);
}

/* Holding the stream back (no demand left in lockstep, or unread
 * messages) and silent for longer than the untethered timeout? */
static int untethered(struct crs_pub *pub, struct pub_slot *s, int holding,
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
	if (!s->asked && now - s->moved_ns > pub->untethered_ns / 2) {
		s->asked = 1;
		pub_want_progress(pub);
	}
	return now - s->moved_ns > pub->untethered_ns;
}

/* Re-read every subscriber's demand and consumed position and recompute
 * the limits. A subscriber whose words went backwards or past what was
 * published is cut off with CRS_EPROTO; one that cancelled is dropped. */
static void pub_recompute(struct crs_pub *pub)
{
	uint64_t credit = CRS_UNBOUNDED, room = CRS_UNBOUNDED;
	int live = 0, n = pub->nactive;
	uint8_t active[CRS_SUBSCRIBERS_MAX]; /* dropping slots edits pub's */
	memcpy(active, pub->active, (size_t)n);
	for (int k = 0; k < n; k++) {
		int i = active[k];
		struct pub_slot *s = &pub->slots[i];
		struct crs_ctl *c = s->ctl;
		if (crs_load_relaxed(&c->cancelled)) {
			pub_drop_slot(pub, i, 0);
			continue;
		}
		/* Pair with the release stores in sub_publish(): the
		 * demand and position read here are whole. */
		uint64_t req = crs_load_acquire(&c->requested);
		uint64_t cons = crs_load_acquire(&c->consumed);
		if (req < s->requested || cons < s->consumed || cons > pub->pos ||
		    !crs_frame_aligned(cons)) {
			pub_drop_slot(pub, i, CRS_EPROTO);
			continue;
		}
		int moved = req != s->requested || cons != s->consumed;
		s->requested = req;
		s->consumed = cons;
		s->consumed_seq = crs_load_relaxed(&c->consumed_seq);
		if (s->end_pos != UINT64_MAX) {
			/* Its epoch ended: it holds back only the ring space
			 * it has yet to read, and may be evicted for that. */
			int unread = cons < s->end_pos;
			if (pub->untethered_ns &&
			    untethered(pub, s, unread, moved)) {
				pub_drop_slot(pub, i, ETIMEDOUT);
				continue;
			}
			if (unread && cons + pub->ring_size < room)
				room = cons + pub->ring_size;
			continue;
		}
		if (s->epoch != pub->epoch || pub->state != PUB_CONNECTED)
			continue; /* waits for the next epoch */
		uint64_t limit = crs_credit_limit(s->join_seq, req);
		int holding = cons < pub->pos || (pub->mode == CRS_MODE_PUBLISH &&
						  limit <= pub->seq);
		if (pub->untethered_ns && untethered(pub, s, holding, moved)) {
			pub_drop_slot(pub, i, ETIMEDOUT);
			continue;
		}
		live++;
		if (limit < credit)
			credit = limit;
		if (cons + pub->ring_size < room)
			room = cons + pub->ring_size;
	}
	if (pub->mode == CRS_MODE_REPLAY)
		credit = CRS_UNBOUNDED; /* run ahead, bounded by the ring */
	else if (!live)
		credit = 0; /* no subscriber, no demand: hold */
	pub->credit_limit = credit;
	pub->room_limit = room;
}

static int64_t serve_if_due(struct crs_pub *pub)
{
	int64_t now = ipc_now_ns();
	if (now >= pub->next_serve_ns)
		pub_serve(pub);
	return now;
}

/* Can a frame of `need` bytes (padding included) be written now? */
static int pub_check(struct crs_pub *pub, uint64_t need)
{
	if (pub->seq >= pub->credit_limit)
		return -CRS_ENODEMAND;
	if (ring_end(pub->pos, need) > pub->room_limit)
		return -CRS_ENOROOM;
	return 0;
}

static int pub_refresh(struct crs_pub *pub, uint64_t need)
{
	serve_if_due(pub);
	pub_recompute(pub);
	return pub_check(pub, need);
}

/* Bytes a message of len takes at the current position, with the
 * padding frame needed when it does not fit before the ring's end. */
static inline uint64_t claim_need(const struct crs_pub *pub, uint64_t frame,
				  uint64_t *pad)
{
	*pad = ring_pad_needed(pub->pos & pub->mask, frame, pub->ring_size);
	return *pad + frame;
}

/* The figures inspectors read (crs_stream_info): kept in the handle by
 * every commit and stored here only every PUB_SERVE_EVERY commits, at
 * each serve and at a flush, so the data path stores no shared line per
 * message. Nobody steers by them (readers go by frame headers). */
void pub_mirror(struct crs_pub *pub)
{
	struct crs_pub_stats *st = &pub->hdr->stats;
	crs_store_relaxed(&st->position, pub->more ? pub->more_pos : pub->pos);
	crs_store_relaxed(&st->published, pub->seq - pub->more_count);
	crs_store_relaxed(&st->bytes, pub->bytes - pub->more_bytes);
}

/* crs_pub_claim's slow path: not connected, a claim open, too long, no
 * demand or room in the cached limits, padding needed, or replay mode. */
static __attribute__((noinline, cold)) int
claim_slow(struct crs_pub *pub, size_t len, void **buf)
{
	if (pub->claimed || pub->state != PUB_CONNECTED)
		return pub->claimed			   ? -EALREADY
		       : pub->state == PUB_TERMINATED ? -ESHUTDOWN
						      : -ENOTCONN;
	if (len > pub->max_message)
		return -EMSGSIZE;
	uint64_t pad;
	uint64_t need = claim_need(pub, crs_frame_size(len), &pad);
	if (pub_check(pub, need)) {
		/* Refused: what we deferred must go out first, or the
		 * demand and room we wait for could never come back. */
		crs_pub_flush(pub);
		int err = pub_refresh(pub, need);
		if (err) {
			_Atomic uint64_t *n = err == -CRS_ENODEMAND
						      ? &pub->hdr->stats.no_demand
						      : &pub->hdr->stats.no_room;
			crs_store_relaxed(n, crs_load_relaxed(n) + 1);
			return err;
		}
	}
	if (pub->mode == CRS_MODE_REPLAY) {
		/* Retained messages this frame will overwrite are gone. */
		uint64_t end = ring_end(pub->pos, need);
		if (end > pub->ring_size)
			crs_retain_trim(&pub->retain, pub->ring, pub->ring_size,
					pub->pos, pub->seq, pub->bytes, 0,
					end - pub->ring_size);
	}
	if (pad) {
		/* The padding counts as committed even if this claim is then
		 * aborted: readers step over it by its header alone. */
		ring_pad(pub->ring, pub->mask, pub->pos, pad);
		pub->pos += pad;
	}
	pub->claim_pos = pub->pos;
	pub->claim_len = len;
	pub->claimed = 1;
	*buf = pub->ring + ring_payload_offset(pub->mask, pub->pos);
	return 0;
}

int crs_pub_claim(crs_pub *pub, size_t len, void **buf)
{
	uint64_t frame = crs_frame_size(len);
	uint64_t off = pub->pos & pub->mask;
	/* Everything unusual in one test: the cached limits say whether
	 * demand and room allow it (pub_recompute refreshes them). */
	if (__builtin_expect(pub->claimed || pub->state != PUB_CONNECTED ||
				     len > pub->max_message ||
				     pub->seq >= pub->credit_limit ||
				     ring_end(pub->pos, frame) >
					     pub->room_limit ||
				     ring_wraps(off, frame, pub->ring_size) ||
				     pub->mode == CRS_MODE_REPLAY,
			     0))
		return claim_slow(pub, len, buf);
	pub->claim_pos = pub->pos;
	pub->claim_len = len;
	pub->claimed = 1;
	*buf = pub->ring + ring_payload_offset(pub->mask, pub->pos);
	return 0;
}

void pub_wake_all(struct crs_pub *pub)
{
	pub->signal++;
	/* Step c of park.h: W changes before the wake, so a subscriber
	 * that sleeps on the old value returns at once. The release pairs
	 * with the acquire load of data_signal in sub_announce(). */
	crs_store_release(&pub->hdr->signal.data_signal, pub->signal);
	ipc_futex_wake(&pub->hdr->signal.data_signal, INT_MAX);
	crs_store_relaxed(&pub->hdr->stats.wakes,
			  crs_load_relaxed(&pub->hdr->stats.wakes) + 1);
}

/* Subscriber k of the active list announced that it sleeps on the
 * current signal: is a wake due? Not if it has consumed everything
 * committed (it read this message before it parked: nothing to wake it
 * for), and not if we woke it before while it was behind and it has
 * consumed nothing since. An honest subscriber woken while behind
 * consumes up to what was committed before that wake, and publishes it
 * (at its release or in sub_idle) before it parks again; if it cannot
 * (no demand, its epoch ended), only its own request (after which it
 * looks again itself) or a terminal signal (which wakes everyone
 * unconditionally) can give it work. A park word rewritten at every
 * commit by a hostile peer thus costs one wake, not one per commit. */
static int wake_due(struct crs_pub *pub, int k)
{
	struct pub_slot *s = &pub->slots[pub->active[k]];
	/* Orders the load of the park word before the load of consumed:
	 * pairs with the full fence in sub_publish(), which comes after
	 * its store of consumed and before a later announcement. */
	crs_fence_acquire();
	uint64_t cons = crs_load_relaxed(&s->ctl->consumed);
	if (cons >= pub->pos ||
	    (s->woke_gen == pub->slot_gen && s->woke_consumed == cons))
		return 0;
	s->woke_gen = pub->slot_gen;
	s->woke_consumed = cons;
	return 1;
}

/* wake_if_parked's slow path, from park word i on (w: its value, with
 * a flag set): fence if asked, then wake if one sleeps on the signal. */
static __attribute__((noinline)) void wake_parked_from(struct crs_pub *pub,
						       int i, uint64_t w)
{
	int fenced = pub->fences;
	for (;;) {
		if ((w & CRS_PARK_FENCE) && !fenced) {
			/* Asked for (park.h): orders the header store of
			 * the commit before the loads of the park words
			 * from here on; pairs with the fence in
			 * park_begin() after sub_announce(). */
			crs_fence_full();
			fenced = 1;
			w = crs_load_relaxed(pub->parked[i]);
		}
		if ((w & CRS_PARK_ASLEEP) && (uint32_t)w == pub->signal &&
		    wake_due(pub, i)) {
			pub_wake_all(pub);
			return;
		}
		if (++i == pub->nparked)
			return;
		w = crs_load_relaxed(pub->parked[i]);
	}
}

/* After a commit: wake subscribers parked on the current signal value. */
static inline void wake_if_parked(struct crs_pub *pub)
{
	/* Orders the header store of the commit before the loads of the
	 * park words: pairs with the fence in park_begin() after
	 * sub_announce(). Registered for membarrier, a compiler fence: a
	 * word that needs the order carries CRS_PARK_FENCE, and one
	 * without it is covered by the membarrier() its subscriber runs
	 * before relying on the fence (park.h). */
	park_waker_fence(pub->fences);
	for (int i = 0; i < pub->nparked; i++) {
		uint64_t w = crs_load_relaxed(pub->parked[i]);
		if (__builtin_expect(w >> 32 != 0, 0)) {
			wake_parked_from(pub, i, w);
			return;
		}
	}
}

/* Every PUB_SERVE_EVERY commits: mirror the figures, and serve if due.
 * Busy publishers look at the clock every PUB_SERVE_EVERY commits; slow
 * ones (a millisecond or more between looks) at every commit, so
 * newcomers never wait for 16 more. */
static __attribute__((noinline, cold)) void commit_tick(struct crs_pub *pub)
{
	pub_mirror(pub);
	int64_t last = pub->next_serve_ns;
	int64_t now = serve_if_due(pub);
	pub->until_serve = now < last ? PUB_SERVE_EVERY : 1;
}

/* Retention marks (replay with an age bound) and deferred frames. */
static __attribute__((noinline, cold)) void commit_note(struct crs_pub *pub)
{
	if (pub->retain.marks)
		crs_retain_note(&pub->retain, pub->seq - 1, pub_now(pub));
	if (pub->more)
		crs_pub_flush(pub);
}

static inline int pub_commit(struct crs_pub *pub, size_t len, int more)
{
	if (__builtin_expect(!pub->claimed || len > pub->claim_len, 0))
		return -EINVAL;
	uint64_t pos = pub->claim_pos;
	uint64_t next = pos + crs_frame_size(len);
	if (more && !pub->more) {
		/* The first deferred frame: its header is stored last, at
		 * the flush; readers stop at it until then, also at the
		 * frames behind it whose headers are stored now. */
		pub->more = 1;
		pub->more_pos = pos;
		pub->more_word = crs_frame_word(pos, (uint32_t)len);
		ring_clear(pub->ring, pub->mask, next);
	} else {
		ring_commit(pub->ring, pub->mask, pos, next,
			    crs_frame_word(pos, (uint32_t)len));
	}
	pub->pos = next;
	pub->claimed = 0;
	pub->seq++;
	pub->bytes += len;
	if (more) {
		pub->more_count++;
		pub->more_bytes += len;
		return 0;
	}
	if (__builtin_expect(pub->retain.marks != NULL || pub->more, 0))
		commit_note(pub);
	wake_if_parked(pub);
	if (__builtin_expect(--pub->until_serve == 0, 0))
		commit_tick(pub);
	return 0;
}

int crs_pub_commit(crs_pub *pub, size_t len)
{
	return pub_commit(pub, len, 0);
}

int crs_pub_commit_more(crs_pub *pub, size_t len)
{
	/* Replay mode walks its own headers to keep retention: no frame
	 * may stay without one there. */
	return pub_commit(pub, len, pub->mode != CRS_MODE_REPLAY);
}

int crs_pub_flush(crs_pub *pub)
{
	if (!pub->more)
		return 0;
	/* After the headers of every frame behind it (ring.h). */
	ring_publish(pub->ring, pub->mask, pub->more_pos, pub->more_word);
	pub->more = 0;
	uint64_t n = pub->more_count;
	pub->more_count = pub->more_bytes = 0;
	wake_if_parked(pub);
	pub_mirror(pub);
	if (--pub->until_serve == 0)
		commit_tick(pub);
	return (int)(n < INT32_MAX ? n : INT32_MAX);
}

void crs_pub_abort(crs_pub *pub)
{
	pub->claimed = 0;
}

static int publish_copy(struct crs_pub *pub, const void *data, size_t len)
{
	void *buf;
	int err = crs_pub_claim(pub, len, &buf);
	if (err)
		return err;
	if (len)
		memcpy(buf, data, len);
	return crs_pub_commit(pub, len);
}

static void count_drop(struct crs_pub *pub)
{
	crs_store_relaxed(&pub->hdr->stats.dropped,
			  crs_load_relaxed(&pub->hdr->stats.dropped) + 1);
}

/* LATEST: send the kept message if there is demand and room now. */
void pub_flush_latest(struct crs_pub *pub)
{
	crs_pub_flush(pub); /* deferred frames first, then the kept one */
	if (pub->latest_held &&
	    publish_copy(pub, pub->latest, pub->latest_len) == 0)
		pub->latest_held = 0;
}

int crs_pub_offer(crs_pub *pub, const void *data, size_t len)
{
	if (len > pub->max_message)
		return -EMSGSIZE;
	if (pub->state != PUB_CONNECTED)
		return pub->state == PUB_TERMINATED ? -ESHUTDOWN : -ENOTCONN;
	pub_flush_latest(pub);
	int err = pub->latest_held ? -CRS_ENODEMAND
				   : publish_copy(pub, data, len);
	if (err != -CRS_ENODEMAND && err != -CRS_ENOROOM)
		return err;
	switch (pub->overflow) {
	case CRS_OVERFLOW_ERROR:
		crs_pub_error(pub, ENOBUFS,
			      err == -CRS_ENOROOM
				      ? "publisher overflow: ring full"
				      : "publisher overflow: no demand");
		return err;
	case CRS_OVERFLOW_DROP:
		count_drop(pub);
		return 0;
	case CRS_OVERFLOW_LATEST:
		if (pub->latest_held)
			count_drop(pub); /* replaced by a newer one */
		memcpy(pub->latest, data, len);
		pub->latest_len = len;
		pub->latest_held = 1;
		return 0;
	default:
		while (err == -CRS_ENODEMAND || err == -CRS_ENOROOM) {
			err = crs_pub_wait(pub, len, -1);
			if (!err)
				err = publish_copy(pub, data, len);
		}
		return err;
	}
}

uint64_t crs_pub_dropped(const crs_pub *pub)
{
	return crs_load_relaxed(&pub->hdr->stats.dropped);
}

uint64_t crs_pub_demand(crs_pub *pub)
{
	pub_recompute(pub);
	return crs_credit_outstanding(pub->credit_limit, pub->seq);
}

int crs_pub_serve(crs_pub *pub)
{
	int n = pub_serve(pub);
	pub_flush_latest(pub);
	if (n >= 0)
		pub_recompute(pub);
	return n < 0 ? n : pub->nactive;
}

int crs_pub_fd(const crs_pub *pub)
{
	return pub->ep;
}

int crs_pub_subscribers(const crs_pub *pub)
{
	return pub->nactive;
}

void pub_forget_slots(struct ipc_waitset *ws, uint64_t base)
{
	for (uint32_t s = 0; s < CRS_SUBSCRIBERS_MAX; s++)
		ipc_waitset_forget(ws, base + 1 + s);
}

int pub_announce(struct crs_pub *pub, struct ipc_waitset *ws, uint64_t base,
		 const uint32_t *progress, uint32_t *armed_gen)
{
	/* A slot that was dropped and refilled may sit at the same address
	 * with the same value, but it is another memfd: never keep a wait
	 * armed across a change of subscribers. */
	if (*armed_gen != pub->slot_gen) {
		pub_forget_slots(ws, base);
		*armed_gen = pub->slot_gen;
	}
	/* Read by sub_publish() after it stored new demand. */
	if (pub->parkers++ == 0)
		crs_store_relaxed(&pub->hdr->signal.pub_parked, 1);
	int how = 0;
	if (ipc_waitset_poll(ws, base, pub->ep, POLLIN))
		how |= PARK_NAP;
	for (uint32_t s = 0; s < CRS_SUBSCRIBERS_MAX; s++) {
		uint64_t key = base + 1 + s;
		if (s < pub->max_subscribers && pub->slots[s].used) {
			if (ipc_waitset_futex(ws, key,
					      &pub->slots[s].ctl->progress,
					      progress[s]))
				how |= PARK_NAP;
		} else {
			ipc_waitset_forget(ws, key);
		}
	}
	return how;
}

void pub_withdraw(struct crs_pub *pub)
{
	if (pub->parkers > 0 && --pub->parkers == 0)
		crs_store_relaxed(&pub->hdr->signal.pub_parked, 0);
}

void pub_progress(const struct crs_pub *pub, uint32_t *progress)
{
	for (uint32_t s = 0; s < pub->max_subscribers; s++)
		/* Pairs with the release increment in sub_publish(). */
		progress[s] = pub->slots[s].used
				      ? crs_load_acquire(&pub->slots[s].ctl->progress)
				      : 0;
}

/* A blocking wait of the publisher: park.h over this one publisher,
 * until ready(pub, arg) or until the subscriber set changes (the words
 * we would sleep on may be gone: the caller's loop looks again). */
struct pub_wait {
	struct crs_pub *pub;
	int (*ready)(struct crs_pub *, uint64_t);
	uint64_t arg;
	uint32_t gen; /* slot_gen when the wait began */
	uint32_t progress[CRS_SUBSCRIBERS_MAX];
};

static int wait_announce(void *ctx, struct ipc_waitset *ws)
{
	struct pub_wait *w = ctx;
	pub_progress(w->pub, w->progress);
	return pub_announce(w->pub, ws, 0, w->progress, &w->pub->ws_gen);
}

static int wait_has_work(void *ctx)
{
	struct pub_wait *w = ctx;
	return w->ready(w->pub, w->arg) || w->gen != w->pub->slot_gen;
}

static void wait_withdraw(void *ctx)
{
	pub_withdraw(((struct pub_wait *)ctx)->pub);
}

static const struct park_hooks wait_hooks = {
	.announce = wait_announce,
	.has_work = wait_has_work,
	.withdraw = wait_withdraw,
};

/* Sleep until a subscriber's words change, a control fd is ready, or
 * the deadline. Returns 0 or -errno (not -EINTR: signals look again). */
static int pub_park(struct crs_pub *pub,
		    int (*ready)(struct crs_pub *, uint64_t), uint64_t arg,
		    int64_t deadline)
{
	struct pub_wait w = {
		.pub = pub, .ready = ready, .arg = arg, .gen = pub->slot_gen
	};
	uint64_t fired[CRS_SUBSCRIBERS_MAX + 1];
	if (pub->untethered_ns) { /* wake up to evict in time */
		int64_t check = ipc_now_ns() + pub->untethered_ns / 4;
		if (check < deadline)
			deadline = check;
	}
	int n = park_wait(&wait_hooks, &w, pub->ws, deadline, fired,
			  CRS_SUBSCRIBERS_MAX + 1);
	for (int k = 0; k < n; k++)
		if (fired[k] == 0)
			pub_serve(pub);
	return n < 0 && n != -EINTR ? n : 0;
}

/* Generic wait loop: serve, test, park; until ready or the deadline. */
static int pub_wait_for(struct crs_pub *pub,
			int (*ready)(struct crs_pub *, uint64_t), uint64_t arg,
			int timeout_ms)
{
	int64_t deadline = ipc_deadline(timeout_ms);
	int64_t spin_until = ipc_now_ns() + pub->spin_ns;
	for (;;) {
		int64_t now = ipc_now_ns();
		if (now >= pub->next_serve_ns)
			pub_serve(pub);
		pub_flush_latest(pub);
		if (ready(pub, arg))
			return 0;
		if (now >= deadline)
			return -ETIMEDOUT;
		if (now < spin_until)
			continue; /* demand usually returns within microseconds */
		int r = pub_park(pub, ready, arg, deadline);
		if (r != 0)
			return r;
	}
}

static int ready_claim(struct crs_pub *pub, uint64_t len)
{
	uint64_t pad;
	if (pub->state != PUB_CONNECTED)
		return 0; /* autoConnect pending: serving will connect */
	pub_recompute(pub);
	return pub_check(pub, claim_need(pub, crs_frame_size(len), &pad)) == 0;
}

int crs_pub_wait(crs_pub *pub, size_t len, int timeout_ms)
{
	if (pub->state == PUB_TERMINATED)
		return -ESHUTDOWN;
	/* Unconnected: wait only if serving can connect us (autoConnect
	 * not fired yet); nobody else can call crs_pub_connect meanwhile. */
	if (pub->state != PUB_CONNECTED && pub->auto_connect < 0)
		return -ENOTCONN;
	if (len > pub->max_message)
		return -EMSGSIZE;
	return pub_wait_for(pub, ready_claim, len, timeout_ms);
}

static int ready_subscribers(struct crs_pub *pub, uint64_t n)
{
	pub_recompute(pub);
	return (uint64_t)pub->nactive >= n;
}

int crs_pub_wait_subscribers(crs_pub *pub, int n, int timeout_ms)
{
	return pub_wait_for(pub, ready_subscribers, (uint64_t)(n < 0 ? 0 : n),
			    timeout_ms);
}

static int ready_consumed(struct crs_pub *pub, uint64_t unused)
{
	(void)unused;
	pub_recompute(pub);
	for (uint32_t i = 0; i < pub->max_subscribers; i++) {
		const struct pub_slot *s = &pub->slots[i];
		uint64_t end = s->end_pos < pub->pos ? s->end_pos : pub->pos;
		if (s->used && s->consumed < end)
			return 0;
	}
	return 1;
}

int crs_pub_wait_consumed(crs_pub *pub, int timeout_ms)
{
	return pub_wait_for(pub, ready_consumed, 0, timeout_ms);
}

void crs_pub_close(crs_pub *pub)
{
	if (!pub)
		return;
	pub_close_epochs(pub);
	crs_store_relaxed(&pub->hdr->stats.state, (uint32_t)CRS_STATS_CLOSED);
	/* Unlink first so no new subscriber finds a stream going away. */
	ipc_unlink_at(pub->paths.dir.fd, pub->paths.sock);
	ipc_unlink_at(pub->paths.dir.fd, pub->paths.lock);
	pub_drop_all(pub);
	ipc_close(pub->listen_fd);
	ipc_close(pub->ep);
	ipc_waitset_free(pub->ws);
	ipc_unmap(pub->hdr, pub->data_size);
	ipc_close(pub->data_fd);
	ipc_close(pub->lock_fd);
	crs_paths_close(&pub->paths);
	crs_retain_free(&pub->retain);
	free(pub->latest);
	free(pub);
}
