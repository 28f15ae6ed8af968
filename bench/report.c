/*
 * report.c - what a run prints: the table, one JSON document, the plots.
 *
 * Every summary is a median over rounds; every ratio is the median over
 * rounds of the per-round ratio of two scenarios measured in the same
 * round (shared/BENCHMARKING.md), never a ratio of figures from
 * different moments.
 */
#include <errno.h>
#include <fcntl.h>
#include <inttypes.h>
#include <stdlib.h>
#include <sys/stat.h>
#include <sys/utsname.h>
#include <sys/wait.h>
#include <unistd.h>

#include "bench.h"
#include "crs/crs.h"

#define REF_CRS "crs-spin-p128"
#define REF_BARE "bare-ring"

/* ---- summaries -------------------------------------------------------- */

static double tp_val(const struct tp_sample *s, size_t size, int what)
{
	switch (what) {
	case TP_GBPS: return s->rate * (double)size / 1e9;
	case TP_CPU: return s->cpu_ns;
	case TP_UTIL: return s->util;
	default: return s->rate;
	}
}

double tp_median(const struct tp_cell *c, int what)
{
	double v[MAX_ROUNDS];
	int n = 0;
	for (int i = 0; c && i < c->n; i++)
		if (c->s[i].ok)
			v[n++] = tp_val(&c->s[i], c->size, what);
	return median(v, n);
}

double tp_ratio(const struct tp_cell *a, const struct tp_cell *b)
{
	double v[MAX_ROUNDS];
	int n = 0;
	if (!a || !b)
		return 0;
	for (int i = 0; i < a->n && i < b->n; i++)
		if (a->s[i].ok && b->s[i].ok && b->s[i].rate > 0)
			v[n++] = a->s[i].rate / b->s[i].rate;
	return median(v, n);
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

double lat_median(const struct lat_cell *c, int what)
{
	double v[MAX_ROUNDS];
	int n = 0;
	for (int i = 0; c && i < c->n; i++)
		if (c->s[i].ok)
			v[n++] = lat_val(&c->s[i], what);
	return median(v, n);
}

double lat_ratio(const struct lat_cell *a, const struct lat_cell *b, int what)
{
	double v[MAX_ROUNDS];
	int n = 0;
	if (!a || !b)
		return 0;
	for (int i = 0; i < a->n && i < b->n; i++)
		if (a->s[i].ok && b->s[i].ok && lat_val(&b->s[i], what) > 0)
			v[n++] = lat_val(&a->s[i], what) /
				 lat_val(&b->s[i], what);
	return median(v, n);
}

const struct tp_cell *tp_find(const struct results *res, const char *name,
			      size_t size)
{
	for (int i = 0; i < res->ntp; i++)
		if (res->tp[i].size == size && !strcmp(res->tp[i].name, name))
			return &res->tp[i];
	return NULL;
}

static const struct tp_cell *fan_find(const struct results *res,
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

static const char *lat_base(const struct lat_cell *c)
{
	return !strcmp(c->mode, "spin") ? "raw-spin" : "raw-futex";
}

static const char *tp_mode(const char *name)
{
	for (int i = 0; i < n_crs_tp_scns; i++)
		if (!strcmp(crs_tp_scns[i].name, name))
			return crs_tp_scns[i].mode;
	for (int i = 0; i < n_base_tp_scns; i++)
		if (!strcmp(base_tp_scns[i].name, name))
			return base_tp_scns[i].mode;
	return "?";
}

static double wake_med(const struct wake_cell *c, int what)
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

static double wake_ratio(const struct wake_cell *a, const struct wake_cell *b)
{
	double v[MAX_ROUNDS];
	int n = 0;
	for (int i = 0; i < a->n && i < b->n; i++)
		if (a->s[i].ok && b->s[i].ok && b->s[i].last_med > 0)
			v[n++] = a->s[i].last_med / b->s[i].last_med;
	return median(v, n);
}

static const struct wake_cell *wake_find(const struct results *res,
					 const char *name)
{
	for (int i = 0; i < res->nwake; i++)
		if (!strcmp(res->wake[i].name, name))
			return &res->wake[i];
	return NULL;
}

static double cu_med(const struct results *res, int what)
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
				     : s->read_gbps / s->membw_gbps;
	}
	return median(v, n);
}

/* ---- targets ------------------------------------------------------------ */

struct target {
	char what[160];
	double value, goal;
	int higher_better; /* 1: value >= goal; 0: value <= goal */
	int known;
};

