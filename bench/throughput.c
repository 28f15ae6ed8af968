/*
 * throughput.c - one publisher to one or more subscribers, separate
 * processes: the crs scenarios and the driver that runs every transport
 * (crs here, baselines in baselines.c) through the same window protocol
 * (bench.h): the parent forks a sender and the receivers, waits until
 * every receiver is warm, sleeps tp_secs and raises stop; each process
 * reports its own window; the stream then ends normally and every
 * message is checked.
 *
 * crs sender: zero-copy claim, write in place, commit (or the copying
 * crs_pub_offer). Spinning scenarios retry a refused claim after one
 * pause; only after 2^20 refusals in a row (the receiver lost its CPU for
 * long) do they block in crs_pub_wait, counted as sender_waits. Blocking
 * scenarios wait in crs_pub_wait / crs_sub_wait. crs receiver: poll, read
 * every byte in place, release; spinning receivers back off --idle-pause
 * pauses after an empty poll (README.md says why).
 */
#include <errno.h>
#include <inttypes.h>
#include <stdlib.h>
#include <unistd.h>

#include "bench.h"
#include "crs/crs.h"

#define PUB_SPINS_BEFORE_WAIT (1u << 20)
#define BATCH 64 /* batch scenarios: messages per flush and per take */
#define STUCK_NS (20LL * 1000000000LL)

static inline void idle(const struct config *cfg)
{
	for (uint32_t i = 0; i < cfg->idle_pause; i++)
		cpu_relax();
}

/* ---- crs sender and receiver ------------------------------------------- */

/* What the sender's refused claims did. */
struct claim_wait {
	uint64_t no_demand, no_room, waits;
	int64_t stuck_at;
	uint32_t spin_limit;
};

/* The claim was refused (err): count why, spin or wait, and claim again
 * until it succeeds (0, *buf set) or fails otherwise. Out of line, so
 * that the hot loop keeps its values in registers: every store there
 * waits behind the ring's in the store buffer. */
static __attribute__((noinline)) int claim_refused(crs_pub *pub, size_t size,
						   void **buf, int err,
						   struct claim_wait *cw)
{
	uint32_t spins = 0;
	do {
		if (err == -CRS_ENODEMAND)
			cw->no_demand++;
		else if (err == -CRS_ENOROOM)
			cw->no_room++;
		else
			return err;
		if (++spins < cw->spin_limit) {
			cpu_relax();
			continue;
		}
		spins = 0;
		cw->waits++;
		err = crs_pub_wait(pub, size, 100);
		if (err && err != -ETIMEDOUT)
			return err;
		if (err) {
			int64_t t = now_ns();
			if (!cw->stuck_at)
				cw->stuck_at = t;
			else if (t - cw->stuck_at > STUCK_NS)
				return -ETIMEDOUT;
		} else {
			cw->stuck_at = 0;
		}
	} while ((err = crs_pub_claim(pub, size, buf)) != 0);
	return 0;
}

