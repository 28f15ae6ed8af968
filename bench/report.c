/*
 * report.c - what a run prints: the table and the JSON document.
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


/* ---- machine ------------------------------------------------------------ */

struct machine {
	long nproc;
	char cpu[128], kernel[128], clocksrc[64], rundir[256];
	char shmem_thp[32]; /* the bracketed choice, "-" without THP */
	double probe_med, probe_min, probe_max, pause_ns;
	double cap_med, cap_min, cap_low; /* cap_low: share of probes < 1.5 */
};

/* Shared memory gets huge pages only where this says advise (crs asks
 * on rings of 2 MiB or more), within_size or always: it decides the
 * catch-up figure. */
static void shmem_thp(char *out, size_t len)
{
	char line[128] = "";
	read_line("/sys/kernel/mm/transparent_hugepage/shmem_enabled", NULL,
		  line, sizeof(line));
	const char *open = strchr(line, '[');
	const char *close = open ? strchr(open, ']') : NULL;
	if (!close) {
		snprintf(out, len, "-");
		return;
	}
	snprintf(out, len, "%.*s", (int)(close - open - 1), open + 1);
}

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
	shmem_thp(m->shmem_thp, sizeof(m->shmem_thp));
	if (crs_runtime_dir(m->rundir, sizeof(m->rundir)) < 0)
		snprintf(m->rundir, sizeof(m->rundir), "?");
	m->probe_med = median(res->probes, res->nprobes);
	m->probe_min = pct_of(res->probes, res->nprobes, 0);
	m->probe_max = pct_of(res->probes, res->nprobes, 100);
	m->pause_ns = pause_cost_ns() * cfg->idle_pause;
	m->cap_med = median(res->caps, res->nprobes);
	m->cap_min = pct_of(res->caps, res->nprobes, 0);
	int low = 0;
	for (int i = 0; i < res->nprobes; i++)
		low += res->caps[i] < 1.5;
	m->cap_low = res->nprobes ? (double)low / res->nprobes : 0;
}

/* ---- table --------------------------------------------------------------- */

/* A latency cell that was measured (not skipped, not all failed). */
static int ran(const struct lat_cell *c)
{
	return c && !c->skipped && c->failed < c->n;
}

static void ratio_str(char *buf, size_t len, double r)
{
	if (r > 0)
		snprintf(buf, len, "%.3f", r);
	else
		snprintf(buf, len, "-");
}

/* Who spins in each scenario of the cells, once each, so that the rows
 * need no mode column (the table stays within 120 columns). */
static void tp_modes(const struct tp_cell *cells, int n)
{
	printf("   modes:");
	for (int i = 0, col = 10; i < n; i++) {
		int seen = 0;
		for (int k = 0; k < i && !seen; k++)
			seen = !strcmp(cells[k].name, cells[i].name);
		if (seen)
			continue;
		int len = (int)(strlen(cells[i].name) +
				strlen(tp_mode(cells[i].name)) + 4);
		if (col + len > 118) {
			printf("\n         ");
			col = 10;
		}
		printf(" %s (%s);", cells[i].name, tp_mode(cells[i].name));
		col += len;
	}
	printf("\n");
}

/* A skipped scenario's earlier cell, so that the table says it once. */
static int skipped_before(const struct tp_cell *cells, int i)
{
	for (int k = 0; k < i; k++)
		if (cells[k].skipped && !strcmp(cells[k].name, cells[i].name))
			return 1;
	return 0;
}

/* Each cell's rounds, five to a line. */
static void tp_rounds(const struct tp_cell *cells, int n)
{
	printf("   per-round Mmsg/s [probe after: ns/CPUs]:\n");
	for (int i = 0; i < n; i++) {
		const struct tp_cell *c = &cells[i];
		char sz[16];
		if (c->skipped)
			continue;
		fmt_size(sz, sizeof(sz), c->size);
		printf("   %-5s %-2d %-18s", sz, c->nsubs, c->name);
		for (int k = 0; k < c->n; k++)
			printf("%s %.3g[%.0f/%.1f]",
			       k && k % 5 == 0 ? "\n                              "
					       : "",
			       c->s[k].rate / 1e6, c->s[k].pp_after, c->s[k].cap);
		printf("\n");
	}
}