static int targets(const struct config *cfg, const struct results *res,
		   struct target *t, int max)
{
	int n = 0;
	for (int z = 0; z < cfg->nlat_sizes && n + 2 <= max; z++) {
		size_t size = cfg->lat_sizes[z];
		const struct lat_cell *u = lat_find(res, "crs-block-uring", size),
				      *f = lat_find(res, "raw-futex", size),
				      *p = lat_find(res, "pipe", size);
		char sz[16];
		fmt_size(sz, sizeof(sz), size);
		snprintf(t[n].what, sizeof(t[n].what),
			 "blocking ping-pong %s: crs io_uring p50 / raw futex p50",
			 sz);
		t[n].value = lat_ratio(u, f, LAT_P50);
		t[n].goal = 1.3;
		t[n].known = u && f && t[n].value > 0;
		n++;
		snprintf(t[n].what, sizeof(t[n].what),
			 "blocking ping-pong %s: crs io_uring p50 / pipe p50",
			 sz);
		t[n].value = lat_ratio(u, p, LAT_P50);
		t[n].goal = 1.0;
		t[n].known = u && p && t[n].value > 0;
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
		t[n].value = tp_ratio(r, p);
		t[n].goal = 0.9;
		t[n].higher_better = 1;
		t[n].known = t[n].value > 0;
		n++;
	}
	if (res->ncatchup && n < max) {
		snprintf(t[n].what, sizeof(t[n].what),
			 "catch-up / memory read bandwidth");
		t[n].value = cu_med(res, 4);
		t[n].goal = 0.5;
		t[n].higher_better = 1;
		t[n].known = t[n].value > 0;
		n++;
	}
	return n;
}

static const char *verdict(const struct target *t)
{
	if (!t->known)
		return "not measured";
	int met = t->higher_better ? t->value >= t->goal : t->value <= t->goal;
	return met ? "met" : "NOT met";
}

/* ---- machine ------------------------------------------------------------ */

struct machine {
	long nproc;
	char cpu[128], kernel[128], clocksrc[64], rundir[256];
	double probe_med, probe_min, probe_max, pause_ns;
};

static void machine(const struct config *cfg, const struct results *res,
		    struct machine *m)
{
	struct utsname un;
	uname(&un);
	m->nproc = sysconf(_SC_NPROCESSORS_ONLN);
	read_line("/proc/cpuinfo", "model name", m->cpu, sizeof(m->cpu));
	snprintf(m->kernel, sizeof(m->kernel), "%s", un.release);
	read_line("/sys/devices/system/clocksource/clocksource0/"
		  "current_clocksource",
		  NULL, m->clocksrc, sizeof(m->clocksrc));
	if (crs_runtime_dir(m->rundir, sizeof(m->rundir)) < 0)
		snprintf(m->rundir, sizeof(m->rundir), "?");
	m->probe_med = median(res->probes, res->nprobes);
	m->probe_min = pct_of(res->probes, res->nprobes, 0);
	m->probe_max = pct_of(res->probes, res->nprobes, 100);
	m->pause_ns = pause_cost_ns() * cfg->idle_pause;
}

/* ---- table --------------------------------------------------------------- */

static void ratio_str(char *buf, size_t len, double r)
{
	if (r > 0)
		snprintf(buf, len, "%.3f", r);
	else
		snprintf(buf, len, "-");
}

static void tp_table(const struct results *res, const struct tp_cell *cells,
		     int n, int fan)
{
	if (!fan)
		printf("%-5s %-18s %-36s %9s %8s %9s %5s %6s %6s  %s\n",
		       "size", "scenario", "mode", "Mmsg/s", "GB/s",
		       "CPUns/msg", "cores", "/bare", "/crs",
		       "rounds: Mmsg/s[probe ns]");
	else
		printf("%-5s %-4s %-13s %-31s %9s %8s %9s %8s %5s %6s %7s\n",
		       "size", "subs", "scenario", "mode", "Mdeliv/s", "GB/s",
		       "per-sub M", "CPUns/dl", "cores", "/subs1",
		       "crs/pipe");
	for (int i = 0; i < n; i++) {
		const struct tp_cell *c = &cells[i];
		char sz[16], r1[16], r2[16];
		fmt_size(sz, sizeof(sz), c->size);
		double rate = tp_median(c, TP_RATE);
		if (c->failed == c->n) {
			printf("%-5s %-18s FAILED\n", sz, c->name);
			continue;
		}
		if (!fan) {
			ratio_str(r1, sizeof(r1),
				  tp_ratio(c, tp_find(res, REF_BARE, c->size)));
			ratio_str(r2, sizeof(r2),
				  tp_ratio(c, tp_find(res, REF_CRS, c->size)));
			printf("%-5s %-18s %-36.36s %9.3f %8.3f %9.1f %5.2f "
			       "%6s %6s ",
			       sz, c->name, tp_mode(c->name), rate / 1e6,
			       tp_median(c, TP_GBPS), tp_median(c, TP_CPU),
			       tp_median(c, TP_UTIL), r1, r2);
			for (int k = 0; k < c->n; k++)
				printf(" %.3g[%.0f]", c->s[k].rate / 1e6,
				       c->s[k].pp_before);
			printf("%s\n", c->failed ? " (some failed)" : "");
			continue;
		}
		const struct tp_cell *one = fan_find(res, c->name, c->size, 1);
		const struct tp_cell *pipe =
			fan_find(res, "pipe-fanout", c->size, c->nsubs);
		ratio_str(r1, sizeof(r1), c->nsubs == 1 ? 0 : tp_ratio(c, one));
		ratio_str(r2, sizeof(r2),
			  strcmp(c->name, "crs-fanout") ? 0
							: tp_ratio(c, pipe));
		printf("%-5s %-4d %-13s %-31.31s %9.3f %8.3f %9.3f %8.1f "
		       "%5.2f %6s %7s\n",
		       sz, c->nsubs, c->name, tp_mode(c->name), rate / 1e6,
		       tp_median(c, TP_GBPS), rate / 1e6 / c->nsubs,
		       tp_median(c, TP_CPU), tp_median(c, TP_UTIL), r1, r2);
	}
}

