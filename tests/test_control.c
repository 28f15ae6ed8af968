/*
 * test_control.c - the publisher's control plane under hostile or
 * unlucky conditions, with real processes and sockets: runtime
 * directories with long paths, symlinks and an attacker flipping them;
 * a handshake table flooded by silent peers; a stopped publisher whose
 * backlog is full; descriptor exhaustion on either side; slot quotas;
 * the bound on control work per serve; and crs_errmsg() saying what
 * went wrong in each case.
 */
#include "util.h"

#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <poll.h>
#include <signal.h>
#include <stdio.h>
#include <string.h>
#include <sys/resource.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/un.h>
#include <sys/wait.h>
#include <unistd.h>

#include "crs/inspect.h"
#include "src/handshake.h"

static void set_dir(const char *dir)
{
	assert_int_equal(setenv("CRS_DIR", dir, 1), 0);
}

static void expect_msg(const char *what)
{
	const char *m = crs_errmsg();
	if (!strstr(m, what))
		fail_msg("crs_errmsg() \"%s\" does not mention \"%s\"", m, what);
}

#define CHECK_MSG(what)                                                      \
	do {                                                                 \
		if (!strstr(crs_errmsg(), (what))) {                         \
			fprintf(stderr, "[pid %d] %s:%d: crs_errmsg() \"%s\" " \
				"lacks \"%s\"\n", (int)getpid(), __FILE__,   \
				__LINE__, crs_errmsg(), (what));             \
			_exit(TU_CHILD_FAIL);                                \
		}                                                            \
	} while (0)

/* ---- raw peers --------------------------------------------------------- */

/* A non-blocking connection to stream name in dir, or -errno. */
static int raw_connect(const char *dir, const char *name)
{
	struct sockaddr_un sa = { .sun_family = AF_UNIX };
	snprintf(sa.sun_path, sizeof(sa.sun_path), "%s/%s.sock", dir, name);
	int fd = socket(AF_UNIX, SOCK_SEQPACKET | SOCK_NONBLOCK | SOCK_CLOEXEC,
			0);
	if (fd < 0)
		return -errno;
	if (connect(fd, (struct sockaddr *)&sa, sizeof(sa)) < 0) {
		int err = -errno;
		close(fd);
		return err;
	}
	return fd;
}

/* The publisher's answer on fd within timeout_ms, serving pub (may be
 * NULL) meanwhile: the message type (REJECT code in *code), 0 on a
 * hangup without an answer, -ETIMEDOUT. Received fds are closed. */
static int raw_answer(crs_pub *pub, int fd, int *code, int timeout_ms)
{
	int64_t deadline = tu_now_ms() + timeout_ms;
	for (;;) {
		if (pub)
			crs_pub_serve(pub);
		struct pollfd p = { .fd = fd, .events = POLLIN };
		if (poll(&p, 1, 1) > 0)
			break;
		if (tu_now_ms() > deadline)
			return -ETIMEDOUT;
	}
	union hs_msg m;
	char buf[sizeof(m) + 16];
	union {
		char b[CMSG_SPACE(sizeof(int) * 4)];
		struct cmsghdr align;
	} ctl;
	struct iovec iov = { .iov_base = buf, .iov_len = sizeof(buf) };
	struct msghdr msg = { .msg_iov = &iov,
			      .msg_iovlen = 1,
			      .msg_control = ctl.b,
			      .msg_controllen = sizeof(ctl.b) };
	ssize_t n = recvmsg(fd, &msg, MSG_DONTWAIT | MSG_CMSG_CLOEXEC);
	for (struct cmsghdr *c = CMSG_FIRSTHDR(&msg); n >= 0 && c;
	     c = CMSG_NXTHDR(&msg, c)) {
		int cnt = (int)((c->cmsg_len - CMSG_LEN(0)) / sizeof(int));
		for (int i = 0; i < cnt; i++) {
			int got;
			memcpy(&got, CMSG_DATA(c) + i * sizeof(int), sizeof(int));
			close(got);
		}
	}
	if (n <= 0)
		return 0;
	int type = hs_decode(buf, (size_t)n, &m);
	if (type == HS_REJECT)
		*code = m.reject.code;
	return type;
}

static void raw_hello(int fd, uint32_t role, const char *name)
{
	struct hs_hello h;
	hs_hello_init(&h, role, name);
	assert_int_equal(send(fd, &h, sizeof(h), MSG_NOSIGNAL), sizeof(h));
}

/* ---- subscriber children ----------------------------------------------- */

