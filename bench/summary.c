/*
 * summary.c - the figures every output shares: medians over rounds,
 * per-round ratios, the clean-round filter, finding cells, the targets.
 *
 * Every summary is a median over rounds; every ratio is the median over
 * rounds of the per-round ratio of two scenarios measured in the same
 * round (shared/BENCHMARKING.md), never a ratio of figures from
 * different moments. A pair of one round counts only when the machine
 * was in one state for both: this VM flips every few seconds to minutes
 * between a fast state (probe round trip 60-110 ns) and a slow one
 * (300-340 ns, every transport 3-8x slower), and a ratio of a figure
 * from one state to a figure from the other measures the flip, not the
 * transports.
 */
#include <stdlib.h>

#include "bench.h"

/* ---- summaries -----------------------------------------------------------
 * "clean" rounds: the probes before and after the measurement both got at
 * least CLEAN_CPUS CPUs, i.e. the machine ran two processes at once around
 * it, and bounced the cache line in under CLEAN_RTT_NS. Fixed thresholds,
 * not relative to the run's quickest probe: a run that never saw the
 * machine in a good state has no clean rounds, and says so. Figures are
 * given over clean rounds when there are any (else over all rounds,
 * marked), and over all rounds in the JSON as well.
 * A ratio's pair (or triple) of samples of one round counts when each is
 * clean and the probes around them are in one state: the largest round
 * trip at most STATE_SPREAD times the smallest. Relative, not a fixed
 * line between the states, so it needs no figure of this machine. Only
 * probes that could see the state take part (they got CLEAN_CPUS and
 * stayed under CLEAN_RTT_NS): all of a clean spinning round's; a
 * blocking round's taken while the host ran the vCPUs in turns say
 * nothing about it. */

void summary_init(struct results *res)
{
	for (int i = 0; i < res->nlat; i++) {
		struct lat_cell *c = &res->lat[i];
		histo_reset(&c->clean);
		for (int k = 0; c->round_h && k < c->n; k++)
			if (lat_clean(c, &c->s[k]))
				histo_merge(&c->clean, &c->round_h[k]);
	}
}

double clean_rtt_max(void)
{
	return CLEAN_RTT_NS;
}

static int probe_ok(double cap, double rtt)
{
	return cap >= CLEAN_CPUS && rtt > 0 && rtt < CLEAN_RTT_NS;
}

static int state_ok(double cap0, double cap1, double rtt0, double rtt1)
{
	return probe_ok(cap0, rtt0) && probe_ok(cap1, rtt1);
}

int probes_same_state(const double *rtt, int n)
{
	double lo = n ? rtt[0] : 0, hi = lo;
	for (int i = 1; i < n; i++) {
		lo = rtt[i] < lo ? rtt[i] : lo;
		hi = rtt[i] > hi ? rtt[i] : hi;
	}
	return !n || (lo > 0 && hi <= lo * STATE_SPREAD);
}

/* Appends a sample's probes that could see the state to rtt. */
static int state_probes(double *rtt, int n, double cap0, double rtt0,
			double cap1, double rtt1)
{
	if (probe_ok(cap0, rtt0))
		rtt[n++] = rtt0;
	if (probe_ok(cap1, rtt1))
		rtt[n++] = rtt1;
	return n;
}

/* x, y and w (if not NULL) of one round were measured in one state. */
static int tp_one_state(const struct tp_sample *x, const struct tp_sample *y,
			const struct tp_sample *w)
{
	const struct tp_sample *s[3] = { x, y, w };
	double rtt[6];
	int n = 0;
	for (int i = 0; i < 3 && s[i]; i++)
		n = state_probes(rtt, n, s[i]->cap_before, s[i]->pp_before,
				 s[i]->cap, s[i]->pp_after);
	return probes_same_state(rtt, n);
}

static int lat_one_state(const struct lat_sample *x,
			 const struct lat_sample *y)
{
	double rtt[4];
	int n = state_probes(rtt, 0, x->cap_before, x->pp_before, x->cap,
			     x->pp_after);
	n = state_probes(rtt, n, y->cap_before, y->pp_before, y->cap,
			 y->pp_after);
	return probes_same_state(rtt, n);
}

