/*
 * pub.c - the publisher's API, on top of its three parts (pub.h): stream
 * creation and closing, claim and commit (the hot part's fast paths,
 * inlined from pubring.h, and their slow paths), offer and LATEST,
 * epochs and terminal signals (epoch.c does them), and blocking waits.
 *
 * Wakeups follow park.h. As a waker, commit wakes parked subscribers
 * (pubring.h). As a parker, this file gives its hooks (pub_announce,
 * pub_withdraw) and the blocking waits (pub_wait_for).
 */
#include <errno.h>
#include <fcntl.h>
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
#include "handle.h"
#include "ipc/clock.h"
#include "ipc/epoll.h"
#include "ipc/futex.h"
#include "ipc/memfd.h"
#include "ipc/rundir.h"
#include "ipc/sock.h"
#include "ipc/waitset.h"
#include "park.h"
#include "pub.h"

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
	struct crs_seg_header *h = &pub->ring.hdr->seg;
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
	h->flags = CRS_SEG_PUB_FENCE_ASK |
		   (pub->ring.fences ? CRS_SEG_PUB_FENCES : 0);
	h->pub_pid = getpid();
	h->pub_uid = getuid();
	h->created_ns = (uint64_t)now.tv_sec * 1000000000 +
			(uint64_t)now.tv_nsec;
	strlcpy(h->name, name, sizeof(h->name));
	h->stream_id = stream_id_new(h->created_ns);
}

/* Bind the stream's socket, replacing one left by a dead publisher. We
 * hold the lock, so any socket file there is stale. */
static int listen_on(struct crs_pub *pub)
{
	const struct name_paths *p = &pub->paths;
	int fd = ipc_sock_listen(p->dir.fd, p->dir.path, p->sock);
	if (fd == -EADDRINUSE) {
		ipc_unlink_at(p->dir.fd, p->sock);
		fd = ipc_sock_listen(p->dir.fd, p->dir.path, p->sock);
	}
	if (fd < 0)
		errmsg_set(fd, "cannot listen on %s/%s: %s", p->dir.path,
			   p->sock, crs_strerror(fd));
	return fd;
}

/* A live publisher owns the name: say which process. */
static int pub_lock_error(const struct crs_pub *pub, const char *name, int err)
{
	const struct name_paths *p = &pub->paths;
	if (err != -EEXIST)
		return errmsg_set(err, "cannot take the lock %s/%s: %s",
				  p->dir.path, p->lock, crs_strerror(err));
	int owner = ipc_lock_owner(p->dir.fd, p->lock);
	if (owner)
		return errmsg_set(err,
				  "stream '%s' is already published by "
				  "pid %d (lock %s/%s)",
				  name, owner, p->dir.path, p->lock);
	return errmsg_set(err,
			  "stream '%s' is already published by a live "
			  "process (lock %s/%s)",
			  name, p->dir.path, p->lock);
}

static int pub_setup(struct crs_pub *pub, const char *name,
		     struct crs_pub_opts *o)
{
	int err = name_paths_for(name, 1, &pub->paths);
	if (err)
		return err;
	pub->lock_fd = ipc_lock_take(pub->paths.dir.fd, pub->paths.lock);
	if (pub->lock_fd < 0)
		return pub_lock_error(pub, name, pub->lock_fd);
	int fences = ipc_membarrier_register() != 0;
	pub->data_size = CRS_RING_OFFSET + o->ring_bytes;
	pub->data_fd = ipc_memfd_create(name, pub->data_size);
	if (pub->data_fd < 0)
		return pub->data_fd;
	void *map;
	err = ipc_map(pub->data_fd, pub->data_size, 1, &map);
	if (err)
		return err;
	ipc_prefault(map, pub->data_size, 1);
	pubring_init(&pub->ring, map, o->ring_bytes, o->max_message,
		     o->mode == CRS_MODE_REPLAY, fences);
	pub->overflow = o->overflow;
	pub->spin_ns = spin_budget_ns(o->spin_us);
	err = epoch_init(&pub->epoch, &pub->ring, o);
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
	err = control_init(&pub->control, &pub->ring, &pub->epoch, o,
			   pub->data_fd, pub->data_size, pub->listen_fd,
			   pub->ep);
	if (err)
		return err;
	epoch_start(&pub->epoch);
	return 0;
}

/* The name this publisher creates: name itself, or with o->shared a
 * fresh member name NAME~<8 hex digits> (name.h). Member names are made
 * here only. */
