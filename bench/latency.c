/*
 * latency.c - ping-pong round trips between two processes, one channel
 * each way, for crs and the raw limits, spinning and blocking.
 *
 * Process A sends message i (fills every byte), waits for the echo and
 * reads it (every byte, index words checked); B reads each message and
 * answers with a message of the same size it fills itself. A times each
 * round trip with CLOCK_MONOTONIC (two clock reads, about 20-40 ns, are in
 * every figure) into a log-bucketed histogram (histo.c). The first
 * trips are a warm-up; a measurement stops after lat_trips round trips or
 * lat_secs, whichever comes first.
 *
 * Spinning (both processes busy-poll; each holds a CPU):
 *   raw-spin      a shared word followed by the payload in MAP_SHARED
 *                 memory, one region per direction: fill, store the word
 *                 (release); the peer spins on the word. At 32 B word and
 *                 payload share one cache line: the cache-line ping-pong.
 *   crs-spin      claim/commit and crs_sub_poll in a loop with a pause.
 *   aeron-spin    Aeron aeron:ipc, an exclusive publication each way,
 *                 poll with a fragment limit of 1 (aeron.c; skipped unless
 *                 built with the meson option aeron).
 * Blocking (both processes sleep in the kernel while waiting):
 *   raw-futex     as raw-spin, but the reader FUTEX_WAITs on the word at
 *                 once and the writer FUTEX_WAKEs after every store.
 *   raw-futex-ro  as raw-futex, but the reader waits through a read-only
 *                 view of the writer's word, as a crs subscriber waits on
 *                 its publisher's data_signal (the data segment is sealed
 *                 against writable mappings). The kernel's futex key
 *                 lookup tries a writable page first and takes its slow
 *                 path when that fails, on every wait.
 *   raw-uring, raw-uring-ro
 *                 as raw-futex and raw-futex-ro, but the reader sleeps in
 *                 io_uring: an IORING_OP_FUTEX_WAIT request, submitted and
 *                 waited for in one io_uring_enter, as crs's io_uring
 *                 engine slept before it set its ring up for one
 *                 thread (raw-uring-defer-ro). These are not limits but
 *                 the kernel's share of crs-block-uring. Not run by
 *                 default.
 *   raw-uring-defer-ro
 *                 as raw-uring-ro on a ring set up with SINGLE_ISSUER and
 *                 DEFER_TASKRUN (kernel 6.1+): the completion's task work
 *                 runs in the waiter's own io_uring_enter instead of
 *                 interrupting it, as crs's engine sets its ring up
 *                 where the kernel allows: what is left over it is
 *                 crs's own. Not run by default.
 *   raw-futex-timed-ro
 *                 as raw-futex-ro with a 100 ms timeout on every
 *                 FUTEX_WAIT: the floor of a wait outside io_uring that
 *                 looks at its publisher's liveness at each timeout (a
 *                 hrtimer armed and cancelled per sleep). Not run by
 *                 default.
 *   raw-waitv-ro  as raw-futex-ro, but the reader sleeps in futex_waitv
 *                 on two words of the read-only view: the writer's word
 *                 and one that never moves (the writer's liveness, in a
 *                 design where a dead publisher's futex word wakes its
 *                 subscribers: the cost of a wait outside io_uring that
 *                 needs no fd). Not run by default.
 *   crs-block-uring / crs-block-poll
 *                 crs_sub_wait with spin_us = -1 on both subscriptions
 *                 (sleep at once, no polling) and spin_us = -1 on both
 *                 publishers; the io_uring engine, or the poll/futex
 *                 fallback (CRS_NO_URING=1 in both processes).
 *   pipe, unix-socket, zmq
 *                 write/read of whole messages on two pipes, one
 *                 socketpair, or a ZeroMQ PAIR over ipc:// (plus ZeroMQ's
 *                 I/O thread in each process).
 */
#include <errno.h>
#include <fcntl.h>
#include <inttypes.h>
#include <limits.h>
#include <linux/futex.h>
#include <liburing.h>
#include <stdlib.h>
#include <sys/mman.h>
#include <sys/socket.h>
#include <sys/syscall.h>
#include <unistd.h>

#include "bench.h"
#include "crs/crs.h"

#ifdef HAVE_ZMQ
#include <zmq.h>
#endif

#define STOP_SEQ UINT64_MAX
#define EP_TIMEOUT_NS (30LL * 1000000000LL)

struct pp {
	const struct config *cfg;
	const struct lat_scn *sc;
	size_t size;
	unsigned id;
	struct ctl *ctl;
	struct histo *h; /* shared: A's round trips */
	char name[2][128];
	int fds[4];
	uint8_t *map;
	const uint8_t *view; /* map, or a read-only view of it (raw-*-ro) */
	size_t maplen, region;
};

/* How the reader of a raw ping-pong waits for the word. */
enum raw_wait { RAW_SPIN, RAW_FUTEX, RAW_URING, RAW_WAITV };

