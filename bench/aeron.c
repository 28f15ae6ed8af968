/*
 * aeron.c - Aeron over aeron:ipc as an optional baseline (meson option
 * aeron=PREFIX): its media driver, the throughput transports and the
 * ping-pong endpoints, run through the same window protocol, payload fill
 * and checks as every other transport (bench.h).
 *
 * Media driver: the first Aeron scenario of a run starts PREFIX/bin/aeronmd
 * with its directory private to the run (/dev/shm/crs-bench-aeron-PID,
 * deleted on start and on shutdown; Aeron's defaults otherwise, AERON_*
 * variables in the environment pass through); aeron_driver_stop ends it
 * with SIGINT (its clean shutdown) when crs-bench ends, and the kernel
 * does if crs-bench dies (PR_SET_PDEATHSIG). With AERON_DIR set,
 * crs-bench uses the driver running there instead. No client library or
 * no driver: the scenarios are skipped, with the reason.
 *
 * Throughput: one publication per measurement on a stream id of its own
 * (no old image), exclusive or concurrent ("shared"). Sender: try_claim,
 * fill in place, commit; above the publication's max payload (MTU - 32)
 * offer from a private filled buffer (Aeron fragments and copies it).
 * Receiver: aeron_subscription_poll with a fragment limit of 10 (the one
 * Aeron's samples use), reads every byte in place and checks the index
 * words; larger messages pass through Aeron's fragment assembler. The
 * sender ends with one more message whose index words are END_SEQ and
 * closes once the receiver has it (ctl->nwoken). Warm-up: two passes over
 * the publication's three terms, as crs's is two passes over its ring, so
 * that no first touch of a fresh log falls in the window.
 *
 * Ping-pong: side `who` publishes on stream base + who (exclusive,
 * try_claim/commit) and polls base + 1 - who with a fragment limit of 1,
 * one pause between empty polls.
 */
#include <errno.h>
#include <fcntl.h>
#include <ftw.h>
#include <inttypes.h>
#include <signal.h>
#include <stdlib.h>
#include <sys/prctl.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#include "bench.h"

#ifndef HAVE_AERON

const char *aeron_skip_reason(const struct config *cfg)
{
	(void)cfg;
	return "crs-bench built without Aeron (meson setup -Daeron=PREFIX)";
}

const char *aeron_about(void)
{
	return NULL;
}

void aeron_driver_stop(void)
{
}

#else
#include <aeronc.h>

#define END_SEQ UINT64_MAX
#define STUCK_NS (20LL * 1000000000LL)
#define CONNECT_NS (20LL * 1000000000LL)
#define DRIVER_START_NS (10LL * 1000000000LL)
#define FRAGMENT_LIMIT 10
#define AERON_WARM_NS 1500000000LL /* the warm-up may take this long */

/* ---- the media driver --------------------------------------------------- */

static struct {
	int tried;
	const char *skip;    /* why Aeron scenarios are skipped, or NULL */
	pid_t pid;	     /* the driver crs-bench started, or 0 */
	char dir[256];	     /* its directory (children inherit it) */
	char log[128];	     /* its stdout and stderr */
	char why[640];
	char about[640];
} drv;

static int rm_entry(const char *path, const struct stat *st, int flag,
		    struct FTW *ftw)
{
	(void)st;
	(void)flag;
	(void)ftw;
	remove(path);
	return 0;
}

/* The last line of the driver's log, for a reason that helps. */
static void log_tail(char *buf, size_t len)
{
	char all[2048] = "";
	int fd = open(drv.log, O_RDONLY | O_CLOEXEC);
	ssize_t n = fd >= 0 ? read(fd, all, sizeof(all) - 1) : -1;
	if (fd >= 0)
		close(fd);
	all[n > 0 ? n : 0] = 0;
	while (n > 0 && (all[n - 1] == '\n' || all[n - 1] == '\r'))
		all[--n] = 0;
	char *last = strrchr(all, '\n');
	snprintf(buf, len, "%s", last ? last + 1 : all);
}

/* A driver is active in dir: its CnC file is there and its conductor
 * has marked the to-driver buffer within the last 2 s. */