struct opener {
	char name[CRS_NAME_MAX + 1];
	int handshake_ms;
	int expect;	   /* crs_sub_open's result */
	const char *msg;   /* crs_errmsg() must contain this (if expect) */
	int count;	   /* subscriptions to open (expect applies to the
			      last one; the others must succeed) */
	int free_fds;	   /* > 0: open with only this many fds free */
};

/* Use up every descriptor but `keep`, under a small limit. */
static void exhaust_fds(int keep)
{
	struct rlimit r = { 64, 64 };
	CHECK(setrlimit(RLIMIT_NOFILE, &r) == 0);
	int fill[64], n = 0;
	while (n < 64 && (fill[n] = dup(2)) >= 0)
		n++;
	CHECK(n < 64 && errno == EMFILE && n >= keep);
	for (int i = 0; i < keep; i++)
		CHECK(close(fill[--n]) == 0);
}

static int child_open(void *arg, int chan)
{
	(void)chan;
	struct opener *o = arg;
	struct crs_sub_opts so;
	crs_sub_opts_init(&so);
	so.wait_ms = 10000;
	so.handshake_ms = o->handshake_ms ? o->handshake_ms : 10000;
	crs_sub *subs[64];
	int n = o->count ? o->count : 1;
	for (int i = 0; i < n - 1; i++)
		CHECK_EQ(crs_sub_open(o->name, &so, &subs[i]), 0);
	if (o->free_fds)
		exhaust_fds(o->free_fds);
	crs_sub *last = NULL;
	int r = crs_sub_open(o->name, &so, &last);
	CHECK_EQ(r, o->expect);
	if (r)
		CHECK_MSG(o->msg);
	else
		crs_sub_close(last);
	for (int i = 0; i < n - 1; i++)
		crs_sub_close(subs[i]);
	return 0;
}

/* Run an opener child while serving pub. */
static void run_opener(crs_pub *pub, struct opener *o)
{
	pid_t pid = tu_spawn(child_open, o, NULL, 30);
	assert_int_equal(tu_serve_wait_child(pub, pid, 25000), 0);
}

/* ---- 3: names fit whatever the directory -------------------------------- */

static void test_long_runtime_dir(void **state)
{
	(void)state;
	/* 200 bytes of path: far past sun_path's 108 with any name. */
	char dir[256];
	int n = snprintf(dir, sizeof(dir), "%s/", tu_dir());
	while (n < 200)
		dir[n++] = 'd';
	dir[n] = 0;
	assert_int_equal(mkdir(dir, 0700), 0);
	set_dir(dir);
	struct opener o = { .expect = 0 };
	memset(o.name, 'n', CRS_NAME_MAX);
	o.name[CRS_NAME_MAX] = 0;
	assert_int_equal(crs_name_check(o.name), 0);
	crs_pub *pub;
	assert_int_equal(crs_pub_create(o.name, NULL, &pub), 0);
	char (*names)[CRS_NAME_MAX + 1] = calloc(4, sizeof(*names));
	assert_int_equal(crs_inspect_list(names, 4), 1);
	assert_string_equal(names[0], o.name);
	free(names);
	run_opener(pub, &o);
	crs_pub_close(pub);
	set_dir(tu_dir());
	assert_int_equal(rmdir(dir), 0); /* close removed every file */
}

/* ---- 8: symlinks and an attacker flipping them ------------------------- */

static void test_symlinked_dir_refused(void **state)
{
	(void)state;
	char real[200], link[200];
	snprintf(real, sizeof(real), "%s/real", tu_dir());
	snprintf(link, sizeof(link), "%s/link", tu_dir());
	assert_int_equal(mkdir(real, 0700), 0);
	assert_int_equal(symlink(real, link), 0);
	set_dir(link);
	crs_pub *pub;
	crs_sub *sub;
	assert_int_equal(crs_pub_create("s", NULL, &pub), -ELOOP);
	expect_msg("symbolic link");
	expect_msg(link);
	assert_int_equal(crs_sub_open("s", NULL, &sub), -ELOOP);
	char buf[256];
	assert_int_equal(crs_runtime_dir(buf, sizeof(buf)), -ELOOP);
	set_dir(tu_dir());
	unlink(link);
	rmdir(real);
}

