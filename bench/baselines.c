/*
 * baselines.c - the throughput transfers without crs, run through the
 * same window protocol as crs (throughput.c):
 *
 *   bare-ring    SPSC ring of fixed slots in MAP_SHARED memory, head/tail
 *                counters on their own cache lines, each side caching the
 *                other's; written and read in place; no framing, no demand,
 *                no validation. Both spin. The practical limit.
 *   inband-ring  crs's frame format without crs: an 8-byte header word
 *                tag(pos) << 32 | len stored last (release) after zeroing
 *                the next header, payload padded to 8; the receiver polls
 *                the header word and publishes its position every ring/4
 *                and when idle. Both spin.
 *   aeron-excl, aeron-shared
 *                Aeron aeron:ipc, exclusive and concurrent publications
 *                (aeron.c; skipped unless built with the meson option aeron).
 *   pipe         write(2) / read(2) of whole messages, default pipe size
 *                (64 KiB). Both block in the kernel; two copies.
 *   unix-socket  the same over socketpair(AF_UNIX, SOCK_STREAM).
 *   zmq          ZeroMQ PUSH/PULL over ipc:// (when built with libzmq):
 *                zmq_send copies, the receiver reads zmq_msg_recv's
 *                message; each process also runs ZeroMQ's I/O thread.
 *                High-water marks keep about one ring of bytes queued.
 *                The receiver binds and the sender connects, so nothing
 *                the sender queues before the connection is lost, and
 *                the sender closes only after the receiver has the end
 *                marker: libzmq 4.3 can drop the last messages over
 *                ipc:// when the sender closes early, LINGER
 *                notwithstanding (libzmq issue 4660).
 *   pipe-fanout  one writer, one pipe per reader, every message written
 *                to each (fan-out baseline). All block.
 *
 * Senders fill a message in place (rings) or in a private buffer they then
 * hand over (pipe, socket, ZeroMQ); receivers read every byte (in place or
 * from their own buffer) and check the index words.
 */
#include <errno.h>
#include <fcntl.h>
#include <inttypes.h>
#include <stdlib.h>
#include <sys/socket.h>
#include <unistd.h>

#include "bench.h"

#ifdef HAVE_ZMQ
#include <zmq.h>
#endif

static inline void idle(const struct config *cfg)
{
	for (uint32_t i = 0; i < cfg->idle_pause; i++)
		cpu_relax();
}

/* Receiver epilogue shared by every baseline. */
static int recv_done(struct xfer *x, struct win *w, struct proc_rep *rep,
		     uint64_t seq, uint64_t sum, uint64_t bad, uint64_t empty)
{
	(void)x;
	bench_sink += sum;
	if (w->state == 1)
		win_close(w, seq);
	else if (w->state == 0 && !rep->err)
		rep_err(rep, EPROTO, "stream ended during the warm-up");
	rep->total = seq;
	rep->bad = bad;
	rep->empty = empty;
	return rep->err ? 1 : 0;
}

static int map_setup(struct xfer *x, size_t len)
{
	x->maplen = len;
	x->map = shared_alloc(len);
	return x->map ? 0 : -ENOMEM;
}

static void map_cleanup(struct xfer *x)
{
	shared_free(x->map, x->maplen);
	x->map = NULL;
}

/* ---- bare ring ------------------------------------------------------------ */

struct ring_ctl {
	_Alignas(64) _Atomic uint64_t head;  /* bare: slots written */
	_Alignas(64) _Atomic uint64_t tail;  /* bare: slots read; inband: pos */
	_Alignas(64) _Atomic uint64_t ended; /* sender done: total messages+1 */
};
#define RING_DATA 4096

static size_t bare_slot(size_t size)
{
	return (size + 63) & ~(size_t)63;
}

static int bare_setup(struct xfer *x)
{
	uint64_t nslots = x->cfg->ring_bytes / bare_slot(x->size);
	if (nslots < 2)
		return -EINVAL;
	return map_setup(x, RING_DATA + nslots * bare_slot(x->size));
}