static int driver_active(const char *dir, int64_t timeout_ms)
{
	aeron_cnc_t *cnc;
	if (aeron_cnc_init(&cnc, dir, timeout_ms) < 0)
		return 0;
	int64_t beat = aeron_cnc_to_driver_heartbeat(cnc);
	aeron_cnc_close(cnc);
	return beat > 0 && aeron_epoch_clock() - beat < 2000;
}

static const char *driver_start(const struct config *cfg)
{
	const char *dir = getenv("AERON_DIR");
	if (dir && *dir) {
		snprintf(drv.dir, sizeof(drv.dir), "%s", dir);
		if (!driver_active(drv.dir, 1000)) {
			snprintf(drv.why, sizeof(drv.why),
				 "no media driver active in AERON_DIR=%s",
				 drv.dir);
			return drv.why;
		}
		snprintf(drv.about, sizeof(drv.about),
			 "Aeron %s, media driver found in %s", aeron_version_text(),
			 drv.dir);
		return NULL;
	}
	struct stat st;
	if (stat("/dev/shm", &st) == 0 && S_ISDIR(st.st_mode))
		snprintf(drv.dir, sizeof(drv.dir), "/dev/shm/crs-bench-aeron-%ld",
			 (long)getpid());
	else
		snprintf(drv.dir, sizeof(drv.dir), "%s/aeron", cfg->tmpdir);
	snprintf(drv.log, sizeof(drv.log), "%s/aeronmd.log", cfg->tmpdir);
	const char *md = CRSB_AERON_PREFIX "/bin/aeronmd";
	pid_t parent = getpid();
	fflush(NULL);
	pid_t pid = fork();
	if (pid < 0) {
		snprintf(drv.why, sizeof(drv.why), "fork: %s", strerror(errno));
		return drv.why;
	}
	if (pid == 0) {
		prctl(PR_SET_PDEATHSIG, SIGINT); /* aeronmd shuts down on SIGINT */
		if (getppid() != parent)
			_exit(127);
		int fd = open(drv.log, O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC,
			      0600);
		if (fd >= 0) {
			dup2(fd, 1);
			dup2(fd, 2);
		}
		/* The prefix's libaeron_driver.so, wherever it was built. */
		setenv("LD_LIBRARY_PATH", CRSB_AERON_PREFIX "/lib", 1);
		setenv("AERON_DIR", drv.dir, 1);
		setenv("AERON_DIR_DELETE_ON_START", "1", 1);
		setenv("AERON_DIR_DELETE_ON_SHUTDOWN", "1", 1);
		execl(md, "aeronmd", (char *)NULL);
		fprintf(stderr, "exec %s: %s\n", md, strerror(errno));
		_exit(127);
	}
	drv.pid = pid;
	int64_t deadline = now_ns() + DRIVER_START_NS;
	while (!driver_active(drv.dir, 100)) {
		int status;
		if (waitpid(pid, &status, WNOHANG) == pid) {
			char tail[200];
			log_tail(tail, sizeof(tail));
			drv.pid = 0;
			snprintf(drv.why, sizeof(drv.why),
				 "%s exited at start (status %d): %s", md,
				 WIFEXITED(status) ? WEXITSTATUS(status) : -1,
				 tail);
			return drv.why;
		}
		if (now_ns() > deadline) {
			aeron_driver_stop();
			snprintf(drv.why, sizeof(drv.why),
				 "%s did not come up in %s within 10 s", md,
				 drv.dir);
			return drv.why;
		}
		sleep_ns(20000000);
	}
	setenv("AERON_DIR", drv.dir, 1); /* for the measurement processes */
	snprintf(drv.about, sizeof(drv.about),
		 "Aeron %s, %s started (pid %ld, directory %s)",
		 aeron_version_text(), md, (long)pid, drv.dir);
	return NULL;
}

const char *aeron_skip_reason(const struct config *cfg)
{
	if (!drv.tried) {
		drv.tried = 1;
		drv.skip = driver_start(cfg);
	}
	return drv.skip;
}