static int crs_send(struct xfer *x)
{
	const struct tp_scn *sc = x->sc;
	struct proc_rep *rep = &x->ctl->rep[0];
	const size_t size = x->size;
	const uint32_t spin_limit = sc->blocking ? 1 : PUB_SPINS_BEFORE_WAIT;
	struct crs_pub_opts po;
	crs_pub_opts_init(&po);
	po.ring_bytes = x->cfg->ring_bytes;
	po.max_message = (uint32_t)(x->cfg->ring_bytes / 4);
	po.mode = sc->replay ? CRS_MODE_REPLAY : CRS_MODE_PUBLISH;
	po.spin_us = sc->spin_us;
	crs_pub *pub;
	int err = crs_pub_create(x->name, &po, &pub);
	if (err) {
		rep_err(rep, err, "crs_pub_create: %s", crs_strerror(err));
		return 1;
	}
	err = crs_pub_wait_subscribers(pub, x->nrecv, 20000);
	if (err) {
		rep_err(rep, err, "subscribers missing: %s", crs_strerror(err));
		crs_pub_close(pub);
		return 1;
	}
	uint8_t *copy = sc->offer ? malloc(size) : NULL;
	if (sc->offer && !copy) {
		crs_pub_close(pub);
		return 1;
	}
	struct win w;
	win_init(&w, x->ctl, 0, 0, size);
	struct claim_wait cw = { .spin_limit = spin_limit };
	uint64_t seq;
	for (seq = 0; tx_go(&w, seq); seq++) {
		if (sc->offer) {
			fill_msg(copy, size, seq);
			err = crs_pub_offer(pub, copy, size);
			if (err)
				goto fail;
			continue;
		}
		void *buf;
		err = crs_pub_claim(pub, size, &buf);
		if (__builtin_expect(err != 0, 0) &&
		    (err = claim_refused(pub, size, &buf, err, &cw)) != 0)
			goto fail;
		fill_msg(buf, size, seq);
		if (!sc->batch)
			err = crs_pub_commit(pub, size);
		else if ((err = crs_pub_commit_more(pub, size)) == 0 &&
			 seq % BATCH == BATCH - 1)
			crs_pub_flush(pub);
		if (err)
			goto fail;
	}
	crs_pub_flush(pub);
	free(copy);
	rep->total = seq;
	rep->refused_demand = cw.no_demand;
	rep->refused_room = cw.no_room;
	rep->waits = cw.waits;
	err = crs_pub_complete(pub);
	if (!err)
		err = crs_pub_wait_consumed(pub, 30000);
	crs_pub_close(pub);
	if (err) {
		rep_err(rep, err, "completing: %s", crs_strerror(err));
		return 1;
	}
	return 0;
fail:
	free(copy);
	rep_err(rep, err, "publishing message %" PRIu64 ": %s", seq,
		crs_strerror(err));
	crs_pub_close(pub);
	return 1;
}

static int crs_recv(struct xfer *x, int idx)
{
	const struct tp_scn *sc = x->sc;
	struct proc_rep *rep = &x->ctl->rep[idx];
	const size_t size = x->size;
	struct crs_sub_opts so;
	crs_sub_opts_init(&so);
	if (!sc->defaults)
		so.prefetch = sc->prefetch;
	so.wait_ms = 20000;
	so.spin_us = sc->spin_us;
	crs_sub *sub = NULL;
	int err = crs_sub_open(x->name, &so, &sub);
	if (!err && !sc->prefetch && !sc->defaults)
		err = crs_sub_request(sub, sc->request);
	if (err) {
		rep_err(rep, err, "subscribe: %s", crs_strerror(err));
		crs_sub_close(sub);
		return 1;
	}
	struct win w;
	win_init(&w, x->ctl, idx, x->warmup, size);
	uint64_t seq = 0, sum = 0, bad = 0, empty = 0;
	int64_t deadline = now_ns() + WATCHDOG_NS;
	struct crs_msg msgs[BATCH];
	for (;;) {
		int n = sc->batch || sc->take ? crs_sub_take(sub, msgs, BATCH, 0)
					      : crs_sub_poll(sub, &msgs[0]);
		if (n >= 1) {
			for (int i = 0; i < n; i++) {
				const struct crs_msg *m = &msgs[i];
				if (m->len != size || m->seq != seq ||
				    !read_msg(m->data, m->len, seq, &sum))
					bad++;
				rx_tick(&w, ++seq);
			}
			crs_sub_release(sub);
			continue;
		}
		if (n < 0) {
			const struct crs_end *e = crs_sub_end(sub);
			if (!e || e->code != 0)
				rep_err(rep, n, "stream ended after %" PRIu64
					" messages: %s", seq,
					e ? e->message : crs_strerror(n));
			break;
		}
		empty++;
		if ((sc->blocking || (empty & 0xfffff) == 0) &&
		    now_ns() > deadline) {
			rep_err(rep, ETIMEDOUT, "stuck after %" PRIu64
				" messages", seq);
			break;
		}
		if (sc->blocking)
			crs_sub_wait(sub, 1000);
		else
			idle(x->cfg);
	}
	bench_sink += sum;
	if (w.state == 1)
		win_close(&w, seq);
	else if (w.state == 0 && !rep->err)
		rep_err(rep, EPROTO, "stream ended during the warm-up");
	rep->total = seq;
	rep->bad = bad;
	rep->empty = empty;
	crs_sub_close(sub);
	return rep->err ? 1 : 0;
}

