/*
 * hotpath.c - crs-hotpath: publish and receive N messages in ONE process
 * (publisher and subscriber alternating on one thread), so that
 * `valgrind --tool=callgrind` counts the instructions of the claim/commit
 * and poll/release paths per message, deterministic whatever the load of
 * the machine. Not a rate benchmark: nothing here is timed.
 *
 *   crs-hotpath [count [size [batch [prefetch [api]]]]]
 *
 * batch: messages published before the subscriber drains (1: one by
 * one, the ping-pong shape; 64: a streaming shape). prefetch 0 requests
 * CRS_UNBOUNDED. api: "poll" (crs_sub_poll + release, claim + commit)
 * or "batch" (crs_sub_take + crs_sub_release; crs_pub_commit_more and
 * one crs_pub_flush per batch).
 * end: "front" publishes all count messages first (the ring is sized to
 * hold them; use prefetch 0), then the subscriber drains them; "ended"
 * does the same with crs_pub_complete before the drain: the cost of
 * draining a stream that has ended.
 *
 * Instructions per message: run twice with two counts and divide the
 * difference (that removes setup and teardown), e.g.
 *   valgrind --tool=callgrind --callgrind-out-file=/dev/null \
 *     build/bench/crs-hotpath 200000 32 64 2>&1 | grep refs
 */
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "crs/crs.h"

static volatile uint64_t sink;

static int drain(crs_sub *sub, int batch_api, uint64_t *got)
{
	struct crs_msg m[64];
	if (batch_api) {
		int n = crs_sub_take(sub, m, 64, 0);
		if (n <= 0)
			return n;
		for (int i = 0; i < n; i++)
			sink += *(const uint8_t *)m[i].data + m[i].seq;
		crs_sub_release(sub);
		*got += (uint64_t)n;
		return n;
	}
	int r, n = 0;
	while ((r = crs_sub_poll(sub, &m[0])) == 1) {
		sink += *(const uint8_t *)m[0].data + m[0].seq;
		crs_sub_release(sub);
		n++;
	}
	*got += (uint64_t)n;
	return r < 0 ? r : n;
}

int main(int argc, char **argv)
{
	uint64_t count = argc > 1 ? strtoull(argv[1], NULL, 0) : 100000;
	size_t size = argc > 2 ? strtoul(argv[2], NULL, 0) : 32;
	unsigned batch = argc > 3 ? (unsigned)strtoul(argv[3], NULL, 0) : 64;
	long prefetch = argc > 4 ? strtol(argv[4], NULL, 0) : -1;
	int batch_api = argc > 5 && !strcmp(argv[5], "batch");
	const char *end = argc > 6 ? argv[6] : "";
	int front = !strcmp(end, "front") || !strcmp(end, "ended");
	if (!batch || batch > 64)
		batch = 64;
	char name[64];
	snprintf(name, sizeof(name), "crs-hotpath-%d", (int)getpid());

	struct crs_pub_opts po;
	crs_pub_opts_init(&po);
	if (front)
		while (po.ring_bytes < count * (size + 16) + (1u << 20))
			po.ring_bytes *= 2;
	crs_pub *pub;
	int err = crs_pub_create(name, &po, &pub);
	if (err) {
		fprintf(stderr, "crs_pub_create: %s\n", crs_strerror(err));
		return 1;
	}
	struct crs_sub_opts so;
	crs_sub_opts_init(&so);
	so.async = 1;
	if (prefetch >= 0)
		so.prefetch = (uint32_t)prefetch;
	crs_sub *sub;
	err = crs_sub_open(name, &so, &sub);
	if (err) {
		fprintf(stderr, "crs_sub_open: %s\n", crs_strerror(err));
		return 1;
	}
	if (prefetch == 0)
		crs_sub_request(sub, CRS_UNBOUNDED);
	struct crs_msg m;
	for (int i = 0; i < 100000 && crs_pub_demand(pub) == 0; i++) {
		crs_pub_serve(pub);
		crs_sub_poll(sub, &m);
		usleep(100);
	}
	if (crs_pub_demand(pub) == 0) {
		fprintf(stderr, "no subscriber\n");
		return 1;
	}
	uint64_t sent = 0, got = 0;
	if (front)
		batch = 64; /* fills 64 at a time, drains none until the end */
	while (sent < count) {
		for (unsigned b = 0; b < batch && sent < count; b++) {
			void *buf;
			while ((err = crs_pub_claim(pub, size, &buf)) ==
				       -CRS_ENODEMAND ||
			       err == -CRS_ENOROOM)
				if (drain(sub, batch_api, &got) < 0)
					return 1;
			if (err) {
				fprintf(stderr, "claim: %s\n", crs_strerror(err));
				return 1;
			}
			memset(buf, (int)sent, size < 8 ? size : 8);
			err = batch_api ? crs_pub_commit_more(pub, size)
					: crs_pub_commit(pub, size);
			if (err)
				return 1;
			sent++;
		}
		if (batch_api)
			crs_pub_flush(pub);
		if (!front && drain(sub, batch_api, &got) < 0)
			return 1;
	}
	if (!strcmp(end, "ended") && (err = crs_pub_complete(pub)) != 0) {
		fprintf(stderr, "complete: %s\n", crs_strerror(err));
		return 1;
	}
	while (got < count)
		if (drain(sub, batch_api, &got) < 0)
			return 1;
	crs_sub_close(sub);
	crs_pub_close(pub);
	printf("%llu messages\n", (unsigned long long)got);
	return 0;
}