const char *aeron_about(void)
{
	return drv.tried && !drv.skip ? drv.about : NULL;
}

void aeron_driver_stop(void)
{
	if (drv.pid > 0) {
		kill(drv.pid, SIGINT); /* aeronmd's clean shutdown */
		int64_t deadline = now_ns() + 5000000000LL;
		while (waitpid(drv.pid, NULL, WNOHANG) == 0) {
			if (now_ns() > deadline) {
				kill(drv.pid, SIGKILL);
				waitpid(drv.pid, NULL, 0);
				break;
			}
			sleep_ns(10000000);
		}
		drv.pid = 0;
		/* The driver deletes its directory on shutdown; after a
		 * SIGKILL this does. */
		nftw(drv.dir, rm_entry, 16, FTW_DEPTH | FTW_PHYS);
	}
	if (drv.log[0])
		unlink(drv.log);
}

/* ---- client, publication, subscription ----------------------------------- */

struct client {
	aeron_context_t *ctx;
	aeron_t *aeron;
};

static int client_open(struct client *c, struct proc_rep *rep)
{
	memset(c, 0, sizeof(*c));
	if (aeron_context_init(&c->ctx) < 0 ||
	    aeron_context_set_dir(c->ctx, drv.dir) < 0 ||
	    aeron_init(&c->aeron, c->ctx) < 0 || aeron_start(c->aeron) < 0) {
		rep_err(rep, EIO, "aeron client: %s", aeron_errmsg());
		return -1;
	}
	return 0;
}

static void client_close(struct client *c)
{
	if (c->aeron)
		aeron_close(c->aeron);
	if (c->ctx)
		aeron_context_close(c->ctx);
}

/* Either kind of publication behind one face. */
struct pub {
	aeron_exclusive_publication_t *excl;
	aeron_publication_t *shared;
	size_t max_payload;
};

static int pub_open(struct client *c, struct pub *p, int excl,
		    int32_t stream, struct proc_rep *rep)
{
	memset(p, 0, sizeof(*p));
	int64_t deadline = now_ns() + CONNECT_NS;
	aeron_publication_constants_t k;
	int r = -1;
	if (excl) {
		aeron_async_add_exclusive_publication_t *a;
		if (aeron_async_add_exclusive_publication(&a, c->aeron,
							  "aeron:ipc", stream) == 0)
			while ((r = aeron_async_add_exclusive_publication_poll(
					&p->excl, a)) == 0 &&
			       now_ns() < deadline)
				sleep_ns(1000000);
		if (r == 1 && aeron_exclusive_publication_constants(p->excl,
								    &k) < 0)
			r = -1;
	} else {
		aeron_async_add_publication_t *a;
		if (aeron_async_add_publication(&a, c->aeron, "aeron:ipc",
						stream) == 0)
			while ((r = aeron_async_add_publication_poll(&p->shared,
								     a)) == 0 &&
			       now_ns() < deadline)
				sleep_ns(1000000);
		if (r == 1 && aeron_publication_constants(p->shared, &k) < 0)
			r = -1;
	}
	if (r != 1) {
		rep_err(rep, EIO, "add %s publication, stream %d: %s",
			excl ? "exclusive" : "shared", (int)stream,
			aeron_errmsg());
		return -1;
	}
	p->max_payload = k.max_payload_length;
	return 0;
}

/* Until a subscriber's image is there, every claim is refused. */
static int pub_wait(struct pub *p, struct proc_rep *rep)
{
	int64_t deadline = now_ns() + CONNECT_NS;
	while (!(p->excl ? aeron_exclusive_publication_is_connected(p->excl)
			 : aeron_publication_is_connected(p->shared))) {
		if (now_ns() > deadline) {
			rep_err(rep, ETIMEDOUT, "no subscriber connected");
			return -1;
		}
		sleep_ns(1000000);
	}
	return 0;
}

static void pub_close(struct pub *p)
{
	if (p->excl)
		aeron_exclusive_publication_close(p->excl, NULL, NULL);
	if (p->shared)
		aeron_publication_close(p->shared, NULL, NULL);
}