static int crs_setup(struct xfer *x)
{
	stream_name(x->name, sizeof(x->name), x->id);
	return 0;
}

const struct tp_scn crs_tp_scns[] = {
	{ .name = "crs-spin-p128", .kind = "crs", .spins = 1, .mode = "both spin",
	  .desc = "zero-copy: claim, write in place, commit; poll, read in "
		  "place, release; prefetch 128 (the default until "
		  "2026-12)",
	  .setup = crs_setup, .send = crs_send, .recv = crs_recv,
	  .prefetch = 128, .is_default = 1 },
	{ .name = "crs-offer-p128", .kind = "crs", .spins = 1,
	  .mode = "sub spins; pub blocks in offer when refused",
	  .desc = "copying: the publisher fills a private buffer and calls "
		  "crs_pub_offer (claim, memcpy, commit; BLOCK overflow "
		  "waits in crs_pub_wait); subscriber as crs-spin-p128",
	  .setup = crs_setup, .send = crs_send, .recv = crs_recv,
	  .prefetch = 128, .offer = 1, .is_default = 1 },
	{ .name = "crs-replay-p128", .kind = "crs", .spins = 1, .mode = "both spin",
	  .desc = "as crs-spin-p128 with the publisher in CRS_MODE_REPLAY "
		  "(runs ahead of demand, bounded by the ring; retains)",
	  .setup = crs_setup, .send = crs_send, .recv = crs_recv,
	  .prefetch = 128, .replay = 1, .is_default = 1 },
	{ .name = "crs-wait-p128", .kind = "crs",
	  .mode = "both block (20 us spin, then sleep)",
	  .desc = "blocking: crs_sub_wait when empty, crs_pub_wait when "
		  "refused, default spin_us (20 us of polling first)",
	  .setup = crs_setup, .send = crs_send, .recv = crs_recv,
	  .prefetch = 128, .blocking = 1, .is_default = 1 },
	{ .name = "crs-defaults", .kind = "crs", .spins = 1, .mode = "both spin",
	  .desc = "as crs-spin-p128 with the subscriber's prefetch as "
		  "crs_sub_opts_init sets it (2^20)",
	  .setup = crs_setup, .send = crs_send, .recv = crs_recv,
	  .defaults = 1, .is_default = 1 },
	{ .name = "crs-batch", .kind = "crs", .spins = 1, .mode = "both spin",
	  .desc = "batch API with default prefetch: crs_pub_commit_more, "
		  "crs_pub_flush every 64; crs_sub_take of up to 64, one "
		  "crs_sub_release per batch",
	  .setup = crs_setup, .send = crs_send, .recv = crs_recv,
	  .defaults = 1, .batch = 1, .is_default = 1 },
	{ .name = "crs-take", .kind = "crs", .spins = 1, .mode = "both spin",
	  .desc = "as crs-defaults with the subscriber in crs_sub_take of up "
		  "to 64: a reader that keeps pace with the publisher (it "
		  "slows the publisher down: bench/results/2026-12-01/"
		  "ab-store-stall.txt)",
	  .setup = crs_setup, .send = crs_send, .recv = crs_recv,
	  .defaults = 1, .take = 1 },
	{ .name = "crs-spin-unbounded", .kind = "crs", .spins = 1, .mode = "both spin",
	  .desc = "as crs-spin-p128 with prefetch 0 and "
		  "crs_sub_request(CRS_UNBOUNDED)",
	  .setup = crs_setup, .send = crs_send, .recv = crs_recv,
	  .prefetch = 0, .request = CRS_UNBOUNDED },
	{ .name = "crs-spin-p4096", .kind = "crs", .spins = 1, .mode = "both spin",
	  .desc = "as crs-spin-p128 with prefetch 4096",
	  .setup = crs_setup, .send = crs_send, .recv = crs_recv,
	  .prefetch = 4096 },
	{ .name = "crs-fanout", .kind = "crs",
	  .mode = "all sleep at once (spin_us -1)",
	  .desc = "fan-out, blocking: subscribers in crs_sub_wait, the "
		  "publisher in crs_pub_wait when refused, spin_us -1 on "
		  "both (no polling before sleeping); prefetch 128",
	  .setup = crs_setup, .send = crs_send, .recv = crs_recv,
	  .prefetch = 128, .blocking = 1, .spin_us = -1, .fan = 1,
	  .is_default = 1 },
};
const int n_crs_tp_scns = sizeof(crs_tp_scns) / sizeof(crs_tp_scns[0]);