static void lat_table(const struct results *res)
{
	printf("%-5s %-5s %-15s %-8s %7s %8s %8s %8s %8s %9s %7s %7s %7s\n",
	       "size", "mode", "scenario", "engine", "trips", "p50 us",
	       "p90 us", "p99 us", "p99.9 us", "max us", "p50/raw", "p99/raw",
	       "p50/pipe");
	for (int i = 0; i < res->nlat; i++) {
		const struct lat_cell *c = &res->lat[i];
		char sz[16], r1[16], r2[16], r3[16];
		fmt_size(sz, sizeof(sz), c->size);
		if (c->failed == c->n) {
			printf("%-5s %-5s %-15s FAILED\n", sz, c->mode,
			       c->name);
			continue;
		}
		const struct lat_cell *b = lat_find(res, lat_base(c), c->size);
		const struct lat_cell *p = lat_find(res, "pipe", c->size);
		ratio_str(r1, sizeof(r1), b == c ? 0 : lat_ratio(c, b, LAT_P50));
		ratio_str(r2, sizeof(r2), b == c ? 0 : lat_ratio(c, b, LAT_P99));
		ratio_str(r3, sizeof(r3),
			  p == c || strcmp(c->mode, "block")
				  ? 0
				  : lat_ratio(c, p, LAT_P50));
		const struct histo *h = &c->h;
		printf("%-5s %-5s %-15s %-8s %7" PRIu64
		       " %8.2f %8.2f %8.2f %8.2f %9.1f %7s %7s %7s\n",
		       sz, c->mode, c->name,
		       c->s[0].engine[0] ? c->s[0].engine : "-", h->count,
		       (double)histo_pct(h, 50) / 1e3,
		       (double)histo_pct(h, 90) / 1e3,
		       (double)histo_pct(h, 99) / 1e3,
		       (double)histo_pct(h, 99.9) / 1e3, (double)h->max / 1e3,
		       r1, r2, r3);
	}
	printf("  per-round p50 us [probe ns]:\n");
	for (int i = 0; i < res->nlat; i++) {
		const struct lat_cell *c = &res->lat[i];
		char sz[16];
		fmt_size(sz, sizeof(sz), c->size);
		printf("  %-5s %-15s", sz, c->name);
		for (int k = 0; k < c->n; k++)
			printf(" %.2f[%.0f]", c->s[k].p50 / 1e3,
			       c->s[k].pp_before);
		printf("\n");
	}
}