static int bare_send(struct xfer *x)
{
	struct ring_ctl *c = (struct ring_ctl *)x->map;
	uint8_t *slots = x->map + RING_DATA;
	const size_t size = x->size, slot = bare_slot(size);
	const uint64_t nslots = x->cfg->ring_bytes / slot;
	struct win w;
	win_init(&w, x->ctl, 0, 0, size);
	uint64_t head = 0, tail = 0, full = 0, idx = 0;
	for (; tx_go(&w, head); head++) {
		while (head - tail >= nslots) {
			tail = atomic_load_explicit(&c->tail,
						    memory_order_acquire);
			if (head - tail >= nslots) {
				full++;
				cpu_relax();
			}
		}
		fill_msg(slots + idx * slot, size, head);
		if (++idx == nslots)
			idx = 0;
		atomic_store_explicit(&c->head, head + 1, memory_order_release);
	}
	atomic_store_explicit(&c->ended, head + 1, memory_order_release);
	x->ctl->rep[0].total = head;
	x->ctl->rep[0].refused_room = full;
	return 0;
}

static int bare_recv(struct xfer *x, int i)
{
	struct ring_ctl *c = (struct ring_ctl *)x->map;
	const uint8_t *slots = x->map + RING_DATA;
	const size_t size = x->size, slot = bare_slot(size);
	const uint64_t nslots = x->cfg->ring_bytes / slot;
	struct proc_rep *rep = &x->ctl->rep[i];
	struct win w;
	win_init(&w, x->ctl, i, x->warmup, size);
	uint64_t tail = 0, head = 0, idx = 0, sum = 0, bad = 0, empty = 0;
	int64_t deadline = now_ns() + WATCHDOG_NS;
	for (;;) {
		if (tail == head) {
			head = atomic_load_explicit(&c->head,
						    memory_order_acquire);
			if (tail == head) {
				uint64_t e = atomic_load_explicit(
					&c->ended, memory_order_acquire);
				if (e && tail == e - 1)
					break;
				if (e)
					continue; /* head moved meanwhile */
				if ((++empty & 0xfffff) == 0 &&
				    now_ns() > deadline) {
					rep_err(rep, ETIMEDOUT, "stuck");
					break;
				}
				idle(x->cfg);
				continue;
			}
		}
		if (!read_msg(slots + idx * slot, size, tail, &sum))
			bad++;
		if (++idx == nslots)
			idx = 0;
		atomic_store_explicit(&c->tail, ++tail, memory_order_release);
		rx_tick(&w, tail);
	}
	return recv_done(x, &w, rep, tail, sum, bad, empty);
}

/* ---- in-band ring --------------------------------------------------------- */

#define INBAND_PAD 0x80000000u

static inline uint64_t inband_word(uint64_t pos, uint32_t len_flags)
{
	return (uint64_t)((uint32_t)(pos >> 3) | 0x80000000u) << 32 | len_flags;
}

static int inband_setup(struct xfer *x)
{
	return map_setup(x, RING_DATA + x->cfg->ring_bytes);
}

