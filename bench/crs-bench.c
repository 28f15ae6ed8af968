/*
 * crs-bench.c - the zero-copy throughput and latency benchmark of crs,
 * side by side with baselines measured in the same run.
 *
 * Sections, each run in interleaved rounds (every scenario once per round,
 * a cache-line probe after every measurement):
 *   throughput  1 publisher -> 1 subscriber, separate processes, message
 *               sizes 8 B .. 1 MiB: crs zero-copy, copying offer, replay
 *               mode, blocking; bare ring, in-band ring, pipe, unix
 *               socket, ZeroMQ; Aeron when built with it (throughput.c,
 *               baselines.c, aeron.c)
 *   fanout      1 publisher -> K subscribers, blocking (throughput.c)
 *   latency     ping-pong round trips, spinning and blocking, histogram
 *               percentiles (latency.c, histo.c)
 *   wake        one commit waking 64 sleeping subscribers (wake.c)
 *   catchup     a late joiner reading ~900 MiB retained by a replay
 *               stream, against memory read bandwidth (replay.c)
 *   pattern     only when asked for: the user's own pattern (rate,
 *               bursts, processing time, prefetch, subscribers), its
 *               delivered rate and latency (pattern.c)
 * Output: a table, --json (one document), --plot DIR (report.c).
 * README.md explains how to read every figure.
 */
#include <errno.h>
#include <getopt.h>
#include <inttypes.h>
#include <sched.h>
#include <stdlib.h>
#include <unistd.h>

#include "bench.h"
#include "crs/crs.h"

static void usage(FILE *f)
{
	fprintf(f,
		"usage: crs-bench [options]\n"
		"  --json              print one JSON document\n"
		"  --quick             CI smoke run (under 30 s): few sizes, "
		"rounds and subscribers,\n"
		"                      64 MiB catch-up\n"
		"  --json-file PATH    also write the JSON document to PATH\n"
		"  --plot DIR          write .dat files and plots.gp to DIR, "
		"render PNGs with gnuplot\n"
		"  --section LIST      throughput,fanout,latency,wake,catchup "
		"(default: all),\n"
		"                      or pattern (your own, below; only when "
		"named)\n"
		"                      or multipub (shared streams, 1/2/4 "
		"publishers; only when named)\n"
		"  --scenario NAME     run only NAME (repeatable; 'all' for "
		"every one, see --list);\n"
		"                      the baselines a section compares "
		"against always run\n"
		"  --rounds N          interleaved rounds (default 5; quick 2)\n"
		"  --size LIST         throughput sizes (default 8,32,128,512,"
		"2K,4K,8K,32K,64K,128K,512K,1M)\n"
		"  --fan-size LIST     fan-out sizes (default 32,4K,64K)\n"
		"  --fanout LIST       fan-out subscriber counts (default "
		"1,2,4; at most 8)\n"
		"  --lat-size LIST     ping-pong sizes (default 32,64K)\n"
		"  --ring BYTES        ring of crs and the ring baselines "
		"(default 8M)\n"
		"  --window SECS       throughput window per measurement "
		"(default 0.2)\n"
		"  --lat-secs SECS     ping-pong: at most SECS per measurement "
		"(default 0.4)\n"
		"  --trips N           ping-pong: at most N round trips per "
		"measurement (default 50000)\n"
		"  --wake-subs N       wake fan-out subscribers (default 64, "
		"at most 64)\n"
		"  --wakes N           wakes per wake measurement (default 20)\n"
		"  --catchup BYTES     bytes retained for the catch-up "
		"(default 900M; ring: the next\n"
		"                      power of two, at most 1G)\n"
		"  --idle-pause N      spinning throughput receivers: pauses "
		"after an empty poll (64)\n"
		"  --probe N           cache-line probe round trips (default "
		"10000)\n"
		"  --pin               senders on CPU 0, receivers on CPU 1\n"
		"  --block-cpu N       both sides of blocking ping-pongs on CPU N "
		"(one placement\n"
		"                      for every transport; default: where the "
		"scheduler puts them)\n"
		"  --verbose           one line per measurement on stderr\n"
		"Your own pattern (--section pattern): 1 publisher -> --subs "
		"subscribers, blocking,\n"
		"  message size the first --size (default 64, at least 16), "
		"for --window per round:\n"
		"  --rate MSGS/S       publish this many messages a second "
		"(default 0: as demand allows)\n"
		"  --burst N           in bursts of N back to back (default 1)\n"
		"  --work NS           each subscriber spends NS ns on every "
		"message (default 0)\n"
		"  --prefetch N        subscribers' prefetch (default 128)\n"
		"  --subs N            subscribers (default 1, at most 8)\n"
		"  --list              list the scenarios\n"
		"  -h, --help          show this help\n"
		"Exit status: 0 done, 1 a transfer failed, 2 usage error.\n");
}