int tp_clean(const struct tp_cell *c, const struct tp_sample *s)
{
	return s->ok && (!c->spins || state_ok(s->cap_before, s->cap,
					       s->pp_before, s->pp_after));
}

int lat_clean(const struct lat_cell *c, const struct lat_sample *s)
{
	return s->ok && (!c->spins || state_ok(s->cap_before, s->cap,
					       s->pp_before, s->pp_after));
}

static double tp_val(const struct tp_sample *s, size_t size, int what)
{
	switch (what) {
	case TP_GBPS: return s->rate * (double)size / 1e9;
	case TP_CPU: return s->cpu_ns;
	case TP_UTIL: return s->util;
	default: return s->rate;
	}
}

int tp_nclean(const struct tp_cell *c)
{
	int n = 0;
	for (int i = 0; c && i < c->n; i++)
		n += tp_clean(c, &c->s[i]);
	return n;
}

double tp_median(const struct tp_cell *c, int what, int clean)
{
	double v[MAX_ROUNDS];
	int n = 0;
	for (int i = 0; c && i < c->n; i++)
		if (clean ? tp_clean(c, &c->s[i]) : c->s[i].ok)
			v[n++] = tp_val(&c->s[i], c->size, what);
	return median(v, n);
}

/* Median over rounds of a/b in the same round; *np: rounds used. clean:
 * only rounds where both are clean and in one state. */
double tp_ratio_n(const struct tp_cell *a, const struct tp_cell *b,
			 int clean, int *np)
{
	double v[MAX_ROUNDS];
	int n = 0;
	if (a && b)
		for (int i = 0; i < a->n && i < b->n; i++) {
			const struct tp_sample *x = &a->s[i], *y = &b->s[i];
			if ((clean ? tp_clean(a, x) && tp_clean(b, y) &&
					     tp_one_state(x, y, NULL)
				   : x->ok && y->ok) &&
			    y->rate > 0)
				v[n++] = x->rate / y->rate;
		}
	if (np)
		*np = n;
	return median(v, n);
}

/* Clean same-state pairs if there are any, else all rounds. */
double tp_ratio(const struct tp_cell *a, const struct tp_cell *b)
{
	int n;
	double r = tp_ratio_n(a, b, 1, &n);
	return n ? r : tp_ratio_n(a, b, 0, NULL);
}

static double lat_val(const struct lat_sample *s, int what)
{
	switch (what) {
	case LAT_P90: return s->p90;
	case LAT_P99: return s->p99;
	case LAT_P999: return s->p999;
	case LAT_MAX: return s->max;
	default: return s->p50;
	}
}

int lat_nclean(const struct lat_cell *c)
{
	int n = 0;
	for (int i = 0; c && i < c->n; i++)
		n += lat_clean(c, &c->s[i]);
	return n;
}

double lat_median(const struct lat_cell *c, int what, int clean)
{
	double v[MAX_ROUNDS];
	int n = 0;
	for (int i = 0; c && i < c->n; i++)
		if (clean ? lat_clean(c, &c->s[i]) : c->s[i].ok)
			v[n++] = lat_val(&c->s[i], what);
	return median(v, n);
}

double lat_ratio_n(const struct lat_cell *a, const struct lat_cell *b,
			  int what, int clean, int *np)
{
	double v[MAX_ROUNDS];
	int n = 0;
	if (a && b)
		for (int i = 0; i < a->n && i < b->n; i++) {
			const struct lat_sample *x = &a->s[i], *y = &b->s[i];
			if ((clean ? lat_clean(a, x) && lat_clean(b, y) &&
					     lat_one_state(x, y)
				   : x->ok && y->ok) &&
			    lat_val(y, what) > 0)
				v[n++] = lat_val(x, what) / lat_val(y, what);
		}
	if (np)
		*np = n;
	return median(v, n);
}

double lat_ratio(const struct lat_cell *a, const struct lat_cell *b,
			int what)
{
	int n;
	double r = lat_ratio_n(a, b, what, 1, &n);
	return n ? r : lat_ratio_n(a, b, what, 0, NULL);
}

