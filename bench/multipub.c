/*
 * multipub.c - section "multipub" (only when asked for): throughput of a
 * shared stream with 1, 2 and 4 publisher processes into one merged
 * subscriber, beside the plain 1:1 stream in the same run. Each
 * publisher sends its share of the messages (64 bytes, claim/commit,
 * spinning on crs_pub_wait), then completes; the subscriber (this
 * process, crs_sub_take batches, prefetch 1024) times from its first
 * message to the merged completion. Printed as its own table on stderr
 * and in the JSON document ("multipub": rows of publishers, 0 for the
 * plain stream).
 */
#include <errno.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include "bench.h"
#include "crs/crs.h"

#define MP_SIZE 64

static int64_t mp_now(void)
{
	struct timespec t;
	clock_gettime(CLOCK_MONOTONIC, &t);
	return (int64_t)t.tv_sec * 1000000000 + t.tv_nsec;
}

static void mp_publisher(const char *name, int shared, uint64_t n,
			 int ready_fd)
{
	struct crs_pub_opts o;
	crs_pub_opts_init(&o);
	o.shared = shared;
	o.ring_bytes = 1 << 20;
	crs_pub *pub;
	if (crs_pub_create(name, &o, &pub))
		_exit(1);
	/* Created: the subscriber opens once every member exists. */
	if (write(ready_fd, "", 1) != 1)
		_exit(1);
	close(ready_fd);
	if (crs_pub_wait_subscribers(pub, 1, 20000))
		_exit(1);
	for (uint64_t k = 0; k < n; k++) {
		void *buf;
		while (crs_pub_claim(pub, MP_SIZE, &buf))
			if (crs_pub_wait(pub, MP_SIZE, 20000))
				_exit(1);
		memcpy(buf, &k, sizeof(k));
		crs_pub_commit(pub, MP_SIZE);
	}
	crs_pub_complete(pub);
	crs_pub_wait_consumed(pub, 20000);
	crs_pub_close(pub);
	_exit(0);
}

/* Messages per second with npub publishers (shared, or one plain). */
static double mp_measure(int npub, int shared, uint64_t total, unsigned id)
{
	char name[64];
	snprintf(name, sizeof(name), "mp%u-%d", id, (int)getpid());
	pid_t pid[4];
	int ok = 1;
	for (int i = 0; i < npub; i++) {
		int fds[2];
		char c;
		if (pipe(fds))
			return -1;
		pid[i] = fork();
		if (pid[i] == 0) {
			close(fds[0]);
			mp_publisher(name, shared, total / (uint64_t)npub,
				     fds[1]);
		}
		close(fds[1]);
		if (pid[i] < 0 || read(fds[0], &c, 1) != 1)
			ok = 0;
		close(fds[0]);
		if (!ok)
			npub = i + (pid[i] > 0);
	}
	struct crs_sub_opts so;
	crs_sub_opts_init(&so);
	so.prefetch = 1024;
	crs_sub *sub = NULL;
	double rate = -1;
	if (ok && crs_sub_open(name, &so, &sub) == 0) {
		struct crs_msg m[64];
		uint64_t got = 0;
		int64_t t0 = 0;
		for (;;) {
			int r = crs_sub_take(sub, m, 64, 0);
			if (r > 0) {
				if (!t0)
					t0 = mp_now();
				got += (uint64_t)r;
				crs_sub_release(sub);
			} else if (r < 0) {
				break;
			}
		}
		int64_t t1 = mp_now();
		if (got == total / (uint64_t)npub * (uint64_t)npub && t1 > t0)
			rate = (double)got * 1e9 / (double)(t1 - t0);
		crs_sub_close(sub);
	}
	for (int i = 0; i < npub; i++) {
		int st;
		if (waitpid(pid[i], &st, 0) < 0 || !WIFEXITED(st) ||
		    WEXITSTATUS(st))
			rate = -1;
	}
	return rate;
}

int multipub_run(const struct config *cfg, struct results *res)
{
	setenv("CRS_DIR", cfg->tmpdir, 1);
	uint64_t total = cfg->quick ? 200000 : 2000000;
	static const int pubs[] = {1, 2, 4};
	unsigned id = 0;
	fprintf(stderr, "multipub: %llu messages of %d bytes, 1 subscriber, "
		"msg/s (median of %d rounds)\n", (unsigned long long)total,
		MP_SIZE, cfg->rounds);
	int rounds = cfg->rounds > 0 ? cfg->rounds : 3;
	if (rounds > MAX_ROUNDS)
		rounds = MAX_ROUNDS;
	for (int v = -1; v < 3; v++) {
		struct mp_row *row = &res->multipub[res->nmultipub++];
		double *r = row->rate;
		int n = 0;
		for (int k = 0; k < rounds; k++) {
			double x = v < 0 ? mp_measure(1, 0, total, id++)
					 : mp_measure(pubs[v], 1, total, id++);
			if (x > 0)
				r[n++] = x;
		}
		for (int i = 1; i < n; i++) /* sort for the median */
			for (int j = i; j > 0 && r[j - 1] > r[j]; j--) {
				double t = r[j];
				r[j] = r[j - 1];
				r[j - 1] = t;
			}
		row->pubs = v < 0 ? 0 : pubs[v];
		row->nrounds = rounds;
		row->good = n;
		row->median = n ? r[n / 2] : 0;
		if (v < 0)
			fprintf(stderr, "  plain 1:1            ");
		else
			fprintf(stderr, "  shared, %d publisher%s ", pubs[v],
				pubs[v] > 1 ? "s" : " ");
		if (n)
			fprintf(stderr, "%12.0f msg/s (%d/%d rounds)\n",
				r[n / 2], n, rounds);
		else
			fprintf(stderr, "       failed\n");
	}
	return 0;
}