static int shared_name(const char *name, const struct crs_pub_opts *o,
		       char *out, size_t size)
{
	int err = crs_name_check(name);
	if (err)
		return err;
	if (name_member(name))
		return errmsg_set(-EINVAL,
				  "'%s' is a member name of a "
				  "shared stream; publish with "
				  "crs_pub_opts.shared instead",
				  name);
	if (!o->shared) {
		strlcpy(out, name, size);
		return 0;
	}
	if (strlen(name) > CRS_NAME_MAX - CRS_MEMBER_SUFFIX)
		return errmsg_set(-EINVAL,
				  "shared stream name '%s' is longer "
				  "than %d bytes",
				  name, CRS_NAME_MAX - CRS_MEMBER_SUFFIX);
	uint32_t id = (uint32_t)stream_id_new((uint64_t)ipc_now_ns());
	snprintf(out, size, "%s~%08x", name, id);
	return 0;
}

/* Mark name as shared (the file NAME~), or, for a plain stream, no
 * longer shared: a subscriber opening name then merges the members, or
 * reads this publisher alone. */
static int shared_mark(struct crs_pub *pub, const char *name, int shared)
{
	char marker[CRS_NAME_MAX + 2];
	snprintf(marker, sizeof(marker), "%s~", name);
	if (!shared) {
		ipc_unlink_at(pub->paths.dir.fd, marker);
		return 0;
	}
	int fd = openat(pub->paths.dir.fd, marker,
			O_WRONLY | O_CREAT | O_CLOEXEC | O_NOFOLLOW, 0644);
	if (fd < 0) {
		int err = -errno;
		return errmsg_set(err, "cannot create %s/%s: %s",
				  pub->paths.dir.path, marker,
				  crs_strerror(err));
	}
	close(fd);
	return 0;
}

/* Remove the sockets and locks that dead publishers of shared stream
 * name left behind: nobody publishes a member name again, so without
 * this they would pile up for good, each looked at by every merged
 * subscriber. Only members with a socket, and only under the member's
 * own lock: a starting publisher creates its lock file before it locks
 * it, but binds its socket only after. Best effort: what is left here
 * is removed by the next one. */
static void shared_sweep(const struct crs_pub *pub, const char *name)
{
	enum { SIZE = CRS_NAME_MAX + 1 };
	int dirfd = pub->paths.dir.fd;
	size_t len = strlen(name);
	char *names;
	int n = ipc_dir_list_all(dirfd, ".sock", SIZE, &names);
	for (int i = 0; i < n; i++) {
		const char *member = names + (size_t)i * SIZE;
		if (name_member(member) != len || memcmp(member, name, len))
			continue;
		char sock[SIZE + 8], lock[SIZE + 8];
		snprintf(sock, sizeof(sock), "%s.sock", member);
		snprintf(lock, sizeof(lock), "%s.lock", member);
		int fd = ipc_lock_orphan(dirfd, lock);
		if (fd < 0)
			continue; /* live (ours too), or gone already */
		ipc_unlink_at(dirfd, sock);
		ipc_unlink_at(dirfd, lock);
		ipc_close(fd);
	}
	free(names);
}

int crs_pub_create(const char *name, const struct crs_pub_opts *opts,
		   crs_pub **out)
{
	errmsg_begin();
	struct crs_pub_opts o;
	if (opts)
		o = *opts;
	else
		crs_pub_opts_init(&o);
	int err = opts_check(&o);
	if (err)
		return errmsg_set(err,
				  "invalid crs_pub_opts for stream '%.64s'",
				  name ? name : "");
	struct crs_pub *pub = handle_alloc(sizeof(*pub));
	if (!pub)
		return errmsg_code(-ENOMEM);
	pub->paths.dir.fd = -1;
	pub->data_fd = pub->listen_fd = pub->lock_fd = pub->ep = -1;
	pub->ws_gen = UINT32_MAX;
	/* A shared stream: our own member stream under a name no plain
	 * name can take (merge.c reads them together). */
	char member[CRS_NAME_MAX + 1];
	err = shared_name(name, &o, member, sizeof(member));
	if (err) {
		free(pub);
		return err;
	}
	err = pub_setup(pub, member, &o);
	if (!err)
		err = shared_mark(pub, name, o.shared);
	if (err) {
		int owned = pub->lock_fd >= 0;
		if (pub->listen_fd >= 0)
			ipc_unlink_at(pub->paths.dir.fd, pub->paths.sock);
		ipc_close(pub->listen_fd);
		ipc_close(pub->ep);
		ipc_waitset_free(pub->ws);
		if (pub->ring.hdr)
			ipc_unmap(pub->ring.hdr, pub->data_size);
		ipc_close(pub->data_fd);
		if (owned)
			ipc_unlink_at(pub->paths.dir.fd, pub->paths.lock);
		ipc_close(pub->lock_fd);
		name_paths_close(&pub->paths);
		epoch_free(&pub->epoch);
		free(pub->latest);
		free(pub);
		return errmsg_code(err);
	}
	if (o.shared)
		shared_sweep(pub, name);
	*out = pub;
	return 0;
}