const struct tp_cell *tp_find(const struct results *res, const char *name,
			      size_t size)
{
	for (int i = 0; i < res->ntp; i++)
		if (res->tp[i].size == size && !strcmp(res->tp[i].name, name))
			return &res->tp[i];
	return NULL;
}

const struct tp_cell *fan_find(const struct results *res,
				      const char *name, size_t size, int subs)
{
	for (int i = 0; i < res->nfan; i++)
		if (res->fan[i].size == size && res->fan[i].nsubs == subs &&
		    !strcmp(res->fan[i].name, name))
			return &res->fan[i];
	return NULL;
}

const struct lat_cell *lat_find(const struct results *res, const char *name,
				size_t size)
{
	for (int i = 0; i < res->nlat; i++)
		if (res->lat[i].size == size && !strcmp(res->lat[i].name, name))
			return &res->lat[i];
	return NULL;
}

const char *lat_base(const struct lat_cell *c)
{
	return !strcmp(c->mode, "spin") ? "raw-spin" : "raw-futex";
}

const char *tp_mode(const char *name)
{
	for (int i = 0; i < n_crs_tp_scns; i++)
		if (!strcmp(crs_tp_scns[i].name, name))
			return crs_tp_scns[i].mode;
	for (int i = 0; i < n_base_tp_scns; i++)
		if (!strcmp(base_tp_scns[i].name, name))
			return base_tp_scns[i].mode;
	return "?";
}

double wake_med(const struct wake_cell *c, int what)
{
	double v[MAX_ROUNDS];
	int n = 0;
	for (int i = 0; i < c->n; i++) {
		const struct wake_sample *s = &c->s[i];
		if (!s->ok)
			continue;
		v[n++] = what == 0   ? s->last_med
			 : what == 1 ? s->last_p90
			 : what == 2 ? s->last_max
			 : what == 3 ? s->first_med
			 : what == 4 ? s->mid_med
				     : s->commit_med;
	}
	return median(v, n);
}

double wake_ratio(const struct wake_cell *a, const struct wake_cell *b)
{
	double v[MAX_ROUNDS];
	int n = 0;
	for (int i = 0; i < a->n && i < b->n; i++)
		if (a->s[i].ok && b->s[i].ok && b->s[i].last_med > 0)
			v[n++] = a->s[i].last_med / b->s[i].last_med;
	return median(v, n);
}

const struct wake_cell *wake_find(const struct results *res,
					 const char *name)
{
	for (int i = 0; i < res->nwake; i++)
		if (!strcmp(res->wake[i].name, name))
			return &res->wake[i];
	return NULL;
}

double cu_med(const struct results *res, int what)
{
	double v[MAX_ROUNDS];
	int n = 0;
	for (int i = 0; i < res->ncatchup; i++) {
		const struct catchup_sample *s = &res->catchup[i];
		if (!s->ok)
			continue;
		v[n++] = what == 0   ? s->catchup_gbps
			 : what == 1 ? s->read_gbps
			 : what == 2 ? s->membw_gbps
			 : what == 3 ? s->memfd_gbps
			 : what == 4 ? s->catchup_gbps / s->membw_gbps
			 : what == 5 ? s->open_ms
			 : what == 6 ? s->minflt
			 : what == 7 ? s->publish_gbps
			 : what == 8 ? s->memfd_minflt
			 : what == 10 ? s->memfd_warm_gbps
			 : what == 11 ? s->memfd_populate_gbps
			 : what == 12 ? s->catchup_gbps / s->memfd_gbps
				     : s->read_gbps / s->membw_gbps;
	}
	return median(v, n);
}

/* ---- targets ------------------------------------------------------------ */

/* Issue 12's small message: the throughput and spinning latency targets
 * are at this size only (omitted when it was not measured). */
#define TARGET_SIZE 32

/* Median over rounds of a's rate / the faster of b1 and b2 in the same
 * round; a round counts when all three are clean and in one state. */