static int inband_send(struct xfer *x)
{
	struct ring_ctl *c = (struct ring_ctl *)x->map;
	uint8_t *ring = x->map + RING_DATA;
	const uint64_t rsize = x->cfg->ring_bytes, mask = rsize - 1;
	const size_t size = x->size;
	const uint64_t frame = (8 + size + 7) & ~(uint64_t)7;
	struct win w;
	win_init(&w, x->ctl, 0, 0, size);
	uint64_t pos = 0, consumed = 0, full = 0, seq;
	for (seq = 0; tx_go(&w, seq); seq++) {
		uint64_t off = pos & mask;
		uint64_t pad = off + frame > rsize ? rsize - off : 0;
		while (pos + pad + frame + 8 > consumed + rsize) {
			consumed = atomic_load_explicit(&c->tail,
							memory_order_acquire);
			if (pos + pad + frame + 8 > consumed + rsize) {
				full++;
				cpu_relax();
			}
		}
		if (pad) {
			atomic_store_explicit((_Atomic uint64_t *)ring, 0,
					      memory_order_relaxed);
			atomic_store_explicit(
				(_Atomic uint64_t *)(ring + off),
				inband_word(pos, INBAND_PAD | (uint32_t)pad),
				memory_order_release);
			pos += pad;
			off = 0;
		}
		fill_msg(ring + off + 8, size, seq);
		atomic_store_explicit(
			(_Atomic uint64_t *)(ring + ((pos + frame) & mask)), 0,
			memory_order_relaxed);
		atomic_store_explicit((_Atomic uint64_t *)(ring + off),
				      inband_word(pos, (uint32_t)size),
				      memory_order_release);
		pos += frame;
	}
	atomic_store_explicit(&c->ended, seq + 1, memory_order_release);
	x->ctl->rep[0].total = seq;
	x->ctl->rep[0].refused_room = full;
	return 0;
}

static int inband_recv(struct xfer *x, int i)
{
	struct ring_ctl *c = (struct ring_ctl *)x->map;
	const uint8_t *ring = x->map + RING_DATA;
	const uint64_t rsize = x->cfg->ring_bytes, mask = rsize - 1;
	const size_t size = x->size;
	struct proc_rep *rep = &x->ctl->rep[i];
	struct win w;
	win_init(&w, x->ctl, i, x->warmup, size);
	uint64_t pos = 0, published = 0, seq = 0, sum = 0, bad = 0, empty = 0;
	int64_t deadline = now_ns() + WATCHDOG_NS;
	for (;;) {
		uint64_t wd = atomic_load_explicit(
			(const _Atomic uint64_t *)(ring + (pos & mask)),
			memory_order_acquire);
		if ((wd >> 32) != (inband_word(pos, 0) >> 32)) {
			if (pos != published) {
				atomic_store_explicit(&c->tail, pos,
						      memory_order_release);
				published = pos;
			}
			uint64_t e = atomic_load_explicit(&c->ended,
							  memory_order_acquire);
			if (e && seq == e - 1)
				break;
			if (e)
				continue;
			if ((++empty & 0xfffff) == 0 && now_ns() > deadline) {
				rep_err(rep, ETIMEDOUT, "stuck");
				break;
			}
			idle(x->cfg);
			continue;
		}
		uint32_t lf = (uint32_t)wd;
		if (lf & INBAND_PAD) {
			pos += lf & ~INBAND_PAD;
			continue;
		}
		if (lf != size ||
		    !read_msg(ring + (pos & mask) + 8, size, seq, &sum))
			bad++;
		pos += (8 + size + 7) & ~(uint64_t)7;
		if (pos - published >= rsize / 4) {
			atomic_store_explicit(&c->tail, pos,
					      memory_order_release);
			published = pos;
		}
		rx_tick(&w, ++seq);
	}
	return recv_done(x, &w, rep, seq, sum, bad, empty);
}

/* ---- pipe, unix socket, pipe fan-out -------------------------------------
 * fds[2k] is receiver k+1's end, fds[2k+1] the sender's end of the same
 * channel. */

static int pipe_setup(struct xfer *x)
{
	for (int k = 0; k < x->nrecv; k++) {
		int p[2];
		if (pipe2(p, O_CLOEXEC) < 0)
			return -errno;
		x->fds[2 * k] = p[0];
		x->fds[2 * k + 1] = p[1];
	}
	return 0;
}

static int unix_setup(struct xfer *x)
{
	int p[2];
	if (socketpair(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0, p) < 0)
		return -errno;
	x->fds[0] = p[0];
	x->fds[1] = p[1];
	return 0;
}

