/*
 * wake.c - how long one publisher takes to wake many sleeping subscribers.
 *
 * N subscriber processes (64 by default, the most a stream admits) block in
 * crs_sub_wait with spin_us = -1 (they sleep at once). When every one has
 * announced that it is about to wait, and every one is seen sleeping in
 * /proc/PID/stat (state S) after a settle time, the publisher process reads
 * CLOCK_MONOTONIC, claims and commits one message. Each subscriber reads
 * CLOCK_MONOTONIC as soon as crs_sub_wait returns. Per wake: commit to the
 * first, the median and the last subscriber awake; over the wakes of a
 * measurement: medians (and p90/max of the last). The publisher's commit
 * call is timed too: it is where the wake happens.
 *
 * crs wakes every subscriber of a stream with ONE futex wake (FUTEX_WAKE,
 * INT_MAX) on one shared word: there is no per-subscriber wake to batch;
 * what remains is the kernel waking N tasks and the scheduler running
 * them on 2 CPUs. The raw-futex baseline does exactly that and nothing
 * else: N processes in FUTEX_WAIT on one shared word, one FUTEX_WAKE of
 * INT_MAX after incrementing it.
 *
 * Variants: crs-uring (the default engine), crs-poll (CRS_NO_URING=1 in
 * every process), raw-futex.
 */
#include <errno.h>
#include <inttypes.h>
#include <limits.h>
#include <linux/futex.h>
#include <stdlib.h>
#include <sys/syscall.h>
#include <unistd.h>

#include "bench.h"
#include "crs/crs.h"

#define MAX_WAKES 200
#define SETTLE_NS 5000000LL
/* Subscribers open the stream at most this many at a time: more than 16
 * handshakes at once make crs_sub_open fail (the publisher refuses the
 * 17th pending handshake and the subscriber does not retry; with the
 * poll engine the publisher serves its sockets only between 20 ms futex
 * slices, so they pile up). notes/bench.md has the numbers. */
#define OPENING_MAX 8

struct wake_shared {
	_Alignas(64) _Atomic uint32_t word; /* raw-futex */
	_Alignas(64) _Atomic int opened;    /* subscribers past crs_sub_open */
	_Alignas(64) pid_t pids[MAX_PROCS];
	int64_t t0[MAX_WAKES];		     /* publisher: before the commit */
	int64_t commit_ns[MAX_WAKES];	     /* duration of the commit/wake */
	int64_t woke[MAX_WAKES][MAX_PROCS];  /* subscriber i, wake r */
};

struct wake_run {
	const struct config *cfg;
	const char *variant;
	int subs, wakes;
	char name[80];
	struct ctl *ctl;
	struct wake_shared *sh;
};

static void engine_env(const struct wake_run *w)
{
	if (!strcmp(w->variant, "crs-poll"))
		setenv("CRS_NO_URING", "1", 1);
	else
		unsetenv("CRS_NO_URING");
}

static char proc_state(pid_t pid)
{
	char path[64], buf[512];
	snprintf(path, sizeof(path), "/proc/%d/stat", (int)pid);
	FILE *f = fopen(path, "r");
	if (!f)
		return '?';
	size_t n = fread(buf, 1, sizeof(buf) - 1, f);
	fclose(f);
	buf[n] = 0;
	char *p = strrchr(buf, ')');
	return p && p[1] == ' ' ? p[2] : '?';
}

/* Wait until every subscriber said it is about to sleep (nready reaches
 * want), then until all are asleep. 0 or -ETIMEDOUT. */
static int wait_asleep(struct wake_run *w, int want)
{
	int64_t deadline = now_ns() + 30000000000LL;
	while (atomic_load(&w->ctl->nready) < want) {
		if (now_ns() > deadline)
			return -ETIMEDOUT;
		sleep_ns(200000);
	}
	sleep_ns(SETTLE_NS);
	for (int i = 1; i <= w->subs; i++) {
		while (proc_state(w->sh->pids[i]) != 'S') {
			if (now_ns() > deadline)
				return -ETIMEDOUT;
			sleep_ns(200000);
		}
	}
	return 0;
}

static long futex(_Atomic uint32_t *addr, int op, uint32_t val)
{
	return syscall(SYS_futex, (uint32_t *)addr, op, val, NULL, NULL, 0);
}

