/*
 * test_access.c - who may subscribe: the same uid by default, others
 * only when allowed by uid list or group; refused peers get EACCES and
 * the publisher counts them. Children switch to another uid for real
 * (this test needs root to do that; it is skipped otherwise). Also: an
 * unsafe runtime directory and names that could escape it are refused.
 */
#include <errno.h>
#include <grp.h>
#include <string.h>
#include <sys/stat.h>

#include <poll.h>
#include <sys/socket.h>
#include <sys/un.h>

#include "crs/inspect.h"
#include "src/handshake.h"
#include "util.h"

#define OTHER 65534 /* nobody / nogroup */

struct stranger {
	char name[64];
	int expect; /* 0: admitted and reads one message, else -errno */
};

static int stranger(void *arg, int chan)
{
	(void)chan;
	struct stranger *s = arg;
	CHECK(setgroups(0, NULL) == 0);
	CHECK(setgid(OTHER) == 0);
	CHECK(setuid(OTHER) == 0);
	crs_sub *sub;
	int r = tu_sub_open(s->name, 4, &sub);
	CHECK_EQ(r, s->expect);
	/* The publisher's reason reaches the caller. */
	if (r == -EACCES)
		CHECK(strstr(crs_errmsg(), "uid 65534 may not subscribe"));
	if (r == 0) {
		struct crs_msg m;
		CHECK_EQ(tu_sub_next(sub, &m, 10000), 1);
		CHECK(tu_verify(m.data, m.len, m.seq) < 0);
		crs_sub_close(sub);
	}
	return 0;
}

static int report_refused(void *arg, int chan)
{
	CHECK_EQ(tu_send(chan, 1, 0), 0);
	crs_inspector *in;
	CHECK_EQ(crs_inspect_open(arg, &in), 0);
	struct crs_stream_info info;
	CHECK(crs_inspect_read(in, &info, NULL, 0) >= 0);
	CHECK_EQ(tu_send(chan, 2, info.refused), 0);
	crs_inspect_close(in);
	return 0;
}

static void try_stranger(struct crs_pub_opts *o, int expect)
{
	if (geteuid() != 0)
		skip();
	/* Let the stranger reach the socket; admission is up to crs. */
	assert_int_equal(chmod(tu_dir(), 0711), 0);
	struct stranger s = { .expect = expect };
	tu_name(s.name, sizeof(s.name), "access");
	crs_pub *pub;
	assert_int_equal(crs_pub_create(s.name, o, &pub), 0);
	pid_t pid = tu_spawn(stranger, &s, NULL, 30);
	if (expect == 0) {
		assert_int_equal(tu_pub_await_count(pub, 1, 10000), 0);
		assert_int_equal(tu_pub_send(pub, 0, 100, 10000), 0);
	}
	assert_int_equal(tu_serve_wait_child(pub, pid, 20000), 0);
	int chan;
	pid = tu_spawn(report_refused, s.name, &chan, 30);
	uint64_t n = 0;
	assert_int_equal(tu_expect(chan, 1, NULL, 10000), 0);
	int64_t deadline = tu_now_ms() + 10000;
	uint64_t tag = 0;
	while (tag != 2 && tu_now_ms() < deadline) {
		crs_pub_serve(pub); /* the inspector's handshake */
		tu_recv(chan, &tag, &n, 5);
	}
	assert_int_equal(tag, 2);
	assert_int_equal(n, expect ? 1 : 0);
	assert_int_equal(tu_serve_wait_child(pub, pid, 10000), 0);
	close(chan);
	crs_pub_close(pub);
}

static void test_other_uid_refused_by_default(void **state)
{
	(void)state;
	try_stranger(NULL, -EACCES);
}

static void test_other_uid_allowed_by_list(void **state)
{
	(void)state;
	struct crs_pub_opts o;
	crs_pub_opts_init(&o);
	o.n_allow_uids = 2;
	o.allow_uids[0] = 12345;
	o.allow_uids[1] = OTHER;
	try_stranger(&o, 0);
}