static int64_t serve_if_due(struct crs_pub *pub)
{
	int64_t now = ipc_now_ns();
	if (control_serve_due(&pub->control, now))
		control_serve(&pub->control);
	return now;
}

static int pub_refresh(struct crs_pub *pub, uint64_t need)
{
	serve_if_due(pub);
	control_recompute(&pub->control);
	return pubring_check(&pub->ring, need);
}

int crs_pub_flush(crs_pub *pub);

/* crs_pub_claim's slow path: not connected, a claim open, too long, no
 * demand or room in the cached limits, padding needed, or replay mode. */
static __attribute__((noinline, cold)) int claim_slow(struct crs_pub *pub,
						      size_t len, void **buf)
{
	struct pub_ring *r = &pub->ring;
	if (pubring_claim_open(r))
		return -EALREADY;
	if (!r->open)
		return pub_state_error(pub->epoch.state);
	if (len > r->max_message)
		return -EMSGSIZE;
	uint64_t pad;
	uint64_t need = pubring_need(r, len, &pad);
	if (pubring_check(r, need)) {
		/* Refused: what we deferred must go out first, or the
		 * demand and room we wait for could never come back. */
		crs_pub_flush(pub);
		int err = pub_refresh(pub, need);
		if (err) {
			shm_inc(err == -CRS_ENODEMAND ? &r->hdr->stats.no_demand
						      : &r->hdr->stats.no_room);
			return err;
		}
	}
	/* Replay: retained messages this frame will overwrite are gone. */
	epoch_overwrite(&pub->epoch, ring_end(r->pos, need));
	if (pad)
		pubring_pad(r, pad);
	*buf = pubring_take(r, len);
	pubring_limit_claims(r); /* a frame may start the next lap */
	return 0;
}

int crs_pub_claim(crs_pub *pub, size_t len, void **buf)
{
	if (__builtin_expect(pubring_claim(&pub->ring, len, buf), 0))
		return claim_slow(pub, len, buf);
	return 0;
}

/* The cold parts of a commit return 0 for the commit's caller: the hot
 * path ends in tail calls to them, so it needs no stack frame (fewer
 * stores behind the ring's; pubring.h says why that matters). */

/* Every PUB_SERVE_EVERY messages: zero the ring ahead, mirror the
 * figures, and serve if due.
 * Busy publishers look at the clock every PUB_SERVE_EVERY messages; slow
 * ones (a millisecond or more between looks) at every commit, so
 * newcomers never wait for 16 more. */
static __attribute__((noinline, cold)) int commit_tick(struct crs_pub *pub)
{
	pubring_clean_ahead(&pub->ring);
	int64_t last = pub->control.next_serve_ns;
	int64_t now = ipc_now_ns();
	if (control_serve_due(&pub->control, now))
		control_serve(&pub->control); /* mirrors them too */
	else
		pubring_mirror(&pub->ring);
	pubring_set_tick(&pub->ring, now < last ? PUB_SERVE_EVERY : 1);
	return 0;
}

/* Count a commit (or a flush), and tick every PUB_SERVE_EVERY. */
static inline int commit_count(struct crs_pub *pub)
{
	if (__builtin_expect(pubring_count(&pub->ring), 0))
		return commit_tick(pub);
	return 0;
}

/* Park word i has a flag set: wake if due. (No tick is: commit_limit
 * is at most tick_seq.) */
static __attribute__((noinline, cold)) int commit_wake(struct crs_pub *pub,
						       int i)
{
	struct pub_ring *r = &pub->ring;
	pubring_wake_from(r, i, shm_load_relaxed(r->parked[i]));
	return 0;
}

/* pubring_commit_slow: retention marks (replay with an age bound),
 * deferred frames to flush, a fence, a tick; then the rest of the
 * commit, in that order. */