/* Keep only fds[keep]; close the rest. */
static void keep_only(struct xfer *x, int keep)
{
	for (int i = 0; i < 2 * x->nrecv; i++)
		if (i != keep && x->fds[i] >= 0) {
			close(x->fds[i]);
			x->fds[i] = -1;
		}
}

static int write_all(int fd, const uint8_t *p, size_t n)
{
	while (n) {
		ssize_t w = write(fd, p, n);
		if (w < 0) {
			if (errno == EINTR)
				continue;
			return -errno;
		}
		p += w;
		n -= (size_t)w;
	}
	return 0;
}

/* 1: a whole message, 0: end of stream, < 0: error. */
static int read_all(int fd, uint8_t *p, size_t n)
{
	size_t got = 0;
	while (got < n) {
		ssize_t r = read(fd, p + got, n - got);
		if (r < 0) {
			if (errno == EINTR)
				continue;
			return -errno;
		}
		if (r == 0)
			return got ? -EPROTO : 0;
		got += (size_t)r;
	}
	return 1;
}

static int stream_send(struct xfer *x)
{
	struct proc_rep *rep = &x->ctl->rep[0];
	for (int k = 0; k < x->nrecv; k++) { /* the readers' ends */
		close(x->fds[2 * k]);
		x->fds[2 * k] = -1;
	}
	const size_t size = x->size;
	uint8_t *buf = malloc(size);
	if (!buf)
		return 1;
	struct win w;
	win_init(&w, x->ctl, 0, 0, size);
	uint64_t seq;
	int err = 0;
	for (seq = 0; !err && tx_go(&w, seq); seq++) {
		fill_msg(buf, size, seq);
		for (int k = 0; k < x->nrecv && !err; k++)
			err = write_all(x->fds[2 * k + 1], buf, size);
	}
	free(buf);
	rep->total = seq;
	if (err)
		rep_err(rep, err, "write: %s", strerror(-err));
	return err ? 1 : 0;
}

static int stream_recv(struct xfer *x, int i)
{
	struct proc_rep *rep = &x->ctl->rep[i];
	const int me = 2 * (i - 1);
	keep_only(x, me);
	const size_t size = x->size;
	uint8_t *buf = malloc(size);
	if (!buf)
		return 1;
	struct win w;
	win_init(&w, x->ctl, i, x->warmup, size);
	uint64_t seq = 0, sum = 0, bad = 0;
	for (;;) {
		int r = read_all(x->fds[me], buf, size);
		if (r <= 0) {
			if (r < 0)
				rep_err(rep, r, "read: %s", strerror(-r));
			break;
		}
		if (!read_msg(buf, size, seq, &sum))
			bad++;
		rx_tick(&w, ++seq);
	}
	free(buf);
	return recv_done(x, &w, rep, seq, sum, bad, 0);
}

/* The sender writes to fds[1] and the receiver reads fds[0]: the same
 * shape as a pipe, one socket pair. */
#define unix_send stream_send
#define unix_recv stream_recv

/* ---- ZeroMQ ------------------------------------------------------------- */

#ifdef HAVE_ZMQ
static int zmq_setup(struct xfer *x)
{
	snprintf(x->name, sizeof(x->name), "ipc://%s/z%u", x->cfg->tmpdir,
		 x->id);
	return 0;
}

static void zmq_cleanup(struct xfer *x)
{
	unlink(x->name + strlen("ipc://"));
}

static int zmq_hwm(const struct xfer *x)
{
	uint64_t n = x->cfg->ring_bytes / x->size;
	return n < 4 ? 4 : n > 1000 ? 1000 : (int)n;
}

