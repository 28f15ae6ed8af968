/*
 * common.c - clocks, CPU time, shared memory, child processes, the
 * measurement window, the cache-line probe and small statistics.
 */
#include <errno.h>
#include <sched.h>
#include <signal.h>
#include <stdarg.h>
#include <stdlib.h>
#include <sys/mman.h>
#include <sys/prctl.h>
#include <sys/resource.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include "bench.h"

volatile uint64_t bench_sink;

int64_t now_ns(void)
{
	struct timespec ts;
	clock_gettime(CLOCK_MONOTONIC, &ts);
	return (int64_t)ts.tv_sec * 1000000000 + ts.tv_nsec;
}

int64_t cpu_ns(void)
{
	struct rusage ru;
	getrusage(RUSAGE_SELF, &ru);
	return ((int64_t)ru.ru_utime.tv_sec + ru.ru_stime.tv_sec) * 1000000000 +
	       ((int64_t)ru.ru_utime.tv_usec + ru.ru_stime.tv_usec) * 1000;
}

void sleep_ns(int64_t ns)
{
	struct timespec ts = { ns / 1000000000, ns % 1000000000 };
	while (nanosleep(&ts, &ts) < 0 && errno == EINTR)
		;
}

void *shared_alloc(size_t len)
{
	void *p = mmap(NULL, len, PROT_READ | PROT_WRITE,
		       MAP_SHARED | MAP_ANONYMOUS, -1, 0);
	return p == MAP_FAILED ? NULL : p;
}

void shared_free(void *p, size_t len)
{
	if (p)
		munmap(p, len);
}

void pin_to(int enabled, int cpu)
{
	if (!enabled || cpu < 0)
		return;
	cpu_set_t set;
	CPU_ZERO(&set);
	CPU_SET(cpu, &set);
	sched_setaffinity(0, sizeof(set), &set);
}

static int cmp_double(const void *a, const void *b)
{
	double x = *(const double *)a, y = *(const double *)b;
	return (x > y) - (x < y);
}

/* p in 0..100, nearest rank on the sorted values. */
double pct_of(const double *v, int n, double p)
{
	if (n <= 0)
		return 0;
	double *t = malloc((size_t)n * sizeof(*t));
	if (!t)
		return 0;
	memcpy(t, v, (size_t)n * sizeof(*t));
	qsort(t, (size_t)n, sizeof(*t), cmp_double);
	int k = (int)(p / 100.0 * n + 0.999999) - 1;
	k = k < 0 ? 0 : k >= n ? n - 1 : k;
	double r = t[k];
	free(t);
	return r;
}

double median(const double *v, int n)
{
	if (n <= 0)
		return 0;
	double *t = malloc((size_t)n * sizeof(*t));
	if (!t)
		return 0;
	memcpy(t, v, (size_t)n * sizeof(*t));
	qsort(t, (size_t)n, sizeof(*t), cmp_double);
	double m = n & 1 ? t[n / 2] : (t[n / 2 - 1] + t[n / 2]) / 2;
	free(t);
	return m;
}

void fmt_size(char *buf, size_t len, size_t size)
{
	if (size >= (1u << 20) && !(size & ((1u << 20) - 1)))
		snprintf(buf, len, "%zuM", size >> 20);
	else if (size >= 1024 && !(size & 1023))
		snprintf(buf, len, "%zuK", size >> 10);
	else
		snprintf(buf, len, "%zu", size);
}

void read_line(const char *path, const char *key, char *buf, size_t len)
{
	snprintf(buf, len, "?");
	FILE *f = fopen(path, "r");
	if (!f)
		return;
	char line[512];
	while (fgets(line, sizeof(line), f)) {
		if (key && strncmp(line, key, strlen(key)))
			continue;
		char *v = key ? strchr(line, ':') : line;
		if (!v)
			continue;
		v += key ? 1 : 0;
		while (*v == ' ' || *v == '\t')
			v++;
		v[strcspn(v, "\n")] = 0;
		snprintf(buf, len, "%s", v);
		break;
	}
	fclose(f);
}

/* --scenario filters: none selects the defaults; baselines a section
 * compares against always run. */
int scenario_selected(const struct config *cfg, const char *name,
		      int is_default, int is_baseline)
{
	if (!cfg->nonly)
		return is_default;
	for (int i = 0; i < cfg->nonly; i++)
		if (!strcmp(cfg->only[i], name) || !strcmp(cfg->only[i], "all"))
			return 1;
	return is_baseline;
}

static pid_t bench_pid;