static double tp_ratio_best(const struct tp_cell *a, const struct tp_cell *b1,
			    const struct tp_cell *b2, int *np)
{
	double v[MAX_ROUNDS];
	int n = 0;
	for (int i = 0; a && b1 && b2 && i < a->n && i < b1->n && i < b2->n;
	     i++) {
		const struct tp_sample *x = &a->s[i], *y = &b1->s[i],
				       *w = &b2->s[i];
		double best = y->rate > w->rate ? y->rate : w->rate;
		if (tp_clean(a, x) && tp_clean(b1, y) && tp_clean(b2, w) &&
		    tp_one_state(x, y, w) && best > 0)
			v[n++] = x->rate / best;
	}
	*np = n;
	return median(v, n);
}

/* Fills t's verdict fields; t->what, value and rounds are set before.
 * skipped: the reason a baseline did not run (an Aeron cell's), if so. */
static void judge(struct target *t, double goal, int higher_better,
		  int measured, const char *skipped)
{
	t->goal = goal;
	t->higher_better = higher_better;
	t->measured = measured;
	t->skipped = measured ? skipped : NULL;
	t->known = measured && !skipped && t->rounds && t->value > 0;
}

static int has_size(const size_t *sizes, int n, size_t size)
{
	for (int i = 0; i < n; i++)
		if (sizes[i] == size)
			return 1;
	return 0;
}

/* Issue 12, throughput at 32 B: crs with its defaults against the faster
 * of the two rings and Aeron's exclusive publication; the batch API
 * against the defaults. */
static int tp_targets(const struct config *cfg, const struct results *res,
		      struct target *t)
{
	if (!res->ntp || !has_size(cfg->sizes, cfg->nsizes, TARGET_SIZE))
		return 0;
	const struct tp_cell *d = tp_find(res, "crs-defaults", TARGET_SIZE),
			     *b = tp_find(res, "bare-ring", TARGET_SIZE),
			     *i = tp_find(res, "inband-ring", TARGET_SIZE),
			     *a = tp_find(res, "aeron-excl", TARGET_SIZE),
			     *k = tp_find(res, "crs-batch", TARGET_SIZE);
	snprintf(t[0].what, sizeof(t[0].what),
		 "throughput 32 B: crs-defaults / faster of bare, inband ring");
	t[0].value = tp_ratio_best(d, b, i, &t[0].rounds);
	judge(&t[0], 0.5, 1, d && b && i, NULL);
	snprintf(t[1].what, sizeof(t[1].what),
		 "throughput 32 B: crs-defaults / aeron-excl");
	t[1].value = tp_ratio_n(d, a, 1, &t[1].rounds);
	judge(&t[1], 1.5, 1, d && a, a ? a->skipped : NULL);
	snprintf(t[2].what, sizeof(t[2].what),
		 "throughput 32 B: crs-batch / crs-defaults");
	t[2].value = tp_ratio_n(k, d, 1, &t[2].rounds);
	judge(&t[2], 1.0, 1, k && d, NULL);
	return 3;
}

/* Issue 12, spinning ping-pong at 32 B: crs against the raw cache line
 * and below Aeron's ping-pong at p50 and p99. */
static int spin_targets(const struct config *cfg, const struct results *res,
			struct target *t)
{
	if (!res->nlat ||
	    !has_size(cfg->lat_sizes, cfg->nlat_sizes, TARGET_SIZE))
		return 0;
	const struct lat_cell *c = lat_find(res, "crs-spin", TARGET_SIZE),
			      *r = lat_find(res, "raw-spin", TARGET_SIZE),
			      *a = lat_find(res, "aeron-spin", TARGET_SIZE);
	snprintf(t[0].what, sizeof(t[0].what),
		 "spinning ping-pong 32 B: crs-spin p50 / raw-spin p50");
	t[0].value = lat_ratio_n(c, r, LAT_P50, 1, &t[0].rounds);
	judge(&t[0], 1.5, 0, c && r, NULL);
	snprintf(t[1].what, sizeof(t[1].what),
		 "spinning ping-pong 32 B: crs-spin p50 / aeron-spin p50");
	t[1].value = lat_ratio_n(c, a, LAT_P50, 1, &t[1].rounds);
	judge(&t[1], 1.0, 0, c && a, a ? a->skipped : NULL);
	snprintf(t[2].what, sizeof(t[2].what),
		 "spinning ping-pong 32 B: crs-spin p99 / aeron-spin p99");
	t[2].value = lat_ratio_n(c, a, LAT_P99, 1, &t[2].rounds);
	judge(&t[2], 1.0, 0, c && a, a ? a->skipped : NULL);
	return 3;
}