/* Files planted in the directory as symlinks are never followed. */
static void test_planted_symlinks(void **state)
{
	(void)state;
	char target[200], lock[200];
	snprintf(target, sizeof(target), "%s/victim-file", tu_dir());
	snprintf(lock, sizeof(lock), "%s/planted.lock", tu_dir());
	assert_int_equal(symlink(target, lock), 0);
	crs_pub *pub;
	assert_int_equal(crs_pub_create("planted", NULL, &pub), -ELOOP);
	struct stat st;
	assert_int_equal(lstat(target, &st), -1); /* nothing created there */
	unlink(lock);
	/* A socket path planted as a symlink is replaced, not followed. */
	char sock[200];
	snprintf(sock, sizeof(sock), "%s/planted.sock", tu_dir());
	assert_int_equal(symlink(target, sock), 0);
	assert_int_equal(crs_pub_create("planted", NULL, &pub), 0);
	assert_int_equal(lstat(target, &st), -1);
	assert_int_equal(lstat(sock, &st), 0);
	assert_true(S_ISSOCK(st.st_mode));
	crs_pub_close(pub);
}

struct flipper {
	char a[200], b[200];
};

/* Swap a and b (one our real directory, one a symlink to the
 * attacker's) as fast as possible until killed. */
static int child_flip(void *arg, int chan)
{
	struct flipper *f = arg;
	CHECK_EQ(tu_send(chan, 1, 0), 0);
	for (;;)
		renameat2(AT_FDCWD, f->a, AT_FDCWD, f->b, RENAME_EXCHANGE);
	return 0;
}

static int dir_entries(const char *dir)
{
	int n = 0;
	DIR *d = opendir(dir);
	if (!d)
		return -1;
	struct dirent *e;
	while ((e = readdir(d)))
		n += e->d_name[0] != '.';
	closedir(d);
	return n;
}

static void test_flipping_attacker(void **state)
{
	(void)state;
	struct flipper f;
	char evil[200];
	snprintf(evil, sizeof(evil), "%s/evil", tu_dir());
	snprintf(f.a, sizeof(f.a), "%s/flip", tu_dir());
	snprintf(f.b, sizeof(f.b), "%s/flip-other", tu_dir());
	assert_int_equal(mkdir(evil, 0700), 0);
	assert_int_equal(chmod(evil, 0777), 0); /* the attacker's, open */
	assert_int_equal(mkdir(f.a, 0700), 0);
	assert_int_equal(symlink(evil, f.b), 0);
	int chan;
	pid_t pid = tu_spawn(child_flip, &f, &chan, 60);
	assert_int_equal(tu_expect(chan, 1, NULL, 10000), 0);
	set_dir(f.a);
	int made = 0, refused = 0, other = 0;
	for (int i = 0; i < 200; i++) {
		crs_pub *pub;
		int r = crs_pub_create("flip", NULL, &pub);
		if (r == 0) {
			made++;
			crs_pub_close(pub);
		} else if (r == -ELOOP || r == -ENOTDIR) {
			refused++;
		} else {
			other = r;
		}
		if (dir_entries(evil) != 0)
			break;
	}
	tu_kill(pid);
	close(chan);
	set_dir(tu_dir());
	if (other)
		fail_msg("create failed with %d: %s", other, crs_errmsg());
	print_message("flipping: %d created in our directory, %d refused\n",
		      made, refused);
	assert_int_equal(dir_entries(evil), 0);
}

/* ---- 6: the handshake table and silent peers --------------------------- */

static void test_silent_peers(void **state)
{
	(void)state;
	struct opener o = { .handshake_ms = 3000 }; /* < the 5 s HELLO timeout */
	tu_name(o.name, sizeof(o.name), "silent");
	crs_pub *pub = tu_make_pub(o.name, 1 << 16);
	/* More silent peers than the handshake table holds, all accepted
	 * before the honest one arrives. */
	int silent[48];
	for (int i = 0; i < 48; i++) {
		silent[i] = raw_connect(tu_dir(), o.name);
		assert_true(silent[i] >= 0);
	}
	for (int i = 0; i < 50; i++) {
		crs_pub_serve(pub);
		tu_sleep_ms(2);
	}
	run_opener(pub, &o); /* admitted long before the HELLO timeout */
	/* The oldest silent peers were told why they were dropped. */
	int code = 0;
	assert_int_equal(raw_answer(pub, silent[0], &code, 5000), HS_REJECT);
	assert_int_equal(code, ETIMEDOUT);
	for (int i = 0; i < 48; i++)
		close(silent[i]);
	crs_pub_close(pub);
}

/* ---- 7: a stopped publisher with a full backlog ------------------------ */