void tp_list(FILE *f)
{
	for (int i = 0; i < n_crs_tp_scns + n_base_tp_scns; i++) {
		const struct tp_scn *sc = i < n_crs_tp_scns
						  ? &crs_tp_scns[i]
						  : &base_tp_scns[i - n_crs_tp_scns];
		fprintf(f, "%-20s %-8s %-9s %s [%s]%s\n", sc->name, sc->kind,
			sc->fan ? "fan-out" : "1:1", sc->desc, sc->mode,
			sc->is_default ? "" : " (not default)");
	}
}

/* ---- the driver ----------------------------------------------------------- */

static int send_entry(void *arg, int idx)
{
	(void)idx;
	struct xfer *x = arg;
	return x->sc->send(x);
}

static int recv_entry(void *arg, int idx)
{
	struct xfer *x = arg;
	return x->sc->recv(x, idx);
}

static void close_fds(struct xfer *x)
{
	for (size_t i = 0; i < sizeof(x->fds) / sizeof(x->fds[0]); i++) {
		if (x->fds[i] >= 0)
			close(x->fds[i]);
		x->fds[i] = -1;
	}
}

static unsigned next_id;

/* One measurement: one sender, nrecv receivers. */
static void tp_measure(const struct config *cfg, const struct tp_scn *sc,
		       size_t size, int nrecv, struct tp_sample *s)
{
	memset(s, 0, sizeof(*s));
	int64_t started = now_ns();
	struct xfer x = { .cfg = cfg, .sc = sc, .size = size, .nrecv = nrecv,
			  .id = next_id++ };
	for (size_t i = 0; i < sizeof(x.fds) / sizeof(x.fds[0]); i++)
		x.fds[i] = -1;
	x.warmup = 2 * cfg->ring_bytes / (size + 8) + 1;
	x.ctl = ctl_new(nrecv, cfg->warm_ns);
	if (!x.ctl) {
		snprintf(s->err, sizeof(s->err), "out of memory");
		return;
	}
	int err = sc->setup ? sc->setup(&x) : 0;
	if (err) {
		snprintf(s->err, sizeof(s->err), "setup: %s", strerror(-err));
		close_fds(&x);
		ctl_free(x.ctl);
		return;
	}
	pid_t pids[MAX_PROCS];
	int n = 0;
	pids[n++] = spawn(cfg, 0, send_entry, &x, 0);
	for (int i = 1; i <= nrecv; i++)
		pids[n++] = spawn(cfg, i & 1, recv_entry, &x, i);
	close_fds(&x); /* the children hold what they use */
	int warm = wait_warm(x.ctl, nrecv, pids, n,
			     now_ns() + WATCHDOG_NS / 2);
	if (!warm)
		sleep_ns((int64_t)(cfg->tp_secs * 1e9));
	atomic_store(&x.ctl->stop, 1);
	int failed = reap_all(pids, n, now_ns() + WATCHDOG_NS / 2);
	if (sc->cleanup)
		sc->cleanup(&x);

	const struct proc_rep *rep = x.ctl->rep;
	for (int i = 0; i <= nrecv && !s->err[0]; i++)
		if (rep[i].err)
			snprintf(s->err, sizeof(s->err), "%s %d: %s",
				 i ? "receiver" : "sender", i, rep[i].msg);
	if (!s->err[0] && warm)
		snprintf(s->err, sizeof(s->err), "%s before the window",
			 warm == -ETIMEDOUT ? "timed out" : "a process died");
	if (!s->err[0] && failed)
		snprintf(s->err, sizeof(s->err), "%d processes failed", failed);
	double rate = 0, util = 0, secs = 0, msgs = 0;
	uint64_t bad = 0, empty = 0, total = 0;
	for (int i = 0; i <= nrecv; i++) {
		double w = (double)(rep[i].t1 - rep[i].t0) / 1e9;
		if (!rep[i].done || w <= 0) {
			if (!s->err[0])
				snprintf(s->err, sizeof(s->err),
					 "%s %d: no window",
					 i ? "receiver" : "sender", i);
			continue;
		}
		util += (double)rep[i].cpu / 1e9 / w;
		if (i == 0) {
			s->send_rate = (double)rep[i].msgs / w;
			continue;
		}
		rate += (double)rep[i].msgs / w;
		secs += w;
		msgs += (double)rep[i].msgs;
		bad += rep[i].bad;
		empty += rep[i].empty;
		total += rep[i].total;
	}
	if (bad && !s->err[0])
		snprintf(s->err, sizeof(s->err), "%" PRIu64 " bad messages",
			 bad);
	for (int i = 1; i <= nrecv && !s->err[0]; i++)
		if (rep[i].total != rep[0].total)
			snprintf(s->err, sizeof(s->err),
				 "receiver %d read %" PRIu64 " of %" PRIu64
				 " messages", i, rep[i].total, rep[0].total);
	s->rate = rate;
	s->secs = secs / nrecv;
	s->messages = (uint64_t)msgs;
	s->util = util;
	s->cpu_ns = rate > 0 ? util / rate * 1e9 : 0;
	s->bad = bad;
	double sent = rep[0].total ? (double)rep[0].total : 1;
	s->refused_demand = (double)rep[0].refused_demand / sent;
	s->refused_room = (double)rep[0].refused_room / sent;
	s->waits = rep[0].waits;
	s->empty = total ? (double)empty / (double)total : 0;
	s->ok = !s->err[0] && rate > 0;
	s->wall = (double)(now_ns() - started) / 1e9;
	ctl_free(x.ctl);
}

