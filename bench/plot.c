/*
 * plot.c - --plot DIR: .dat files and plots.gp in DIR, rendered to PNG by
 * gnuplot when it is installed (Debian: gnuplot-nox). Figures are the
 * same as the table's: clean rounds when there are any. Every plot says
 * in its title what it shows and over which rounds; sizes are labelled in
 * bytes, subscriber counts as the integers run; crs series are solid and
 * thick with filled points, baselines dashed with open points, and no two
 * series of a plot share a colour.
 */
#include <errno.h>
#include <fcntl.h>
#include <stdlib.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#include "bench.h"

static FILE *dat_open(const char *dir, const char *name)
{
	char path[512];
	snprintf(path, sizeof(path), "%s/%s", dir, name);
	return fopen(path, "w");
}

/* Distinct colours, one per series of a plot. */
static const char *const colours[] = {
	"#1f77b4", "#d62728", "#2ca02c", "#ff7f0e", "#9467bd", "#8c564b",
	"#e377c2", "#17becf", "#7f7f7f", "#bcbd22", "#000000", "#393b79",
	"#ad494a", "#637939", "#e7ba52", "#843c39",
};
#define NCOLOURS (int)(sizeof(colours) / sizeof(colours[0]))

/* The style of series k of a plot: crs apart from the baselines. Past
 * the palette, colours come round again with another dash pattern. */
static void series_style(FILE *gp, int k, const char *name)
{
	int crs = !strncmp(name, "crs", 3);
	int dash = crs ? 1 + 2 * (k / NCOLOURS) : 2 + 2 * (k / NCOLOURS);
	fprintf(gp, " lc rgb '%s' dt %d lw %s pt %d ps %s", colours[k % NCOLOURS],
		dash, crs ? "2.5" : "1.5", crs ? 7 : 6, crs ? "1.2" : "1");
}

/* x tics at the message sizes measured, labelled in bytes. */
static void size_tics(FILE *gp, const size_t *sizes, int n)
{
	fprintf(gp, "set xtics (");
	for (int z = 0; z < n; z++) {
		char sz[16];
		fmt_size(sz, sizeof(sz), sizes[z]);
		fprintf(gp, "%s'%s' %zu", z ? ", " : "", sz, sizes[z]);
	}
	fprintf(gp, ")\n");
}

/* Which rounds the medians come from, for titles. */
static void rounds_text(char *buf, size_t len, const struct config *cfg)
{
	snprintf(buf, len, "median over the clean rounds of %d (over all %d "
			   "for a series without a clean one)",
		 cfg->rounds, cfg->rounds);
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
						tp_median(c, TP_GBPS, tp_auto(c)),
						tp_median(c, TP_RATE, tp_auto(c)) /
							1e6,
						tp_median(c, TP_CPU, tp_auto(c)));
				else
					fprintf(d, " NaN NaN NaN");
			}
			fprintf(d, "\n");
		}
		fclose(d);
		static const char *what[3] = {
			"GB/s", "million messages/s",
			"CPU ns per message (both processes)"
		};
		static const char *file[3] = { "throughput-gbps.png",
					       "throughput-msgs.png",
					       "throughput-cpu.png" };
		char rounds[96];
		rounds_text(rounds, sizeof(rounds), cfg);
		for (int w = 0; w < 3; w++) {
			fprintf(gp, "set output '%s'\nset title \"crs-bench: 1 "
				    "publisher -> 1 subscriber, separate "
				    "processes: %s\\n%s\"\nset logscale xy\n"
				    "set xlabel 'message size (bytes; K = 1024)'"
				    "\nset ylabel '%s'\n",
				file[w], what[w], rounds, what[w]);
			size_tics(gp, cfg->sizes, cfg->nsizes);
			fprintf(gp, "plot ");
			for (int k = 0; k < nn; k++) {
				fprintf(gp, "%s'throughput.dat' using 1:%d with "
					    "linespoints title '%s'",
					k ? ", " : "", 2 + 3 * k + w, names[k]);
				series_style(gp, k, names[k]);
			}
			fprintf(gp, "\nset xtics autofreq\n");
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
						c ? tp_median(c, TP_RATE,
							      tp_auto(c)) / 1e6
						  : 0);
				}
				fprintf(d, "\n");
			}
			fprintf(d, "\n\n");
		}
		fclose(d);
		char rounds[96];
		rounds_text(rounds, sizeof(rounds), cfg);
		fprintf(gp, "set output 'fanout.png'\nset title \"crs-bench: "
			    "fan-out, 1 publisher -> K subscribers, blocking: "
			    "deliveries/s summed over the subscribers\\n%s\"\n"
			    "unset logscale\nset logscale y\n"
			    "set xlabel 'subscribers (K)'\nset ylabel 'million "
			    "deliveries/s'\nset xtics (",
			rounds);
		for (int f = 0; f < cfg->nfanout; f++)
			fprintf(gp, "%s'%d' %d", f ? ", " : "", cfg->fanout[f],
				cfg->fanout[f]);
		fprintf(gp, ")\nset mxtics 1\nplot ");
		int series = 0;
		for (int z = 0; z < cfg->nfan_sizes; z++)
			for (int k = 0; k < nn; k++) {
				char sz[16];
				fmt_size(sz, sizeof(sz), cfg->fan_sizes[z]);
				fprintf(gp, "%s'fanout.dat' index %d using 1:%d "
					    "with linespoints title '%s, %s "
					    "messages'",
					series ? ", " : "", z, 3 + k, names[k],
					sz);
				series_style(gp, series++, names[k]);
			}
		fprintf(gp, "\nset xtics autofreq\n");
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
			    "\"crs-bench: ping-pong round trip of %s messages "
			    "between two processes, by percentile\\nhistogram "
			    "of the clean rounds (of all rounds for a "
			    "scenario without any)\"\n"
			    "unset logscale\nset logscale xy\nset xlabel "
			    "'percentile'\nset ylabel 'round trip "
			    "(us)'\nset xtics ('p50' 2, 'p90' 10, 'p99' "
			    "100, 'p99.9' 1000, 'p99.99' 10000, "
			    "'p99.999' 100000, 'max' 1000000)\nplot ",
			sz, sz);
		for (int i = 0; i < res->nlat; i++) {
			const struct lat_cell *c = &res->lat[i];
			if (c->size != cfg->lat_sizes[z] || !c->h.count)
				continue;
			const struct histo *h = lat_histo(c);
			fprintf(d, "# %s (%s)\n", c->name, c->mode);
			for (size_t k = 0; k < sizeof(pct) / sizeof(pct[0]);
			     k++)
				fprintf(d, "%g %.6g %.6g\n", pct[k],
					1 / (1 - pct[k] / 100),
					(double)histo_pct(h, pct[k]) / 1e3);
			fprintf(d, "100 1e6 %.6g\n\n\n", (double)h->max / 1e3);
			fprintf(gp, "%s'%s' index %d using 2:3 with linespoints "
				    "title '%s (%s)'",
				idx ? ", " : "", fname, idx, c->name, c->mode);
			series_style(gp, idx, c->name);
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
