/*
 * pubsub.c - the smallest complete crs program, and the README's demo: a
 * publisher process and a subscriber process exchange N messages through
 * a stream, zero-copy, and the subscriber reports what it received.
 *
 *   crs-demo [MESSAGES]        default 10000000
 */
#include <crs/crs.h>

#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

static double now_s(void)
{
	struct timespec ts;
	clock_gettime(CLOCK_MONOTONIC, &ts);
	return (double)ts.tv_sec + (double)ts.tv_nsec * 1e-9;
}

static int subscribe(const char *name)
{
	crs_sub *sub;
	struct crs_sub_opts o;
	crs_sub_opts_init(&o);
	o.wait_ms = 5000; /* the publisher may still be starting */
	int err = crs_sub_open(name, &o, &sub);
	if (err) {
		fprintf(stderr, "subscribe: %s\n", crs_strerror(err));
		return 1;
	}
	struct crs_msg msg;
	uint64_t n = 0, sum = 0;
	double t0 = 0;
	for (;;) {
		int r = crs_sub_poll(sub, &msg);
		if (r == 1) { /* read in place, then release */
			uint64_t v;
			memcpy(&v, msg.data, sizeof(v));
			sum += v;
			if (n++ == 0)
				t0 = now_s();
			crs_sub_release(sub);
		} else if (r == 0) {
			crs_sub_wait(sub, -1);
		} else {
			break; /* the stream ended: see crs_sub_end() */
		}
	}
	double dt = now_s() - t0;
	const struct crs_end *end = crs_sub_end(sub);
	printf("subscriber: %llu messages (checksum %llu) in %.3f s = %.1f M msg/s; "
	       "stream %s\n",
	       (unsigned long long)n, (unsigned long long)sum, dt,
	       dt > 0 ? (double)n / dt / 1e6 : 0.0,
	       end->code ? end->message : "completed");
	crs_sub_close(sub);
	return end->code != 0;
}

int main(int argc, char **argv)
{
	uint64_t count = argc > 1 ? strtoull(argv[1], NULL, 0) : 10000000;
	char name[64];
	snprintf(name, sizeof(name), "demo-%d", (int)getpid());

	crs_pub *pub;
	int err = crs_pub_create(name, NULL, &pub);
	if (err) {
		fprintf(stderr, "publish: %s\n", crs_strerror(err));
		return 1;
	}
	pid_t child = fork();
	if (child == 0) {
		int rc = subscribe(name);
		fflush(stdout);
		_exit(rc);
	}

	crs_pub_wait_subscribers(pub, 1, 5000);
	for (uint64_t i = 0; i < count;) {
		void *buf;
		err = crs_pub_claim(pub, sizeof(i), &buf);
		if (err == 0) { /* write in place, then commit */
			memcpy(buf, &i, sizeof(i));
			crs_pub_commit(pub, sizeof(i));
			i++;
		} else if (err == -CRS_ENODEMAND || err == -CRS_ENOROOM) {
			crs_pub_wait(pub, sizeof(i), -1);
		} else {
			fprintf(stderr, "publish: %s\n", crs_strerror(err));
			break;
		}
	}
	crs_pub_complete(pub);
	crs_pub_wait_consumed(pub, 5000);
	printf("publisher:  %llu messages to stream '%s'\n",
	       (unsigned long long)count, name);
	crs_pub_close(pub);
	int status;
	waitpid(child, &status, 0);
	return WIFEXITED(status) ? WEXITSTATUS(status) : 1;
}