void stream_name(char *buf, size_t len, unsigned id)
{
	if (!bench_pid)
		bench_pid = getpid();
	snprintf(buf, len, "crs-bench-%ld-%u", (long)bench_pid, id);
}

double pause_cost_ns(void)
{
	const int n = 100000;
	int64_t t0 = now_ns();
	for (int i = 0; i < n; i++)
		cpu_relax();
	return (double)(now_ns() - t0) / n;
}

/* ---- children ---------------------------------------------------------- */

void rep_err(struct proc_rep *rep, int err, const char *fmt, ...)
{
	va_list ap;
	rep->err = err ? err : -1;
	va_start(ap, fmt);
	vsnprintf(rep->msg, sizeof(rep->msg), fmt, ap);
	va_end(ap);
}

struct ctl *ctl_new(int nrecv, int64_t warm_ns)
{
	struct ctl *c = shared_alloc(sizeof(*c));
	if (c) {
		c->nrecv = nrecv;
		c->warm_ns = warm_ns;
	}
	return c;
}

void ctl_free(struct ctl *ctl)
{
	shared_free(ctl, sizeof(*ctl));
}

pid_t spawn(const struct config *cfg, int cpu, int (*fn)(void *, int),
	    void *arg, int idx)
{
	if (!bench_pid)
		bench_pid = getpid();
	pid_t parent = getpid();
	fflush(NULL);
	pid_t pid = fork();
	if (pid == 0) {
		prctl(PR_SET_PDEATHSIG, SIGKILL);
		if (getppid() != parent)
			_exit(1);
		pin_to(cfg->pin, cpu);
		_exit(fn(arg, idx));
	}
	return pid;
}

int wait_warm(struct ctl *ctl, int want, const pid_t *pids, int n,
	      int64_t deadline)
{
	while (atomic_load(&ctl->nwarm) < want) {
		for (int i = 0; i < n; i++) {
			siginfo_t si;
			si.si_pid = 0;
			if (waitid(P_PID, (id_t)pids[i], &si,
				   WEXITED | WNOHANG | WNOWAIT) == 0 &&
			    si.si_pid == pids[i])
				return -ECHILD; /* exited early: failed */
		}
		if (now_ns() > deadline)
			return -ETIMEDOUT;
		sleep_ns(2000000);
	}
	return 0;
}

int reap_all(pid_t *pids, int n, int64_t deadline)
{
	int failed = 0, left = n;
	int done[MAX_PROCS] = { 0 };
	int64_t nap = 100000;
	while (left) {
		for (int i = 0; i < n; i++) {
			if (done[i] || pids[i] <= 0) {
				if (!done[i]) {
					done[i] = 1;
					left--;
				}
				continue;
			}
			int st;
			pid_t r = waitpid(pids[i], &st, WNOHANG);
			if (r == pids[i] || (r < 0 && errno == ECHILD)) {
				done[i] = 1;
				left--;
				if (r < 0 || !WIFEXITED(st) || WEXITSTATUS(st))
					failed++;
			}
		}
		if (!left)
			break;
		if (now_ns() > deadline) {
			for (int i = 0; i < n; i++)
				if (!done[i] && pids[i] > 0) {
					kill(pids[i], SIGKILL);
					waitpid(pids[i], NULL, 0);
					failed++;
				}
			break;
		}
		sleep_ns(nap);
		if (nap < 2000000)
			nap *= 2;
	}
	return failed;
}

/* ---- the measurement window ------------------------------------------- */

void win_init(struct win *w, struct ctl *ctl, int idx, uint64_t warmup,
	      size_t size)
{
	memset(w, 0, sizeof(*w));
	w->ctl = ctl;
	w->rep = &ctl->rep[idx];
	w->warmup = warmup ? warmup : 1;
	w->mask = size < 256 ? 1023 : size < 16384 ? 63 : 0;
}

void win_open(struct win *w, uint64_t n)
{
	w->rep->t0 = now_ns();
	w->cpu0 = cpu_ns();
	w->n0 = n;
	w->state = 1;
}

void win_close(struct win *w, uint64_t n)
{
	if (w->state != 1)
		return;
	w->rep->t1 = now_ns();
	w->rep->cpu = cpu_ns() - w->cpu0;
	w->rep->msgs = n - w->n0;
	w->rep->done = 1;
	w->state = 2;
}

/* ---- cache-line ping-pong probe -----------------------------------------
 * Two processes bounce one cache line: the raw cost of moving a line
 * between the two CPUs, the unit every cross-process transport pays. The
 * round trips run in batches of PP_BATCH; the probe reports the median
 * batch, so one preemption does not decide it, and it stops after
 * PP_MAX_NS however many batches are done. A probe runs before the first
 * measurement and after every one, so a reader can tell the machine's
 * state (shared/BENCHMARKING.md). */

