/*
 * bench.h - what the parts of crs-bench share.
 *
 * One job per file:
 *   common.c      clocks, CPU time, shared memory, child processes, the
 *                 measurement window, the cache-line probe, statistics
 *   histo.c       the log-bucketed latency histogram
 *   throughput.c  1:1 and fan-out throughput: the crs scenarios and the
 *                 measurement driver
 *   baselines.c   the same transfers without crs: bare ring, in-band ring,
 *                 pipe, unix socket, ZeroMQ, pipe fan-out
 *   aeron.c       Aeron aeron:ipc (meson option aeron): its media driver,
 *                 throughput transports and ping-pong endpoints
 *   latency.c     ping-pong round trips, spinning and blocking, crs and
 *                 the raw limits (cache line, futex, pipe, socket, ZeroMQ)
 *   wake.c        one publisher waking many sleeping subscribers
 *   replay.c      a late joiner's catch-up against memory read bandwidth
 *   pattern.c     the user's own pattern: rate, bursts, processing time,
 *                 prefetch, subscribers; delivered rate and latency
 *   summary.c     medians, per-round ratios, clean rounds, the targets
 *   report.c      the table and the JSON document
 *   plot.c        --plot: .dat files, plots.gp, PNGs via gnuplot
 *   crs-bench.c   options and the order of the sections
 *
 * crs parts use only include/crs/crs.h; baselines use nothing of crs.
 */
#ifndef CRS_BENCH_H
#define CRS_BENCH_H

#include <stdatomic.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <string.h>
#include <sys/types.h>

#include "toolutil.h" /* tool_parse_size, tool_json_str */

#define BENCH_VERSION "0.2"
#define MAX_SIZES 16
#define MAX_ROUNDS 50
#define MAX_PROCS 72	  /* children of one measurement (wake: 64 + 1) */
#define MAX_FANOUT 8	  /* fan-out subscriber counts */
#define MAX_FILTER 32
#define WATCHDOG_NS (120LL * 1000000000LL) /* a stuck measurement fails */
#define CLEAN_CPUS 1.5 /* a probe that got fewer CPUs marks a bad state */
#define CLEAN_RTT_NS 1000.0 /* and so does a slower cache-line round trip */
/* Probe round trips at most this far apart (max/min) are one VM state:
 * the states seen differ 3x and more, one state's noise stays under 1.5x. */
#define STATE_SPREAD 1.5

#if defined(__x86_64__) || defined(__i386__)
#define cpu_relax() __builtin_ia32_pause()
#else
#define cpu_relax() atomic_signal_fence(memory_order_seq_cst)
#endif

/* ---- configuration ---------------------------------------------------- */

enum section {
	SEC_TP = 1,	 /* 1:1 throughput against message size */
	SEC_FAN = 2,	 /* fan-out throughput */
	SEC_LAT = 4,	 /* ping-pong latency */
	SEC_WAKE = 8,	 /* wake fan-out */
	SEC_CATCHUP = 16, /* replay catch-up */
	SEC_PATTERN = 32, /* the user's pattern: only when asked for */
	SEC_MULTIPUB = 64 /* shared streams, 1/2/4 publishers: when asked */
};