struct lat_scn {
	const char *name, *mode, *desc;
	int baseline, no_uring, is_default, needs_zmq, needs_aeron;
	enum raw_wait raw_wait; /* raw-*: how the reader waits */
	int raw_ro;		/* raw-*-ro: through a read-only view */
	unsigned uring_flags;	/* RAW_URING: io_uring_queue_init flags */
	int futex_timeout_ms;	/* RAW_FUTEX: a timeout on each wait (0: none) */
	int (*setup)(struct pp *p);
	void (*cleanup)(struct pp *p);
	void *(*open)(struct pp *p, int who);
	int (*send)(void *ep, uint64_t seq);
	int (*recv)(void *ep, uint64_t *seq); /* 1, or < 0 */
	void (*close)(void *ep);
};

/* ---- raw shared memory: spin and futex ------------------------------------ */

struct raw_ep {
	struct pp *p;
	_Atomic uint32_t *out_word;
	const _Atomic uint32_t *in_word;
	const _Atomic uint32_t *in_life; /* RAW_WAITV: never moves */
	uint8_t *out;
	const uint8_t *in;
	uint32_t sent, got;
	enum raw_wait wait;
	struct io_uring ring; /* RAW_URING */
};

static long futex(const _Atomic uint32_t *w, int op, uint32_t val)
{
	return syscall(SYS_futex, (const uint32_t *)w, op, val, NULL, NULL, 0);
}

/* RAW_FUTEX: FUTEX_WAIT while *w == v, for at most timeout_ms if > 0. */
static void raw_futex_wait(const _Atomic uint32_t *w, uint32_t v,
			   int timeout_ms)
{
	struct timespec ts = { .tv_sec = timeout_ms / 1000,
			       .tv_nsec = (long)(timeout_ms % 1000) * 1000000 };
	syscall(SYS_futex, (const uint32_t *)w, FUTEX_WAIT, v,
		timeout_ms > 0 ? &ts : NULL, NULL, 0);
}

/* raw-*-ro: the regions live in a memfd mapped twice, read-write for
 * the writer's side and read-only for the reader's, as crs maps a
 * publisher's data segment in its subscribers. */
static int raw_map_ro(struct pp *p)
{
	int fd = memfd_create("crs-bench-raw", MFD_CLOEXEC);
	if (fd < 0)
		return -errno;
	int err = 0;
	void *rw = MAP_FAILED, *ro = MAP_FAILED;
	if (ftruncate(fd, (off_t)p->maplen) != 0)
		err = -errno;
	if (!err)
		rw = mmap(NULL, p->maplen, PROT_READ | PROT_WRITE, MAP_SHARED,
			  fd, 0);
	if (!err && rw != MAP_FAILED)
		ro = mmap(NULL, p->maplen, PROT_READ, MAP_SHARED, fd, 0);
	if (!err && (rw == MAP_FAILED || ro == MAP_FAILED))
		err = -errno;
	close(fd);
	if (err) {
		if (rw != MAP_FAILED)
			munmap(rw, p->maplen);
		return err;
	}
	p->map = rw;
	p->view = ro;
	return 0;
}

static int raw_setup(struct pp *p)
{
	p->region = (64 + p->size + 4095) & ~(size_t)4095;
	p->maplen = 2 * p->region;
	if (p->sc->raw_ro)
		return raw_map_ro(p);
	p->map = shared_alloc(p->maplen);
	p->view = p->map;
	return p->map ? 0 : -ENOMEM;
}

static void raw_cleanup(struct pp *p)
{
	if (p->view && p->view != p->map)
		munmap((void *)p->view, p->maplen);
	shared_free(p->map, p->maplen);
}

/* RAW_URING: sleep while *w == v in one io_uring_enter (submit the
 * FUTEX_WAIT request and wait for its completion), as crs's engine
 * sleeps (ipc/waitset.c). liburing 2.3 has no helper for the opcode. */
#define RAW_OP_FUTEX_WAIT 51
#define RAW_FUTEX2_U32 0x02
/* 0 (woken, or the word had moved), or -errno: a kernel without the
 * opcode (before 6.7) fails every request, which must not pass for a
 * sleep. */
static int raw_uring_wait(struct raw_ep *e, uint32_t v)
{
	struct io_uring_sqe *sqe = io_uring_get_sqe(&e->ring);
	if (!sqe)
		return -EBUSY; /* cannot happen: one request at a time */
	io_uring_prep_rw(RAW_OP_FUTEX_WAIT, sqe, RAW_FUTEX2_U32,
			 (const void *)e->in_word, 0, v);
	sqe->addr3 = 0xffffffffu; /* wake mask: any */
	struct io_uring_cqe *cqe;
	int err = io_uring_submit_and_wait(&e->ring, 1);
	if (err == -EINTR)
		return 0; /* the request stays; the next wait reaps it */
	if (err < 0)
		return err;
	if (io_uring_peek_cqe(&e->ring, &cqe) != 0)
		return 0;
	int res = cqe->res;
	io_uring_cqe_seen(&e->ring, cqe);
	return res < 0 && res != -EAGAIN && res != -EINTR ? res : 0;
}