/* One message: claim, fill in place, commit; or offer from buf (filled
 * here) above the max payload. A refusal for back pressure or an admin
 * action is retried after a pause and counted in *refused; 0 or -errno
 * (the subscriber went away, or has not moved for STUCK_NS). */
static int pub_send(struct pub *p, uint8_t *buf, size_t size, uint64_t seq,
		    uint64_t *refused)
{
	const int claim = size <= p->max_payload;
	aeron_buffer_claim_t c;
	int64_t stuck_at = 0;
	if (!claim)
		fill_msg(buf, size, seq);
	for (uint32_t spins = 1;; spins++) {
		int64_t r = claim ? p->excl ? aeron_exclusive_publication_try_claim(
						      p->excl, size, &c)
					    : aeron_publication_try_claim(
						      p->shared, size, &c)
			    : p->excl ? aeron_exclusive_publication_offer(
						p->excl, buf, size, NULL, NULL)
				      : aeron_publication_offer(p->shared, buf,
								size, NULL, NULL);
		if (r >= 0)
			break;
		if (r != AERON_PUBLICATION_BACK_PRESSURED &&
		    r != AERON_PUBLICATION_ADMIN_ACTION)
			return r == AERON_PUBLICATION_NOT_CONNECTED ? -ENOTCONN
								    : -EIO;
		++*refused;
		if (spins % (1u << 16) == 0) {
			int64_t t = now_ns();
			if (!stuck_at)
				stuck_at = t;
			else if (t - stuck_at > STUCK_NS)
				return -ETIMEDOUT;
		}
		cpu_relax();
	}
	if (claim) {
		fill_msg(c.data, size, seq);
		aeron_buffer_claim_commit(&c);
	}
	return 0;
}

static int sub_add(struct client *c, aeron_subscription_t **sub,
		   int32_t stream, struct proc_rep *rep)
{
	aeron_async_add_subscription_t *a;
	int64_t deadline = now_ns() + CONNECT_NS;
	int r = -1;
	*sub = NULL;
	if (aeron_async_add_subscription(&a, c->aeron, "aeron:ipc", stream,
					 NULL, NULL, NULL, NULL) == 0)
		while ((r = aeron_async_add_subscription_poll(sub, a)) == 0 &&
		       now_ns() < deadline)
			sleep_ns(1000000);
	if (r != 1) {
		rep_err(rep, EIO, "add subscription, stream %d: %s",
			(int)stream, aeron_errmsg());
		return -1;
	}
	return 0;
}

/* Until the subscription has an image; that image's MTU and term length. */
static int sub_wait(aeron_subscription_t *sub, size_t *mtu, uint64_t *term,
		    struct proc_rep *rep)
{
	int64_t deadline = now_ns() + CONNECT_NS;
	aeron_image_t *img;
	while (!(img = aeron_subscription_image_at_index(sub, 0))) {
		if (now_ns() > deadline) {
			rep_err(rep, ETIMEDOUT, "no publication connected");
			return -1;
		}
		sleep_ns(1000000);
	}
	aeron_image_constants_t k;
	int r = aeron_image_constants(img, &k);
	aeron_subscription_image_release(sub, img);
	if (r < 0) {
		rep_err(rep, EIO, "image constants: %s", aeron_errmsg());
		return -1;
	}
	*mtu = k.mtu_length;
	*term = (uint64_t)k.term_buffer_length;
	return 0;
}

/* ---- throughput ------------------------------------------------------------ */

/* Stream ids unique within the run and apart from other runs' on a
 * shared driver: the pid picks a block of 2^12. */
static int32_t stream_base(unsigned id)
{
	return (int32_t)(0x10000000u + ((unsigned)getpid() & 0xfffu) * 0x1000u +
			 (id & 0xfffu));
}

int aeron_tp_setup(struct xfer *x)
{
	snprintf(x->name, sizeof(x->name), "%" PRId32, stream_base(x->id));
	if (x->ctl->warm_ns < AERON_WARM_NS)
		x->ctl->warm_ns = AERON_WARM_NS;
	return 0;
}