void report_table(const struct config *cfg, const struct results *res)
{
	struct machine m;
	machine(cfg, res, &m);
	printf("crs-bench %s: %ld CPUs (%s), kernel %s, %d rounds%s, ring "
	       "%" PRIu64 " KiB, %s\n",
	       BENCH_VERSION, m.nproc, m.cpu, m.kernel, cfg->rounds,
	       cfg->quick ? " (quick)" : "", cfg->ring_bytes >> 10,
	       cfg->pin ? "pinned" : "not pinned");
	printf("load %s -> %s; cache-line probe (ns per round trip) median "
	       "%.0f, min %.0f, max %.0f over %d probes; wall %.1f s\n",
	       res->load0, res->load1, m.probe_med, m.probe_min, m.probe_max,
	       res->nprobes, res->wall);
	if (res->ntp) {
		printf("\n== Throughput: 1 publisher -> 1 subscriber, separate "
		       "processes, %.2f s window, receiver timed ==\n"
		       "   spinning receivers back off %u pauses (%.0f ns) "
		       "after an empty poll; CPU = user+sys of both "
		       "processes per message; /bare and /crs: median of "
		       "per-round ratios to bare-ring and to crs-spin-p128\n",
		       cfg->tp_secs, cfg->idle_pause, m.pause_ns);
		tp_table(res, res->tp, res->ntp, 0);
	}
	if (res->nfan) {
		printf("\n== Fan-out: 1 publisher -> K subscribers, blocking "
		       "(spin_us -1: nobody polls) ==\n"
		       "   deliveries/s summed over subscribers; /subs1: "
		       "against the same scenario with 1 subscriber\n");
		tp_table(res, res->fan, res->nfan, 1);
	}
	if (res->nlat) {
		printf("\n== Latency: ping-pong round trips between two "
		       "processes (histogram over all rounds) ==\n"
		       "   spin: both processes busy-poll; block: both sleep "
		       "in the kernel while waiting; /raw: against raw-spin "
		       "or raw-futex, per-round medians\n");
		lat_table(res);
	}
	if (res->nwake) {
		const struct wake_cell *fx = wake_find(res, "raw-futex");
		printf("\n== Wake fan-out: 1 publisher wakes %d sleeping "
		       "subscribers (%d wakes per round) ==\n"
		       "   crs wakes all subscribers of a stream with ONE "
		       "futex wake on one shared word: no per-subscriber "
		       "wake to batch\n",
		       cfg->wake_subs, cfg->wake_rounds);
		printf("%-10s %-8s %10s %10s %10s %10s %10s %10s %9s\n",
		       "variant", "engine", "last us", "last p90", "last max",
		       "first us", "median us", "commit us", "last/raw");
		for (int i = 0; i < res->nwake; i++) {
			const struct wake_cell *c = &res->wake[i];
			char r[16];
			ratio_str(r, sizeof(r),
				  fx && fx != c ? wake_ratio(c, fx) : 0);
			printf("%-10s %-8s %10.1f %10.1f %10.1f %10.1f %10.1f "
			       "%10.1f %9s%s\n",
			       c->name, c->s[0].engine[0] ? c->s[0].engine : "-",
			       wake_med(c, 0) / 1e3, wake_med(c, 1) / 1e3,
			       wake_med(c, 2) / 1e3, wake_med(c, 3) / 1e3,
			       wake_med(c, 4) / 1e3, wake_med(c, 5) / 1e3, r,
			       c->failed ? " (failures)" : "");
		}
	}
	if (res->ncatchup) {
		const struct catchup_sample *s = &res->catchup[0];
		printf("\n== Replay catch-up: late joiner reads %.0f MiB "
		       "retained (%zu B messages, ring %" PRIu64
		       " MiB) ==\n",
		       s->bytes / 1048576, cfg->catchup_msg,
		       cfg->catchup_ring >> 20);
		printf("   catch-up %.2f GB/s (open to last; read only %.2f "
		       "GB/s; open to first message %.2f ms; %.0f page "
		       "faults)\n",
		       cu_med(res, 0), cu_med(res, 1), cu_med(res, 5),
		       cu_med(res, 6));
		printf("   mem-read %.2f GB/s (anonymous buffer, same loop); "
		       "memfd-read %.2f GB/s (fresh mapping, %.0f faults); "
		       "publishing with no subscriber %.2f GB/s\n",
		       cu_med(res, 2), cu_med(res, 3), cu_med(res, 8),
		       cu_med(res, 7));
		printf("   catch-up / mem-read %.3f, read-only / mem-read "
		       "%.3f; rounds:",
		       cu_med(res, 4), cu_med(res, 9));
		for (int i = 0; i < res->ncatchup; i++)
			printf(" %.2f/%.2f", res->catchup[i].catchup_gbps,
			       res->catchup[i].membw_gbps);
		printf("\n");
	}
	struct target t[48];
	int nt = targets(cfg, res, t, 48);
	if (nt) {
		printf("\n== Targets ==\n");
		for (int i = 0; i < nt; i++)
			printf("  %-62s %7.3f  (goal %s %.2f) %s\n", t[i].what,
			       t[i].value, t[i].higher_better ? ">=" : "<=",
			       t[i].goal, verdict(&t[i]));
	}
	printf("\nfailures: %d\n", res->failures);
}

/* ---- JSON ------------------------------------------------------------------ */