struct config {
	int rounds;
	int quick, json, pin, verbose;
	/* --block-cpu: both sides of every blocking ping-pong on block_cpu,
	 * so that every transport is measured at the same placement (a wake
	 * across CPUs costs what waking an idle vCPU costs; latency.c) */
	int block_pin, block_cpu;
	unsigned sections;
	size_t sizes[MAX_SIZES]; /* throughput sizes */
	int nsizes;
	size_t fan_sizes[MAX_SIZES];
	int nfan_sizes;
	int fanout[MAX_FANOUT]; /* subscriber counts */
	int nfanout;
	size_t lat_sizes[MAX_SIZES];
	int nlat_sizes;
	uint64_t ring_bytes;  /* crs and baseline rings */
	double tp_secs;	      /* throughput: timed window per measurement */
	double lat_secs;      /* latency: at most this long per measurement */
	uint32_t lat_trips;   /* latency: at most this many round trips */
	int wake_subs;	      /* wake fan-out: sleeping subscribers */
	int wake_rounds;      /* wakes per measurement */
	uint64_t catchup_ring;	/* replay catch-up: ring and bytes retained */
	uint64_t catchup_bytes;
	size_t catchup_msg;
	int catchup_rounds;
	uint32_t pp_trips;    /* cache-line probe round trips */
	uint32_t idle_pause;  /* spinning receivers: pauses after an empty poll */
	int64_t warm_ns;      /* receivers' warm-up ends after this at most */
	size_t pat_size;      /* pattern: message size (the first --size) */
	double pat_rate;      /* messages/s; 0: as fast as demand allows */
	uint32_t pat_burst;   /* messages published back to back */
	int64_t pat_work_ns;  /* subscriber's processing per message */
	uint32_t pat_prefetch;
	int pat_subs;
	const char *only[MAX_FILTER]; /* --scenario filters */
	int nonly;
	const char *plot_dir;
	const char *json_file; /* also write the JSON document here */
	char tmpdir[48];      /* private: ZeroMQ ipc:// endpoints */
	int have_zmq;
};

/* ---- small helpers (common.c) ----------------------------------------- */

int64_t now_ns(void);
int64_t cpu_ns(void); /* getrusage(RUSAGE_SELF): user + sys */
void sleep_ns(int64_t ns);
void *shared_alloc(size_t len);
void shared_free(void *p, size_t len);
void pin_to(int enabled, int cpu);
double median(const double *v, int n);
double pct_of(const double *v, int n, double p);
void read_line(const char *path, const char *key, char *buf, size_t len);
void fmt_size(char *buf, size_t len, size_t size);
int scenario_selected(const struct config *cfg, const char *name,
		      int is_default, int is_baseline);
void stream_name(char *buf, size_t len, unsigned id);
double pause_cost_ns(void);

/* The cache-line ping-pong probe (ns per round trip; see common.c). */
double probe_ns(const struct config *cfg, double *cap);

/* ---- payload ------------------------------------------------------------
 * The sender stores the message's index in the first and the last 8 bytes
 * and writes every byte in between. The receiver reads every byte (a sum
 * of 8-byte words) and checks both index words, which also catches a torn
 * or misplaced message. Sizes are at least 8 bytes. */

typedef uint64_t v2u64 __attribute__((vector_size(16), aligned(1)));

static inline void put_word(uint8_t *p, uint64_t v)
{
	memcpy(p, &v, 8);
}

static inline uint64_t get_word(const uint8_t *p)
{
	uint64_t v;
	memcpy(&v, p, 8);
	return v;
}

static inline void fill_msg(void *buf, size_t size, uint64_t seq)
{
	uint8_t *p = buf;
	if (size >= 256) {
		memset(p + 8, (int)(seq & 0xff), size - 16);
	} else {
		for (size_t i = 8; i + 8 < size; i += 8)
			put_word(p + i, seq * 0x9e3779b97f4a7c15ULL);
	}
	put_word(p, seq);
	put_word(p + size - 8, seq);
}

/* Sum of all 8-byte words (a partial tail word is read as the last 8). */
static inline uint64_t sum_msg(const void *buf, size_t size)
{
	const uint8_t *p = buf;
	size_t i = 0;
	uint64_t s = 0;
	if (size >= 64) {
		v2u64 a = { 0, 0 }, b = a, c = a, d = a;
		for (; i + 64 <= size; i += 64) {
			a += *(const v2u64 *)(p + i);
			b += *(const v2u64 *)(p + i + 16);
			c += *(const v2u64 *)(p + i + 32);
			d += *(const v2u64 *)(p + i + 48);
		}
		a += b + c + d;
		s = a[0] + a[1];
	}
	for (; i + 8 <= size; i += 8)
		s += get_word(p + i);
	if (i < size)
		s += get_word(p + size - 8);
	return s;
}

/* Read a message; false if its index words are not `seq`. */
static inline bool read_msg(const void *buf, size_t size, uint64_t seq,
			    uint64_t *sum)
{
	const uint8_t *p = buf;
	*sum += sum_msg(buf, size);
	return get_word(p) == seq && get_word(p + size - 8) == seq;
}