static int child_stopped_pub(void *arg, int chan)
{
	crs_pub *pub;
	CHECK_EQ(crs_pub_create(arg, NULL, &pub), 0);
	CHECK_EQ(tu_send(chan, 1, 0), 0);
	raise(SIGSTOP);
	for (;;)
		pause();
	return 0;
}

static int child_open_wedged(void *arg, int chan)
{
	(void)chan;
	struct crs_sub_opts so;
	crs_sub_opts_init(&so);
	so.handshake_ms = 300;
	crs_sub *sub;
	CHECK_EQ(crs_sub_open(arg, &so, &sub), -ETIMEDOUT);
	CHECK_MSG("backlog");
	crs_inspector *in;
	CHECK_EQ(crs_inspect_open(arg, &in), -ETIMEDOUT);
	return 0;
}

static void test_wedged_publisher(void **state)
{
	(void)state;
	char name[64];
	tu_name(name, sizeof(name), "wedged");
	int chan;
	pid_t pub = tu_spawn(child_stopped_pub, name, &chan, 60);
	assert_int_equal(tu_expect(chan, 1, NULL, 10000), 0);
	int st;
	assert_int_equal(waitpid(pub, &st, WUNTRACED), pub);
	assert_true(WIFSTOPPED(st));
	/* Fill its backlog: connections nobody will accept. */
	int held[300], n = 0, r = 0;
	while (n < 300 && (r = raw_connect(tu_dir(), name)) >= 0)
		held[n++] = r;
	assert_int_equal(r, -EAGAIN);
	/* Killed by its alarm if any open blocks past its timeout. */
	pid_t pid = tu_spawn(child_open_wedged, name, NULL, 8);
	assert_int_equal(tu_wait_child(pid, 10000), 0);
	for (int i = 0; i < n; i++)
		close(held[i]);
	tu_kill(pub);
	close(chan);
}

/* ---- 9: descriptor exhaustion ----------------------------------------- */

struct fd_pub {
	char name[64];
	int keep; /* descriptors left free */
};

/* A publisher with `keep` descriptors free: it refuses (CPU time spent
 * reported), then frees its descriptors and admits. */
static int child_fd_pub(void *arg, int chan)
{
	struct fd_pub *a = arg;
	crs_pub *pub;
	CHECK_EQ(crs_pub_create(a->name, NULL, &pub), 0);
	struct rlimit r = { 64, 64 };
	CHECK(setrlimit(RLIMIT_NOFILE, &r) == 0);
	int fill[64], n = 0;
	while (n < 64 && (fill[n] = dup(2)) >= 0)
		n++;
	CHECK(n < 64 && errno == EMFILE);
	for (int i = 0; i < a->keep; i++)
		close(fill[--n]);
	CHECK_EQ(tu_send(chan, 1, 0), 0);
	/* Serve while the parent's subscriber is refused. */
	struct rusage ru0, ru1;
	getrusage(RUSAGE_SELF, &ru0);
	CHECK_EQ(crs_pub_wait_subscribers(pub, 1, 1500), -ETIMEDOUT);
	getrusage(RUSAGE_SELF, &ru1);
	int64_t us = (ru1.ru_utime.tv_sec - ru0.ru_utime.tv_sec) * 1000000 +
		     (ru1.ru_utime.tv_usec - ru0.ru_utime.tv_usec) +
		     (ru1.ru_stime.tv_sec - ru0.ru_stime.tv_sec) * 1000000 +
		     (ru1.ru_stime.tv_usec - ru0.ru_stime.tv_usec);
	CHECK_EQ(tu_send(chan, 2, (uint64_t)us), 0);
	while (n)
		close(fill[--n]);
	CHECK_EQ(tu_expect(chan, 3, NULL, 10000), 0);
	CHECK_EQ(crs_pub_wait_subscribers(pub, 1, 10000), 0);
	CHECK_EQ(tu_pub_send(pub, 0, 10, 10000), 0);
	CHECK_EQ(crs_pub_complete(pub), 0);
	CHECK_EQ(crs_pub_wait_consumed(pub, 10000), 0);
	crs_pub_close(pub);
	return 0;
}

static int child_sub_one(void *arg, int chan)
{
	(void)chan;
	crs_sub *sub;
	CHECK_EQ(tu_sub_open(arg, 4, &sub), 0);
	struct crs_msg m;
	CHECK_EQ(tu_sub_next(sub, &m, 10000), 1);
	crs_sub_close(sub);
	return 0;
}