/* Whether --scenario NAME names one (see --list). */
static int scenario_known(const char *name)
{
	static const char *const others[] = { "all", "crs-uring", "crs-poll",
					      "raw-futex", "catchup", NULL };
	for (int i = 0; others[i]; i++)
		if (!strcmp(name, others[i]))
			return 1;
	for (int i = 0; i < n_crs_tp_scns; i++)
		if (!strcmp(name, crs_tp_scns[i].name))
			return 1;
	for (int i = 0; i < n_base_tp_scns; i++)
		if (!strcmp(name, base_tp_scns[i].name))
			return 1;
	return lat_known(name);
}

/* A pattern option: a number in its range. Returns 0 or -1. */
static int pattern_opt(struct config *c, int ch, const char *arg)
{
	char *end;
	errno = 0;
	double v = strtod(arg, &end);
	int bad = end == arg || *end || errno || v < 0;
	switch (ch) {
	case 'a':
		bad |= v > 1e9;
		c->pat_rate = v;
		break;
	case 'b':
		bad |= v < 1 || v > 1e6 || v != (double)(uint32_t)v;
		c->pat_burst = (uint32_t)v;
		break;
	case 'k':
		bad |= v > 1e9;
		c->pat_work_ns = (int64_t)v;
		break;
	case 'f':
		bad |= v < 1 || v > 1e6 || v != (double)(uint32_t)v;
		c->pat_prefetch = (uint32_t)v;
		break;
	default:
		bad |= v < 1 || v > MAX_FANOUT || v != (double)(int)v;
		c->pat_subs = (int)v;
		break;
	}
	if (bad)
		fprintf(stderr, "crs-bench: --%s: bad value '%s' (%s)\n",
			ch == 'a' ? "rate" : ch == 'b' ? "burst"
			: ch == 'k' ? "work" : ch == 'f' ? "prefetch" : "subs",
			arg,
			ch == 'a' ? "0..1e9 messages/s" : ch == 'b' ? "1..1000000"
			: ch == 'k' ? "0..1e9 ns" : ch == 'f' ? "1..1000000"
			: "1..8");
	return bad ? -1 : 0;
}

static int parse_list(const char *arg, size_t *out, int *n, int max,
		      uint64_t lo, uint64_t hi, const char *opt)
{
	char *dup = strdup(arg), *save = NULL;
	*n = 0;
	for (char *t = strtok_r(dup, ",", &save); t;
	     t = strtok_r(NULL, ",", &save)) {
		uint64_t v;
		if (tool_parse_size(t, lo, hi, &v) || *n == max) {
			fprintf(stderr, "%s: values %" PRIu64 "..%" PRIu64
				", at most %d\n", opt, lo, hi, max);
			free(dup);
			return -1;
		}
		out[(*n)++] = v;
	}
	free(dup);
	return *n ? 0 : -1;
}