/* The index a message carries (for transports that cannot tell). */
static inline uint64_t msg_index(const void *buf)
{
	return get_word(buf);
}

extern volatile uint64_t bench_sink; /* keeps the receivers' sums alive */

/* ---- child processes and the measurement window -------------------------
 * A measurement forks its processes (one sender, one or more receivers);
 * the parent only coordinates and sleeps. Receivers count messages and,
 * after a warm-up, open a window (time and CPU time); the parent waits
 * until every receiver is warm, sleeps for the window's length and raises
 * `stop`; senders and receivers close their windows when they see it and
 * the stream then ends normally (every message sent is read and checked).
 * Each process reports its own window, so rates are what the receivers
 * got and CPU time is that of each process in its window. */

struct proc_rep {
	int err;	  /* nonzero: this process failed */
	int done;	  /* window closed */
	char msg[160];
	uint64_t msgs;	  /* messages in the window */
	int64_t t0, t1;	  /* window, CLOCK_MONOTONIC ns */
	int64_t cpu;	  /* user + sys ns in the window */
	uint64_t bad;	  /* messages that failed their check */
	uint64_t total;	  /* all messages, warm-up and drain included */
	uint64_t refused_demand, refused_room, waits, empty;
	uint64_t minflt;  /* page faults (catch-up) */
	int64_t stamp[4]; /* scenario-specific times */
	char engine[16];  /* crs wait engine in this process */
};

struct ctl {
	_Alignas(64) _Atomic int stop;
	_Atomic int nwarm;
	int nrecv;
	int64_t warm_ns;
	_Alignas(64) _Atomic int nready; /* wake: subscribers about to sleep */
	_Atomic int nwoken;
	_Alignas(64) _Atomic uint64_t round; /* wake: current wake round */
	_Alignas(64) struct proc_rep rep[MAX_PROCS];
};

struct win {
	struct ctl *ctl;
	struct proc_rep *rep;
	uint64_t warmup; /* receiver: messages before the window */
	uint64_t mask;	 /* look at the clock / stop flag every mask+1 */
	uint64_t n0;
	int64_t cpu0, tfirst;
	int state; /* 0 warm-up, 1 timing, 2 closed */
};

void win_init(struct win *w, struct ctl *ctl, int idx, uint64_t warmup,
	      size_t size);
void win_open(struct win *w, uint64_t n);
void win_close(struct win *w, uint64_t n);

/* Receiver: call after each message; n = messages received so far. */
static inline void rx_tick(struct win *w, uint64_t n)
{
	if (__builtin_expect((n & w->mask) != 0 && n != w->warmup, 1))
		return;
	if (w->state == 0) {
		if (!w->tfirst)
			w->tfirst = now_ns();
		if (n >= w->warmup || now_ns() - w->tfirst > w->ctl->warm_ns) {
			win_open(w, n);
			atomic_fetch_add(&w->ctl->nwarm, 1);
		}
	} else if (w->state == 1 &&
		   atomic_load_explicit(&w->ctl->stop, memory_order_relaxed)) {
		win_close(w, n);
	}
}

/* Sender: call before message n; false once the window is over. */
static inline bool tx_go(struct win *w, uint64_t n)
{
	if (__builtin_expect((n & w->mask) != 0, 1))
		return true;
	if (w->state == 0) {
		if (atomic_load_explicit(&w->ctl->nwarm,
					 memory_order_relaxed) >= w->ctl->nrecv)
			win_open(w, n);
		return true;
	}
	if (atomic_load_explicit(&w->ctl->stop, memory_order_relaxed)) {
		win_close(w, n);
		return false;
	}
	return true;
}

void rep_err(struct proc_rep *rep, int err, const char *fmt, ...)
	__attribute__((format(printf, 3, 4)));

struct ctl *ctl_new(int nrecv, int64_t warm_ns);
void ctl_free(struct ctl *ctl);

/* Fork a child running fn(arg, idx); it dies with the parent. */
pid_t spawn(const struct config *cfg, int cpu, int (*fn)(void *, int),
	    void *arg, int idx);
/* Wait until nwarm reaches want (or a child exits, or the deadline). */
int wait_warm(struct ctl *ctl, int want, const pid_t *pids, int n,
	      int64_t deadline);