static void tp_table(const struct results *res, const struct tp_cell *cells,
		     int n, int fan)
{
	tp_modes(cells, n);
	if (!fan)
		printf("%-5s %-18s %9s %8s %9s %5s %6s %6s %6s %6s %5s %10s\n",
		       "size", "scenario", "Mmsg/s", "GB/s", "CPUns/msg",
		       "cores", "/bare", "/crs", "/aerx", "/aers", "clean",
		       "all:Mmsg/s");
	else
		printf("%-5s %-4s %-13s %9s %8s %9s %8s %5s %6s %8s %5s\n",
		       "size", "subs", "scenario", "Mdeliv/s", "GB/s",
		       "per-sub M", "CPUns/dl", "cores", "/subs1",
		       "crs/pipe", "clean");
	for (int i = 0; i < n; i++) {
		const struct tp_cell *c = &cells[i];
		char sz[16], r1[16], r2[16], cl[16];
		fmt_size(sz, sizeof(sz), c->size);
		if (c->skipped) {
			if (!skipped_before(cells, i))
				printf("%-5s %-18s skipped at every size: %s\n",
				       sz, c->name, c->skipped);
			continue;
		}
		if (c->failed == c->n) {
			printf("%-5s %-18s FAILED: %s\n", sz, c->name,
			       c->s[0].err);
			continue;
		}
		int a = tp_auto(c);
		double rate = tp_median(c, TP_RATE, a);
		snprintf(cl, sizeof(cl), "%d/%d%s", tp_nclean(c), c->n,
			 a ? "" : "*");
		if (!fan) {
			ratio_str(r1, sizeof(r1),
				  tp_ratio(c, tp_find(res, REF_BARE, c->size)));
			ratio_str(r2, sizeof(r2),
				  tp_ratio(c, tp_find(res, REF_CRS, c->size)));
			char r3[16], r4[16];
			ratio_str(r3, sizeof(r3),
				  tp_ratio(c, tp_find(res, REF_AERON, c->size)));
			ratio_str(r4, sizeof(r4),
				  tp_ratio(c, tp_find(res, REF_AERON_SHARED,
						      c->size)));
			printf("%-5s %-18s %9.3f %8.3f %9.1f %5.2f %6s %6s %6s "
			       "%6s %5s %10.3f%s\n",
			       sz, c->name, rate / 1e6, tp_median(c, TP_GBPS, a),
			       tp_median(c, TP_CPU, a), tp_median(c, TP_UTIL, a),
			       r1, r2, r3, r4, cl, tp_median(c, TP_RATE, 0) / 1e6,
			       c->failed ? " (some failed)" : "");
			continue;
		}
		const struct tp_cell *one = fan_find(res, c->name, c->size, 1);
		const struct tp_cell *pipe =
			fan_find(res, "pipe-fanout", c->size, c->nsubs);
		ratio_str(r1, sizeof(r1), c->nsubs == 1 ? 0 : tp_ratio(c, one));
		ratio_str(r2, sizeof(r2),
			  strcmp(c->name, "crs-fanout") ? 0
							: tp_ratio(c, pipe));
		printf("%-5s %-4d %-13s %9.3f %8.3f %9.3f %8.1f "
		       "%5.2f %6s %8s %5s%s\n",
		       sz, c->nsubs, c->name, rate / 1e6,
		       tp_median(c, TP_GBPS, a), rate / 1e6 / c->nsubs,
		       tp_median(c, TP_CPU, a), tp_median(c, TP_UTIL, a), r1, r2,
		       cl, c->failed ? " (some failed)" : "");
	}
	tp_rounds(cells, n);
}

/* One line below the latency table: c against x, per-round medians. */
static void lat_ratio_line(const struct lat_cell *c, const struct lat_cell *x,
			   const char *note)
{
	char sz[16];
	fmt_size(sz, sizeof(sz), c->size);
	printf("  %-5s %s / %s: p50 %.3f, p99 %.3f (per-round medians%s)\n",
	       sz, c->name, x->name, lat_ratio(c, x, LAT_P50),
	       lat_ratio(c, x, LAT_P99), note);
}