static void defaults(struct config *c)
{
	static const size_t tp_full[] = { 8,	  32,	    128,     512,
					  2048,	  4096,	    8192,    32768,
					  65536,  131072,   524288,  1048576 };
	static const size_t tp_quick[] = { 32, 4096, 65536 };
	if (!c->nsizes) {
		const size_t *v = c->quick ? tp_quick : tp_full;
		c->nsizes = c->quick ? 3 : 12;
		memcpy(c->sizes, v, (size_t)c->nsizes * sizeof(*v));
	}
	if (!c->nfan_sizes) {
		if (c->quick) {
			c->fan_sizes[c->nfan_sizes++] = 4096;
		} else {
			c->fan_sizes[c->nfan_sizes++] = 32;
			c->fan_sizes[c->nfan_sizes++] = 4096;
			c->fan_sizes[c->nfan_sizes++] = 65536;
		}
	}
	if (!c->nfanout) {
		c->fanout[c->nfanout++] = 1;
		c->fanout[c->nfanout++] = 2;
		if (!c->quick)
			c->fanout[c->nfanout++] = 4;
	}
	if (!c->nlat_sizes) {
		c->lat_sizes[c->nlat_sizes++] = 32;
		c->lat_sizes[c->nlat_sizes++] = 65536;
	}
	if (!c->rounds)
		c->rounds = c->quick ? 2 : 5;
	if (!c->ring_bytes)
		c->ring_bytes = 8ULL << 20;
	if (c->tp_secs <= 0)
		c->tp_secs = c->quick ? 0.05 : 0.2;
	if (c->lat_secs <= 0)
		c->lat_secs = c->quick ? 0.1 : 0.4;
	if (!c->lat_trips)
		c->lat_trips = c->quick ? 5000 : 50000;
	if (!c->wake_subs)
		c->wake_subs = c->quick ? 4 : 64;
	if (!c->wake_rounds)
		c->wake_rounds = c->quick ? 5 : 20;
	if (!c->catchup_bytes)
		c->catchup_bytes = c->quick ? 56ULL << 20 : 900ULL << 20;
	c->catchup_msg = 65536;
	c->catchup_ring = 1ULL << 20;
	while (c->catchup_ring < c->catchup_bytes + (c->catchup_bytes >> 4) &&
	       c->catchup_ring < (1ULL << 30))
		c->catchup_ring <<= 1;
	c->catchup_rounds = c->quick ? 1 : 3;
	c->warm_ns = c->quick ? 20000000 : 100000000;
	if (!c->pp_trips)
		c->pp_trips = c->quick ? 2500 : 10000;
	if (!c->sections)
		c->sections = SEC_TP | SEC_FAN | SEC_LAT | SEC_WAKE | SEC_CATCHUP;
}

