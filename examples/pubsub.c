/*
 * pubsub.c - the smallest complete crs program, and the README's example
 * made whole: a publisher and a subscriber exchange N numbers through a
 * stream, zero-copy, and the subscriber reports what it received.
 *
 *   crs-demo [MESSAGES]              both, in two processes, timed
 *                                    (default 10000000)
 *   crs-demo publish NAME [MESSAGES] the publisher alone (default 1000)
 *   crs-demo subscribe NAME          the subscriber alone
 *
 * The two roles may start in either order: the subscriber waits for the
 * stream to appear, the publisher (lockstep) for the subscriber's demand.
 */
#include <crs/crs.h>

#include <signal.h>
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

/* Process A: publish count numbers, then complete. */
static int publish(const char *name, uint64_t count)
{
	crs_pub *pub;
	int err = crs_pub_create(name, NULL, &pub);
	if (err) {
		fprintf(stderr, "publish %s: %s\n", name, crs_strerror(err));
		return 1;
	}
	for (uint64_t i = 0; i < count;) {
		void *buf;
		err = crs_pub_claim(pub, sizeof(i), &buf);
		if (err == 0) { /* write in place, then commit */
			memcpy(buf, &i, sizeof(i));
			crs_pub_commit(pub, sizeof(i));
			i++;
		} else if (err == -CRS_ENODEMAND || err == -CRS_ENOROOM) {
			crs_pub_wait(pub, sizeof(i), -1); /* sleep for demand */
		} else {
			fprintf(stderr, "publish %s: %s\n", name, crs_strerror(err));
			crs_pub_close(pub);
			return 1;
		}
	}
	crs_pub_complete(pub);
	err = crs_pub_wait_consumed(pub, 5000);
	printf("publisher:  %llu messages to stream '%s'%s\n",
	       (unsigned long long)count, name,
	       err ? " (not all consumed in 5 s)" : "");
	crs_pub_close(pub);
	return 0;
}

/* Process B: read every number in place, until the stream ends. */
static int subscribe(const char *name)
{
	struct crs_sub_opts o;
	crs_sub_opts_init(&o); /* requests 128, replenishes at 96 */
	o.wait_ms = -1;	       /* the publisher may not be there yet */
	crs_sub *sub;
	int err = crs_sub_open(name, &o, &sub);
	if (err) {
		fprintf(stderr, "subscribe %s: %s\n", name, crs_strerror(err));
		return 1;
	}
	struct crs_msg msg;
	uint64_t n = 0, sum = 0;
	double t0 = 0;
	int r;
	while ((r = crs_sub_poll(sub, &msg)) >= 0) {
		if (r == 0) {
			crs_sub_wait(sub, -1); /* sleep until data or the end */
			continue;
		}
		uint64_t v; /* read in place, then release */
		memcpy(&v, msg.data, sizeof(v));
		sum += v;
		if (n++ == 0)
			t0 = now_s();
		crs_sub_release(sub); /* hand the space back */
	}
	double dt = now_s() - t0;
	const struct crs_end *end = crs_sub_end(sub); /* code 0: completed */
	printf("subscriber: %llu messages (checksum %llu) in %.3f s = %.1f M msg/s; "
	       "stream %s\n",
	       (unsigned long long)n, (unsigned long long)sum, dt,
	       dt > 0 ? (double)n / dt / 1e6 : 0.0,
	       end->code ? end->message : "completed");
	int code = end->code;
	crs_sub_close(sub);
	return code != 0;
}

static int usage(void)
{
	fprintf(stderr, "usage: crs-demo [MESSAGES]\n"
			"       crs-demo publish NAME [MESSAGES]\n"
			"       crs-demo subscribe NAME\n");
	return 2;
}

int main(int argc, char **argv)
{
	if (argc >= 3 && !strcmp(argv[1], "publish") && argc <= 4)
		return publish(argv[2], argc > 3 ? strtoull(argv[3], NULL, 0) : 1000);
	if (argc == 3 && !strcmp(argv[1], "subscribe"))
		return subscribe(argv[2]);
	if (argc > 2 || (argc == 2 && (argv[1][0] < '0' || argv[1][0] > '9')))
		return usage();

	/* Both roles, the subscriber in a child process. */
	uint64_t count = argc > 1 ? strtoull(argv[1], NULL, 0) : 10000000;
	char name[64];
	snprintf(name, sizeof(name), "demo-%d", (int)getpid());
	pid_t child = fork();
	if (child < 0) {
		perror("fork");
		return 1;
	}
	if (child == 0) {
		int rc = subscribe(name);
		fflush(stdout);
		_exit(rc);
	}
	int rc = publish(name, count);
	if (rc)
		kill(child, SIGTERM); /* it would wait for the stream for ever */
	int status;
	waitpid(child, &status, 0);
	return rc ? rc : WIFEXITED(status) ? WEXITSTATUS(status) : 1;
}