static int waker(void *arg, int idx)
{
	struct wake_run *w = arg;
	struct proc_rep *rep = &w->ctl->rep[idx];
	w->sh->pids[0] = getpid();
	crs_pub *pub = NULL;
	int err = 0;
	if (strcmp(w->variant, "raw-futex")) {
		engine_env(w);
		struct crs_pub_opts po;
		crs_pub_opts_init(&po);
		po.spin_us = -1;
		err = crs_pub_create(w->name, &po, &pub);
		if (!err)
			err = crs_pub_wait_subscribers(pub, w->subs, 30000);
		if (err) {
			rep_err(rep, err, "publisher: %s (%d of %d subscribers "
				"active)", crs_strerror(err),
				pub ? crs_pub_subscribers(pub) : 0, w->subs);
			goto out;
		}
	}
	for (int r = 0; r < w->wakes; r++) {
		err = wait_asleep(w, w->subs * (r + 1));
		if (err) {
			rep_err(rep, err, "wake %d: subscribers not asleep", r);
			goto out;
		}
		if (pub)
			crs_pub_serve(pub); /* serve now, not inside the commit */
		int64_t t0 = now_ns();
		if (pub) {
			void *buf;
			err = crs_pub_claim(pub, 64, &buf);
			if (err) {
				rep_err(rep, err, "claim: %s",
					crs_strerror(err));
				goto out;
			}
			fill_msg(buf, 64, (uint64_t)r);
			err = crs_pub_commit(pub, 64);
		} else {
			atomic_fetch_add(&w->sh->word, 1);
			futex(&w->sh->word, FUTEX_WAKE, INT_MAX);
		}
		int64_t t1 = now_ns();
		w->sh->t0[r] = t0;
		w->sh->commit_ns[r] = t1 - t0;
		if (err) {
			rep_err(rep, err, "commit: %s", crs_strerror(err));
			goto out;
		}
	}
	/* Let the last wake be recorded before ending the stream. */
	int64_t deadline = now_ns() + 30000000000LL;
	while (atomic_load(&w->ctl->nwoken) < w->subs * w->wakes &&
	       now_ns() < deadline)
		sleep_ns(200000);
	if (pub) {
		crs_pub_complete(pub);
		crs_pub_wait_consumed(pub, 10000);
	} else {
		atomic_store(&w->sh->word, UINT32_MAX);
		futex(&w->sh->word, FUTEX_WAKE, INT_MAX);
	}
out:
	if (pub)
		crs_pub_close(pub);
	return rep->err ? 1 : 0;
}

static int sleeper(void *arg, int idx)
{
	struct wake_run *w = arg;
	struct proc_rep *rep = &w->ctl->rep[idx];
	w->sh->pids[idx] = getpid();
	if (!strcmp(w->variant, "raw-futex")) {
		uint32_t seen = 0;
		for (int r = 0; r < w->wakes; r++) {
			atomic_fetch_add(&w->ctl->nready, 1);
			uint32_t v;
			while ((v = atomic_load(&w->sh->word)) == seen)
				futex(&w->sh->word, FUTEX_WAIT, v);
			w->sh->woke[r][idx] = now_ns();
			atomic_fetch_add(&w->ctl->nwoken, 1);
			seen = v;
		}
		while (atomic_load(&w->sh->word) != UINT32_MAX)
			futex(&w->sh->word, FUTEX_WAIT, seen);
		return 0;
	}
	engine_env(w);
	struct crs_sub_opts so;
	crs_sub_opts_init(&so);
	so.wait_ms = 20000;
	so.spin_us = -1;
	so.handshake_ms = 20000;
	crs_sub *sub;
	int64_t give_up = now_ns() + 30000000000LL;
	while (atomic_load(&w->sh->opened) < idx - 1 - OPENING_MAX &&
	       now_ns() < give_up)
		sleep_ns(200000);
	int err = crs_sub_open(w->name, &so, &sub);
	atomic_fetch_add(&w->sh->opened, 1);
	if (err) {
		rep_err(rep, err, "subscribe: %s", crs_strerror(err));
		return 1;
	}
	crs_loop *loop;
	if (idx == 1 && crs_loop_create(&loop) == 0) {
		snprintf(rep->engine, sizeof(rep->engine), "%s",
			 crs_loop_engine(loop));
		crs_loop_close(loop);
	}
	struct crs_msg m;
	for (int r = 0; r < w->wakes; r++) {
		atomic_fetch_add(&w->ctl->nready, 1);
		int n;
		while ((n = crs_sub_poll(sub, &m)) == 0) {
			err = crs_sub_wait(sub, 30000);
			if (err) {
				rep_err(rep, err, "wait: %s", crs_strerror(err));
				goto out;
			}
			/* Stamp the first return: the wake itself. */
			if (!w->sh->woke[r][idx])
				w->sh->woke[r][idx] = now_ns();
		}
		if (!w->sh->woke[r][idx]) /* it never slept */
			w->sh->woke[r][idx] = now_ns();
		if (n < 0) {
			rep_err(rep, n, "stream ended early");
			goto out;
		}
		if (m.seq != (uint64_t)r)
			rep_err(rep, EPROTO, "wake %d: message %" PRIu64, r,
				m.seq);
		crs_sub_release(sub);
		atomic_fetch_add(&w->ctl->nwoken, 1);
	}
	while ((err = crs_sub_poll(sub, &m)) == 0)
		if (crs_sub_wait(sub, 10000))
			break;
out:
	crs_sub_close(sub);
	return rep->err ? 1 : 0;
}