/* RAW_WAITV: sleep while *in_word == v and *in_life == 0. 0 (woken,
 * or a word had moved), or -errno: a kernel without futex_waitv (before
 * 5.16) must not pass for a sleep. */
static int raw_waitv(struct raw_ep *e, uint32_t v)
{
	struct futex_waitv w[2] = {
		{ .val = v, .uaddr = (uintptr_t)e->in_word,
		  .flags = RAW_FUTEX2_U32 },
		{ .val = 0, .uaddr = (uintptr_t)e->in_life,
		  .flags = RAW_FUTEX2_U32 },
	};
	if (syscall(SYS_futex_waitv, w, 2, 0, NULL, CLOCK_MONOTONIC) < 0 &&
	    errno != EAGAIN && errno != EINTR)
		return -errno;
	return 0;
}

static void *raw_open(struct pp *p, int who)
{
	struct raw_ep *e = calloc(1, sizeof(*e));
	if (!e)
		return NULL;
	uint8_t *mine = p->map + (size_t)who * p->region;
	const uint8_t *theirs = p->view + (size_t)(1 - who) * p->region;
	e->p = p;
	e->out_word = (_Atomic uint32_t *)mine;
	e->in_word = (const _Atomic uint32_t *)theirs;
	e->out = mine + 8; /* word and payload share the first line */
	e->in = theirs + 8;
	/* The last word of the region: past the payload at any size. */
	e->in_life = (const _Atomic uint32_t *)(theirs + p->region - 4);
	e->wait = p->sc->raw_wait;
	int err = e->wait == RAW_URING ? io_uring_queue_init(
						 8, &e->ring, p->sc->uring_flags)
				       : 0;
	if (err) {
		rep_err(&p->ctl->rep[who], err, "io_uring_queue_init: %s",
			strerror(-err));
		free(e);
		return NULL;
	}
	return e;
}

static int raw_send(void *ep, uint64_t seq)
{
	struct raw_ep *e = ep;
	fill_msg(e->out, e->p->size, seq);
	atomic_store_explicit(e->out_word, ++e->sent, memory_order_release);
	if (e->wait != RAW_SPIN)
		futex(e->out_word, FUTEX_WAKE, 1);
	return 0;
}

static int raw_recv(void *ep, uint64_t *seq)
{
	struct raw_ep *e = ep;
	uint32_t want = e->got + 1, v;
	int64_t deadline = 0;
	unsigned n = 0;
	while ((v = atomic_load_explicit(e->in_word, memory_order_acquire)) !=
	       want) {
		if (e->wait == RAW_FUTEX) {
			raw_futex_wait(e->in_word, v,
				       e->p->sc->futex_timeout_ms);
		} else if (e->wait == RAW_URING) {
			int err = raw_uring_wait(e, v);
			if (err)
				return err;
		} else if (e->wait == RAW_WAITV) {
			int err = raw_waitv(e, v);
			if (err)
				return err;
		} else {
			cpu_relax();
		}
		if ((++n & 0xffff) == 0) {
			int64_t t = now_ns();
			if (!deadline)
				deadline = t + EP_TIMEOUT_NS;
			else if (t > deadline)
				return -ETIMEDOUT;
		}
	}
	e->got = want;
	uint64_t sum = 0;
	*seq = msg_index(e->in);
	return read_msg(e->in, e->p->size, *seq, &sum) ? (bench_sink += sum, 1)
						       : -EPROTO;
}

static void raw_close(void *ep)
{
	struct raw_ep *e = ep;
	if (e->wait == RAW_URING)
		io_uring_queue_exit(&e->ring);
	free(e);
}

/* ---- crs ----------------------------------------------------------------- */

struct crs_ep {
	struct pp *p;
	crs_pub *pub;
	crs_sub *sub;
	int block;
};

static int crs_pp_setup(struct pp *p)
{
	stream_name(p->name[0], sizeof(p->name[0]), p->id * 2);
	stream_name(p->name[1], sizeof(p->name[1]), p->id * 2 + 1);
	return 0;
}