int targets(const struct config *cfg, const struct results *res,
		   struct target *t, int max)
{
	int n = 0;
	memset(t, 0, sizeof(*t) * (size_t)max);
	if (n + 6 <= max) {
		n += tp_targets(cfg, res, t + n);
		n += spin_targets(cfg, res, t + n);
	}
	for (int z = 0; res->nlat && z < cfg->nlat_sizes && n + 2 <= max;
	     z++) {
		size_t size = cfg->lat_sizes[z];
		const struct lat_cell *u = lat_find(res, "crs-block-uring", size),
				      *f = lat_find(res, "raw-futex", size),
				      *p = lat_find(res, "pipe", size);
		char sz[16];
		fmt_size(sz, sizeof(sz), size);
		snprintf(t[n].what, sizeof(t[n].what),
			 "blocking ping-pong %s: crs io_uring p50 / raw futex p50",
			 sz);
		t[n].value = lat_ratio_n(u, f, LAT_P50, 1, &t[n].rounds);
		t[n].goal = 1.1; /* issue 12 */
		t[n].measured = u && f;
		t[n].known = t[n].measured && t[n].rounds && t[n].value > 0;
		n++;
		snprintf(t[n].what, sizeof(t[n].what),
			 "blocking ping-pong %s: crs io_uring p50 / pipe p50",
			 sz);
		t[n].value = lat_ratio_n(u, p, LAT_P50, 1, &t[n].rounds);
		t[n].goal = 1.0;
		t[n].measured = u && p;
		t[n].known = t[n].measured && t[n].rounds && t[n].value > 0;
		n++;
	}
	for (int z = 0; z < cfg->nsizes && n < max; z++) {
		size_t size = cfg->sizes[z];
		const struct tp_cell *r = tp_find(res, "crs-replay-p128", size),
				     *p = tp_find(res, REF_CRS, size);
		if (!r || !p)
			continue;
		char sz[16];
		fmt_size(sz, sizeof(sz), size);
		snprintf(t[n].what, sizeof(t[n].what),
			 "replay / publish throughput, %s", sz);
		t[n].value = tp_ratio_n(r, p, 1, &t[n].rounds);
		t[n].goal = 0.9;
		t[n].higher_better = 1;
		t[n].measured = 1;
		t[n].known = t[n].rounds && t[n].value > 0;
		n++;
	}
	if (res->ncatchup && n < max) {
		/* One reader at a time, no spinning peer: every round
		 * that succeeded counts, as for blocking scenarios. */
		snprintf(t[n].what, sizeof(t[n].what),
			 "catch-up / memory read bandwidth");
		t[n].value = cu_med(res, 4);
		t[n].goal = 0.5;
		t[n].higher_better = 1;
		t[n].measured = 1;
		for (int i = 0; i < res->ncatchup; i++)
			t[n].rounds += res->catchup[i].ok;
		t[n].known = t[n].rounds && t[n].value > 0;
		n++;
	}
	return n;
}

/* A verdict comes from clean rounds only: with none, there is none. */
const char *verdict(const struct target *t)
{
	if (!t->measured)
		return "not measured";
	if (t->skipped)
		return "skipped";
	if (!t->known)
		return "no clean rounds: no verdict";
	int met = t->higher_better ? t->value >= t->goal : t->value <= t->goal;
	return met ? "met" : "NOT met";
}

/* A cell's figures: over its clean rounds when it has any, else over all
 * of them (the table marks those with '*'). */
int tp_auto(const struct tp_cell *c)
{
	return tp_nclean(c) > 0;
}

const struct histo *lat_histo(const struct lat_cell *c)
{
	return c->clean.count ? &c->clean : &c->h;
}