static void lat_table(const struct results *res)
{
	printf("%-5s %-5s %-18s %-8s %7s %8s %8s %8s %8s %8s %7s %7s %8s "
	       "%5s\n",
	       "size", "mode", "scenario", "engine", "trips", "p50 us",
	       "p90 us", "p99 us", "p99.9 us", "max us", "p50/raw", "p99/raw",
	       "p50/pipe", "clean");
	for (int i = 0; i < res->nlat; i++) {
		const struct lat_cell *c = &res->lat[i];
		char sz[16], r1[16], r2[16], r3[16], cl[16];
		fmt_size(sz, sizeof(sz), c->size);
		if (c->skipped) {
			int seen = 0;
			for (int k = 0; k < i && !seen; k++)
				seen = !strcmp(res->lat[k].name, c->name);
			if (!seen)
				printf("%-5s %-5s %-18s skipped at every size: "
				       "%s\n", sz, c->mode, c->name,
				       c->skipped);
			continue;
		}
		if (c->failed == c->n) {
			printf("%-5s %-5s %-18s FAILED: %s\n", sz, c->mode,
			       c->name, c->s[0].err);
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
		snprintf(cl, sizeof(cl), "%d/%d%s", lat_nclean(c), c->n,
			 c->clean.count ? "" : "*");
		const struct histo *h = lat_histo(c);
		printf("%-5s %-5s %-18s %-8s %7" PRIu64
		       " %8.2f %8.2f %8.2f %8.2f %8.1f %7s %7s %8s %5s%s\n",
		       sz, c->mode, c->name,
		       c->s[0].engine[0] ? c->s[0].engine : "-", h->count,
		       (double)histo_pct(h, 50) / 1e3,
		       (double)histo_pct(h, 90) / 1e3,
		       (double)histo_pct(h, 99) / 1e3,
		       (double)histo_pct(h, 99.9) / 1e3, (double)h->max / 1e3,
		       r1, r2, r3, cl, c->failed ? " (some failed)" : "");
	}
	for (int i = 0; i < res->nlat; i++) {
		const struct lat_cell *c = &res->lat[i];
		const struct lat_cell *x = lat_find(res, REF_AERON_LAT, c->size);
		if (!ran(x) || !ran(c) || strncmp(c->name, "crs-", 4) ||
		    strcmp(c->mode, "spin"))
			continue;
		lat_ratio_line(c, x, "");
	}
	/* The kernel's share of a crs blocking round trip (latency.c):
	 * what crs-block-uring costs over the same sleep without crs. Its
	 * ring is set up as raw-uring-defer-ro's where the kernel allows
	 * (6.1+), else as raw-uring-ro's. */
	static const char *const uring_refs[] = { "raw-uring-defer-ro",
						   "raw-uring-ro" };
	for (int k = 0; k < 2; k++) {
		for (int i = 0; i < res->nlat; i++) {
			const struct lat_cell *c = &res->lat[i];
			const struct lat_cell *x =
				lat_find(res, uring_refs[k], c->size);
			/* Only where crs really slept in io_uring. */
			if (!ran(x) || !ran(c) ||
			    strcmp(c->name, "crs-block-uring") ||
			    strcmp(c->s[0].engine, "io_uring"))
				continue;
			lat_ratio_line(c, x,
				       k == 0 ? "; the rest is crs's own"
					      : "; as crs slept before it "
						"kept a ring per thread");
		}
	}
	printf("  per-round p50 us [probe after: ns/CPUs]:\n");
	for (int i = 0; i < res->nlat; i++) {
		const struct lat_cell *c = &res->lat[i];
		char sz[16];
		if (c->skipped)
			continue;
		fmt_size(sz, sizeof(sz), c->size);
		printf("  %-5s %-18s", sz, c->name);
		for (int k = 0; k < c->n; k++)
			printf("%s %.2f[%.0f/%.1f]",
			       k && k % 5 == 0 ? "\n                       " : "",
			       c->s[k].p50 / 1e3, c->s[k].pp_after, c->s[k].cap);
		printf("\n");
	}
}

/* Median over the pattern's good rounds of one figure. */
static double pat_med(const struct results *res, int what)
{
	double v[MAX_ROUNDS];
	int n = 0;
	for (int i = 0; i < res->npattern; i++) {
		const struct pat_sample *s = &res->pattern[i];
		if (s->ok)
			v[n++] = what == 0   ? s->sent_rate
				 : what == 1 ? s->deliv_rate
				 : what == 2 ? s->p50
				 : what == 3 ? s->p90
				 : what == 4 ? s->p99
				 : what == 5 ? s->max
					     : s->refused;
	}
	return median(v, n);
}

static void pattern_table(const struct config *cfg, const struct results *res)
{
	char rate[32];
	if (cfg->pat_rate > 0)
		snprintf(rate, sizeof(rate), "%.0f msg/s", cfg->pat_rate);
	else
		snprintf(rate, sizeof(rate), "as fast as demand allows");
	printf("\n== Your pattern: %zu B messages, %s in bursts of %u, %d "
	       "subscriber%s spending %" PRId64 " ns each,\n"
	       "   prefetch %u, both sides blocking; %.2f s per round ==\n",
	       cfg->pat_size, rate, cfg->pat_burst, cfg->pat_subs,
	       cfg->pat_subs == 1 ? "" : "s", cfg->pat_work_ns,
	       cfg->pat_prefetch, cfg->tp_secs);
	printf("%-6s %12s %14s %10s %10s %10s %10s %12s\n", "round",
	       "sent msg/s", "deliv/s /sub", "p50 us", "p90 us", "p99 us",
	       "max us", "refused");
	for (int i = 0; i < res->npattern; i++) {
		const struct pat_sample *s = &res->pattern[i];
		if (!s->ok) {
			printf("%-6d FAILED: %s\n", i + 1, s->err);
			continue;
		}
		printf("%-6d %12.0f %14.0f %10.2f %10.2f %10.2f %10.1f %12.0f\n",
		       i + 1, s->sent_rate, s->deliv_rate, s->p50 / 1e3,
		       s->p90 / 1e3, s->p99 / 1e3, s->max / 1e3, s->refused);
	}
	printf("%-6s %12.0f %14.0f %10.2f %10.2f %10.2f %10.1f %12.0f\n",
	       "median", pat_med(res, 0), pat_med(res, 1),
	       pat_med(res, 2) / 1e3, pat_med(res, 3) / 1e3,
	       pat_med(res, 4) / 1e3, pat_med(res, 5) / 1e3, pat_med(res, 6));
	printf("   latency: commit to the subscriber seeing the message, "
	       "queueing behind processing included;\n"
	       "   refused: claims refused for want of demand or room "
	       "(the subscribers held the publisher back)\n");
}

/* "multipub": per row, publishers (0: the plain 1:1 stream beside), the
 * median and each good round's rate, messages/s into one subscriber. */
static void json_multipub(FILE *f, const struct config *cfg,
			  const struct results *res)
{
	fprintf(f, "  \"multipub\": ");
	if (!(cfg->sections & SEC_MULTIPUB)) {
		fprintf(f, "null,\n");
		return;
	}
	fprintf(f, "[");
	for (int i = 0; i < res->nmultipub; i++) {
		const struct mp_row *m = &res->multipub[i];
		fprintf(f, "%s\n    {\"publishers\": %d, \"shared\": %s, "
			   "\"rounds\": %d, \"good_rounds\": %d, "
			   "\"median_msgs_per_s\": %.0f, \"msgs_per_s\": [",
			i ? "," : "", m->pubs ? m->pubs : 1,
			m->pubs ? "true" : "false", m->nrounds, m->good,
			m->median);
		for (int k = 0; k < m->good; k++)
			fprintf(f, "%s%.0f", k ? ", " : "", m->rate[k]);
		fprintf(f, "]}");
	}
	fprintf(f, "\n  ],\n");
}

static void json_pattern(FILE *f, const struct config *cfg,
			 const struct results *res)
{
	fprintf(f, "  \"pattern\": ");
	if (!(cfg->sections & SEC_PATTERN)) {
		fprintf(f, "null,\n");
		return;
	}
	fprintf(f, "{\"size\": %zu, \"rate\": %.1f, \"burst\": %u, "
		   "\"work_ns\": %" PRId64 ", \"prefetch\": %u, "
		   "\"subscribers\": %d, \"rounds\": [",
		cfg->pat_size, cfg->pat_rate, cfg->pat_burst, cfg->pat_work_ns,
		cfg->pat_prefetch, cfg->pat_subs);
	for (int i = 0; i < res->npattern; i++) {
		const struct pat_sample *s = &res->pattern[i];
		fprintf(f, "%s\n    {\"ok\": %s", i ? "," : "",
			s->ok ? "true" : "false");
		if (s->ok)
			fprintf(f, ", \"messages\": %" PRIu64 ", "
				   "\"sent_msgs_per_s\": %.1f, "
				   "\"delivered_msgs_per_s_per_sub\": %.1f, "
				   "\"p50_ns\": %.0f, \"p90_ns\": %.0f, "
				   "\"p99_ns\": %.0f, \"max_ns\": %.0f, "
				   "\"refused_claims\": %.0f",
				s->messages, s->sent_rate, s->deliv_rate, s->p50,
				s->p90, s->p99, s->max, s->refused);
		else {
			fprintf(f, ", \"error\": ");
			tool_json_str(f, s->err);
		}
		fprintf(f, "}");
	}
	fprintf(f, "]},\n");
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
	printf("load %s -> %s; wall %.1f s\n", res->load0, res->load1,
	       res->wall);
	if (cfg->block_pin)
		printf("blocking ping-pongs: both sides on CPU %d\n",
		       cfg->block_cpu);
	if (aeron_about())
		printf("aeron: %s\n", aeron_about());
	printf("probe after each measurement (%d): cache-line round trip "
	       "median %.0f ns (min %.0f, max %.0f);\n"
	       "  CPUs the two spinning probe processes got: median %.2f, "
	       "min %.2f, %.0f%% of probes below 1.5\n",
	       res->nprobes, m.probe_med, m.probe_min, m.probe_max, m.cap_med,
	       m.cap_min, 100 * m.cap_low);
	printf("clean rounds of spinning scenarios: probes before and after "
	       "got >= %.1f CPUs and round trips\n"
	       "  under %.0f ns; blocking scenarios: every round. Targets use "
	       "clean rounds only.\n"
	       "ratios and targets pair only clean rounds in one VM state: "
	       "the probes around both sides within %.1fx\n"
	       "  of each other (this VM flips between states 3x+ apart; a "
	       "ratio across them is meaningless)\n",
	       CLEAN_CPUS, clean_rtt_max(), STATE_SPREAD);
	if (res->ntp) {
		printf("\n== Throughput: 1 publisher -> 1 subscriber, separate "
		       "processes, %.2f s window, receiver timed ==\n"
		       "   spinning receivers back off %u pauses (%.0f ns) "
		       "after an empty poll; CPU = user+sys of both\n"
		       "   processes per message (not Aeron's driver); /bare, "
		       "/crs, /aerx, /aers: median of per-round\n"
		       "   ratios to bare-ring, crs-spin-p128, aeron-excl, "
		       "aeron-shared\n",
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
		       "processes (histogram over the clean rounds) ==\n"
		       "   spin: both processes busy-poll; block: both sleep "
		       "in the kernel while waiting;\n"
		       "   /raw: against raw-spin or raw-futex, per-round "
		       "medians\n");
		lat_table(res);
	}
	if (res->nwake) {
		const struct wake_cell *fx = wake_find(res, "raw-futex");
		printf("\n== Wake fan-out: 1 publisher wakes %d sleeping "
		       "subscribers (%d wakes per round) ==\n"
		       "   crs wakes all subscribers of a stream with ONE "
		       "futex wake on one shared word:\n"
		       "   no per-subscriber wake to batch\n",
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
		printf("   mem-read %.2f GB/s (anonymous buffer, same loop, "
		       "median of 3 passes)\n"
		       "   memfd-read %.2f GB/s (fresh mapping of a filled "
		       "memfd, %.0f faults), %.2f GB/s (second pass, no "
		       "faults),\n"
		       "   %.2f GB/s (MAP_POPULATE, mmap timed)\n"
		       "   publishing with no subscriber %.2f GB/s\n"
		       "   shmem huge pages: %s (crs asks for them on rings "
		       "of 2 MiB or more; \"never\" leaves 4 KiB pages)\n",
		       cu_med(res, 2), cu_med(res, 3), cu_med(res, 8),
		       cu_med(res, 10), cu_med(res, 11), cu_med(res, 7),
		       m.shmem_thp);
		printf("   catch-up / mem-read %.3f, read-only / mem-read "
		       "%.3f, catch-up / memfd-read %.3f;\n"
		       "   rounds (catch-up/mem-read GB/s):",
		       cu_med(res, 4), cu_med(res, 9), cu_med(res, 12));
		for (int i = 0; i < res->ncatchup; i++)
			printf(" %.2f/%.2f", res->catchup[i].catchup_gbps,
			       res->catchup[i].membw_gbps);
		printf("\n");
	}
	if (res->npattern)
		pattern_table(cfg, res);
	struct target t[48];
	int nt = targets(cfg, res, t, 48);
	if (nt) {
		printf("\n== Targets ==\n");
		for (int i = 0; i < nt; i++) {
			if (t[i].known)
				printf("  %-58s %7.3f (goal %s %.2f, %d clean "
				       "rounds) %s\n",
				       t[i].what, t[i].value,
				       t[i].higher_better ? ">=" : "<=",
				       t[i].goal, t[i].rounds, verdict(&t[i]));
			else
				printf("  %-58s       - (goal %s %.2f) %s%s%s\n",
				       t[i].what,
				       t[i].higher_better ? ">=" : "<=",
				       t[i].goal, verdict(&t[i]),
				       t[i].skipped ? ": " : "",
				       t[i].skipped ? t[i].skipped : "");
		}
	}
	printf("\nfailures: %d\n", res->failures);
}

/* ---- JSON ------------------------------------------------------------------ */

static void json_tp_cells(FILE *f, const struct results *res,
			  const struct tp_cell *cells, int n, int fan)
{
	for (int i = 0; i < n; i++) {
		const struct tp_cell *c = &cells[i];
		int a = tp_auto(c);
		fprintf(f, "%s\n    {\"name\": \"%s\", \"size\": %zu, "
			   "\"subscribers\": %d, \"mode\": ",
			i ? "," : "", c->name, c->size, c->nsubs);
		tool_json_str(f, tp_mode(c->name));
		if (c->skipped) {
			/* Not run: no figure at all, never a zero. */
			fprintf(f, ", \"skipped\": ");
			tool_json_str(f, c->skipped);
			fprintf(f, ", \"rounds\": []}");
			continue;
		}
		fprintf(f, ", \"ok\": %s, \"failed_rounds\": %d, "
			   "\"clean_rounds\": %d, \"figures_from\": \"%s\",\n"
			   "     \"median_msgs_per_s\": %.0f, \"median_gb_per_s\": "
			   "%.4f, \"median_cpu_ns_per_msg\": %.1f, "
			   "\"median_cores_busy\": %.3f,\n"
			   "     \"all_rounds_median_msgs_per_s\": %.0f, "
			   "\"all_rounds_median_cpu_ns_per_msg\": %.1f",
			c->failed ? "false" : "true", c->failed, tp_nclean(c),
			a ? "clean rounds" : "all rounds",
			tp_median(c, TP_RATE, a), tp_median(c, TP_GBPS, a),
			tp_median(c, TP_CPU, a), tp_median(c, TP_UTIL, a),
			tp_median(c, TP_RATE, 0), tp_median(c, TP_CPU, 0));
		const struct tp_cell *ref[4] = { NULL, NULL, NULL, NULL };
		const char *key[4] = { NULL, NULL, NULL, NULL };
		if (!fan) {
			ref[0] = tp_find(res, REF_BARE, c->size);
			key[0] = "bare_ring";
			ref[1] = tp_find(res, REF_CRS, c->size);
			key[1] = "crs_spin_p128";
			ref[2] = tp_find(res, REF_AERON, c->size);
			key[2] = "aeron_excl";
			ref[3] = tp_find(res, REF_AERON_SHARED, c->size);
			key[3] = "aeron_shared";
		} else if (c->nsubs > 1) {
			ref[0] = fan_find(res, c->name, c->size, 1);
			key[0] = "1_subscriber";
		}
		for (int k = 0; k < 4; k++) {
			if (!ref[k] || ref[k] == c || ref[k]->skipped)
				continue;
			int nc;
			double rc = tp_ratio_n(c, ref[k], 1, &nc);
			fprintf(f, ", \"ratio_to_%s\": %.4f, "
				   "\"ratio_to_%s_clean_pairs\": %d, "
				   "\"ratio_to_%s_all_rounds\": %.4f",
				key[k], nc ? rc : tp_ratio_n(c, ref[k], 0, NULL),
				key[k], nc, key[k],
				tp_ratio_n(c, ref[k], 0, NULL));
		}
		fprintf(f, ",\n     \"rounds\": [");
		for (int k = 0; k < c->n; k++) {
			const struct tp_sample *s = &c->s[k];
			fprintf(f, "%s\n      {\"ok\": %s, \"clean\": %s, "
				   "\"msgs_per_s\": %.0f, "
				   "\"gb_per_s\": %.4f, \"sent_per_s\": %.0f, "
				   "\"window_s\": %.4f, \"messages\": %" PRIu64
				   ", \"cpu_ns_per_msg\": %.1f, "
				   "\"cores_busy\": %.3f, "
				   "\"probe_before_ns\": %.1f, "
				   "\"probe_after_ns\": %.1f, "
				   "\"probe_cpus_before\": %.2f, "
				   "\"probe_cpus_after\": %.2f, \"wall_s\": %.3f, "
				   "\"refused_demand_per_msg\": %.4f, "
				   "\"refused_room_per_msg\": %.4f, "
				   "\"sender_waits\": %" PRIu64
				   ", \"empty_polls_per_msg\": %.4f",
				k ? "," : "", s->ok ? "true" : "false",
				tp_clean(c, s) ? "true" : "false", s->rate,
				s->rate * (double)c->size / 1e9, s->send_rate,
				s->secs, s->messages, s->cpu_ns, s->util,
				s->pp_before, s->pp_after, s->cap_before, s->cap,
				s->wall, s->refused_demand, s->refused_room,
				s->waits, s->empty);
			if (!s->ok) {
				fprintf(f, ", \"error\": ");
				tool_json_str(f, s->err);
			}
			fprintf(f, "}");
		}
		fprintf(f, "]}");
	}
}

static void json_histo(FILE *f, const char *key, const struct histo *h)
{
	static const double pcts[] = { 50, 90, 99, 99.9 };
	fprintf(f, "\"%s\": {\"round_trips\": %" PRIu64 ", ", key, h->count);
	for (int k = 0; k < 4; k++)
		fprintf(f, "\"p%g\": %" PRIu64 ", ", pcts[k],
			histo_pct(h, pcts[k]));
	fprintf(f, "\"min\": %" PRIu64 ", \"max\": %" PRIu64 ", \"mean\": %.1f}",
		h->count ? h->min : 0, h->max, histo_mean(h));
}

static void json_lat(FILE *f, const struct results *res)
{
	for (int i = 0; i < res->nlat; i++) {
		const struct lat_cell *c = &res->lat[i];
		int a = lat_nclean(c) > 0;
		fprintf(f, "%s\n    {\"name\": \"%s\", \"mode\": \"%s\", "
			   "\"size\": %zu, ",
			i ? "," : "", c->name, c->mode, c->size);
		if (c->skipped) {
			fprintf(f, "\"skipped\": ");
			tool_json_str(f, c->skipped);
			fprintf(f, ", \"rounds\": []}");
			continue;
		}
		fprintf(f, "\"engine\": ");
		tool_json_str(f, c->s[0].engine);
		fprintf(f, ", \"ok\": %s, \"failed_rounds\": %d, "
			   "\"clean_rounds\": %d,\n     ",
			c->failed ? "false" : "true", c->failed, lat_nclean(c));
		json_histo(f, "clean_rounds_ns", &c->clean);
		fprintf(f, ",\n     ");
		json_histo(f, "all_rounds_ns", &c->h);
		fprintf(f, ",\n     \"median_of_rounds_ns\": {\"p50\": %.0f, "
			   "\"p99\": %.0f, \"from\": \"%s\"}",
			lat_median(c, LAT_P50, a), lat_median(c, LAT_P99, a),
			a ? "clean rounds" : "all rounds");
		const struct lat_cell *b = lat_find(res, lat_base(c), c->size);
		const struct lat_cell *p = lat_find(res, "pipe", c->size);
		if (b && b != c)
			fprintf(f, ", \"ratio_to_%s\": {\"p50\": %.4f, "
				   "\"p99\": %.4f}",
				lat_base(c), lat_ratio(c, b, LAT_P50),
				lat_ratio(c, b, LAT_P99));
		const struct lat_cell *x = lat_find(res, REF_AERON_LAT, c->size);
		if (ran(x) && x != c && !strcmp(c->mode, "spin"))
			fprintf(f, ", \"ratio_to_%s\": {\"p50\": %.4f, "
				   "\"p99\": %.4f}",
				"aeron_spin", lat_ratio(c, x, LAT_P50),
				lat_ratio(c, x, LAT_P99));
		if (p && p != c && !strcmp(c->mode, "block"))
			fprintf(f, ", \"ratio_to_pipe\": {\"p50\": %.4f, "
				   "\"p99\": %.4f}",
				lat_ratio(c, p, LAT_P50),
				lat_ratio(c, p, LAT_P99));
		fprintf(f, ",\n     \"rounds\": [");
		for (int k = 0; k < c->n; k++) {
			const struct lat_sample *s = &c->s[k];
			fprintf(f, "%s{\"ok\": %s, \"clean\": %s, \"trips\": "
				   "%" PRIu64 ", \"p50\": %.0f, \"p90\": %.0f, "
				   "\"p99\": %.0f, \"p99.9\": %.0f, \"max\": "
				   "%.0f, \"probe_after_ns\": %.1f, "
				   "\"probe_cpus_before\": %.2f, "
				   "\"probe_cpus_after\": %.2f",
				k ? ", " : "", s->ok ? "true" : "false",
				lat_clean(c, s) ? "true" : "false", s->trips,
				s->p50, s->p90, s->p99, s->p999, s->max,
				s->pp_after, s->cap_before, s->cap);
			if (!s->ok) {
				fprintf(f, ", \"error\": ");
				tool_json_str(f, s->err);
			}
			fprintf(f, "}");
		}
		fprintf(f, "]}");
	}
}

/* "[" for a section that ran (the caller closes it), else "null". */
static int json_section(FILE *f, const struct config *cfg, unsigned sec)
{
	fputs(cfg->sections & sec ? "[" : "null", f);
	return (cfg->sections & sec) != 0;
}

static void json_wake(FILE *f, const struct config *cfg,
		      const struct results *res)
{
	for (int i = 0; i < res->nwake; i++) {
		const struct wake_cell *c = &res->wake[i];
		fprintf(f, "%s\n    {\"name\": \"%s\", \"engine\": ",
			i ? "," : "", c->name);
		tool_json_str(f, c->s[0].engine);
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
				tool_json_str(f, s->err);
			}
			fprintf(f, "}");
		}
		fprintf(f, "]}");
	}
	fprintf(f, "\n  ]");
}