static void *crs_pp_open(struct pp *p, int who)
{
	struct proc_rep *rep = &p->ctl->rep[who];
	if (p->sc->no_uring)
		setenv("CRS_NO_URING", "1", 1);
	else
		unsetenv("CRS_NO_URING");
	struct crs_ep *e = calloc(1, sizeof(*e));
	if (!e)
		return NULL;
	e->p = p;
	e->block = !strcmp(p->sc->mode, "block");
	crs_loop *loop;
	if (e->block && crs_loop_create(&loop) == 0) {
		snprintf(rep->engine, sizeof(rep->engine), "%s",
			 crs_loop_engine(loop));
		crs_loop_close(loop);
	}
	struct crs_pub_opts po;
	crs_pub_opts_init(&po);
	po.ring_bytes = p->cfg->ring_bytes;
	po.max_message = (uint32_t)(p->cfg->ring_bytes / 4);
	po.spin_us = e->block ? -1 : 0;
	struct crs_sub_opts so;
	crs_sub_opts_init(&so);
	so.wait_ms = 20000;
	so.spin_us = e->block ? -1 : 0;
	int err = crs_pub_create(p->name[who], &po, &e->pub);
	if (err) {
		rep_err(rep, err, "crs_pub_create: %s", crs_strerror(err));
		goto fail;
	}
	/* A admits B first, then subscribes; B subscribes, then admits A. */
	if (who == 0)
		err = crs_pub_wait_subscribers(e->pub, 1, 20000);
	if (!err)
		err = crs_sub_open(p->name[1 - who], &so, &e->sub);
	if (!err && who == 1)
		err = crs_pub_wait_subscribers(e->pub, 1, 20000);
	if (err) {
		rep_err(rep, err, "connecting: %s", crs_strerror(err));
		goto fail;
	}
	return e;
fail:
	crs_sub_close(e->sub);
	if (e->pub)
		crs_pub_close(e->pub);
	free(e);
	return NULL;
}

static int crs_pp_send(void *ep, uint64_t seq)
{
	struct crs_ep *e = ep;
	void *buf;
	int err;
	int64_t deadline = 0;
	unsigned n = 0;
	while ((err = crs_pub_claim(e->pub, e->p->size, &buf)) != 0) {
		if (err != -CRS_ENODEMAND && err != -CRS_ENOROOM)
			return err;
		if (e->block)
			crs_pub_wait(e->pub, e->p->size, 1000);
		else
			cpu_relax();
		if ((++n & (e->block ? 0 : 0xffff)) == 0) {
			int64_t t = now_ns();
			if (!deadline)
				deadline = t + EP_TIMEOUT_NS;
			else if (t > deadline)
				return -ETIMEDOUT;
		}
	}
	fill_msg(buf, e->p->size, seq);
	err = crs_pub_commit(e->pub, e->p->size);
	/* The message crs_pp_recv left held: released once the reply is
	 * out, as a zero-copy echo does (the reply may be built from it in
	 * place) and as Aeron's pong does (offer in the fragment handler,
	 * position stored after it). */
	crs_sub_release(e->sub);
	return err;
}

static int crs_pp_recv(void *ep, uint64_t *seq)
{
	struct crs_ep *e = ep;
	struct crs_msg m;
	int64_t deadline = 0;
	unsigned n = 0;
	for (;;) {
		int r = crs_sub_poll(e->sub, &m);
		if (r == 1)
			break;
		if (r < 0)
			return -EPIPE;
		if (e->block)
			crs_sub_wait(e->sub, 1000);
		else
			cpu_relax();
		if ((++n & (e->block ? 0 : 0xffff)) == 0) {
			int64_t t = now_ns();
			if (!deadline)
				deadline = t + EP_TIMEOUT_NS;
			else if (t > deadline)
				return -ETIMEDOUT;
		}
	}
	uint64_t sum = 0;
	*seq = m.len >= 8 ? msg_index(m.data) : 0;
	int ok = m.len == e->p->size && read_msg(m.data, m.len, *seq, &sum);
	bench_sink += sum;
	/* Held until crs_pp_send has sent the reply. */
	return ok ? 1 : -EPROTO;
}

static void crs_pp_close(void *ep)
{
	struct crs_ep *e = ep;
	/* Leave first: a reader that stopped polling has not published
	 * its last consumed position, and the peer would wait for it. */
	crs_sub_close(e->sub);
	crs_pub_complete(e->pub);
	crs_pub_wait_consumed(e->pub, 2000);
	crs_pub_close(e->pub);
	free(e);
}

/* ---- pipe and unix socket ---------------------------------------------- */

struct fd_ep {
	struct pp *p;
	int in, out;
	uint8_t *buf;
};

static int pipes_setup(struct pp *p)
{
	if (pipe2(p->fds, O_CLOEXEC) < 0 || pipe2(p->fds + 2, O_CLOEXEC) < 0)
		return -errno;
	return 0;
}

static int sock_setup(struct pp *p)
{
	if (socketpair(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0, p->fds) < 0)
		return -errno;
	return 0;
}