static const struct tp_scn *scn_at(int i)
{
	return i < n_crs_tp_scns ? &crs_tp_scns[i]
				 : &base_tp_scns[i - n_crs_tp_scns];
}

static bool usable(const struct config *cfg, const struct tp_scn *sc)
{
	return !sc->needs_zmq || cfg->have_zmq;
}

static void note(const struct config *cfg, struct results *res,
		 struct tp_cell *cl, struct tp_sample *s, int round)
{
	probe_note(cfg, res, &s->pp_before, &s->pp_after, &s->cap_before,
		   &s->cap);
	if (!s->ok) {
		cl->failed++;
		res->failures++;
		fprintf(stderr, "crs-bench: %s size %zu x%d round %d failed: %s\n",
			cl->name, cl->size, cl->nsubs, round + 1, s->err);
	}
	cl->n++;
	if (cfg->verbose)
		fprintf(stderr, "%d/%d %s %zu B x%d: %.3f M/s, %.2f cores, "
			"%.2f s, probe %.0f ns%s%s\n", round + 1, cfg->rounds,
			cl->name, cl->size, cl->nsubs, s->rate / 1e6, s->util,
			s->wall, s->pp_after, s->ok ? "" : ": ", s->err);
	else if (isatty(2))
		fprintf(stderr, "\r%d/%d %s %zu B x%d: %.2f M/s        ",
			round + 1, cfg->rounds, cl->name, cl->size, cl->nsubs,
			s->rate / 1e6);
}