static int zmq_send_side(struct xfer *x)
{
	struct proc_rep *rep = &x->ctl->rep[0];
	void *ctx = zmq_ctx_new();
	void *s = zmq_socket(ctx, ZMQ_PUSH);
	int hwm = zmq_hwm(x);
	zmq_setsockopt(s, ZMQ_SNDHWM, &hwm, sizeof(hwm));
	int ivl = 1; /* retry at once if the receiver has not bound yet */
	zmq_setsockopt(s, ZMQ_RECONNECT_IVL, &ivl, sizeof(ivl));
	int linger = -1; /* zmq_close delivers everything queued */
	zmq_setsockopt(s, ZMQ_LINGER, &linger, sizeof(linger));
	if (zmq_connect(s, x->name) != 0) {
		rep_err(rep, errno, "zmq_connect %s: %s", x->name,
			zmq_strerror(errno));
		zmq_close(s);
		zmq_ctx_term(ctx);
		return 1;
	}
	const size_t size = x->size;
	uint8_t *buf = malloc(size);
	struct win w;
	win_init(&w, x->ctl, 0, 0, size);
	uint64_t seq;
	int err = 0;
	for (seq = 0; buf && tx_go(&w, seq); seq++) {
		fill_msg(buf, size, seq);
		if (zmq_send(s, buf, size, 0) != (int)size) {
			err = errno;
			break;
		}
	}
	zmq_send(s, "", 0, 0); /* end of stream */
	free(buf);
	rep->total = seq;
	atomic_store(&x->ctl->nready, 1); /* all sent: total is final */
	int64_t give_up = now_ns() + 10000000000LL;
	while (!atomic_load(&x->ctl->nwoken) && now_ns() < give_up)
		sleep_ns(1000000); /* until the receiver has it all */
	if (err)
		rep_err(rep, err, "zmq_send: %s", zmq_strerror(err));
	zmq_close(s); /* linger: delivers what is queued */
	zmq_ctx_term(ctx);
	return err ? 1 : 0;
}

static int zmq_recv_side(struct xfer *x, int i)
{
	struct proc_rep *rep = &x->ctl->rep[i];
	void *ctx = zmq_ctx_new();
	void *s = zmq_socket(ctx, ZMQ_PULL);
	int hwm = zmq_hwm(x);
	zmq_setsockopt(s, ZMQ_RCVHWM, &hwm, sizeof(hwm));
	int tmo = 200; /* wake up now and then to see whether all came */
	zmq_setsockopt(s, ZMQ_RCVTIMEO, &tmo, sizeof(tmo));
	if (zmq_bind(s, x->name) != 0) {
		rep_err(rep, errno, "zmq_bind: %s", zmq_strerror(errno));
		zmq_close(s);
		zmq_ctx_term(ctx);
		return 1;
	}
	const size_t size = x->size;
	struct win w;
	win_init(&w, x->ctl, i, x->warmup, size);
	uint64_t seq = 0, sum = 0, bad = 0;
	zmq_msg_t m;
	zmq_msg_init(&m);
	int64_t all_sent_at = 0;
	for (;;) {
		int r = zmq_msg_recv(&m, s, 0);
		if (r < 0 && errno == EAGAIN) {
			/* The end marker should come; if the sender is done
			 * and it does not, count what arrived. */
			if (!atomic_load(&x->ctl->nready))
				continue;
			if (seq == x->ctl->rep[0].total)
				break;
			int64_t t = now_ns();
			if (!all_sent_at)
				all_sent_at = t;
			else if (t - all_sent_at > 2000000000LL) {
				rep_err(rep, EPROTO, "%" PRIu64 " of %" PRIu64
					" messages arrived (%" PRIu64 " out of "
					"order, first skip %" PRId64 ")", seq,
					x->ctl->rep[0].total, bad,
					rep->stamp[3]);
				break;
			}
			continue;
		}
		if (r < 0) {
			if (errno == EINTR)
				continue;
			rep_err(rep, errno, "zmq_msg_recv: %s",
				zmq_strerror(errno));
			break;
		}
		if (r == 0)
			break;
		if ((size_t)r != size ||
		    !read_msg(zmq_msg_data(&m), size, seq, &sum)) {
			if (!bad && (size_t)r >= 8)
				rep->stamp[3] = (int64_t)msg_index(
					zmq_msg_data(&m)) - (int64_t)seq;
			bad++;
		}
		rx_tick(&w, ++seq);
	}
	atomic_store(&x->ctl->nwoken, 1); /* the sender may close now */
	zmq_msg_close(&m);
	zmq_close(s);
	zmq_ctx_term(ctx);
	return recv_done(x, &w, rep, seq, sum, bad, 0);
}
#endif