static void json_tp_cells(FILE *f, const struct results *res,
			  const struct tp_cell *cells, int n, int fan)
{
	for (int i = 0; i < n; i++) {
		const struct tp_cell *c = &cells[i];
		fprintf(f, "%s\n    {\"name\": \"%s\", \"size\": %zu, "
			   "\"subscribers\": %d, \"mode\": ",
			i ? "," : "", c->name, c->size, c->nsubs);
		json_str(f, tp_mode(c->name));
		fprintf(f, ", \"ok\": %s, \"failed_rounds\": %d,\n     "
			   "\"median_msgs_per_s\": %.0f, \"median_gb_per_s\": "
			   "%.4f, \"median_cpu_ns_per_msg\": %.1f, "
			   "\"median_cores_busy\": %.3f",
			c->failed ? "false" : "true", c->failed,
			tp_median(c, TP_RATE), tp_median(c, TP_GBPS),
			tp_median(c, TP_CPU), tp_median(c, TP_UTIL));
		if (!fan) {
			double rb = tp_ratio(c, tp_find(res, REF_BARE, c->size));
			double rc = tp_ratio(c, tp_find(res, REF_CRS, c->size));
			if (rb > 0)
				fprintf(f, ", \"ratio_to_bare_ring\": %.4f", rb);
			if (rc > 0)
				fprintf(f, ", \"ratio_to_crs_spin_p128\": %.4f",
					rc);
		} else if (c->nsubs > 1) {
			double r1 = tp_ratio(c, fan_find(res, c->name, c->size,
							 1));
			if (r1 > 0)
				fprintf(f, ", \"ratio_to_1_subscriber\": %.4f",
					r1);
		}
		fprintf(f, ",\n     \"rounds\": [");
		for (int k = 0; k < c->n; k++) {
			const struct tp_sample *s = &c->s[k];
			fprintf(f, "%s\n      {\"ok\": %s, \"msgs_per_s\": %.0f, "
				   "\"gb_per_s\": %.4f, \"sent_per_s\": %.0f, "
				   "\"window_s\": %.4f, \"messages\": %" PRIu64
				   ", \"cpu_ns_per_msg\": %.1f, "
				   "\"cores_busy\": %.3f, "
				   "\"probe_before_ns\": %.1f, "
				   "\"probe_after_ns\": %.1f, "
				   "\"refused_demand_per_msg\": %.4f, "
				   "\"refused_room_per_msg\": %.4f, "
				   "\"sender_waits\": %" PRIu64
				   ", \"empty_polls_per_msg\": %.4f",
				k ? "," : "", s->ok ? "true" : "false", s->rate,
				s->rate * (double)c->size / 1e9, s->send_rate,
				s->secs, s->messages, s->cpu_ns, s->util,
				s->pp_before, s->pp_after, s->refused_demand,
				s->refused_room, s->waits, s->empty);
			if (!s->ok) {
				fprintf(f, ", \"error\": ");
				json_str(f, s->err);
			}
			fprintf(f, "}");
		}
		fprintf(f, "]}");
	}
}

static void json_lat(FILE *f, const struct results *res)
{
	static const double pcts[] = { 50, 90, 99, 99.9 };
	for (int i = 0; i < res->nlat; i++) {
		const struct lat_cell *c = &res->lat[i];
		const struct histo *h = &c->h;
		fprintf(f, "%s\n    {\"name\": \"%s\", \"mode\": \"%s\", "
			   "\"size\": %zu, \"engine\": ",
			i ? "," : "", c->name, c->mode, c->size);
		json_str(f, c->s[0].engine);
		fprintf(f, ", \"ok\": %s, \"failed_rounds\": %d, "
			   "\"round_trips\": %" PRIu64 ",\n     \"all_rounds_ns\": {",
			c->failed ? "false" : "true", c->failed, h->count);
		for (int k = 0; k < 4; k++)
			fprintf(f, "\"p%g\": %" PRIu64 ", ", pcts[k],
				histo_pct(h, pcts[k]));
		fprintf(f, "\"min\": %" PRIu64 ", \"max\": %" PRIu64
			   ", \"mean\": %.1f}",
			h->count ? h->min : 0, h->max, histo_mean(h));
		fprintf(f, ",\n     \"median_of_rounds_ns\": {\"p50\": %.0f, "
			   "\"p99\": %.0f}",
			lat_median(c, LAT_P50), lat_median(c, LAT_P99));
		const struct lat_cell *b = lat_find(res, lat_base(c), c->size);
		const struct lat_cell *p = lat_find(res, "pipe", c->size);
		if (b && b != c)
			fprintf(f, ", \"ratio_to_%s\": {\"p50\": %.4f, "
				   "\"p99\": %.4f}",
				lat_base(c), lat_ratio(c, b, LAT_P50),
				lat_ratio(c, b, LAT_P99));
		if (p && p != c && !strcmp(c->mode, "block"))
			fprintf(f, ", \"ratio_to_pipe\": {\"p50\": %.4f, "
				   "\"p99\": %.4f}",
				lat_ratio(c, p, LAT_P50),
				lat_ratio(c, p, LAT_P99));
		fprintf(f, ",\n     \"rounds\": [");
		for (int k = 0; k < c->n; k++) {
			const struct lat_sample *s = &c->s[k];
			fprintf(f, "%s{\"ok\": %s, \"trips\": %" PRIu64
				   ", \"p50\": %.0f, \"p90\": %.0f, \"p99\": "
				   "%.0f, \"p99.9\": %.0f, \"max\": %.0f, "
				   "\"probe_before_ns\": %.1f",
				k ? ", " : "", s->ok ? "true" : "false",
				s->trips, s->p50, s->p90, s->p99, s->p999,
				s->max, s->pp_before);
			if (!s->ok) {
				fprintf(f, ", \"error\": ");
				json_str(f, s->err);
			}
			fprintf(f, "}");
		}
		fprintf(f, "]}");
	}
}