static unsigned next_wake_id;

static void wake_measure(const struct config *cfg, const char *variant,
			 struct wake_sample *s)
{
	memset(s, 0, sizeof(*s));
	struct wake_run w = { .cfg = cfg, .variant = variant,
			      .subs = cfg->wake_subs,
			      .wakes = cfg->wake_rounds };
	stream_name(w.name, sizeof(w.name), 100000 + next_wake_id++);
	w.ctl = ctl_new(w.subs, 0);
	w.sh = shared_alloc(sizeof(*w.sh));
	if (!w.ctl || !w.sh) {
		snprintf(s->err, sizeof(s->err), "out of memory");
		goto out;
	}
	pid_t pids[MAX_PROCS];
	pids[0] = spawn(cfg, 0, waker, &w, 0);
	for (int i = 1; i <= w.subs; i++)
		pids[i] = spawn(cfg, i & 1, sleeper, &w, i);
	int failed = reap_all(pids, w.subs + 1, now_ns() + WATCHDOG_NS);
	if (cfg->verbose)
		for (int i = 0; i <= w.subs; i++)
			if (w.ctl->rep[i].err)
				fprintf(stderr, "  wake %s process %d: %s\n",
					variant, i, w.ctl->rep[i].msg);
	int nbad = 0, first_bad = 0;
	for (int i = 1; i <= w.subs; i++)
		if (w.ctl->rep[i].err && !nbad++)
			first_bad = i;
	if (w.ctl->rep[0].err)
		snprintf(s->err, sizeof(s->err), "publisher: %.60s; %d subscribers "
			 "failed%s%.60s", w.ctl->rep[0].msg, nbad,
			 nbad ? ", first: " : "",
			 nbad ? w.ctl->rep[first_bad].msg : "");
	else if (nbad)
		snprintf(s->err, sizeof(s->err), "%d subscribers failed, first "
			 "(%d): %.100s", nbad, first_bad, w.ctl->rep[first_bad].msg);
	if (!s->err[0] && failed)
		snprintf(s->err, sizeof(s->err), "%d processes failed", failed);
	snprintf(s->engine, sizeof(s->engine), "%s", w.ctl->rep[1].engine);
	if (s->err[0])
		goto out;
	double last[MAX_WAKES], first[MAX_WAKES], mid[MAX_WAKES],
		commit[MAX_WAKES], v[MAX_PROCS];
	for (int r = 0; r < w.wakes; r++) {
		for (int i = 1; i <= w.subs; i++)
			v[i - 1] = (double)(w.sh->woke[r][i] - w.sh->t0[r]);
		first[r] = pct_of(v, w.subs, 0);
		mid[r] = median(v, w.subs);
		last[r] = pct_of(v, w.subs, 100);
		commit[r] = (double)w.sh->commit_ns[r];
	}
	s->ok = 1;
	s->subs = w.subs;
	s->wakes = w.wakes;
	s->last_med = median(last, w.wakes);
	s->last_p90 = pct_of(last, w.wakes, 90);
	s->last_max = pct_of(last, w.wakes, 100);
	s->first_med = median(first, w.wakes);
	s->mid_med = median(mid, w.wakes);
	s->commit_med = median(commit, w.wakes);
out:
	shared_free(w.sh, sizeof(*w.sh));
	ctl_free(w.ctl);
}

int wake_run(const struct config *cfg, struct results *res)
{
	static const char *variants[] = { "crs-uring", "crs-poll",
					  "raw-futex" };
	int sel[3], nsel = 0;
	for (int i = 0; i < 3; i++)
		if (scenario_selected(cfg, variants[i], 1,
				      !strcmp(variants[i], "raw-futex")))
			sel[nsel++] = i;
	res->nwake = nsel;
	res->wake = calloc((size_t)nsel + 1, sizeof(*res->wake));
	if (!res->wake)
		return -ENOMEM;
	for (int k = 0; k < nsel; k++)
		res->wake[k].name = variants[sel[k]];
	for (int round = 0; round < cfg->rounds; round++)
		for (int k = 0; k < nsel; k++) {
			struct wake_cell *cl = &res->wake[k];
			struct wake_sample *s = &cl->s[cl->n++];
			wake_measure(cfg, cl->name, s);
			double before, after, cap0, cap;
			probe_note(cfg, res, &before, &after, &cap0, &cap);
			if (!s->ok) {
				cl->failed++;
				res->failures++;
				fprintf(stderr,
					"crs-bench: wake %s round %d failed: "
					"%s\n",
					cl->name, round + 1, s->err);
			}
			if (isatty(2))
				fprintf(stderr,
					"\r%d/%d wake %s: last %.0f us        ",
					round + 1, cfg->rounds, cl->name,
					s->last_med / 1e3);
		}
	return 0;
}