/* 1:1 throughput: every size, every selected scenario, interleaved. */
int tp_run(const struct config *cfg, struct results *res)
{
	int sel[64], nsel = 0;
	for (int i = 0; i < n_crs_tp_scns + n_base_tp_scns; i++) {
		const struct tp_scn *sc = scn_at(i);
		if (sc->fan || !usable(cfg, sc))
			continue;
		if (scenario_selected(cfg, sc->name, sc->is_default,
				      !strcmp(sc->name, "bare-ring") ||
					      !strcmp(sc->name, "crs-spin-p128")))
			sel[nsel++] = i;
	}
	res->ntp = nsel * cfg->nsizes;
	res->tp = calloc((size_t)res->ntp, sizeof(*res->tp));
	if (!res->tp)
		return -ENOMEM;
	for (int z = 0; z < cfg->nsizes; z++)
		for (int k = 0; k < nsel; k++) {
			struct tp_cell *cl = &res->tp[z * nsel + k];
			cl->name = scn_at(sel[k])->name;
			cl->spins = scn_at(sel[k])->spins;
			cl->size = cfg->sizes[z];
			cl->nsubs = 1;
			if (scn_at(sel[k])->needs_aeron)
				cl->skipped = aeron_skip_reason(cfg);
		}
	/* Round r starts at scenario r mod nsel: the VM switches between a
	 * fast and a slow state within a run, and a fixed order would give
	 * the same scenario the same place in that drift every round. */
	for (int round = 0; round < cfg->rounds; round++)
		for (int z = 0; z < cfg->nsizes; z++)
			for (int j = 0; j < nsel; j++) {
				int k = (j + round) % nsel;
				struct tp_cell *cl = &res->tp[z * nsel + k];
				struct tp_sample *s = &cl->s[cl->n];
				if (cl->skipped)
					continue;
				tp_measure(cfg, scn_at(sel[k]), cl->size, 1, s);
				note(cfg, res, cl, s, round);
			}
	return 0;
}

/* Fan-out: one publisher, K subscribers, blocking. */
int fan_run(const struct config *cfg, struct results *res)
{
	int sel[16], nsel = 0;
	for (int i = 0; i < n_crs_tp_scns + n_base_tp_scns; i++) {
		const struct tp_scn *sc = scn_at(i);
		if (sc->fan && usable(cfg, sc) &&
		    scenario_selected(cfg, sc->name, sc->is_default,
				      !strcmp(sc->name, "crs-fanout")))
			sel[nsel++] = i;
	}
	int per_size = nsel * cfg->nfanout;
	res->nfan = per_size * cfg->nfan_sizes;
	res->fan = calloc((size_t)res->nfan + 1, sizeof(*res->fan));
	if (!res->fan)
		return -ENOMEM;
	for (int z = 0; z < cfg->nfan_sizes; z++)
		for (int f = 0; f < cfg->nfanout; f++)
			for (int k = 0; k < nsel; k++) {
				struct tp_cell *cl =
					&res->fan[z * per_size + f * nsel + k];
				cl->name = scn_at(sel[k])->name;
				cl->spins = scn_at(sel[k])->spins;
				cl->size = cfg->fan_sizes[z];
				cl->nsubs = cfg->fanout[f];
			}
	for (int round = 0; round < cfg->rounds; round++)
		for (int i = 0; i < res->nfan; i++) {
			struct tp_cell *cl = &res->fan[i];
			const struct tp_scn *sc = scn_at(sel[i % nsel]);
			struct tp_sample *s = &cl->s[cl->n];
			tp_measure(cfg, sc, cl->size, cl->nsubs, s);
			note(cfg, res, cl, s, round);
		}
	return 0;
}