void report_json(const struct config *cfg, const struct results *res)
{
	FILE *f = stdout;
	struct machine m;
	machine(cfg, res, &m);
	fprintf(f, "{\n  \"bench\": \"crs-bench\", \"bench_version\": \""
		   BENCH_VERSION "\", \"crs_version\": \"%d.%d\",\n",
		CRS_VERSION_MAJOR, CRS_VERSION_MINOR);
	fprintf(f, "  \"machine\": {\"nproc\": %ld, \"cpu\": ", m.nproc);
	json_str(f, m.cpu);
	fprintf(f, ", \"kernel\": ");
	json_str(f, m.kernel);
	fprintf(f, ", \"clocksource\": ");
	json_str(f, m.clocksrc);
	fprintf(f, ", \"loadavg_start\": ");
	json_str(f, res->load0);
	fprintf(f, ", \"loadavg_end\": ");
	json_str(f, res->load1);
	fprintf(f, "},\n  \"config\": {\"rounds\": %d, \"quick\": %s, "
		   "\"ring_bytes\": %" PRIu64 ", \"pin\": %s, "
		   "\"throughput_window_s\": %.3f, \"latency_max_s\": %.3f, "
		   "\"latency_max_trips\": %u, \"idle_pause\": %u, "
		   "\"idle_pause_ns\": %.1f, \"wake_subscribers\": %d, "
		   "\"wakes_per_round\": %d, \"catchup_ring\": %" PRIu64
		   ", \"catchup_bytes\": %" PRIu64 ", \"catchup_msg\": %zu, "
		   "\"zmq\": %s, \"runtime_dir\": ",
		cfg->rounds, cfg->quick ? "true" : "false", cfg->ring_bytes,
		cfg->pin ? "true" : "false", cfg->tp_secs, cfg->lat_secs,
		cfg->lat_trips, cfg->idle_pause, m.pause_ns, cfg->wake_subs,
		cfg->wake_rounds, cfg->catchup_ring, cfg->catchup_bytes,
		cfg->catchup_msg, cfg->have_zmq ? "true" : "false");
	json_str(f, m.rundir);
	fprintf(f, "},\n  \"probe_ns\": {\"median\": %.1f, \"min\": %.1f, "
		   "\"max\": %.1f, \"all\": [",
		m.probe_med, m.probe_min, m.probe_max);
	for (int i = 0; i < res->nprobes; i++)
		fprintf(f, "%s%.0f", i ? ", " : "", res->probes[i]);
	fprintf(f, "]},\n  \"wall_s\": %.2f,\n  \"throughput\": [", res->wall);
	json_tp_cells(f, res, res->tp, res->ntp, 0);
	fprintf(f, "\n  ],\n  \"fanout\": [");
	json_tp_cells(f, res, res->fan, res->nfan, 1);
	fprintf(f, "\n  ],\n  \"latency\": [");
	json_lat(f, res);
	fprintf(f, "\n  ],\n  \"wake\": [");
	for (int i = 0; i < res->nwake; i++) {
		const struct wake_cell *c = &res->wake[i];
		fprintf(f, "%s\n    {\"name\": \"%s\", \"engine\": ",
			i ? "," : "", c->name);
		json_str(f, c->s[0].engine);
		fprintf(f, ", \"subscribers\": %d, \"ok\": %s, "
			   "\"median_last_wake_ns\": %.0f, "
			   "\"median_last_wake_p90_ns\": %.0f, "
			   "\"median_last_wake_max_ns\": %.0f, "
			   "\"median_first_wake_ns\": %.0f, "
			   "\"median_median_wake_ns\": %.0f, "
			   "\"median_commit_call_ns\": %.0f, \"rounds\": [",
			cfg->wake_subs, c->failed ? "false" : "true",
			wake_med(c, 0), wake_med(c, 1), wake_med(c, 2),
			wake_med(c, 3), wake_med(c, 4), wake_med(c, 5));
		for (int k = 0; k < c->n; k++) {
			const struct wake_sample *s = &c->s[k];
			fprintf(f, "%s{\"ok\": %s, \"last_ns\": %.0f, "
				   "\"first_ns\": %.0f, \"commit_ns\": %.0f",
				k ? ", " : "", s->ok ? "true" : "false",
				s->last_med, s->first_med, s->commit_med);
			if (!s->ok) {
				fprintf(f, ", \"error\": ");
				json_str(f, s->err);
			}
			fprintf(f, "}");
		}
		fprintf(f, "]}");
	}
	fprintf(f, "\n  ],\n  \"catchup\": {\"rounds\": [");
	for (int i = 0; i < res->ncatchup; i++) {
		const struct catchup_sample *s = &res->catchup[i];
		fprintf(f, "%s\n    {\"ok\": %s, \"bytes\": %.0f, \"messages\": "
			   "%.0f, \"catchup_gb_per_s\": %.3f, "
			   "\"read_gb_per_s\": %.3f, \"open_to_first_ms\": "
			   "%.3f, \"page_faults\": %.0f, "
			   "\"mem_read_gb_per_s\": %.3f, "
			   "\"memfd_read_gb_per_s\": %.3f, "
			   "\"memfd_page_faults\": %.0f, "
			   "\"publish_gb_per_s\": %.3f",
			i ? "," : "", s->ok ? "true" : "false", s->bytes,
			s->msgs, s->catchup_gbps, s->read_gbps, s->open_ms,
			s->minflt, s->membw_gbps, s->memfd_gbps,
			s->memfd_minflt, s->publish_gbps);
		if (!s->ok) {
			fprintf(f, ", \"error\": ");
			json_str(f, s->err);
		}
		fprintf(f, "}");
	}
	fprintf(f, "],\n   \"median_catchup_gb_per_s\": %.3f, "
		   "\"median_mem_read_gb_per_s\": %.3f, "
		   "\"ratio_catchup_to_mem_read\": %.4f},\n",
		cu_med(res, 0), cu_med(res, 2), cu_med(res, 4));
	struct target t[48];
	int nt = targets(cfg, res, t, 48);
	fprintf(f, "  \"targets\": [");
	for (int i = 0; i < nt; i++) {
		fprintf(f, "%s\n    {\"what\": ", i ? "," : "");
		json_str(f, t[i].what);
		fprintf(f, ", \"value\": %.4f, \"goal\": \"%s %.2f\", "
			   "\"verdict\": \"%s\"}",
			t[i].value, t[i].higher_better ? ">=" : "<=",
			t[i].goal, verdict(&t[i]));
	}
	fprintf(f, "\n  ],\n  \"failures\": %d\n}\n", res->failures);
}