static void *fd_open(struct pp *p, int who)
{
	struct fd_ep *e = calloc(1, sizeof(*e));
	if (!e)
		return NULL;
	e->p = p;
	e->buf = malloc(p->size);
	int keep[2];
	if (p->fds[2] >= 0) { /* pipes: 0->1 is fds[0..1], 1->0 fds[2..3] */
		e->out = who ? p->fds[3] : p->fds[1];
		e->in = who ? p->fds[0] : p->fds[2];
	} else {
		e->out = e->in = p->fds[who];
	}
	keep[0] = e->in;
	keep[1] = e->out;
	for (int i = 0; i < 4; i++)
		if (p->fds[i] >= 0 && p->fds[i] != keep[0] &&
		    p->fds[i] != keep[1])
			close(p->fds[i]);
	return e;
}

static int fd_send(void *ep, uint64_t seq)
{
	struct fd_ep *e = ep;
	fill_msg(e->buf, e->p->size, seq);
	const uint8_t *q = e->buf;
	size_t n = e->p->size;
	while (n) {
		ssize_t w = write(e->out, q, n);
		if (w < 0) {
			if (errno == EINTR)
				continue;
			return -errno;
		}
		q += w;
		n -= (size_t)w;
	}
	return 0;
}

static int fd_recv(void *ep, uint64_t *seq)
{
	struct fd_ep *e = ep;
	size_t got = 0, n = e->p->size;
	while (got < n) {
		ssize_t r = read(e->in, e->buf + got, n - got);
		if (r < 0) {
			if (errno == EINTR)
				continue;
			return -errno;
		}
		if (r == 0)
			return -EPIPE;
		got += (size_t)r;
	}
	uint64_t sum = 0;
	*seq = msg_index(e->buf);
	int ok = read_msg(e->buf, n, *seq, &sum);
	bench_sink += sum;
	return ok ? 1 : -EPROTO;
}

static void fd_close(void *ep)
{
	struct fd_ep *e = ep;
	close(e->in);
	if (e->out != e->in)
		close(e->out);
	free(e->buf);
	free(e);
}

/* ---- ZeroMQ ------------------------------------------------------------- */

#ifdef HAVE_ZMQ
struct zmq_ep {
	struct pp *p;
	int who;
	void *ctx, *s;
	uint8_t *buf;
	zmq_msg_t m;
};

static int zpp_setup(struct pp *p)
{
	snprintf(p->name[0], sizeof(p->name[0]), "ipc://%s/p%u",
		 p->cfg->tmpdir, p->id);
	return 0;
}

static void zpp_cleanup(struct pp *p)
{
	unlink(p->name[0] + strlen("ipc://"));
}

static void *zpp_open(struct pp *p, int who)
{
	struct zmq_ep *e = calloc(1, sizeof(*e));
	if (!e)
		return NULL;
	e->p = p;
	e->who = who;
	e->buf = malloc(p->size);
	e->ctx = zmq_ctx_new();
	e->s = zmq_socket(e->ctx, ZMQ_PAIR);
	int ivl = 1; /* B retries at once if A has not bound yet */
	zmq_setsockopt(e->s, ZMQ_RECONNECT_IVL, &ivl, sizeof(ivl));
	int r = who ? zmq_connect(e->s, p->name[0])
		    : zmq_bind(e->s, p->name[0]);
	if (r != 0) {
		rep_err(&p->ctl->rep[who], errno, "zmq: %s",
			zmq_strerror(errno));
		zmq_close(e->s);
		zmq_ctx_term(e->ctx);
		free(e->buf);
		free(e);
		return NULL;
	}
	zmq_msg_init(&e->m);
	return e;
}

static int zpp_send(void *ep, uint64_t seq)
{
	struct zmq_ep *e = ep;
	fill_msg(e->buf, e->p->size, seq);
	return zmq_send(e->s, e->buf, e->p->size, 0) == (int)e->p->size
		       ? 0
		       : -errno;
}

static int zpp_recv(void *ep, uint64_t *seq)
{
	struct zmq_ep *e = ep;
	int r;
	while ((r = zmq_msg_recv(&e->m, e->s, 0)) < 0 && errno == EINTR)
		;
	if (r < 0)
		return -errno;
	if ((size_t)r != e->p->size)
		return -EPROTO;
	uint64_t sum = 0;
	*seq = msg_index(zmq_msg_data(&e->m));
	int ok = read_msg(zmq_msg_data(&e->m), e->p->size, *seq, &sum);
	bench_sink += sum;
	return ok ? 1 : -EPROTO;
}

static void zpp_close(void *ep)
{
	struct zmq_ep *e = ep;
	/* libzmq 4.3 may drop the last message over ipc:// if its sender
	 * closes at once (issue 4660): A says when it has the last echo. */
	if (e->who == 0) {
		atomic_store(&e->p->ctl->nwoken, 1);
	} else {
		int64_t give_up = now_ns() + 10000000000LL;
		while (!atomic_load(&e->p->ctl->nwoken) && now_ns() < give_up)
			sleep_ns(1000000);
	}
	zmq_msg_close(&e->m);
	zmq_close(e->s);
	zmq_ctx_term(e->ctx);
	free(e->buf);
	free(e);
}
#endif

