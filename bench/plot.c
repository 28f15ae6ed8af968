/*
 * plot.c - --plot DIR: .dat files and plots.gp in DIR, rendered to PNG by
 * gnuplot when it is installed (Debian: gnuplot-nox). Figures are the
 * same as the table's: clean rounds when there are any.
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
						c ? tp_median(c, TP_RATE,
							      tp_auto(c)) / 1e6
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
			    "clean rounds (percentile distribution)'\n"
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
