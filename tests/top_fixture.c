/*
 * top_fixture.c - a live stream for the crs-top tests, on the public API
 * alone: this process publishes stream NAME and forks subscribers with a
 * given demand behaviour, so that the tests can watch known figures.
 *
 *   top_fixture NAME [-m SIZE] [-N COUNT] [-r RATE] [-R KEEP] [-g]
 *               [-T SECONDS] [-f]... [-s BATCH:PERIOD_MS:TOTAL:CONSUME]...
 *
 *   -m SIZE   message size in bytes (default 64)
 *   -N COUNT  publish COUNT messages, then only serve (default 0: no end)
 *   -r RATE   at most RATE messages a second (default 0: as demand allows)
 *   -R KEEP   a replay stream retaining the last KEEP messages
 *   -g        publish nothing before SIGUSR1
 *   -T SECS   every process of the fixture exits after SECS (default 60)
 *   -f        a fast subscriber: unbounded demand, consumes everything
 *   -s ...    a slow subscriber: prefetch 0; requests BATCH at once, and
 *             BATCH more every PERIOD_MS after its first message, until it
 *             has requested TOTAL (0: no limit); consumes its first
 *             CONSUME messages (0: all) and then stops reading
 *
 * It prints, one line each, as they happen: "sub fast PID", "sub slow
 * PID" (subscribed, first request made), "ready PID" (every subscriber
 * is in; PID is the publisher's), "slow done REQUESTED CONSUMED SECONDS"
 * (a slow subscriber made its last request, SECONDS after its first
 * message) and "published COUNT". The publisher never completes: SIGTERM
 * closes the stream (the process stays a second longer, so that the
 * stream reads as closed rather than dead), SIGKILL leaves it stale.
 * Subscribers die with the publisher.
 */
#include <errno.h>
#include <inttypes.h>
#include <poll.h>
#include <signal.h>
#include <stdarg.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/prctl.h>
#include <time.h>
#include <unistd.h>

#include "crs/crs.h"

#define MAX_SUBS 8

struct slow_spec {
	uint64_t batch, period_ms, total, consume;
};

struct fixture {
	const char *name;
	uint64_t size, count, rate, keep;
	int gate, lifetime;
	int nfast, nslow;
	struct slow_spec slow[MAX_SUBS];
};

static volatile sig_atomic_t g_go, g_term;

static void on_usr1(int sig)
{
	(void)sig;
	g_go = 1;
}

static void on_term(int sig)
{
	(void)sig;
	g_term = 1;
}

static double now_s(void)
{
	struct timespec ts;
	clock_gettime(CLOCK_MONOTONIC, &ts);
	return (double)ts.tv_sec + (double)ts.tv_nsec / 1e9;
}

static void nap_ms(double ms)
{
	struct timespec ts = { (time_t)(ms / 1000),
			       (long)((ms - 1000 * (double)(time_t)(ms / 1000)) *
				      1e6) };
	nanosleep(&ts, NULL);
}

static void die(const char *what, int err)
{
	fprintf(stderr, "top_fixture[%d]: %s: %s\n", (int)getpid(), what,
		crs_strerror(err));
	exit(1);
}

/* One line on stdout, at once: the tests wait for these. */
__attribute__((format(printf, 1, 2))) static void say(const char *fmt, ...)
{
	va_list ap;
	va_start(ap, fmt);
	vprintf(fmt, ap);
	va_end(ap);
	fflush(stdout);
}

static crs_sub *subscribe(const char *name)
{
	struct crs_sub_opts so;
	crs_sub_opts_init(&so);
	so.prefetch = 0;
	so.wait_ms = 10000;
	crs_sub *sub;
	int err = crs_sub_open(name, &so, &sub);
	if (err)
		die("subscribe", err);
	return sub;
}

static void run_fast(const char *name)
{
	crs_sub *sub = subscribe(name);
	int err = crs_sub_request(sub, CRS_UNBOUNDED);
	if (err)
		die("request", err);
	say("sub fast %d\n", (int)getpid());
	struct crs_msg m;
	int r;
	while ((r = crs_sub_poll(sub, &m)) >= 0) {
		if (r)
			crs_sub_release(sub);
		else
			crs_sub_wait(sub, 100);
	}
	crs_sub_close(sub);
}

static void run_slow(const char *name, const struct slow_spec *sp)
{
	crs_sub *sub = subscribe(name);
	uint64_t requested = sp->batch, consumed = 0;
	int err = crs_sub_request(sub, sp->batch);
	if (err)
		die("request", err);
	say("sub slow %d\n", (int)getpid());
	double first = 0, next = 0;
	int done = 0;
	for (;;) {
		if (!sp->consume || consumed < sp->consume) {
			struct crs_msg m;
			int r = crs_sub_poll(sub, &m);
			if (r < 0)
				break;
			if (r) {
				crs_sub_release(sub);
				if (!consumed++)
					first = next = now_s();
				continue;
			}
		}
		if (first && !done && now_s() >= next + sp->period_ms / 1e3) {
			next += sp->period_ms / 1e3;
			crs_sub_request(sub, sp->batch);
			requested += sp->batch;
			if (sp->total && requested >= sp->total) {
				done = 1;
				say("slow done %" PRIu64 " %" PRIu64 " %.6f\n",
				    requested, consumed, now_s() - first);
			}
		}
		if (!first || (sp->consume && consumed >= sp->consume))
			nap_ms(5);
		else
			crs_sub_wait(sub, 5);
	}
	crs_sub_close(sub);
}