static int parse_args(int argc, char **argv, struct config *c)
{
	static const struct option opts[] = {
		{ "json", no_argument, 0, 'j' },
		{ "quick", no_argument, 0, 'q' },
		{ "plot", required_argument, 0, 'g' },
		{ "json-file", required_argument, 0, 'J' },
		{ "section", required_argument, 0, 'X' },
		{ "scenario", required_argument, 0, 'S' },
		{ "rounds", required_argument, 0, 'r' },
		{ "size", required_argument, 0, 's' },
		{ "fan-size", required_argument, 0, 'F' },
		{ "fanout", required_argument, 0, 'K' },
		{ "lat-size", required_argument, 0, 'L' },
		{ "ring", required_argument, 0, 'R' },
		{ "window", required_argument, 0, 'w' },
		{ "lat-secs", required_argument, 0, 'T' },
		{ "trips", required_argument, 0, 't' },
		{ "wake-subs", required_argument, 0, 'W' },
		{ "wakes", required_argument, 0, 'N' },
		{ "catchup", required_argument, 0, 'C' },
		{ "idle-pause", required_argument, 0, 'I' },
		{ "probe", required_argument, 0, 'p' },
		{ "pin", no_argument, 0, 'P' },
		{ "block-cpu", required_argument, 0, 'B' },
		{ "list", no_argument, 0, 'l' },
		{ "verbose", no_argument, 0, 'v' },
		{ "rate", required_argument, 0, 'a' },
		{ "burst", required_argument, 0, 'b' },
		{ "work", required_argument, 0, 'k' },
		{ "prefetch", required_argument, 0, 'f' },
		{ "subs", required_argument, 0, 'u' },
		{ "help", no_argument, 0, 'h' },
		{ 0, 0, 0, 0 },
	};
	int ch, idle = -1;
	size_t tmp[MAX_SIZES];
	opterr = 0;
	while ((ch = getopt_long(argc, argv, ":h", opts, NULL)) != -1) {
		switch (ch) {
		case 'j': c->json = 1; break;
		case 'q': c->quick = 1; break;
		case 'g': c->plot_dir = optarg; break;
		case 'J': c->json_file = optarg; break;
		case 'P': c->pin = 1; break;
		case 'v': c->verbose = 1; break;
		case 'X': {
			char *dup = strdup(optarg), *save = NULL;
			for (char *t = strtok_r(dup, ",", &save); t;
			     t = strtok_r(NULL, ",", &save)) {
				unsigned b = !strcmp(t, "pattern") ? SEC_PATTERN
					     : !strcmp(t, "multipub")
						     ? SEC_MULTIPUB
					     : !strcmp(t, "throughput") ? SEC_TP
					     : !strcmp(t, "fanout")   ? SEC_FAN
					     : !strcmp(t, "latency")  ? SEC_LAT
					     : !strcmp(t, "wake")     ? SEC_WAKE
					     : !strcmp(t, "catchup")
						     ? SEC_CATCHUP
						     : 0;
				if (!b) {
					fprintf(stderr, "--section: unknown %s\n",
						t);
					free(dup);
					return -1;
				}
				c->sections |= b;
			}
			free(dup);
			break;
		}
		case 'S':
			if (c->nonly == MAX_FILTER) {
				fprintf(stderr, "crs-bench: --scenario: at most "
						"%d\n", MAX_FILTER);
				return -1;
			}
			if (!scenario_known(optarg)) {
				fprintf(stderr, "crs-bench: --scenario: no "
						"scenario '%s' (--list names "
						"them)\n", optarg);
				return -1;
			}
			c->only[c->nonly++] = optarg;
			break;
		case 'r':
			c->rounds = atoi(optarg);
			if (c->rounds < 1 || c->rounds > MAX_ROUNDS) {
				fprintf(stderr, "--rounds: 1..%d\n", MAX_ROUNDS);
				return -1;
			}
			break;
		case 's':
			if (parse_list(optarg, c->sizes, &c->nsizes, MAX_SIZES, 8,
				       1u << 28, "--size"))
				return -1;
			break;
		case 'F':
			if (parse_list(optarg, c->fan_sizes, &c->nfan_sizes,
				       MAX_SIZES, 8, 1u << 28, "--fan-size"))
				return -1;
			break;
		case 'L':
			if (parse_list(optarg, c->lat_sizes, &c->nlat_sizes,
				       MAX_SIZES, 8, 1u << 28, "--lat-size"))
				return -1;
			break;
		case 'K': {
			int n;
			if (parse_list(optarg, tmp, &n, MAX_FANOUT, 1,
				       MAX_FANOUT, "--fanout"))
				return -1;
			for (int i = 0; i < n; i++)
				c->fanout[i] = (int)tmp[i];
			c->nfanout = n;
			break;
		}
		case 'R':
			if (tool_parse_size(optarg, CRS_RING_MIN, CRS_RING_MAX,
					    &c->ring_bytes) ||
			    (c->ring_bytes & (c->ring_bytes - 1))) {
				fprintf(stderr, "--ring: a power of two, 4K..1G\n");
				return -1;
			}
			break;
		case 'a':
		case 'b':
		case 'k':
		case 'f':
		case 'u':
			if (pattern_opt(c, ch, optarg))
				return -1;
			break;
		case 'w': c->tp_secs = atof(optarg); break;
		case 'T': c->lat_secs = atof(optarg); break;
		case 't': c->lat_trips = (uint32_t)strtoul(optarg, NULL, 0); break;
		case 'W':
			c->wake_subs = atoi(optarg);
			if (c->wake_subs < 1 || c->wake_subs > 64) {
				fprintf(stderr, "--wake-subs: 1..64\n");
				return -1;
			}
			break;
		case 'N':
			c->wake_rounds = atoi(optarg);
			if (c->wake_rounds < 1 || c->wake_rounds > 200) {
				fprintf(stderr, "--wakes: 1..200\n");
				return -1;
			}
			break;
		case 'C':
			if (tool_parse_size(optarg, 1u << 20, 960ULL << 20,
					    &c->catchup_bytes)) {
				fprintf(stderr, "--catchup: 1M..960M\n");
				return -1;
			}
			break;
		case 'I':
			idle = atoi(optarg);
			if (idle < 0 || idle > 100000) {
				fprintf(stderr, "--idle-pause: 0..100000\n");
				return -1;
			}
			break;
		case 'B': {
			long ncpu = sysconf(_SC_NPROCESSORS_ONLN);
			char *end;
			long cpu = strtol(optarg, &end, 10);
			if (*optarg == 0 || *end || cpu < 0 || cpu >= ncpu ||
			    cpu >= CPU_SETSIZE) {
				fprintf(stderr, "--block-cpu: 0..%ld\n",
					ncpu - 1);
				return -1;
			}
			c->block_pin = 1;
			c->block_cpu = (int)cpu;
			break;
		}
		case 'p':
			c->pp_trips = (uint32_t)strtoul(optarg, NULL, 0);
			if (c->pp_trips < 500) {
				fprintf(stderr, "--probe: >= 500\n");
				return -1;
			}
			break;
		case 'l':
			tp_list(stdout);
			lat_list(stdout);
			printf("%-20s %-8s %-9s %s\n", "crs-uring", "crs", "wake",
			       "64 subscribers asleep in crs_sub_wait, io_uring");
			printf("%-20s %-8s %-9s %s\n", "crs-poll", "crs", "wake",
			       "the same with CRS_NO_URING=1");
			printf("%-20s %-8s %-9s %s\n", "raw-futex", "baseline",
			       "wake", "64 processes in FUTEX_WAIT, one "
			       "FUTEX_WAKE(INT_MAX)");
			printf("%-20s %-8s %-9s %s\n", "catchup", "crs",
			       "catchup", "late joiner over ~900 MiB retained, "
			       "against memory read bandwidth");
			exit(0);
		case 'h': usage(stdout); exit(0);
		case '?':
			if (optopt)
				fprintf(stderr, "crs-bench: unknown option "
						"-%c\n", optopt);
			else
				fprintf(stderr, "crs-bench: unknown option "
						"%s\n", argv[optind - 1]);
			fprintf(stderr, "Try 'crs-bench -h' for help.\n");
			return -1;
		default:
			fprintf(stderr, "crs-bench: %s needs an argument\n",
				argv[optind - 1]);
			return -1;
		}
	}
	if (optind < argc) {
		fprintf(stderr, "crs-bench: unexpected argument '%s'\n"
				"Try 'crs-bench -h' for help.\n",
			argv[optind]);
		return -1;
	}
	c->idle_pause = idle >= 0 ? (uint32_t)idle : 64;
	c->pat_size = c->nsizes ? c->sizes[0] : 64;
	if (!c->pat_burst)
		c->pat_burst = 1;
	if (!c->pat_prefetch)
		c->pat_prefetch = 128;
	if (!c->pat_subs)
		c->pat_subs = 1;
	if ((c->sections & SEC_PATTERN) && c->pat_size < 16) {
		fprintf(stderr, "crs-bench: --section pattern: messages of at "
				"least 16 bytes (--size)\n");
		return -1;
	}
	defaults(c);
	for (int i = 0; i < c->nsizes; i++)
		if (c->sizes[i] > c->ring_bytes / 4) {
			fprintf(stderr, "size %zu exceeds ring/4; raise --ring\n",
				c->sizes[i]);
			return -1;
		}
	for (int i = 0; i < c->nfan_sizes; i++)
		if (c->fan_sizes[i] > c->ring_bytes / 4) {
			fprintf(stderr, "fan-out size %zu exceeds ring/4; raise "
					"--ring\n", c->fan_sizes[i]);
			return -1;
		}
	for (int i = 0; i < c->nlat_sizes; i++)
		if (c->lat_sizes[i] > c->ring_bytes / 4) {
			fprintf(stderr, "ping-pong size %zu exceeds ring/4; "
					"raise --ring\n", c->lat_sizes[i]);
			return -1;
		}
	return 0;
}