/* Reap children; kill those still running at the deadline. Returns the
 * number that failed (non-zero status or killed). */
int reap_all(pid_t *pids, int n, int64_t deadline);

/* ---- latency histogram (histo.c) ----------------------------------------
 * Log-linear buckets in the manner of HdrHistogram: values below 128 ns
 * exactly, above that 64 buckets per power of two (at most 1.6% apart). */

#define HISTO_SUB 64
#define HISTO_BUCKETS (HISTO_SUB * 36)

struct histo {
	uint64_t count;
	uint64_t min, max;
	double sum;
	uint32_t n[HISTO_BUCKETS];
};

void histo_reset(struct histo *h);
void histo_add(struct histo *h, uint64_t ns);
void histo_merge(struct histo *dst, const struct histo *src);
uint64_t histo_pct(const struct histo *h, double pct); /* 0..100 */
double histo_mean(const struct histo *h);

/* ---- results -------------------------------------------------------------
 * One measurement of one scenario: a sample. The cells of a section keep
 * every round's sample; summaries are medians over rounds and medians of
 * per-round ratios against a baseline run in the same round. */

struct tp_sample {
	int ok;
	double rate;	 /* deliveries/s, summed over receivers */
	double send_rate; /* messages/s published */
	double secs;	 /* receiver window */
	double util;	 /* CPUs busy: sum of cpu/window over processes */
	double cpu_ns;	 /* CPU ns per delivery */
	double pp_before, pp_after, cap_before, cap;
	double wall;	 /* the whole measurement, s */
	double refused_demand, refused_room, empty; /* per message */
	uint64_t waits, bad, messages;
	char err[200];
};

struct tp_cell {
	const char *name; /* scenario */
	const char *skipped; /* not run, and why (no rounds) */
	int spins;	  /* a process of it busy-polls */
	size_t size;
	int nsubs;
	int n;
	int failed;
	struct tp_sample s[MAX_ROUNDS];
};

struct lat_sample {
	int ok;
	uint64_t trips;
	double p50, p90, p99, p999, max, mean; /* ns */
	double pp_before, pp_after, cap_before, cap;
	char engine[16];
	char err[200];
};

struct lat_cell {
	const char *name;
	const char *skipped; /* not run, and why (no rounds) */
	const char *mode; /* "spin" or "block" */
	int spins;
	size_t size;
	int n, failed;
	struct lat_sample s[MAX_ROUNDS];
	struct histo h;	    /* all rounds merged */
	struct histo clean; /* clean rounds merged (summary_init) */
	struct histo *round_h; /* each round's */
};

struct wake_sample {
	int ok;
	int subs, wakes;
	double last_med, last_p90, last_max; /* commit to last wake, ns */
	double first_med;		     /* commit to first wake */
	double mid_med;			     /* commit to the median wake */
	double commit_med;		     /* the commit (or wake) call */
	char engine[16];
	char err[200];
};

struct wake_cell {
	const char *name;
	int n, failed;
	struct wake_sample s[MAX_ROUNDS];
};

struct catchup_sample {
	int ok;
	double bytes, msgs;
	double catchup_gbps; /* open to last message read */
	double read_gbps;    /* first to last message */
	double open_ms;	     /* open to first message */
	double membw_gbps;   /* anonymous buffer, same read loop */
	double memfd_gbps;   /* fresh mapping of a filled memfd */
	double memfd_warm_gbps;	    /* the same mapping, second pass */
	double memfd_populate_gbps; /* fresh MAP_POPULATE mapping, mmap timed */
	double publish_gbps; /* filling the ring, no subscriber */
	double minflt, memfd_minflt;
	char err[200];
};

struct pat_sample {
	int ok;
	uint64_t messages;
	double sent_rate;  /* messages/s published */
	double deliv_rate; /* messages/s delivered, per subscriber */
	double refused;	   /* claims refused for want of demand or room */
	double p50, p90, p99, max; /* commit to seen, ns */
	char err[200];
};

/* One row of the multipub section: publishers (0: the plain 1:1 stream)
 * and the rate of each good round (messages/s delivered). */