const struct tp_scn base_tp_scns[] = {
	{ .name = "bare-ring", .kind = "baseline", .spins = 1, .mode = "both spin",
	  .desc = "SPSC ring of fixed slots (size rounded up to 64), "
		  "head/tail counters, in place, no framing, no demand",
	  .setup = bare_setup, .send = bare_send, .recv = bare_recv,
	  .cleanup = map_cleanup, .is_default = 1 },
	{ .name = "inband-ring", .kind = "baseline", .spins = 1, .mode = "both spin",
	  .desc = "crs's frame protocol (header word polled in the ring) "
		  "without API, demand or checks",
	  .setup = inband_setup, .send = inband_send, .recv = inband_recv,
	  .cleanup = map_cleanup, .is_default = 1 },
	{ .name = "aeron-excl", .kind = "baseline", .spins = 1,
	  .mode = "both spin, + media driver",
	  .desc = "Aeron aeron:ipc, exclusive publication: try_claim, fill, "
		  "commit (offer above max payload); subscription poll, "
		  "10 fragments",
	  .setup = IF_AERON(aeron_tp_setup), .send = IF_AERON(aeron_send_excl),
	  .recv = IF_AERON(aeron_recv), .is_default = 1, .needs_aeron = 1 },
	{ .name = "aeron-shared", .kind = "baseline", .spins = 1,
	  .mode = "both spin, + media driver",
	  .desc = "as aeron-excl with a concurrent (shared) publication",
	  .setup = IF_AERON(aeron_tp_setup),
	  .send = IF_AERON(aeron_send_shared), .recv = IF_AERON(aeron_recv),
	  .is_default = 1, .needs_aeron = 1 },
	{ .name = "pipe", .kind = "baseline", .mode = "both block (kernel)",
	  .desc = "write(2)/read(2) of whole messages through a pipe "
		  "(64 KiB default capacity): two copies",
	  .setup = pipe_setup, .send = stream_send, .recv = stream_recv,
	  .is_default = 1 },
	{ .name = "unix-socket", .kind = "baseline",
	  .mode = "both block (kernel)",
	  .desc = "write(2)/read(2) over socketpair(AF_UNIX, SOCK_STREAM): "
		  "two copies",
	  .setup = unix_setup, .send = unix_send, .recv = unix_recv,
	  .is_default = 1 },
#ifdef HAVE_ZMQ
	{ .name = "zmq", .kind = "baseline",
	  .mode = "both block; + 1 ZeroMQ I/O thread each",
	  .desc = "ZeroMQ PUSH/PULL over ipc://, zmq_send (copy) and "
		  "zmq_msg_recv; high-water mark about one ring",
	  .setup = zmq_setup, .send = zmq_send_side, .recv = zmq_recv_side,
	  .cleanup = zmq_cleanup, .is_default = 1, .needs_zmq = 1 },
#endif
	{ .name = "pipe-fanout", .kind = "baseline",
	  .mode = "all block (kernel)",
	  .desc = "fan-out baseline: one pipe per reader, the writer writes "
		  "every message to each",
	  .setup = pipe_setup, .send = stream_send, .recv = stream_recv,
	  .fan = 1, .is_default = 1 },
};
const int n_base_tp_scns = sizeof(base_tp_scns) / sizeof(base_tp_scns[0]);