static void fd_starved_publisher(int keep, const char *why)
{
	struct fd_pub a = { .keep = keep };
	tu_name(a.name, sizeof(a.name), "nofd");
	int chan;
	pid_t pub = tu_spawn(child_fd_pub, &a, &chan, 60);
	assert_int_equal(tu_expect(chan, 1, NULL, 10000), 0);
	struct opener o = { .expect = -EMFILE, .msg = why,
			    .handshake_ms = 5000 };
	strcpy(o.name, a.name);
	pid_t pid = tu_spawn(child_open, &o, NULL, 30);
	assert_int_equal(tu_wait_child(pid, 20000), 0);
	uint64_t us;
	assert_int_equal(tu_expect(chan, 2, &us, 10000), 0);
	print_message("publisher out of fds (%d free): %.1f ms CPU in a "
		      "1500 ms wait\n", keep, (double)us / 1000);
	assert_true(us < 300000); /* a busy loop would take it all */
	assert_int_equal(tu_send(chan, 3, 0), 0);
	pid = tu_spawn(child_sub_one, a.name, NULL, 30);
	assert_int_equal(tu_wait_child(pid, 20000), 0);
	assert_int_equal(tu_wait_child(pub, 20000), 0);
	close(chan);
}

static void test_publisher_out_of_fds(void **state)
{
	(void)state;
	fd_starved_publisher(0, "out of file descriptors");
}

static void test_publisher_memfd_fails(void **state)
{
	(void)state;
	fd_starved_publisher(1, "cannot create your control segment");
}

static void test_subscriber_out_of_fds(void **state)
{
	(void)state;
	struct opener o = { .expect = -EMFILE, .msg = "file descriptors" };
	tu_name(o.name, sizeof(o.name), "subfd");
	crs_pub *pub = tu_make_pub(o.name, 1 << 16);
	for (int keep = 1; keep <= 2; keep++) {
		o.free_fds = keep;
		run_opener(pub, &o);
	}
	crs_pub_close(pub);
}

/* ---- 11, 13: slots, quotas and what a refused subscriber hears --------- */

static void test_slot_quotas(void **state)
{
	(void)state;
	char name[64];
	tu_name(name, sizeof(name), "quota");
	struct crs_pub_opts po;
	crs_pub_opts_init(&po);
	po.ring_bytes = 1 << 16;
	po.max_subscribers = 8;
	crs_pub *pub;
	assert_int_equal(crs_pub_create(name, &po, &pub), 0);
	/* One process: half the slots by default, then EDQUOT. */
	struct opener o = { .count = 5, .expect = -EDQUOT,
			    .msg = "max_per_process" };
	strcpy(o.name, name);
	run_opener(pub, &o);
	o = (struct opener){ .count = 4 };
	strcpy(o.name, name);
	run_opener(pub, &o);
	crs_pub_close(pub);

	/* A full stream says so, with the publisher's words. */
	po.max_subscribers = 2;
	po.max_per_process = 2;
	assert_int_equal(crs_pub_create(name, &po, &pub), 0);
	o = (struct opener){ .count = 3, .expect = -EUSERS };
	strcpy(o.name, name);
	char why[128];
	snprintf(why, sizeof(why), "stream '%s' has all 2 slots taken", name);
	o.msg = why;
	run_opener(pub, &o);
	crs_pub_close(pub);

	/* Per uid: two processes of ours share max_per_uid. */
	po.max_subscribers = 8;
	po.max_per_process = 0;
	po.max_per_uid = 3;
	assert_int_equal(crs_pub_create(name, &po, &pub), 0);
	int fd1 = raw_connect(tu_dir(), name), fd2 = raw_connect(tu_dir(), name);
	int code = 0;
	raw_hello(fd1, HS_ROLE_SUBSCRIBER, name);
	assert_int_equal(raw_answer(pub, fd1, &code, 5000), HS_WELCOME);
	raw_hello(fd2, HS_ROLE_SUBSCRIBER, name);
	assert_int_equal(raw_answer(pub, fd2, &code, 5000), HS_WELCOME);
	o = (struct opener){ .count = 2, .expect = -EDQUOT,
			     .msg = "max_per_uid" };
	strcpy(o.name, name);
	run_opener(pub, &o);
	close(fd1);
	close(fd2);
	crs_pub_close(pub);
}

/* One serve does a bounded amount of control work, and the rest is
 * done by the following ones. */