static int tp_send(struct xfer *x, int excl)
{
	struct proc_rep *rep = &x->ctl->rep[0];
	struct client c;
	struct pub p = { 0 };
	uint8_t *buf = malloc(x->size);
	uint64_t seq = 0, refused = 0;
	int err = 0;
	if (!buf) {
		rep_err(rep, ENOMEM, "out of memory");
		goto out;
	}
	if (client_open(&c, rep) < 0 ||
	    pub_open(&c, &p, excl, (int32_t)atol(x->name), rep) < 0 ||
	    pub_wait(&p, rep) < 0)
		goto out;
	struct win w;
	win_init(&w, x->ctl, 0, 0, x->size);
	for (; !err && tx_go(&w, seq); seq++)
		err = pub_send(&p, buf, x->size, seq, &refused);
	if (!err)
		err = pub_send(&p, buf, x->size, END_SEQ, &refused);
	if (err)
		rep_err(rep, -err, "message %" PRIu64 ": %s", seq,
			strerror(-err));
	rep->total = err ? seq - 1 : seq;
	rep->refused_room = refused;
	/* Until the receiver has the end marker (closing drops the log). */
	int64_t give_up = now_ns() + STUCK_NS;
	while (!err && !atomic_load(&x->ctl->nwoken) && now_ns() < give_up)
		sleep_ns(100000);
out:
	pub_close(&p);
	client_close(&c);
	free(buf);
	return rep->err ? 1 : 0;
}

int aeron_send_excl(struct xfer *x)
{
	return tp_send(x, 1);
}

int aeron_send_shared(struct xfer *x)
{
	return tp_send(x, 0);
}

struct rx {
	struct win w;
	size_t size;
	uint64_t seq, sum, bad;
	int end;
};

static void rx_fragment(void *clientd, const uint8_t *buf, size_t len,
			aeron_header_t *header)
{
	(void)header;
	struct rx *r = clientd;
	if (len == r->size && msg_index(buf) == END_SEQ) {
		r->end = 1;
		return;
	}
	if (len != r->size || !read_msg(buf, len, r->seq, &r->sum))
		r->bad++;
	rx_tick(&r->w, ++r->seq);
}

int aeron_recv(struct xfer *x, int idx)
{
	struct proc_rep *rep = &x->ctl->rep[idx];
	struct client c;
	aeron_subscription_t *sub = NULL;
	aeron_fragment_assembler_t *fa = NULL;
	struct rx r = { .size = x->size };
	uint64_t empty = 0, term;
	size_t mtu;
	if (client_open(&c, rep) < 0 ||
	    sub_add(&c, &sub, (int32_t)atol(x->name), rep) < 0 ||
	    sub_wait(sub, &mtu, &term, rep) < 0)
		goto out;
	if (aeron_fragment_assembler_create(&fa, rx_fragment, &r) < 0) {
		rep_err(rep, EIO, "fragment assembler: %s", aeron_errmsg());
		goto out;
	}
	/* Frames are 32-byte aligned, with a 32-byte header. */
	uint64_t frame = (x->size + 32 + 31) & ~(uint64_t)31;
	uint64_t warmup = 2 * 3 * term / frame + 1;
	win_init(&r.w, x->ctl, idx, warmup > x->warmup ? warmup : x->warmup,
		 x->size);
	/* Whole messages go to the handler in place; only larger ones
	 * through the assembler. */
	aeron_fragment_handler_t handler =
		x->size + 32 > mtu ? aeron_fragment_assembler_handler
				   : rx_fragment;
	void *arg = x->size + 32 > mtu ? (void *)fa : (void *)&r;
	int64_t deadline = now_ns() + WATCHDOG_NS;
	while (!r.end) {
		int n = aeron_subscription_poll(sub, handler, arg,
						FRAGMENT_LIMIT);
		if (n > 0)
			continue;
		if (n < 0) {
			rep_err(rep, EIO, "poll: %s", aeron_errmsg());
			break;
		}
		if ((++empty & 0xfffff) == 0 && now_ns() > deadline) {
			rep_err(rep, ETIMEDOUT, "stuck after %" PRIu64
				" messages", r.seq);
			break;
		}
		for (uint32_t i = 0; i < x->cfg->idle_pause; i++)
			cpu_relax();
	}
	atomic_store(&x->ctl->nwoken, 1);
out:
	bench_sink += r.sum;
	if (r.w.state == 1)
		win_close(&r.w, r.seq);
	else if (r.w.state == 0 && !rep->err)
		rep_err(rep, EPROTO, "stream ended during the warm-up");
	rep->total = r.seq;
	rep->bad = r.bad;
	rep->empty = empty;
	if (sub)
		aeron_subscription_close(sub, NULL, NULL);
	if (fa)
		aeron_fragment_assembler_delete(fa);
	client_close(&c);
	return rep->err ? 1 : 0;
}

