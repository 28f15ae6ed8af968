/*
 * pattern.c - the user's own traffic pattern (section `pattern`): one
 * publisher sends bursts of --burst messages of --size bytes at --rate
 * messages a second (0: as fast as demand allows) to --subs subscribers,
 * each of which spends --work ns on every message and requests with
 * --prefetch. Both sides block as an application would (crs_pub_wait,
 * crs_sub_wait). Reported per round: the rate published and delivered,
 * the publisher's refusals for want of demand or room (back-pressure),
 * and the latency from commit to the subscriber seeing the message,
 * queueing behind slow processing included.
 *
 * Payload: the message's index in the first 8 bytes, the publisher's
 * CLOCK_MONOTONIC time just before commit in the next 8, the index's low
 * byte in the rest; the subscriber reads every byte and checks the index.
 */
#include <errno.h>
#include <inttypes.h>
#include <stdlib.h>
#include <time.h>
#include <unistd.h>

#include "bench.h"
#include "crs/crs.h"

struct pat_run {
	const struct config *cfg;
	struct ctl *ctl;
	struct histo *h; /* one per subscriber, shared */
	char name[128];
};

/* Sleep until the monotonic time t (ns), unless it has passed. */
static void sleep_until(int64_t t)
{
	struct timespec ts = { t / 1000000000, t % 1000000000 };
	while (clock_nanosleep(CLOCK_MONOTONIC, TIMER_ABSTIME, &ts, NULL) ==
	       EINTR)
		;
}

static int pat_send(void *arg, int idx)
{
	struct pat_run *r = arg;
	const struct config *cfg = r->cfg;
	struct proc_rep *rep = &r->ctl->rep[idx];
	const size_t size = cfg->pat_size;
	struct crs_pub_opts po;
	crs_pub_opts_init(&po);
	po.ring_bytes = cfg->ring_bytes;
	crs_pub *pub = NULL;
	int err = crs_pub_create(r->name, &po, &pub);
	if (!err)
		err = crs_pub_wait_subscribers(pub, cfg->pat_subs, 20000);
	if (err) {
		rep_err(rep, err, "publisher: %s", crs_strerror(err));
		if (pub)
			crs_pub_close(pub);
		return 1;
	}
	/* Tells pat_round the window may open. */
	atomic_store(&r->ctl->nready, 1);
	/* A burst every burst/rate seconds, from now on. */
	int64_t period = cfg->pat_rate > 0 ? (int64_t)(1e9 * cfg->pat_burst /
						       cfg->pat_rate)
					   : 0;
	int64_t t0 = now_ns(), next = t0;
	uint64_t seq = 0, nd = 0, nr = 0;
	while (!atomic_load_explicit(&r->ctl->stop, memory_order_relaxed)) {
		if (period) {
			sleep_until(next);
			next += period;
		}
		for (uint32_t b = 0; b < cfg->pat_burst; b++, seq++) {
			void *buf;
			while ((err = crs_pub_claim(pub, size, &buf)) != 0) {
				if (err == -CRS_ENODEMAND)
					nd++;
				else if (err == -CRS_ENOROOM)
					nr++;
				else
					goto fail;
				err = crs_pub_wait(pub, size, 1000);
				if (err && err != -ETIMEDOUT)
					goto fail;
			}
			uint8_t *p = buf;
			memset(p + 16, (int)(seq & 0xff), size - 16);
			put_word(p, seq);
			put_word(p + 8, (uint64_t)now_ns());
			crs_pub_commit(pub, size);
		}
	}
	rep->t0 = t0;
	rep->t1 = now_ns();
	rep->msgs = seq;
	rep->refused_demand = nd;
	rep->refused_room = nr;
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
	rep_err(rep, err, "publishing message %" PRIu64 ": %s", seq,
		crs_strerror(err));
	crs_pub_close(pub);
	return 1;
}

/* Busy for ns nanoseconds: the subscriber's processing of a message. */
static void work_for(int64_t ns)
{
	if (ns <= 0)
		return;
	int64_t until = now_ns() + ns;
	while (now_ns() < until)
		cpu_relax();
}