static void json_catchup(FILE *f, const struct results *res)
{
	fprintf(f, "{\"rounds\": [");
	for (int i = 0; i < res->ncatchup; i++) {
		const struct catchup_sample *s = &res->catchup[i];
		fprintf(f, "%s\n    {\"ok\": %s, \"bytes\": %.0f, \"messages\": "
			   "%.0f, \"catchup_gb_per_s\": %.3f, "
			   "\"read_gb_per_s\": %.3f, \"open_to_first_ms\": "
			   "%.3f, \"page_faults\": %.0f, "
			   "\"mem_read_gb_per_s\": %.3f, "
			   "\"memfd_read_gb_per_s\": %.3f, "
			   "\"memfd_page_faults\": %.0f, "
			   "\"memfd_second_pass_gb_per_s\": %.3f, "
			   "\"memfd_populate_gb_per_s\": %.3f, "
			   "\"publish_gb_per_s\": %.3f",
			i ? "," : "", s->ok ? "true" : "false", s->bytes,
			s->msgs, s->catchup_gbps, s->read_gbps, s->open_ms,
			s->minflt, s->membw_gbps, s->memfd_gbps,
			s->memfd_minflt, s->memfd_warm_gbps,
			s->memfd_populate_gbps, s->publish_gbps);
		if (!s->ok) {
			fprintf(f, ", \"error\": ");
			tool_json_str(f, s->err);
		}
		fprintf(f, "}");
	}
	fprintf(f, "],\n   \"median_catchup_gb_per_s\": %.3f, "
		   "\"median_mem_read_gb_per_s\": %.3f, "
		   "\"ratio_catchup_to_mem_read\": %.4f}",
		cu_med(res, 0), cu_med(res, 2), cu_med(res, 4));
}