static __attribute__((noinline, cold)) int commit_slow(struct crs_pub *pub)
{
	struct pub_ring *r = &pub->ring;
	if (r->notes)
		epoch_note(&pub->epoch);
	if (r->more)
		crs_pub_flush(pub);
	pubring_wake_if_parked(r);
	return commit_count(pub);
}

/* Inlined into both commits: gcc leaves it out of line once it has two
 * callers, a jump more per commit. */
static inline __attribute__((always_inline)) int
pub_commit(struct crs_pub *pub, size_t len, int more)
{
	struct pub_ring *r = &pub->ring;
	if (__builtin_expect(pubring_commit(r, len, more) != 0, 0))
		return -EINVAL;
	if (more)
		return 0; /* deferred: the flush does the rest */
	if (__builtin_expect(pubring_commit_slow(r), 0))
		return commit_slow(pub);
	/* Not fencing: commit_slow takes every commit that fences. */
	int i = pubring_parked_fenced(r, 0);
	if (__builtin_expect(i >= 0, 0))
		return commit_wake(pub, i);
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
	return pub_commit(pub, len, !pub->ring.replay);
}

int crs_pub_flush(crs_pub *pub)
{
	int n = pubring_flush(&pub->ring);
	if (n)
		commit_count(pub); /* its messages count like commits */
	return n;
}

void crs_pub_abort(crs_pub *pub)
{
	pubring_abort(&pub->ring);
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
	shm_inc(&pub->ring.hdr->stats.dropped);
}

/* LATEST: send the kept message if there is demand and room now. */
static void flush_latest(struct crs_pub *pub)
{
	crs_pub_flush(pub); /* deferred frames first, then the kept one */
	if (pub->latest_held &&
	    publish_copy(pub, pub->latest, pub->latest_len) == 0)
		pub->latest_held = 0;
}

/* An epoch ended: the LATEST message kept was never sent in it. */
static void drop_latest(struct crs_pub *pub)
{
	if (pub->latest_held) {
		pub->latest_held = 0;
		count_drop(pub);
	}
}

int crs_pub_offer(crs_pub *pub, const void *data, size_t len)
{
	if (len > pub->ring.max_message)
		return -EMSGSIZE;
	if (!pub->ring.open)
		return pub_state_error(pub->epoch.state);
	flush_latest(pub);
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
	return shm_load_relaxed(&pub->ring.hdr->stats.dropped);
}

/* ---- epochs (epoch.c) ------------------------------------------------- */

int64_t crs_pub_connect(crs_pub *pub)
{
	return (int64_t)epoch_connect(&pub->epoch);
}

int64_t crs_pub_epoch(const crs_pub *pub)
{
	return (int64_t)pub->epoch.epoch;
}

int crs_pub_complete(crs_pub *pub)
{
	int err = epoch_terminate(&pub->epoch, CRS_TERM_COMPLETE, 0, NULL);
	if (!err)
		drop_latest(pub);
	return err;
}

int crs_pub_error(crs_pub *pub, int code, const char *message)
{
	if (code <= 0)
		return -EINVAL;
	int err = epoch_terminate(&pub->epoch, CRS_TERM_ERROR, code, message);
	if (!err)
		drop_latest(pub);
	return err;
}

int crs_pub_disconnect(crs_pub *pub, int64_t epoch)
{
	if (epoch_disconnect(&pub->epoch, epoch))
		drop_latest(pub);
	return 0;
}

/* ---- control (serve.c) ------------------------------------------------ */

uint64_t crs_pub_demand(crs_pub *pub)
{
	control_recompute(&pub->control);
	return credit_outstanding(pub->ring.credit_limit, pub->ring.seq);
}

int crs_pub_serve(crs_pub *pub)
{
	int n = control_serve(&pub->control);
	flush_latest(pub);
	if (n >= 0)
		control_recompute(&pub->control);
	return n < 0 ? n : pub->control.nactive;
}

int crs_pub_fd(const crs_pub *pub)
{
	return pub->ep;
}

int crs_pub_subscribers(const crs_pub *pub)
{
	return pub->control.nactive;
}

/* ---- for loop.c, and the waits ---------------------------------------- */

void pub_serve_step(struct crs_pub *pub, int force)
{
	if (force || control_serve_due(&pub->control, ipc_now_ns()))
		control_serve(&pub->control);
	flush_latest(pub);
}

uint32_t pub_slot_gen(const struct crs_pub *pub)
{
	return pub->control.slot_gen;
}

void pub_progress(const struct crs_pub *pub, uint32_t *progress)
{
	control_progress(&pub->control, progress);
}