static int pat_recv(void *arg, int idx)
{
	struct pat_run *r = arg;
	const struct config *cfg = r->cfg;
	struct proc_rep *rep = &r->ctl->rep[idx];
	struct histo *h = &r->h[idx - 1];
	struct crs_sub_opts so;
	crs_sub_opts_init(&so);
	so.prefetch = cfg->pat_prefetch;
	so.wait_ms = 20000;
	crs_sub *sub;
	int err = crs_sub_open(r->name, &so, &sub);
	if (err) {
		rep_err(rep, err, "subscriber: %s", crs_strerror(err));
		return 1;
	}
	histo_reset(h);
	uint64_t seq = 0, sum = 0;
	int64_t t0 = 0, t1 = 0;
	struct crs_msg m;
	for (;;) {
		int n = crs_sub_poll(sub, &m);
		if (n == 0) {
			crs_sub_wait(sub, 1000);
			continue;
		}
		if (n < 0)
			break;
		int64_t now = now_ns();
		const uint8_t *p = m.data;
		if (m.len != cfg->pat_size || get_word(p) != m.seq) {
			rep_err(rep, EPROTO, "message %" PRIu64 " torn", m.seq);
			break;
		}
		if (!seq)
			t0 = now;
		int64_t sent = (int64_t)get_word(p + 8);
		histo_add(h, now > sent ? (uint64_t)(now - sent) : 0);
		sum += sum_msg(p, m.len);
		work_for(cfg->pat_work_ns);
		crs_sub_release(sub);
		seq++;
		t1 = now;
	}
	const struct crs_end *e = crs_sub_end(sub);
	if (!rep->err && (!e || e->code))
		rep_err(rep, e ? e->code : EPROTO, "stream ended: %s",
			e ? e->message : "?");
	bench_sink += sum;
	rep->msgs = seq;
	rep->t0 = t0;
	rep->t1 = t1;
	crs_sub_close(sub);
	return rep->err ? 1 : 0;
}

/* One round: fork, let it run a window, stop, reap, summarise. */
static void pat_round(const struct config *cfg, unsigned id,
		      struct pat_sample *out)
{
	memset(out, 0, sizeof(*out));
	int nsubs = cfg->pat_subs;
	struct pat_run r = { .cfg = cfg };
	r.ctl = ctl_new(nsubs, cfg->warm_ns);
	r.h = shared_alloc(sizeof(*r.h) * (size_t)nsubs);
	if (!r.ctl || !r.h) {
		snprintf(out->err, sizeof(out->err), "out of memory");
		goto done;
	}
	stream_name(r.name, sizeof(r.name), id);
	pid_t pids[1 + MAX_FANOUT];
	pids[0] = spawn(cfg, 0, pat_send, &r, 0);
	for (int k = 1; k <= nsubs; k++)
		pids[k] = spawn(cfg, 1, pat_recv, &r, k);
	/* The window opens once the publisher has its subscribers: on a
	 * loaded machine forking and handshakes can outlast a short window. */
	int64_t give_up = now_ns() + WATCHDOG_NS;
	while (!atomic_load(&r.ctl->nready) &&
	       !__atomic_load_n(&r.ctl->rep[0].err, __ATOMIC_RELAXED) &&
	       now_ns() < give_up)
		sleep_ns(1000000);
	sleep_ns((int64_t)(cfg->tp_secs * 1e9));
	atomic_store(&r.ctl->stop, 1);
	int failed = reap_all(pids, 1 + nsubs, now_ns() + WATCHDOG_NS);
	for (int k = 0; k <= nsubs && !out->err[0]; k++)
		if (r.ctl->rep[k].err)
			snprintf(out->err, sizeof(out->err), "%s",
				 r.ctl->rep[k].msg);
	if (failed && !out->err[0])
		snprintf(out->err, sizeof(out->err), "%d processes failed",
			 failed);
	if (out->err[0])
		goto done;
	const struct proc_rep *p = &r.ctl->rep[0];
	struct histo all;
	histo_reset(&all);
	double deliv = 0;
	for (int k = 1; k <= nsubs; k++) {
		const struct proc_rep *s = &r.ctl->rep[k];
		histo_merge(&all, &r.h[k - 1]);
		if (s->t1 > s->t0)
			deliv += (double)s->msgs * 1e9 / (double)(s->t1 - s->t0);
	}
	out->ok = 1;
	out->messages = p->msgs;
	out->sent_rate = p->t1 > p->t0 ? (double)p->msgs * 1e9 /
						 (double)(p->t1 - p->t0)
				       : 0;
	out->deliv_rate = deliv / nsubs;
	out->refused = (double)(p->refused_demand + p->refused_room);
	out->p50 = (double)histo_pct(&all, 50);
	out->p90 = (double)histo_pct(&all, 90);
	out->p99 = (double)histo_pct(&all, 99);
	out->max = (double)all.max;
done:
	if (r.h)
		shared_free(r.h, sizeof(*r.h) * (size_t)nsubs);
	if (r.ctl)
		ctl_free(r.ctl);
}

int pattern_run(const struct config *cfg, struct results *res)
{
	for (int i = 0; i < cfg->rounds; i++) {
		if (isatty(2))
			fprintf(stderr, "\rcrs-bench: pattern round %d/%d ", i + 1,
				cfg->rounds);
		struct pat_sample *s = &res->pattern[res->npattern++];
		pat_round(cfg, 90000u + (unsigned)i, s);
		if (!s->ok)
			res->failures++;
		if (cfg->verbose)
			fprintf(stderr, "pattern round %d: %s %.0f/s sent, "
					"p50 %.0f ns\n",
				i + 1, s->ok ? "ok" : s->err, s->sent_rate,
				s->p50);
	}
	return 0;
}