/* ---- Aeron (aeron.c has the endpoints) ------------------------------------ */

#ifdef HAVE_AERON
static int aer_pp_setup(struct pp *p)
{
	snprintf(p->name[0], sizeof(p->name[0]), "%" PRId32,
		 aeron_pp_base(p->id));
	return 0;
}

static void *aer_pp_open(struct pp *p, int who)
{
	return aeron_pp_open(who, (int32_t)atol(p->name[0]), p->size,
			     &p->ctl->rep[who]);
}
#endif

/* The ends of every raw ping-pong and of every crs one. */
#define RAW_PP                                                                 \
	.setup = raw_setup, .cleanup = raw_cleanup, .open = raw_open,          \
	.send = raw_send, .recv = raw_recv, .close = raw_close
#define CRS_PP                                                                 \
	.setup = crs_pp_setup, .open = crs_pp_open, .send = crs_pp_send,       \
	.recv = crs_pp_recv, .close = crs_pp_close

static const struct lat_scn lat_scns[] = {
	{ .name = "raw-spin", .mode = "spin", .baseline = 1,
	  .desc = "shared word + payload per direction, the peer spins on "
		  "the word (at 32 B: one cache line each way)",
	  RAW_PP, .is_default = 1 },
	{ .name = "crs-spin", .mode = "spin",
	  .desc = "crs claim/commit, crs_sub_poll in a loop (pause between "
		  "polls), both processes spin; the request is released "
		  "after the reply is committed",
	  CRS_PP, .is_default = 1 },
	{ .name = "aeron-spin", .mode = "spin", .needs_aeron = 1,
	  .desc = "Aeron aeron:ipc, an exclusive publication each way: "
		  "try_claim/commit, poll (fragment limit 1), both spin",
	  .setup = IF_AERON(aer_pp_setup), .open = IF_AERON(aer_pp_open),
	  .send = IF_AERON(aeron_pp_send), .recv = IF_AERON(aeron_pp_recv),
	  .close = IF_AERON(aeron_pp_close), .is_default = 1 },
	{ .name = "raw-futex", .mode = "block", .baseline = 1,
	  .raw_wait = RAW_FUTEX,
	  .desc = "as raw-spin, the reader FUTEX_WAITs at once, the writer "
		  "FUTEX_WAKEs after each store",
	  RAW_PP, .is_default = 1 },
	{ .name = "raw-futex-ro", .mode = "block", .raw_wait = RAW_FUTEX,
	  .raw_ro = 1,
	  .desc = "as raw-futex, the reader waits through a read-only view "
		  "of the word (as a crs subscriber does)",
	  RAW_PP },
	{ .name = "raw-uring", .mode = "block", .raw_wait = RAW_URING,
	  .desc = "as raw-futex, the reader sleeps in an io_uring "
		  "FUTEX_WAIT request",
	  RAW_PP },
	{ .name = "raw-uring-ro", .mode = "block", .raw_wait = RAW_URING,
	  .raw_ro = 1,
	  .desc = "as raw-futex-ro, the reader sleeps in an io_uring "
		  "FUTEX_WAIT request (as crs's io_uring engine does)",
	  RAW_PP },
	{ .name = "raw-uring-defer-ro", .mode = "block", .raw_wait = RAW_URING,
	  .raw_ro = 1,
	  .uring_flags = IORING_SETUP_SINGLE_ISSUER |
			 IORING_SETUP_DEFER_TASKRUN,
	  .desc = "as raw-uring-ro, the ring set up with SINGLE_ISSUER and "
		  "DEFER_TASKRUN",
	  RAW_PP },
	{ .name = "raw-futex-timed-ro", .mode = "block", .raw_wait = RAW_FUTEX,
	  .raw_ro = 1, .futex_timeout_ms = 100,
	  .desc = "as raw-futex-ro with a 100 ms timeout on every FUTEX_WAIT "
		  "(a wait that checks liveness at each timeout)",
	  RAW_PP },
	{ .name = "raw-waitv-ro", .mode = "block", .raw_wait = RAW_WAITV,
	  .raw_ro = 1,
	  .desc = "as raw-futex-ro, the reader sleeps in futex_waitv on "
		  "the word and a second one that never moves",
	  RAW_PP },
	{ .name = "crs-block-uring", .mode = "block",
	  .desc = "crs_sub_wait, spin_us -1 on subscriptions and publishers "
		  "(sleep at once), io_uring engine",
	  CRS_PP, .is_default = 1 },
	{ .name = "crs-block-poll", .mode = "block", .no_uring = 1,
	  .desc = "as crs-block-uring with CRS_NO_URING=1 in both processes "
		  "(futex_waitv/poll fallback engine)",
	  CRS_PP, .is_default = 1 },
	{ .name = "pipe", .mode = "block", .baseline = 1,
	  .desc = "two pipes, write/read of whole messages",
	  .setup = pipes_setup, .open = fd_open, .send = fd_send,
	  .recv = fd_recv, .close = fd_close, .is_default = 1 },
	{ .name = "unix-socket", .mode = "block",
	  .desc = "one socketpair(AF_UNIX, SOCK_STREAM)",
	  .setup = sock_setup, .open = fd_open, .send = fd_send,
	  .recv = fd_recv, .close = fd_close, .is_default = 1 },
#ifdef HAVE_ZMQ
	{ .name = "zmq", .mode = "block", .needs_zmq = 1,
	  .desc = "ZeroMQ PAIR over ipc:// (+ an I/O thread per process)",
	  .setup = zpp_setup, .cleanup = zpp_cleanup, .open = zpp_open,
	  .send = zpp_send, .recv = zpp_recv, .close = zpp_close,
	  .is_default = 1 },
#endif
};
#define NLAT (int)(sizeof(lat_scns) / sizeof(lat_scns[0]))