struct mp_row {
	int pubs;
	int nrounds, good;
	double rate[MAX_ROUNDS];
	double median;
};

struct results {
	double pp_first;
	double *probes, *caps; /* probe round trips, parallel capacity */
	int nprobes, cap_probes;
	struct tp_cell *tp;
	int ntp;
	struct tp_cell *fan;
	int nfan;
	struct lat_cell *lat;
	int nlat;
	struct wake_cell *wake;
	int nwake;
	struct catchup_sample catchup[MAX_ROUNDS];
	int ncatchup;
	struct pat_sample pattern[MAX_ROUNDS];
	int npattern;
	struct mp_row multipub[4];
	int nmultipub;
	int failures;
	double wall;
	char load0[128], load1[128];
};

void probe_note(const struct config *cfg, struct results *res,
		double *before, double *after, double *cap_before,
		double *cap);

/* ---- sections ---------------------------------------------------------- */

void tp_list(FILE *f);
int tp_run(const struct config *cfg, struct results *res);
int fan_run(const struct config *cfg, struct results *res);
int lat_run(const struct config *cfg, struct results *res);
void lat_list(FILE *f);
int lat_known(const char *name); /* a latency scenario's name */
int wake_run(const struct config *cfg, struct results *res);
int catchup_run(const struct config *cfg, struct results *res);
int pattern_run(const struct config *cfg, struct results *res);
int multipub_run(const struct config *cfg, struct results *res);

/* Throughput transports (throughput.c and baselines.c). A transfer has
 * one sender and nrecv receivers, each in its own process. */
struct xfer {
	const struct config *cfg;
	const struct tp_scn *sc;
	size_t size;
	int nrecv;
	unsigned id;
	uint64_t warmup;
	struct ctl *ctl;
	char name[128]; /* crs stream name, or ZeroMQ endpoint */
	int fds[2 * MAX_FANOUT * 2];
	uint8_t *map;
	size_t maplen;
};

struct tp_scn {
	const char *name;
	const char *kind; /* "crs" or "baseline" */
	const char *mode; /* who spins, who sleeps */
	const char *desc;
	int (*setup)(struct xfer *x);
	int (*send)(struct xfer *x);
	int (*recv)(struct xfer *x, int idx);
	void (*cleanup)(struct xfer *x);
	uint32_t prefetch;  /* crs_sub_opts.prefetch; 0: request below */
	uint64_t request;   /* crs with prefetch 0 */
	int blocking;	    /* crs: wait in crs_pub_wait / crs_sub_wait */
	int spin_us;	    /* crs: spin_us for both sides */
	int replay;	    /* crs: CRS_MODE_REPLAY */
	int offer;	    /* crs: copying crs_pub_offer */
	int batch;	    /* crs: crs_pub_commit_more + crs_pub_flush every
			       BATCH; crs_sub_take of up to BATCH */
	int take;	    /* crs: crs_sub_take of up to BATCH, the
			       publisher committing one by one */
	int defaults;	    /* crs: the subscriber's prefetch as
			       crs_sub_opts_init leaves it */
	int is_default;
	int spins;	    /* sender or receiver busy-polls */
	int fan;	    /* usable for fan-out */
	int needs_zmq;
	int needs_aeron;    /* skipped when aeron_skip_reason says why */
};

extern const struct tp_scn crs_tp_scns[];
extern const int n_crs_tp_scns;
extern const struct tp_scn base_tp_scns[];
extern const int n_base_tp_scns;

/* ---- Aeron (aeron.c) ------------------------------------------------------
 * Built with HAVE_AERON (meson option aeron=PREFIX). Without it the
 * scenarios stay in the tables with no functions, and are skipped. */

#ifdef HAVE_AERON
#define IF_AERON(f) f
#else
#define IF_AERON(f) NULL
#endif

/* NULL when the Aeron scenarios can run (the first call starts the media
 * driver or finds one in $AERON_DIR), else why they are skipped. */
