/*
 * first-touch.c - what the first access through each page of a new
 * mapping costs once the page is already allocated and mapped.
 *
 * An 8 MiB memfd, two writable shared mappings of it (w, w2). Mode 0:
 * MADV_POPULATE_WRITE on w; 1: memset of w; 2: populate w, then memset
 * it; 3: populate w2 and memset it, then populate w; 4: fallocate, then
 * populate w; 5: populate w, then one store per page of w. Then two
 * passes of one timed store per page of w (at offsets 64 and 2048):
 * average ns per store and stores over 1 us.
 *
 * Build: cc -O2 first-touch.c -o first-touch; run: for m in 0 1 2 3 4 5;
 * do ./first-touch $m; done
 */
#define _GNU_SOURCE
#include <fcntl.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <time.h>
#include <unistd.h>

#define SIZE ((size_t)8 << 20)
#define PAGE 4096

static uint64_t now_ns(void)
{
	struct timespec t;
	clock_gettime(CLOCK_MONOTONIC, &t);
	return (uint64_t)t.tv_sec * 1000000000u + (uint64_t)t.tv_nsec;
}

static void pass(const char *what, volatile uint8_t *w, size_t off)
{
	uint64_t slow = 0, total = 0;
	for (size_t p = 0; p < SIZE; p += PAGE) {
		uint64_t a = now_ns();
		w[p + off] = 1;
		uint64_t d = now_ns() - a;
		total += d;
		slow += d > 1000;
	}
	printf("  %s: %lu ns a store on average, %lu over 1 us of %zu\n", what,
	       (unsigned long)(total / (SIZE / PAGE)), (unsigned long)slow,
	       SIZE / PAGE);
}

int main(int argc, char **argv)
{
	int mode = argc > 1 ? atoi(argv[1]) : 0;
	int fd = memfd_create("first-touch", 0);
	if (fd < 0 || ftruncate(fd, (off_t)SIZE) < 0)
		return 1;
	uint8_t *w = mmap(NULL, SIZE, PROT_READ | PROT_WRITE, MAP_SHARED, fd, 0);
	uint8_t *w2 = mmap(NULL, SIZE, PROT_READ | PROT_WRITE, MAP_SHARED, fd, 0);
	if (w == MAP_FAILED || w2 == MAP_FAILED)
		return 1;
	static const char *what[] = {
		"populate", "memset", "populate, memset",
		"populate and memset another mapping, populate this one",
		"fallocate, populate", "populate, one store per page",
	};
	uint64_t t = now_ns();
	switch (mode) {
	case 1:
		memset(w, 0, SIZE);
		break;
	case 3:
		madvise(w2, SIZE, MADV_POPULATE_WRITE);
		memset(w2, 0, SIZE);
		madvise(w, SIZE, MADV_POPULATE_WRITE);
		break;
	case 4:
		if (fallocate(fd, 0, 0, (off_t)SIZE) < 0)
			return 1;
		madvise(w, SIZE, MADV_POPULATE_WRITE);
		break;
	default:
		madvise(w, SIZE, MADV_POPULATE_WRITE);
		if (mode == 2)
			memset(w, 0, SIZE);
		if (mode == 5)
			for (size_t p = 0; p < SIZE; p += PAGE)
				w[p + 512] = 0;
	}
	printf("mode %d (%s): %lu us\n", mode, what[mode % 6],
	       (unsigned long)((now_ns() - t) / 1000));
	pass("first pass", w, 64);
	pass("second pass", w, 2048);
	return 0;
}