/* ---- plots ----------------------------------------------------------------
 * .dat files and plots.gp in DIR; gnuplot renders PNGs if it is found. */

static FILE *dat_open(const char *dir, const char *name)
{
	char path[512];
	snprintf(path, sizeof(path), "%s/%s", dir, name);
	return fopen(path, "w");
}

static int tp_names(const struct tp_cell *cells, int n, const char **names)
{
	int k = 0;
	for (int i = 0; i < n; i++) {
		int seen = 0;
		for (int j = 0; j < k; j++)
			seen |= !strcmp(names[j], cells[i].name);
		if (!seen && k < 32)
			names[k++] = cells[i].name;
	}
	return k;
}

int report_plots(const struct config *cfg, const struct results *res)
{
	const char *dir = cfg->plot_dir;
	if (mkdir(dir, 0755) < 0 && errno != EEXIST)
		return -errno;
	FILE *gp = dat_open(dir, "plots.gp");
	if (!gp)
		return -errno;
	fprintf(gp, "# crs-bench plots: gnuplot plots.gp (in this folder)\n"
		    "set terminal pngcairo size 1100,700 noenhanced\n"
		    "set key outside right\nset grid\n");
	const char *names[32];
	int nn = tp_names(res->tp, res->ntp, names);
	if (nn) {
		FILE *d = dat_open(dir, "throughput.dat");
		if (!d)
			return -errno;
		fprintf(d, "# size");
		for (int k = 0; k < nn; k++)
			fprintf(d, " %s_GBps %s_Mmsgps %s_cpuns", names[k],
				names[k], names[k]);
		fprintf(d, "\n");
		for (int z = 0; z < cfg->nsizes; z++) {
			fprintf(d, "%zu", cfg->sizes[z]);
			for (int k = 0; k < nn; k++) {
				const struct tp_cell *c =
					tp_find(res, names[k], cfg->sizes[z]);
				if (c && c->failed < c->n)
					fprintf(d, " %.5g %.5g %.5g",
						tp_median(c, TP_GBPS),
						tp_median(c, TP_RATE) / 1e6,
						tp_median(c, TP_CPU));
				else
					fprintf(d, " NaN NaN NaN");
			}
			fprintf(d, "\n");
		}
		fclose(d);
		static const char *what[3] = { "GB/s", "million messages/s",
					       "CPU ns per message (both "
					       "processes)" };
		static const char *file[3] = { "throughput-gbps.png",
					       "throughput-msgs.png",
					       "throughput-cpu.png" };
		for (int w = 0; w < 3; w++) {
			fprintf(gp, "set output '%s'\nset title 'crs-bench: 1 "
				    "publisher -> 1 subscriber, %s (median of "
				    "%d rounds)'\nset logscale xy\nset xlabel "
				    "'message size (bytes)'\nset ylabel '%s'\n"
				    "plot ",
				file[w], what[w], cfg->rounds, what[w]);
			for (int k = 0; k < nn; k++)
				fprintf(gp, "%s'throughput.dat' using 1:%d with "
					    "linespoints title '%s'",
					k ? ", " : "", 2 + 3 * k + w, names[k]);
			fprintf(gp, "\n");
		}
	}
	if (res->nfan) {
		FILE *d = dat_open(dir, "fanout.dat");
		if (!d)
			return -errno;
		nn = tp_names(res->fan, res->nfan, names);
		fprintf(d, "# subscribers size");
		for (int k = 0; k < nn; k++)
			fprintf(d, " %s_Mdeliv", names[k]);
		fprintf(d, "\n");
		for (int z = 0; z < cfg->nfan_sizes; z++) {
			for (int f = 0; f < cfg->nfanout; f++) {
				fprintf(d, "%d %zu", cfg->fanout[f],
					cfg->fan_sizes[z]);
				for (int k = 0; k < nn; k++) {
					const struct tp_cell *c = fan_find(
						res, names[k], cfg->fan_sizes[z],
						cfg->fanout[f]);
					fprintf(d, " %.5g",
						c ? tp_median(c, TP_RATE) / 1e6
						  : 0);
				}
				fprintf(d, "\n");
			}
			fprintf(d, "\n\n");
		}
		fclose(d);
		fprintf(gp, "set output 'fanout.png'\nset title 'crs-bench: "
			    "fan-out, blocking, deliveries/s summed over "
			    "subscribers'\nunset logscale\nset logscale y\n"
			    "set xlabel 'subscribers'\nset ylabel 'million "
			    "deliveries/s'\nplot ");
		int first = 1;
		for (int z = 0; z < cfg->nfan_sizes; z++)
			for (int k = 0; k < nn; k++) {
				char sz[16];
				fmt_size(sz, sizeof(sz), cfg->fan_sizes[z]);
				fprintf(gp, "%s'fanout.dat' index %d using 1:%d "
					    "with linespoints title '%s %s'",
					first ? "" : ", ", z, 3 + k, names[k],
					sz);
				first = 0;
			}
		fprintf(gp, "\n");
	}
	for (int z = 0; z < cfg->nlat_sizes && res->nlat; z++) {
		static const double pct[] = { 0,    10,	  25,	50,    75,
					      90,   95,	  99,	99.5,  99.9,
					      99.95, 99.99, 99.999 };
		char sz[16], fname[64];
		fmt_size(sz, sizeof(sz), cfg->lat_sizes[z]);
		snprintf(fname, sizeof(fname), "latency-%s.dat", sz);
		FILE *d = dat_open(dir, fname);
		if (!d)
			return -errno;
		int idx = 0;
		fprintf(gp, "set output 'latency-%s.png'\nset title "
			    "'crs-bench: ping-pong round trip, %s messages, "
			    "all rounds (percentile distribution)'\n"
			    "unset logscale\nset logscale xy\nset xlabel "
			    "'percentile (1/(1-p))'\nset ylabel 'round trip "
			    "(us)'\nset xtics ('50%%' 2, '90%%' 10, '99%%' "
			    "100, '99.9%%' 1000, '99.99%%' 10000, "
			    "'99.999%%' 100000)\nplot ",
			sz, sz);
		for (int i = 0; i < res->nlat; i++) {
			const struct lat_cell *c = &res->lat[i];
			if (c->size != cfg->lat_sizes[z] || !c->h.count)
				continue;
			fprintf(d, "# %s (%s)\n", c->name, c->mode);
			for (size_t k = 0; k < sizeof(pct) / sizeof(pct[0]);
			     k++)
				fprintf(d, "%g %.6g %.6g\n", pct[k],
					1 / (1 - pct[k] / 100),
					(double)histo_pct(&c->h, pct[k]) / 1e3);
			fprintf(d, "100 1e6 %.6g\n\n\n",
				(double)c->h.max / 1e3);
			fprintf(gp, "%s'%s' index %d using 2:3 with linespoints "
				    "title '%s (%s)'",
				idx ? ", " : "", fname, idx, c->name, c->mode);
			idx++;
		}
		fprintf(gp, "\nset xtics autofreq\n");
		fclose(d);
	}
	fclose(gp);
	/* Render when gnuplot is there. */
	pid_t pid = fork();
	if (pid == 0) {
		if (chdir(dir) == 0) {
			int null = open("/dev/null", O_WRONLY);
			if (null >= 0)
				dup2(null, 1);
			execlp("gnuplot", "gnuplot", "plots.gp", (char *)NULL);
		}
		_exit(127);
	}
	int st = 0;
	if (pid > 0)
		waitpid(pid, &st, 0);
	return pid > 0 && WIFEXITED(st) && WEXITSTATUS(st) == 0 ? 1 : 0;
}