void report_json(const struct config *cfg, const struct results *res, FILE *f)
{
	struct machine m;
	machine(cfg, res, &m);
	fprintf(f, "{\n  \"bench\": \"crs-bench\", \"bench_version\": \""
		   BENCH_VERSION "\", \"crs_version\": \"%d.%d\",\n",
		CRS_VERSION_MAJOR, CRS_VERSION_MINOR);
	fprintf(f, "  \"machine\": {\"nproc\": %ld, \"cpu\": ", m.nproc);
	tool_json_str(f, m.cpu);
	fprintf(f, ", \"kernel\": ");
	tool_json_str(f, m.kernel);
	fprintf(f, ", \"clocksource\": ");
	tool_json_str(f, m.clocksrc);
	fprintf(f, ", \"shmem_thp\": ");
	tool_json_str(f, m.shmem_thp);
	fprintf(f, ", \"loadavg_start\": ");
	tool_json_str(f, res->load0);
	fprintf(f, ", \"loadavg_end\": ");
	tool_json_str(f, res->load1);
	fprintf(f, "},\n  \"config\": {\"rounds\": %d, \"quick\": %s, "
		   "\"ring_bytes\": %" PRIu64 ", \"pin\": %s, "
		   "\"block_cpu\": %d, "
		   "\"throughput_window_s\": %.3f, \"latency_max_s\": %.3f, "
		   "\"latency_max_trips\": %u, \"idle_pause\": %u, "
		   "\"idle_pause_ns\": %.1f, \"wake_subscribers\": %d, "
		   "\"wakes_per_round\": %d, \"catchup_ring\": %" PRIu64
		   ", \"catchup_bytes\": %" PRIu64 ", \"catchup_msg\": %zu, "
		   "\"zmq\": %s, \"aeron\": ",
		cfg->rounds, cfg->quick ? "true" : "false", cfg->ring_bytes,
		cfg->pin ? "true" : "false",
		cfg->block_pin ? cfg->block_cpu : -1, cfg->tp_secs, cfg->lat_secs,
		cfg->lat_trips, cfg->idle_pause, m.pause_ns, cfg->wake_subs,
		cfg->wake_rounds, cfg->catchup_ring, cfg->catchup_bytes,
		cfg->catchup_msg, cfg->have_zmq ? "true" : "false");
	/* null: no Aeron scenario ran (the cells say why). */
	if (aeron_about())
		tool_json_str(f, aeron_about());
	else
		fputs("null", f);
	fprintf(f, ", \"runtime_dir\": ");
	tool_json_str(f, m.rundir);
	fprintf(f, "},\n  \"probe_ns\": {\"median\": %.1f, \"min\": %.1f, "
		   "\"max\": %.1f, \"all\": [",
		m.probe_med, m.probe_min, m.probe_max);
	for (int i = 0; i < res->nprobes; i++)
		fprintf(f, "%s%.0f", i ? ", " : "", res->probes[i]);
	fprintf(f, "],\n   \"cpus_median\": %.2f, \"cpus_min\": %.2f, "
		   "\"share_below_1_5\": %.3f, \"clean_cpus_min\": %.2f, "
		   "\"clean_round_trip_max_ns\": %.1f, \"cpus\": [",
		m.cap_med, m.cap_min, m.cap_low, CLEAN_CPUS, clean_rtt_max());
	for (int i = 0; i < res->nprobes; i++)
		fprintf(f, "%s%.2f", i ? ", " : "", res->caps[i]);
	/* A section not run is null, never an empty or zero figure. */
	fprintf(f, "]},\n  \"wall_s\": %.2f,\n  \"throughput\": ", res->wall);
	if (json_section(f, cfg, SEC_TP)) {
		json_tp_cells(f, res, res->tp, res->ntp, 0);
		fprintf(f, "\n  ]");
	}
	fprintf(f, ",\n  \"fanout\": ");
	if (json_section(f, cfg, SEC_FAN)) {
		json_tp_cells(f, res, res->fan, res->nfan, 1);
		fprintf(f, "\n  ]");
	}
	fprintf(f, ",\n  \"latency\": ");
	if (json_section(f, cfg, SEC_LAT)) {
		json_lat(f, res);
		fprintf(f, "\n  ]");
	}
	fprintf(f, ",\n  \"wake\": ");
	if (json_section(f, cfg, SEC_WAKE))
		json_wake(f, cfg, res);
	fprintf(f, ",\n  \"catchup\": ");
	if (cfg->sections & SEC_CATCHUP && res->ncatchup)
		json_catchup(f, res);
	else
		fputs("null", f);
	fprintf(f, ",\n");
	json_pattern(f, cfg, res);
	json_multipub(f, cfg, res);
	struct target t[48];
	int nt = targets(cfg, res, t, 48);
	fprintf(f, "  \"targets\": [");
	for (int i = 0; i < nt; i++) {
		fprintf(f, "%s\n    {\"what\": ", i ? "," : "");
		tool_json_str(f, t[i].what);
		if (t[i].known)
			fprintf(f, ", \"value\": %.4f", t[i].value);
		else
			fprintf(f, ", \"value\": null");
		fprintf(f, ", \"clean_rounds\": %d, \"goal\": \"%s %.2f\", "
			   "\"verdict\": \"%s\"",
			t[i].rounds, t[i].higher_better ? ">=" : "<=",
			t[i].goal, verdict(&t[i]));
		if (t[i].skipped) {
			fprintf(f, ", \"skipped\": ");
			tool_json_str(f, t[i].skipped);
		}
		fputc('}', f);
	}
	fprintf(f, "\n  ],\n  \"failures\": %d\n}\n", res->failures);
}