/* ---- ping-pong ------------------------------------------------------------ */

struct ep {
	struct client c;
	struct pub p;
	aeron_subscription_t *sub;
	aeron_fragment_assembler_t *fa;
	aeron_fragment_handler_t handler;
	void *arg;
	size_t size;
	uint8_t *buf;
	int got, ok;
	uint64_t seq, sum;
};

static void ep_fragment(void *clientd, const uint8_t *buf, size_t len,
			aeron_header_t *header)
{
	(void)header;
	struct ep *e = clientd;
	e->got = 1;
	e->seq = len >= 8 ? msg_index(buf) : 0;
	e->ok = len == e->size && read_msg(buf, len, e->seq, &e->sum);
}

int32_t aeron_pp_base(unsigned id)
{
	return stream_base(0x800u + 2 * id);
}

void *aeron_pp_open(int who, int32_t base, size_t size, struct proc_rep *rep)
{
	struct ep *e = calloc(1, sizeof(*e));
	if (!e)
		return NULL;
	e->size = size;
	e->buf = malloc(size);
	size_t mtu;
	uint64_t term;
	/* Both ends first, then both waits: each side's publication needs
	 * the other's subscription. */
	if (!e->buf || client_open(&e->c, rep) < 0 ||
	    sub_add(&e->c, &e->sub, base + 1 - who, rep) < 0 ||
	    pub_open(&e->c, &e->p, 1, base + who, rep) < 0 ||
	    pub_wait(&e->p, rep) < 0 ||
	    sub_wait(e->sub, &mtu, &term, rep) < 0)
		goto fail;
	if (aeron_fragment_assembler_create(&e->fa, ep_fragment, e) < 0) {
		rep_err(rep, EIO, "fragment assembler: %s", aeron_errmsg());
		goto fail;
	}
	e->handler = size + 32 > mtu ? aeron_fragment_assembler_handler
				     : ep_fragment;
	e->arg = size + 32 > mtu ? (void *)e->fa : (void *)e;
	return e;
fail:
	aeron_pp_close(e);
	return NULL;
}

int aeron_pp_send(void *ep, uint64_t seq)
{
	struct ep *e = ep;
	uint64_t refused = 0;
	return pub_send(&e->p, e->buf, e->size, seq, &refused);
}

int aeron_pp_recv(void *ep, uint64_t *seq)
{
	struct ep *e = ep;
	int64_t deadline = 0;
	e->got = 0;
	for (uint32_t n = 1; !e->got; n++) {
		if (aeron_subscription_poll(e->sub, e->handler, e->arg, 1) < 0)
			return -EIO;
		if (e->got)
			break;
		cpu_relax();
		if (n % (1u << 16) == 0) {
			int64_t t = now_ns();
			if (!deadline)
				deadline = t + STUCK_NS;
			else if (t > deadline)
				return -ETIMEDOUT;
		}
	}
	bench_sink += e->sum;
	*seq = e->seq;
	return e->ok ? 1 : -EPROTO;
}

void aeron_pp_close(void *ep)
{
	struct ep *e = ep;
	if (e->sub)
		aeron_subscription_close(e->sub, NULL, NULL);
	pub_close(&e->p);
	if (e->fa)
		aeron_fragment_assembler_delete(e->fa);
	client_close(&e->c);
	free(e->buf);
	free(e);
}
#endif /* HAVE_AERON */
