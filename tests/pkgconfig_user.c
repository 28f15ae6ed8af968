/*
 * pkgconfig_user.c - a user's program built outside the crs tree against
 * an installed crs, only with `pkg-config --cflags --libs crs` (see
 * test_pkgconfig.sh). It uses what crs's private dependencies would
 * break if they leaked: getopt(3) from libc, and a strlcpy of its own.
 * Then it publishes a message and reads it back through the library.
 *
 *   pkgconfig_user -n NAME
 */
#include <crs/crs.h>

#include <poll.h>
#include <stdio.h>
#include <string.h>
#include <sys/wait.h>
#include <unistd.h>

/* Our own strlcpy, as many programs have: it must not clash with one
 * that crs's build flags would declare. */
static size_t strlcpy(char *dst, const char *src, size_t size)
{
	size_t len = strlen(src);
	if (size) {
		size_t n = len < size ? len : size - 1;
		memcpy(dst, src, n);
		dst[n] = '\0';
	}
	return len;
}

static int fail(const char *what, int err)
{
	fprintf(stderr, "pkgconfig_user: %s: %s\n", what, crs_strerror(err));
	return 1;
}

int main(int argc, char **argv)
{
	char name[CRS_NAME_MAX + 1] = "";
	int c;
	while ((c = getopt(argc, argv, "n:")) != -1) {
		if (c != 'n')
			return 2;
		strlcpy(name, optarg, sizeof(name));
	}
	if (!name[0] || optind != argc)
		return 2;

	/* The reader, forked before the stream exists, waits for it. */
	pid_t child = fork();
	if (child == 0) {
		struct crs_sub_opts so;
		crs_sub_opts_init(&so);
		so.wait_ms = 10000;
		crs_sub *sub;
		int err = crs_sub_open(name, &so, &sub);
		if (err)
			_exit(fail("crs_sub_open", err));
		struct crs_msg msg;
		int r;
		while ((r = crs_sub_poll(sub, &msg)) == 0)
			crs_sub_wait(sub, 1000);
		int ok = r == 1 && msg.len == 5 && !memcmp(msg.data, "hello", 5);
		printf("received %s\n", ok ? "hello" : "something else");
		crs_sub_close(sub);
		fflush(stdout);
		_exit(ok ? 0 : 1);
	}

	struct crs_pub_opts po;
	crs_pub_opts_init(&po);
	po.mode = CRS_MODE_REPLAY; /* keeps the message for the late reader */
	crs_pub *pub;
	int err = crs_pub_create(name, &po, &pub);
	if (err)
		return fail("crs_pub_create", err);
	err = crs_pub_offer(pub, "hello", 5);
	if (err)
		return fail("crs_pub_offer", err);
	crs_pub_complete(pub);
	/* Serve the reader until it is done: it may come, read and leave
	 * between two of our calls, so wait for its exit, not its count. */
	int status;
	struct pollfd pfd = {.fd = crs_pub_fd(pub), .events = POLLIN};
	while ((err = crs_pub_serve(pub)) >= 0 && waitpid(child, &status, WNOHANG) == 0)
		poll(&pfd, 1, 10);
	crs_pub_close(pub);
	if (err < 0)
		return fail("crs_pub_serve", err);
	return WIFEXITED(status) ? WEXITSTATUS(status) : 1;
}
