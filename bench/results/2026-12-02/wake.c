/* wake.c: blocking ping-pong round trip, futex vs pipe, with CPU placement.
 * usage: wake MODE PLACE N   MODE futex|pipe  PLACE free|same|apart */
#define _GNU_SOURCE
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
int main(int argc, char **argv) {
	int pipe_mode = !strcmp(argv[1], "pipe"); const char *place = argv[2]; int n = atoi(argv[3]);
	_Atomic uint32_t *w = mmap(NULL, 4096, PROT_READ | PROT_WRITE, MAP_SHARED | MAP_ANONYMOUS, -1, 0);
	int p1[2], p2[2]; pipe(p1); pipe(p2); char c = 0;
	if (fork() == 0) {
		if (!strcmp(place, "same")) pin(0); else if (!strcmp(place, "apart")) pin(1);
		for (int i = 0; i < n; i++) {
			if (pipe_mode) { read(p1[0], &c, 1); write(p2[1], &c, 1); continue; }
			while (atomic_load(&w[0]) == (uint32_t)i) fx(&w[0], FUTEX_WAIT, i);
			atomic_store(&w[16], i + 1); fx(&w[16], FUTEX_WAKE, 1);
		}
		_exit(0);
	}
	if (strcmp(place, "free")) pin(0);
	int64_t *t = malloc(n * sizeof *t);
	for (int i = 0; i < n; i++) {
		int64_t a = now();
		if (pipe_mode) { write(p1[1], &c, 1); read(p2[0], &c, 1); }
		else {
			atomic_store(&w[0], i + 1); fx(&w[0], FUTEX_WAKE, 1);
			while (atomic_load(&w[16]) == (uint32_t)i) fx(&w[16], FUTEX_WAIT, i);
		}
		t[i] = now() - a;
	}
	wait(NULL); qsort(t, n, sizeof *t, cmp);
	printf("%-5s %-5s p50 %6.2f us  p90 %6.2f us\n", argv[1], place, t[n / 2] / 1e3, t[n * 9 / 10] / 1e3);
	return 0;
}