static void test_control_work_bounded(void **state)
{
	(void)state;
	char name[64];
	tu_name(name, sizeof(name), "burst");
	crs_pub *pub = tu_make_pub(name, 1 << 16);
	enum { N = 120 };
	int fd[N];
	for (int i = 0; i < N; i++) {
		fd[i] = raw_connect(tu_dir(), name);
		assert_true(fd[i] >= 0);
		raw_hello(fd[i], HS_ROLE_INSPECTOR, name);
	}
	crs_pub_serve(pub);
	int answered = 0;
	for (int i = 0; i < N; i++) {
		struct pollfd p = { .fd = fd[i], .events = POLLIN };
		answered += poll(&p, 1, 0) == 1;
	}
	print_message("one serve answered %d of %d queued handshakes\n",
		      answered, N);
	assert_true(answered >= 1 && answered <= 64);
	int code;
	for (int i = 0; i < N; i++)
		assert_int_equal(raw_answer(pub, fd[i], &code, 10000),
				 HS_WELCOME);
	for (int i = 0; i < N; i++)
		close(fd[i]);
	crs_pub_close(pub);
}

/* ---- 13: crs_errmsg() names what is wrong ------------------------------ */

static int child_hold_name(void *arg, int chan)
{
	crs_pub *pub;
	CHECK_EQ(crs_pub_create(arg, NULL, &pub), 0);
	CHECK_EQ(tu_send(chan, 1, 0), 0);
	tu_expect(chan, 2, NULL, 20000);
	crs_pub_close(pub);
	return 0;
}

static void test_errmsg(void **state)
{
	(void)state;
	crs_pub *pub;
	const char *xdg = getenv("XDG_RUNTIME_DIR");
	char *saved_xdg = xdg ? strdup(xdg) : NULL;
	/* A shared, world-writable directory. */
	set_dir("/tmp");
	assert_int_equal(crs_pub_create("x", NULL, &pub), -EPERM);
	expect_msg("runtime directory /tmp (from CRS_DIR) is refused");
	expect_msg("others may write");
	expect_msg("mode 1777");
	/* XDG_RUNTIME_DIR pointing nowhere. */
	unsetenv("CRS_DIR");
	assert_int_equal(setenv("XDG_RUNTIME_DIR", "/nonexistent/run", 1), 0);
	assert_int_equal(crs_pub_create("x", NULL, &pub), -ENOENT);
	expect_msg("/nonexistent/run/crs");
	expect_msg("XDG_RUNTIME_DIR=/nonexistent/run");
	char buf[256];
	assert_int_equal(crs_runtime_dir(buf, sizeof(buf)), -ENOENT);
	expect_msg("does not exist");
	if (saved_xdg)
		setenv("XDG_RUNTIME_DIR", saved_xdg, 1);
	else
		unsetenv("XDG_RUNTIME_DIR");
	free(saved_xdg);
	set_dir(tu_dir());
	/* A name clash names the owner. */
	char name[64], pid_text[32];
	tu_name(name, sizeof(name), "clash");
	int chan;
	pid_t pid = tu_spawn(child_hold_name, name, &chan, 30);
	assert_int_equal(tu_expect(chan, 1, NULL, 10000), 0);
	assert_int_equal(crs_pub_create(name, NULL, &pub), -EEXIST);
	snprintf(pid_text, sizeof(pid_text), "pid %d", (int)pid);
	expect_msg(pid_text);
	assert_int_equal(tu_send(chan, 2, 0), 0);
	assert_int_equal(tu_wait_child(pid, 10000), 0);
	close(chan);
	/* Bad names say what is bad; a missing stream where it was looked
	 * for. */
	assert_int_equal(crs_name_check("a b"), -EINVAL);
	expect_msg("offset 1");
	crs_sub *sub;
	assert_int_equal(crs_sub_open("nobody-here", NULL, &sub), -ENOENT);
	expect_msg("no stream 'nobody-here'");
	expect_msg(tu_dir());
}

int main(void)
{
	tu_init();
	const struct CMUnitTest tests[] = {
		TU_TEST(test_long_runtime_dir),
		TU_TEST(test_symlinked_dir_refused),
		TU_TEST(test_planted_symlinks),
		TU_TEST(test_flipping_attacker),
		TU_TEST(test_silent_peers),
		TU_TEST(test_wedged_publisher),
		TU_TEST(test_publisher_out_of_fds),
		TU_TEST(test_publisher_memfd_fails),
		TU_TEST(test_subscriber_out_of_fds),
		TU_TEST(test_slot_quotas),
		TU_TEST(test_control_work_bounded),
		TU_TEST(test_errmsg),
	};
	return cmocka_run_group_tests(tests, NULL, NULL);
}
