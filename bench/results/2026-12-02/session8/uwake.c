/* uwake.c: blocking ping-pong of two processes on CPU 0, the reader
 * sleeping in FUTEX_WAIT or in an io_uring FUTEX_WAIT request.
 * usage: uwake MODE N [ro]
 *   MODE futex (WAITV=1: futex_waitv; TMO=1: with a 1 s timeout),
 *        uring (no setup flags, as crs), coop (COOP_TASKRUN|TASKRUN_FLAG),
 *        defer (SINGLE_ISSUER|DEFER_TASKRUN), timer (uring with a pending
 *        IORING_OP_TIMEOUT, as crs keeps one)
 *   ro   each side waits through a read-only view of the other's word
 * build: gcc -O2 -o uwake uwake.c -luring. Prints p50/p90/p99 of N trips
 * (the first tenth dropped). */
#define _GNU_SOURCE
#include <liburing.h>
#include <linux/futex.h>
#include <sched.h>
#include <stdatomic.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/syscall.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>
static long fx(_Atomic uint32_t *w, int op, uint32_t v) { return syscall(SYS_futex, w, op, v, NULL, NULL, 0); }
static int64_t now(void) { struct timespec t; clock_gettime(CLOCK_MONOTONIC, &t); return t.tv_sec * 1000000000LL + t.tv_nsec; }
static void pin(int cpu) { cpu_set_t s; CPU_ZERO(&s); CPU_SET(cpu, &s); sched_setaffinity(0, sizeof s, &s); }
static int cmp(const void *a, const void *b) { int64_t x = *(const int64_t *)a, y = *(const int64_t *)b; return x < y ? -1 : x > y; }
static int mode, waitv, tmo; static struct io_uring ring; static struct __kernel_timespec tts;
static void wait_word(_Atomic uint32_t *w, uint32_t v) {
	while (atomic_load(w) == v) {
		if (!mode && !waitv) { if (tmo) { struct timespec ts = {1, 0}; syscall(SYS_futex, w, FUTEX_WAIT, v, &ts, NULL, 0); } else fx(w, FUTEX_WAIT, v); continue; }
		if (!mode) { struct futex_waitv fv = { .val = v, .uaddr = (uintptr_t)w, .flags = 2 }; struct timespec ts; clock_gettime(CLOCK_MONOTONIC, &ts); ts.tv_sec += 1; syscall(SYS_futex_waitv, &fv, 1, 0, tmo ? &ts : NULL, CLOCK_MONOTONIC); continue; }
		struct io_uring_sqe *s = io_uring_get_sqe(&ring);
		io_uring_prep_rw(51, s, 2, w, 0, v); s->addr3 = 0xffffffffu; io_uring_sqe_set_data64(s, 1);
		struct io_uring_cqe *c;
		io_uring_submit_and_wait(&ring, 1);
		while (io_uring_peek_cqe(&ring, &c) == 0) io_uring_cqe_seen(&ring, c);
	}
}
static void init(void) {
	if (!mode) return;
	struct io_uring_params p; memset(&p, 0, sizeof p);
	if (mode == 2) p.flags = IORING_SETUP_COOP_TASKRUN | IORING_SETUP_TASKRUN_FLAG;
	if (mode == 3) p.flags = IORING_SETUP_SINGLE_ISSUER | IORING_SETUP_DEFER_TASKRUN;
	int e = io_uring_queue_init_params(256, &ring, &p); if (e) { fprintf(stderr, "init %d\n", e); exit(1); }
	if (mode == 4) { /* a pending timer as crs keeps */
		tts.tv_sec = 1000000;
		struct io_uring_sqe *s = io_uring_get_sqe(&ring); io_uring_prep_timeout(s, &tts, 0, 0); io_uring_sqe_set_data64(s, 2); io_uring_submit(&ring);
	}
}
int main(int argc, char **argv) {
	const char *m = argv[1]; int n = atoi(argv[2]);
	mode = !strcmp(m, "uring") ? 1 : !strcmp(m, "coop") ? 2 : !strcmp(m, "defer") ? 3 : !strcmp(m, "timer") ? 4 : 0;
	waitv = !!getenv("WAITV"); tmo = !!getenv("TMO");
	int ro = argc > 3 && !strcmp(argv[3], "ro");
	int fd = memfd_create("w", 0); ftruncate(fd, 4096);
	_Atomic uint32_t *w = mmap(NULL, 4096, PROT_READ | PROT_WRITE, MAP_SHARED, fd, 0);
	/* ro: each side waits on the other's word through a read-only view */
	_Atomic uint32_t *r = ro ? mmap(NULL, 4096, PROT_READ, MAP_SHARED, fd, 0) : w;
	if (fork() == 0) {
		pin(0); init();
		for (int i = 0; i < n; i++) { wait_word(&r[0], i); atomic_store(&w[16], i + 1); fx(&w[16], FUTEX_WAKE, 1); }
		_exit(0);
	}
	pin(0); init();
	int64_t *t = malloc(n * sizeof *t);
	for (int i = 0; i < n; i++) {
		int64_t a = now();
		atomic_store(&w[0], i + 1); fx(&w[0], FUTEX_WAKE, 1);
		wait_word(&r[16], i);
		t[i] = now() - a;
	}
	wait(NULL);
	qsort(t + n / 10, n - n / 10, sizeof *t, cmp);
	int k = n - n / 10;
	printf("%-6s p50 %.2f us p90 %.2f p99 %.2f\n", m, t[n / 10 + k / 2] / 1e3, t[n / 10 + k * 9 / 10] / 1e3, t[n / 10 + k * 99 / 100] / 1e3);
	return 0;
}