const char *aeron_skip_reason(const struct config *cfg);
/* Aeron's version and the driver used, once one is up; else NULL. */
const char *aeron_about(void);
/* Stop the driver crs-bench started, if any. */
void aeron_driver_stop(void);
int aeron_tp_setup(struct xfer *x);
int aeron_send_excl(struct xfer *x);
int aeron_send_shared(struct xfer *x);
int aeron_recv(struct xfer *x, int idx);
int32_t aeron_pp_base(unsigned id); /* ping-pong streams base, base + 1 */
void *aeron_pp_open(int who, int32_t base, size_t size,
		    struct proc_rep *rep);
int aeron_pp_send(void *ep, uint64_t seq);
int aeron_pp_recv(void *ep, uint64_t *seq);
void aeron_pp_close(void *ep);

/* ---- summaries shared by the outputs (summary.c) -------------------------
 * A round of a spinning scenario is clean when the probes before and
 * after it both got at least CLEAN_CPUS CPUs and bounced the cache
 * line in under CLEAN_RTT_NS;
 * every successful round of a blocking scenario is clean. Cell figures
 * come from clean rounds when the cell has any (tp_auto), else from all
 * rounds. Ratios are medians of per-round ratios, over rounds where both
 * sides are clean and their probes in one state (probes_same_state) if
 * there are such, else over all rounds. */

#define REF_CRS "crs-spin-p128"
#define REF_BARE "bare-ring"
#define REF_AERON "aeron-excl"
#define REF_AERON_SHARED "aeron-shared"
#define REF_AERON_LAT "aeron-spin"
enum { TP_RATE, TP_GBPS, TP_CPU, TP_UTIL };
enum { LAT_P50, LAT_P90, LAT_P99, LAT_P999, LAT_MAX };

void summary_init(struct results *res);
int tp_clean(const struct tp_cell *c, const struct tp_sample *s);
int lat_clean(const struct lat_cell *c, const struct lat_sample *s);
double clean_rtt_max(void);
/* 1 when the n round trips (ns) are one VM state: max <= min *
 * STATE_SPREAD (also for n = 0); 0 otherwise or for one <= 0. */
int probes_same_state(const double *rtt, int n);
int tp_nclean(const struct tp_cell *c);
int tp_auto(const struct tp_cell *c);
double tp_median(const struct tp_cell *c, int what, int clean);
double tp_ratio_n(const struct tp_cell *a, const struct tp_cell *b,
		  int clean, int *np);
double tp_ratio(const struct tp_cell *a, const struct tp_cell *b);
int lat_nclean(const struct lat_cell *c);
const struct histo *lat_histo(const struct lat_cell *c);
double lat_median(const struct lat_cell *c, int what, int clean);
double lat_ratio_n(const struct lat_cell *a, const struct lat_cell *b,
		   int what, int clean, int *np);
double lat_ratio(const struct lat_cell *a, const struct lat_cell *b,
		 int what);
const struct tp_cell *tp_find(const struct results *res, const char *name,
			      size_t size);
const struct tp_cell *fan_find(const struct results *res, const char *name,
			       size_t size, int subs);
const struct lat_cell *lat_find(const struct results *res, const char *name,
				size_t size);
const char *lat_base(const struct lat_cell *c);
const char *tp_mode(const char *name);
/* what: 0 last, 1 last p90, 2 last max, 3 first, 4 median, 5 commit */
double wake_med(const struct wake_cell *c, int what);
double wake_ratio(const struct wake_cell *a, const struct wake_cell *b);
const struct wake_cell *wake_find(const struct results *res,
				  const char *name);
/* what: see summary.c */
double cu_med(const struct results *res, int what);

struct target {
	char what[160];
	double value, goal;
	int higher_better; /* 1: value >= goal; 0: value <= goal */
	int measured;	   /* both sides ran */
	int rounds;	   /* clean rounds the value comes from */
	int known;	   /* measured, with clean rounds: a verdict */
	const char *skipped; /* its baseline (Aeron) was skipped: why */
};
int targets(const struct config *cfg, const struct results *res,
	    struct target *t, int max);
const char *verdict(const struct target *t);

/* ---- outputs ------------------------------------------------------------ */

void report_table(const struct config *cfg, const struct results *res);
void report_json(const struct config *cfg, const struct results *res,
		 FILE *f);
int report_plots(const struct config *cfg, const struct results *res);

#endif