/* Die with the publisher, even if it died before this: an orphan would
 * keep the inherited listening socket open, and the stream not stale. */
static void child_setup(pid_t parent, int lifetime)
{
	prctl(PR_SET_PDEATHSIG, SIGKILL);
	if (getppid() != parent)
		_exit(1);
	alarm((unsigned)lifetime);
}

/* Sleep ms while serving subscribers and inspectors: the library serves
 * by itself only every few commits, too seldom at a slow pace. */
static void pause_serving(crs_pub *pub, double ms)
{
	double until = now_s() + ms / 1e3;
	for (double left = ms; left > 0 && !g_term;
	     left = (until - now_s()) * 1e3) {
		struct pollfd p = { .fd = crs_pub_fd(pub), .events = POLLIN };
		if (poll(&p, 1, (int)left + 1) > 0)
			crs_pub_serve(pub);
	}
}

static void publish(crs_pub *pub, const struct fixture *fx)
{
	void *buf;
	uint64_t sent = 0;
	while (!g_term && (!fx->count || sent < fx->count)) {
		int err = crs_pub_claim(pub, fx->size, &buf);
		if (err == -CRS_ENODEMAND || err == -CRS_ENOROOM) {
			crs_pub_wait(pub, fx->size, 50);
			continue;
		}
		if (err)
			die("claim", err);
		memset(buf, (int)(sent & 0xff), fx->size);
		crs_pub_commit(pub, fx->size);
		sent++;
		if (fx->rate)
			pause_serving(pub, 1000.0 / (double)fx->rate);
	}
	if (!g_term)
		say("published %" PRIu64 "\n", sent);
}

/* Serve subscribers (and inspectors) until told to stop. */
static void serve(crs_pub *pub)
{
	while (!g_term) {
		crs_pub_serve(pub);
		struct pollfd p = { .fd = crs_pub_fd(pub), .events = POLLIN };
		poll(&p, 1, 20);
	}
}

static int parse(int argc, char **argv, struct fixture *fx)
{
	*fx = (struct fixture){ .size = 64, .lifetime = 60 };
	int c;
	while ((c = getopt(argc, argv, "m:N:r:R:gT:fs:")) != -1) {
		struct slow_spec *sp = &fx->slow[fx->nslow];
		switch (c) {
		case 'm':
			fx->size = strtoull(optarg, NULL, 10);
			break;
		case 'N':
			fx->count = strtoull(optarg, NULL, 10);
			break;
		case 'r':
			fx->rate = strtoull(optarg, NULL, 10);
			break;
		case 'R':
			fx->keep = strtoull(optarg, NULL, 10);
			break;
		case 'g':
			fx->gate = 1;
			break;
		case 'T':
			fx->lifetime = atoi(optarg);
			break;
		case 'f':
			if (fx->nfast + fx->nslow >= MAX_SUBS)
				return -1;
			fx->nfast++;
			break;
		case 's':
			if (fx->nfast + fx->nslow >= MAX_SUBS ||
			    sscanf(optarg,
				   "%" SCNu64 ":%" SCNu64 ":%" SCNu64 ":%" SCNu64,
				   &sp->batch, &sp->period_ms, &sp->total,
				   &sp->consume) != 4 ||
			    !sp->batch)
				return -1;
			fx->nslow++;
			break;
		default:
			return -1;
		}
	}
	if (optind + 1 != argc || !fx->size || fx->lifetime <= 0)
		return -1;
	fx->name = argv[optind];
	return 0;
}

int main(int argc, char **argv)
{
	struct fixture fx;
	if (parse(argc, argv, &fx) < 0) {
		fputs("usage: top_fixture NAME [-m SIZE] [-N COUNT] [-r RATE] "
		      "[-R KEEP] [-g] [-T SECONDS] [-f]... "
		      "[-s BATCH:PERIOD_MS:TOTAL:CONSUME]...\n",
		      stderr);
		return 2;
	}
	signal(SIGUSR1, on_usr1);
	signal(SIGTERM, on_term);
	signal(SIGINT, on_term);
	signal(SIGPIPE, SIG_IGN);
	alarm((unsigned)fx.lifetime);
	struct crs_pub_opts po;
	crs_pub_opts_init(&po);
	if (fx.keep) {
		po.mode = CRS_MODE_REPLAY;
		po.replay_count = fx.keep;
	}
	crs_pub *pub;
	int err = crs_pub_create(fx.name, &po, &pub);
	if (err)
		die("create", err);
	int nsubs = fx.nfast + fx.nslow;
	pid_t self = getpid();
	for (int k = 0; k < nsubs; k++) {
		fflush(stdout);
		pid_t pid = fork();
		if (pid < 0)
			die("fork", -errno);
		if (pid == 0) {
			child_setup(self, fx.lifetime);
			if (k < fx.nfast)
				run_fast(fx.name);
			else
				run_slow(fx.name, &fx.slow[k - fx.nfast]);
			_exit(0);
		}
	}
	err = crs_pub_wait_subscribers(pub, nsubs, 10000);
	if (err)
		die("wait for subscribers", err);
	say("ready %d\n", (int)getpid());
	while (fx.gate && !g_go && !g_term) {
		crs_pub_serve(pub);
		nap_ms(10);
	}
	publish(pub, &fx);
	serve(pub);
	crs_pub_close(pub);
	nap_ms(1000); /* let inspectors see a closed stream, not a dead one */
	return 0;
}