int lat_known(const char *name)
{
	for (int i = 0; i < NLAT; i++)
		if (!strcmp(name, lat_scns[i].name))
			return 1;
	return 0;
}

void lat_list(FILE *f)
{
	for (int i = 0; i < NLAT; i++)
		fprintf(f, "%-20s %-8s %-9s %s%s\n", lat_scns[i].name,
			strncmp(lat_scns[i].name, "crs-", 4) ? "baseline"
							     : "crs",
			"latency",
			lat_scns[i].desc, lat_scns[i].mode[0] == 's'
						  ? " [both spin]"
						  : " [both sleep]");
}

/* ---- the two sides ------------------------------------------------------- */

/* --block-cpu: a blocking ping-pong's side goes to its CPU. */
static void place(const struct pp *p)
{
	if (p->cfg->block_pin && !strcmp(p->sc->mode, "block"))
		pin_to(1, p->cfg->block_cpu);
}

static int side_a(void *arg, int who)
{
	struct pp *p = arg;
	place(p);
	struct proc_rep *rep = &p->ctl->rep[who];
	void *ep = p->sc->open(p, who);
	if (!ep) {
		if (!rep->err)
			rep_err(rep, ENOMEM, "open failed");
		return 1;
	}
	histo_reset(p->h);
	const uint32_t trips = p->cfg->lat_trips;
	const uint64_t warm = trips / 10 < 200 ? trips / 10 : 200;
	const int64_t limit = (int64_t)(p->cfg->lat_secs * 1e9);
	int64_t start = 0;
	uint64_t i, got = 0;
	int r = 0;
	for (i = 0;; i++) {
		int64_t t0 = now_ns();
		r = p->sc->send(ep, i);
		if (!r)
			r = p->sc->recv(ep, &got);
		int64_t t1 = now_ns();
		if (r < 0 || got != i) {
			rep_err(rep, r, "round trip %" PRIu64 ": %s", i,
				r < 0 ? strerror(-r) : "wrong message");
			break;
		}
		if (i == warm)
			start = t1;
		if (i > warm) {
			histo_add(p->h, (uint64_t)(t1 - t0));
			if (p->h->count >= trips || t1 - start > limit)
				break;
		}
	}
	if (!rep->err) {
		r = p->sc->send(ep, STOP_SEQ);
		if (!r)
			r = p->sc->recv(ep, &got);
		if (r < 0 || got != STOP_SEQ)
			rep_err(rep, r, "stopping: %s",
				r < 0 ? strerror(-r) : "wrong message");
	}
	rep->msgs = p->h->count;
	p->sc->close(ep);
	return rep->err ? 1 : 0;
}

static int side_b(void *arg, int who)
{
	struct pp *p = arg;
	place(p);
	struct proc_rep *rep = &p->ctl->rep[who];
	void *ep = p->sc->open(p, who);
	if (!ep) {
		if (!rep->err)
			rep_err(rep, ENOMEM, "open failed");
		return 1;
	}
	for (uint64_t want = 0;; want++) {
		uint64_t got = 0;
		int r = p->sc->recv(ep, &got);
		if (r > 0 && got != want && got != STOP_SEQ)
			r = -EPROTO;
		if (r > 0)
			r = p->sc->send(ep, got);
		if (r < 0) {
			rep_err(rep, r, "echo %" PRIu64 ": %s", want,
				strerror(-r));
			break;
		}
		if (got == STOP_SEQ)
			break;
	}
	p->sc->close(ep);
	return rep->err ? 1 : 0;
}

static unsigned next_pp_id;