#define PP_BATCH 500
#define PP_MIN_NS 5000000LL
#define PP_MAX_NS 50000000LL
#define PP_STOP UINT64_MAX

static int64_t proc_cpu_ns(void)
{
	struct timespec ts;
	clock_gettime(CLOCK_PROCESS_CPUTIME_ID, &ts);
	return (int64_t)ts.tv_sec * 1000000000 + ts.tv_nsec;
}

static int probe_child(void *arg, int idx)
{
	(void)idx;
	_Atomic uint64_t *w = arg;
	_Atomic int64_t *cpu = (_Atomic int64_t *)((char *)arg + 64);
	uint64_t want = 1;
	int64_t c0 = 0;
	for (;;) {
		uint64_t v = atomic_load_explicit(w, memory_order_acquire);
		if (v == PP_STOP) {
			atomic_store(cpu, proc_cpu_ns() - c0);
			return 0;
		}
		if (v == want) {
			if (v == 1)
				c0 = proc_cpu_ns();
			atomic_store_explicit(w, v + 1, memory_order_release);
			want += 2;
		}
	}
}

/* Round trip in ns (median batch); *cap = CPUs the two spinning processes
 * got during the probe (their CPU time over wall time: 2.0 when the
 * machine really runs both at once, 1.0 when they take turns). */
double probe_ns(const struct config *cfg, double *cap)
{
	*cap = 0;
	_Atomic uint64_t *w = shared_alloc(4096);
	if (!w)
		return -1;
	_Atomic int64_t *child_cpu = (_Atomic int64_t *)((char *)w + 64);
	atomic_store(child_cpu, -1);
	pid_t pid = spawn(cfg, 0, probe_child, (void *)w, 0);
	if (pid < 0) {
		shared_free((void *)w, 4096);
		return -1;
	}
	/* Wait for the child to run, so its start-up is not timed. */
	atomic_store_explicit(w, 1, memory_order_release);
	int64_t give_up = now_ns() + 5000000000LL;
	while (atomic_load_explicit(w, memory_order_acquire) != 2)
		if (now_ns() > give_up)
			break;
	uint64_t v = 3;
	int nb = (int)((cfg->pp_trips + PP_BATCH - 1) / PP_BATCH), done = 0;
	double batch[400];
	int64_t start = now_ns(), c0 = proc_cpu_ns(), t1 = start;
	while (done < 400 && atomic_load(w) == v - 1) {
		int64_t t0 = now_ns();
		for (int i = 0; i < PP_BATCH; i++, v += 2) {
			atomic_store_explicit(w, v, memory_order_release);
			while (atomic_load_explicit(w, memory_order_acquire) !=
			       v + 1)
				;
		}
		t1 = now_ns();
		batch[done++] = (double)(t1 - t0) / PP_BATCH;
		if (t1 - start > PP_MAX_NS ||
		    (done >= nb && t1 - start >= PP_MIN_NS))
			break;
	}
	int64_t mine = proc_cpu_ns() - c0;
	atomic_store_explicit(w, PP_STOP, memory_order_release);
	reap_all(&pid, 1, now_ns() + 5000000000LL);
	int64_t theirs = atomic_load(child_cpu);
	if (done && theirs >= 0 && t1 > start)
		*cap = (double)(mine + theirs) / (double)(t1 - start);
	shared_free((void *)w, 4096);
	return done ? median(batch, done) : -1;
}

/* Record the probe after a measurement; before = the previous one. */
void probe_note(const struct config *cfg, struct results *res,
		double *before, double *after, double *cap_before,
		double *cap)
{
	*before = res->nprobes ? res->probes[res->nprobes - 1] : 0;
	*cap_before = res->nprobes ? res->caps[res->nprobes - 1] : 0;
	double c, p = probe_ns(cfg, &c);
	*after = p;
	*cap = c;
	if (res->nprobes == res->cap_probes) {
		int n = res->cap_probes ? 2 * res->cap_probes : 256;
		double *np = realloc(res->probes, (size_t)n * sizeof(*np));
		double *nc = np ? realloc(res->caps, (size_t)n * sizeof(*nc))
				: NULL;
		if (!np || !nc) {
			if (np)
				res->probes = np;
			return;
		}
		res->probes = np;
		res->caps = nc;
		res->cap_probes = n;
	}
	res->caps[res->nprobes] = c;
	res->probes[res->nprobes++] = p;
}