static void test_other_uid_allowed_by_group(void **state)
{
	(void)state;
	struct crs_pub_opts o;
	crs_pub_opts_init(&o);
	o.allow_group = 1;
	o.allow_gid = OTHER;
	try_stranger(&o, 0);
	o.allow_gid = OTHER - 1; /* another group: refused */
	try_stranger(&o, -EACCES);
}

/* A stranger that connects and never speaks is refused at once, by its
 * credentials, instead of holding a handshake entry until the HELLO
 * timeout. */
static int silent_stranger(void *arg, int chan)
{
	(void)chan;
	CHECK(setgroups(0, NULL) == 0);
	CHECK(setgid(OTHER) == 0);
	CHECK(setuid(OTHER) == 0);
	struct sockaddr_un sa = { .sun_family = AF_UNIX };
	snprintf(sa.sun_path, sizeof(sa.sun_path), "%s/%s.sock", tu_dir(),
		 (const char *)arg);
	int fd = socket(AF_UNIX, SOCK_SEQPACKET | SOCK_CLOEXEC, 0);
	CHECK(fd >= 0);
	CHECK(connect(fd, (struct sockaddr *)&sa, sizeof(sa)) == 0);
	struct pollfd p = { .fd = fd, .events = POLLIN };
	CHECK_EQ(poll(&p, 1, 10000), 1);
	union hs_msg m;
	char buf[sizeof(m)];
	ssize_t n = recv(fd, buf, sizeof(buf), 0);
	CHECK(n > 0);
	CHECK_EQ(hs_decode(buf, (size_t)n, &m), HS_REJECT);
	CHECK_EQ(m.reject.code, EACCES);
	close(fd);
	return 0;
}

static void test_stranger_refused_at_accept(void **state)
{
	(void)state;
	if (geteuid() != 0)
		skip();
	assert_int_equal(chmod(tu_dir(), 0711), 0);
	char name[64];
	tu_name(name, sizeof(name), "silent");
	crs_pub *pub;
	assert_int_equal(crs_pub_create(name, NULL, &pub), 0);
	pid_t pid = tu_spawn(silent_stranger, name, NULL, 30);
	assert_int_equal(tu_serve_wait_child(pub, pid, 20000), 0);
	crs_pub_close(pub);
}

static void test_unsafe_dir_refused(void **state)
{
	(void)state;
	char name[64];
	tu_name(name, sizeof(name), "unsafe");
	crs_pub *pub;
	assert_int_equal(chmod(tu_dir(), 0777), 0);
	assert_int_equal(crs_pub_create(name, NULL, &pub), -EPERM);
	assert_int_equal(chmod(tu_dir(), 0720), 0);
	assert_int_equal(crs_pub_create(name, NULL, &pub), -EPERM);
	if (geteuid() == 0) {
		assert_int_equal(chmod(tu_dir(), 0700), 0);
		assert_int_equal(chown(tu_dir(), OTHER, OTHER), 0);
		assert_int_equal(crs_pub_create(name, NULL, &pub), -EPERM);
		assert_int_equal(chown(tu_dir(), 0, 0), 0);
	}
	assert_int_equal(chmod(tu_dir(), 0700), 0);
	assert_int_equal(crs_pub_create(name, NULL, &pub), 0);
	crs_pub_close(pub);
}

static void test_escaping_names_refused(void **state)
{
	(void)state;
	const char *bad[] = { "../x", "a/b", ".", "..", ".hidden", "",
			      "x\n", "white space" };
	crs_pub *pub;
	crs_sub *sub;
	for (size_t i = 0; i < sizeof(bad) / sizeof(bad[0]); i++) {
		assert_int_equal(crs_pub_create(bad[i], NULL, &pub), -EINVAL);
		assert_int_equal(crs_sub_open(bad[i], NULL, &sub), -EINVAL);
	}
}

int main(void)
{
	tu_init();
	const struct CMUnitTest tests[] = {
		TU_TEST(test_other_uid_refused_by_default),
		TU_TEST(test_other_uid_allowed_by_list),
		TU_TEST(test_other_uid_allowed_by_group),
		TU_TEST(test_stranger_refused_at_accept),
		TU_TEST(test_unsafe_dir_refused),
		TU_TEST(test_escaping_names_refused),
	};
	return cmocka_run_group_tests(tests, NULL, NULL);
}