int main(int argc, char **argv)
{
	struct config cfg = { 0 };
	if (parse_args(argc, argv, &cfg))
		return 2;
#ifdef HAVE_ZMQ
	cfg.have_zmq = 1;
#endif
	snprintf(cfg.tmpdir, sizeof(cfg.tmpdir), "/tmp/crs-bench-XXXXXX");
	if (!mkdtemp(cfg.tmpdir)) {
		perror("crs-bench: mkdtemp");
		return 1;
	}
	struct results res = { 0 };
	read_line("/proc/loadavg", NULL, res.load0, sizeof(res.load0));
	int64_t start = now_ns();
	double b, a, c0, c;
	probe_note(&cfg, &res, &b, &a, &c0, &c);
	int err = 0;
	if (!err && (cfg.sections & SEC_TP))
		err = tp_run(&cfg, &res);
	if (!err && (cfg.sections & SEC_FAN))
		err = fan_run(&cfg, &res);
	if (!err && (cfg.sections & SEC_LAT))
		err = lat_run(&cfg, &res);
	if (!err && (cfg.sections & SEC_WAKE))
		err = wake_run(&cfg, &res);
	if (!err && (cfg.sections & SEC_CATCHUP))
		err = catchup_run(&cfg, &res);
	if (!err && (cfg.sections & SEC_PATTERN))
		err = pattern_run(&cfg, &res);
	if (!err && (cfg.sections & SEC_MULTIPUB))
		err = multipub_run(&cfg, &res);
	res.wall = (double)(now_ns() - start) / 1e9;
	read_line("/proc/loadavg", NULL, res.load1, sizeof(res.load1));
	aeron_driver_stop();
	rmdir(cfg.tmpdir);
	if (isatty(2))
		fprintf(stderr, "\r%70s\r", "");
	summary_init(&res);
	if (err) {
		fprintf(stderr, "crs-bench: %s\n", strerror(-err));
		res.failures++;
	} else if (cfg.json) {
		report_json(&cfg, &res, stdout);
	} else {
		report_table(&cfg, &res);
	}
	if (!err && cfg.json_file) {
		FILE *f = fopen(cfg.json_file, "w");
		if (f) {
			report_json(&cfg, &res, f);
			fclose(f);
		} else {
			perror(cfg.json_file);
		}
	}
	if (!err && cfg.plot_dir) {
		int r = report_plots(&cfg, &res);
		if (r < 0)
			fprintf(stderr, "crs-bench: --plot %s: %s\n",
				cfg.plot_dir, strerror(-r));
		else
			fprintf(stderr, "crs-bench: plot data in %s/%s\n",
				cfg.plot_dir,
				r ? " (PNGs rendered by gnuplot)"
				  : " (gnuplot not found or failed: run "
				    "'gnuplot plots.gp' there)");
	}
	free(res.tp);
	free(res.fan);
	for (int i = 0; i < res.nlat; i++)
		free(res.lat[i].round_h);
	free(res.lat);
	free(res.wake);
	free(res.probes);
	free(res.caps);
	return res.failures ? 1 : 0;
}