int pub_progress_changed(const struct crs_pub *pub, const uint32_t *seen)
{
	return control_progress_changed(&pub->control, seen);
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
	if (*armed_gen != pub_slot_gen(pub)) {
		pub_forget_slots(ws, base);
		*armed_gen = pub_slot_gen(pub);
	}
	/* Read by sub_publish() after it stored new demand. */
	if (pub->parkers++ == 0)
		shm_store_relaxed(&pub->ring.hdr->signal.pub_parked, 1);
	return control_arm(&pub->control, ws, base, progress);
}

void pub_withdraw(struct crs_pub *pub)
{
	if (pub->parkers > 0 && --pub->parkers == 0)
		shm_store_relaxed(&pub->ring.hdr->signal.pub_parked, 0);
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
	return w->ready(w->pub, w->arg) || w->gen != pub_slot_gen(w->pub);
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
		.pub = pub, .ready = ready, .arg = arg, .gen = pub_slot_gen(pub)
	};
	uint64_t fired[CRS_SUBSCRIBERS_MAX + 1];
	int64_t untethered_ns = pub->control.untethered_ns;
	if (untethered_ns) { /* wake up to evict in time */
		int64_t check = ipc_now_ns() + untethered_ns / 4;
		if (check < deadline)
			deadline = check;
	}
	int n = park_wait(&wait_hooks, &w, pub->ws, deadline, fired,
			  CRS_SUBSCRIBERS_MAX + 1);
	for (int k = 0; k < n; k++)
		if (fired[k] == 0)
			control_serve(&pub->control);
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
		if (control_serve_due(&pub->control, now))
			control_serve(&pub->control);
		flush_latest(pub);
		if (ready(pub, arg))
			return 0;
		if (now >= deadline)
			return -ETIMEDOUT;
		if (now < spin_until)
			continue; /* demand usually returns within microseconds
				   */
		int r = pub_park(pub, ready, arg, deadline);
		if (r != 0)
			return r;
	}
}

static int ready_claim(struct crs_pub *pub, uint64_t len)
{
	uint64_t pad;
	if (!pub->ring.open)
		return 0; /* autoConnect pending: serving will connect */
	control_recompute(&pub->control);
	return pubring_check(&pub->ring, pubring_need(&pub->ring, len, &pad)) ==
	       0;
}

int crs_pub_wait(crs_pub *pub, size_t len, int timeout_ms)
{
	int state = pub->epoch.state;
	/* Unconnected: wait only if serving can connect us (autoConnect
	 * not fired yet); nobody else can call crs_pub_connect meanwhile. */
	if (state == PUB_TERMINATED ||
	    (state != PUB_CONNECTED && pub->epoch.auto_connect < 0))
		return pub_state_error(state);
	if (len > pub->ring.max_message)
		return -EMSGSIZE;
	return pub_wait_for(pub, ready_claim, len, timeout_ms);
}

static int ready_subscribers(struct crs_pub *pub, uint64_t n)
{
	control_recompute(&pub->control);
	return (uint64_t)pub->control.nactive >= n;
}

int crs_pub_wait_subscribers(crs_pub *pub, int n, int timeout_ms)
{
	return pub_wait_for(pub, ready_subscribers, (uint64_t)(n < 0 ? 0 : n),
			    timeout_ms);
}

static int ready_consumed(struct crs_pub *pub, uint64_t unused)
{
	(void)unused;
	control_recompute(&pub->control);
	return control_all_consumed(&pub->control);
}

int crs_pub_wait_consumed(crs_pub *pub, int timeout_ms)
{
	return pub_wait_for(pub, ready_consumed, 0, timeout_ms);
}

void crs_pub_close(crs_pub *pub)
{
	if (!pub)
		return;
	epoch_close(&pub->epoch);
	shm_store_relaxed(&pub->ring.hdr->stats.state,
			  (uint32_t)CRS_STATS_CLOSED);
	/* Unlink first so no new subscriber finds a stream going away. */
	ipc_unlink_at(pub->paths.dir.fd, pub->paths.sock);
	ipc_unlink_at(pub->paths.dir.fd, pub->paths.lock);
	control_close(&pub->control);
	ipc_close(pub->listen_fd);
	ipc_close(pub->ep);
	ipc_waitset_free(pub->ws);
	ipc_unmap(pub->ring.hdr, pub->data_size);
	ipc_close(pub->data_fd);
	ipc_close(pub->lock_fd);
	name_paths_close(&pub->paths);
	epoch_free(&pub->epoch);
	free(pub->latest);
	free(pub);
}