static void lat_measure(const struct config *cfg, const struct lat_scn *sc,
			size_t size, struct lat_sample *s, struct histo *merged)
{
	memset(s, 0, sizeof(*s));
	struct pp p = { .cfg = cfg, .sc = sc, .size = size,
			.id = next_pp_id++ };
	for (int i = 0; i < 4; i++)
		p.fds[i] = -1;
	p.ctl = ctl_new(1, 0);
	p.h = shared_alloc(sizeof(*p.h));
	if (!p.ctl || !p.h) {
		snprintf(s->err, sizeof(s->err), "out of memory");
		goto out;
	}
	int err = sc->setup ? sc->setup(&p) : 0;
	if (err) {
		snprintf(s->err, sizeof(s->err), "setup: %s", strerror(-err));
		goto out;
	}
	pid_t pids[2];
	pids[0] = spawn(cfg, 0, side_a, &p, 0);
	pids[1] = spawn(cfg, 1, side_b, &p, 1);
	for (int i = 0; i < 4; i++)
		if (p.fds[i] >= 0)
			close(p.fds[i]);
	int failed = reap_all(pids, 2,
			      now_ns() + (int64_t)(cfg->lat_secs * 1e9) +
				      WATCHDOG_NS / 2);
	if (sc->cleanup)
		sc->cleanup(&p);
	for (int i = 0; i < 2 && !s->err[0]; i++)
		if (p.ctl->rep[i].err)
			snprintf(s->err, sizeof(s->err), "%s: %s",
				 i ? "B" : "A", p.ctl->rep[i].msg);
	if (!s->err[0] && failed)
		snprintf(s->err, sizeof(s->err), "%d processes failed", failed);
	snprintf(s->engine, sizeof(s->engine), "%s", p.ctl->rep[0].engine);
	if (!s->err[0] && p.h->count) {
		s->ok = 1;
		s->trips = p.h->count;
		s->p50 = (double)histo_pct(p.h, 50);
		s->p90 = (double)histo_pct(p.h, 90);
		s->p99 = (double)histo_pct(p.h, 99);
		s->p999 = (double)histo_pct(p.h, 99.9);
		s->max = (double)p.h->max;
		s->mean = histo_mean(p.h);
		histo_merge(merged, p.h);
	} else if (!s->err[0]) {
		snprintf(s->err, sizeof(s->err), "no round trips");
	}
out:
	shared_free(p.h, sizeof(*p.h));
	ctl_free(p.ctl);
}

int lat_run(const struct config *cfg, struct results *res)
{
	int sel[NLAT], nsel = 0;
	for (int i = 0; i < NLAT; i++) {
		if (lat_scns[i].needs_zmq && !cfg->have_zmq)
			continue;
		if (scenario_selected(cfg, lat_scns[i].name,
				      lat_scns[i].is_default,
				      lat_scns[i].baseline))
			sel[nsel++] = i;
	}
	res->nlat = nsel * cfg->nlat_sizes;
	res->lat = calloc((size_t)res->nlat + 1, sizeof(*res->lat));
	if (!res->lat)
		return -ENOMEM;
	for (int z = 0; z < cfg->nlat_sizes; z++)
		for (int k = 0; k < nsel; k++) {
			struct lat_cell *cl = &res->lat[z * nsel + k];
			cl->name = lat_scns[sel[k]].name;
			cl->mode = lat_scns[sel[k]].mode;
			cl->spins = !strcmp(cl->mode, "spin");
			cl->round_h = calloc((size_t)cfg->rounds,
					     sizeof(*cl->round_h));
			cl->size = cfg->lat_sizes[z];
			if (lat_scns[sel[k]].needs_aeron)
				cl->skipped = aeron_skip_reason(cfg);
			histo_reset(&cl->h);
			histo_reset(&cl->clean);
		}
	/* Rotated as in tp_run: round r starts at scenario r mod nsel. */
	for (int round = 0; round < cfg->rounds; round++)
		for (int j = 0; j < res->nlat; j++) {
			int i = j / nsel * nsel + (j % nsel + round) % nsel;
			struct lat_cell *cl = &res->lat[i];
			struct lat_sample *s = &cl->s[cl->n];
			if (cl->skipped)
				continue;
			struct histo round_h;
			histo_reset(&round_h);
			lat_measure(cfg, &lat_scns[sel[i % nsel]], cl->size, s,
				    &round_h);
			histo_merge(&cl->h, &round_h);
			probe_note(cfg, res, &s->pp_before, &s->pp_after,
				   &s->cap_before, &s->cap);
			if (cl->round_h)
				cl->round_h[cl->n] = round_h;
			if (!s->ok) {
				cl->failed++;
				res->failures++;
				fprintf(stderr,
					"crs-bench: latency %s %zu B round %d "
					"failed: %s\n",
					cl->name, cl->size, round + 1, s->err);
			}
			cl->n++;
			if (isatty(2))
				fprintf(stderr,
					"\r%d/%d latency %s %zu B: p50 %.1f us"
					"        ",
					round + 1, cfg->rounds, cl->name,
					cl->size, s->p50 / 1e3);
		}
	return 0;
}
