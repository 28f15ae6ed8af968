/*
 * test_handshake.c - the handshake protocol and stream names: every
 * message hs_decode() must accept or refuse, crs_name_check(), the
 * publisher's option checks, the runtime directory's safety checks, and
 * a live publisher answering raw, malformed handshakes on its socket
 * without being disturbed.
 */
#include "util.h"

#include <errno.h>
#include <poll.h>
#include <string.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/un.h>

#include "src/handshake.h"

/* Decode from a heap copy of exactly len bytes, so that ASan catches any
 * read past the end. */
static int decode(const void *msg, size_t len, union hs_msg *out)
{
	void *copy = malloc(len ? len : 1);
	assert_non_null(copy);
	memcpy(copy, msg, len);
	int r = hs_decode(copy, len, out);
	free(copy);
	return r;
}

static void test_decode_valid(void **state)
{
	(void)state;
	union hs_msg out;
	struct hs_hello h;
	hs_hello_init(&h, HS_ROLE_SUBSCRIBER, "stream-1");
	assert_int_equal(decode(&h, sizeof(h), &out), HS_HELLO);
	assert_int_equal(out.hello.role, HS_ROLE_SUBSCRIBER);
	assert_string_equal(out.hello.name, "stream-1");

	hs_hello_init(&h, HS_ROLE_INSPECTOR, "x");
	assert_int_equal(decode(&h, sizeof(h), &out), HS_HELLO);
	assert_int_equal(out.hello.role, HS_ROLE_INSPECTOR);

	struct hs_welcome w;
	hs_welcome_init(&w);
	w.slot = 7;
	w.layout_version = 1;
	w.data_size = 8192 + 4096;
	w.ctl_size = 4096;
	w.start_pos = 4096;
	w.start_seq = 99;
	assert_int_equal(decode(&w, sizeof(w), &out), HS_WELCOME);
	assert_int_equal(out.welcome.slot, 7);
	assert_int_equal(out.welcome.start_pos, 4096);
	assert_int_equal(out.welcome.start_seq, 99);

	struct hs_reject r;
	hs_reject_init(&r, ECONNREFUSED, "full");
	assert_int_equal(decode(&r, sizeof(r), &out), HS_REJECT);
	assert_int_equal(out.reject.code, ECONNREFUSED);
	assert_string_equal(out.reject.reason, "full");
}

static void test_decode_reject_reason_truncated(void **state)
{
	(void)state;
	char longr[300];
	memset(longr, 'r', sizeof(longr) - 1);
	longr[sizeof(longr) - 1] = 0;
	struct hs_reject r;
	hs_reject_init(&r, EPERM, longr);
	union hs_msg out;
	assert_int_equal(decode(&r, sizeof(r), &out), HS_REJECT);
	assert_int_equal(strlen(out.reject.reason), HS_REASON_MAX);
}

static void test_decode_bad_magic_version(void **state)
{
	(void)state;
	union hs_msg out;
	struct hs_hello h;
	hs_hello_init(&h, HS_ROLE_SUBSCRIBER, "s");
	h.head.magic = 0x12345678;
	assert_int_equal(decode(&h, sizeof(h), &out), -CRS_EPROTO);
	h.head.magic = HS_MAGIC ^ 1;
	assert_int_equal(decode(&h, sizeof(h), &out), -CRS_EPROTO);

	hs_hello_init(&h, HS_ROLE_SUBSCRIBER, "s");
	h.head.version = HS_VERSION + 1;
	assert_int_equal(decode(&h, sizeof(h), &out), -CRS_EVERSION);
	h.head.version = 0;
	assert_int_equal(decode(&h, sizeof(h), &out), -CRS_EVERSION);
	/* Another version may have another length: still EVERSION. */
	h.head.version = 2;
	assert_int_equal(decode(&h, sizeof(h.head), &out), -CRS_EVERSION);
	assert_int_equal(decode(&h, sizeof(h) - 3, &out), -CRS_EVERSION);
}

static void test_decode_bad_length(void **state)
{
	(void)state;
	union hs_msg out;
	struct hs_hello h;
	struct hs_welcome w;
	struct hs_reject r;
	hs_hello_init(&h, HS_ROLE_SUBSCRIBER, "s");
	hs_welcome_init(&w);
	hs_reject_init(&r, EPERM, "no");
	const struct {
		const void *m;
		size_t len;
	} msgs[] = { { &h, sizeof(h) }, { &w, sizeof(w) }, { &r, sizeof(r) } };
	for (size_t i = 0; i < 3; i++) {
		size_t len = msgs[i].len;
		assert_int_equal(decode(msgs[i].m, len - 1, &out), -CRS_EPROTO);
		assert_int_equal(decode(msgs[i].m, 0, &out), -CRS_EPROTO);
		assert_int_equal(decode(msgs[i].m, 3, &out), -CRS_EPROTO);
		assert_int_equal(decode(msgs[i].m, sizeof(struct hs_head),
					&out),
				 -CRS_EPROTO);
		/* One byte too many. */
		char big[sizeof(union hs_msg) + 8];
		memset(big, 0, sizeof(big));
		memcpy(big, msgs[i].m, len);
		assert_int_equal(decode(big, len + 1, &out), -CRS_EPROTO);
		assert_int_equal(decode(big, sizeof(big), &out), -CRS_EPROTO);
	}
	/* A HELLO with the length of a WELCOME and vice versa. */
	char buf[sizeof(union hs_msg)];
	memset(buf, 0, sizeof(buf));
	memcpy(buf, &h, sizeof(h.head));
	if (sizeof(w) != sizeof(h))
		assert_int_equal(decode(buf, sizeof(w), &out), -CRS_EPROTO);
}

static void test_decode_bad_type(void **state)
{
	(void)state;
	union hs_msg out;
	struct hs_hello h;
	hs_hello_init(&h, HS_ROLE_SUBSCRIBER, "s");
	const uint16_t types[] = { 0, 4, 5, 0xffff };
	for (size_t i = 0; i < sizeof(types) / sizeof(types[0]); i++) {
		h.head.type = types[i];
		assert_int_equal(decode(&h, sizeof(h), &out), -CRS_EPROTO);
	}
}

static void test_decode_unterminated(void **state)
{
	(void)state;
	union hs_msg out;
	struct hs_hello h;
	hs_hello_init(&h, HS_ROLE_SUBSCRIBER, "s");
	memset(h.name, 'a', sizeof(h.name));
	assert_int_equal(decode(&h, sizeof(h), &out), -CRS_EPROTO);
	/* Terminated at the very last byte is fine. */
	h.name[sizeof(h.name) - 1] = 0;
	assert_int_equal(decode(&h, sizeof(h), &out), HS_HELLO);

	struct hs_reject r;
	hs_reject_init(&r, EPERM, "x");
	memset(r.reason, 'b', sizeof(r.reason));
	assert_int_equal(decode(&r, sizeof(r), &out), -CRS_EPROTO);
	r.reason[sizeof(r.reason) - 1] = 0;
	assert_int_equal(decode(&r, sizeof(r), &out), HS_REJECT);
}

static void test_decode_bad_role_and_code(void **state)
{
	(void)state;
	union hs_msg out;
	struct hs_hello h;
	const uint32_t roles[] = { 0, 3, 4, 0x80000001u, UINT32_MAX };
	for (size_t i = 0; i < sizeof(roles) / sizeof(roles[0]); i++) {
		hs_hello_init(&h, roles[i], "s");
		assert_int_equal(decode(&h, sizeof(h), &out), -CRS_EPROTO);
	}
	struct hs_reject r;
	const int codes[] = { 0, -1, -EPERM, INT32_MIN };
	for (size_t i = 0; i < sizeof(codes) / sizeof(codes[0]); i++) {
		hs_reject_init(&r, EPERM, "x");
		r.code = codes[i];
		assert_int_equal(decode(&r, sizeof(r), &out), -CRS_EPROTO);
	}
}

static void test_decode_garbage(void **state)
{
	(void)state;
	/* Random bytes of every length: never a crash, never accepted
	 * unless the magic and version happen to be right. */
	union hs_msg out;
	uint8_t buf[sizeof(union hs_msg) + 16];
	for (uint64_t i = 0; i < 20000; i++) {
		size_t len = (size_t)(tu_mix(i) % sizeof(buf));
		tu_fill(buf, len, i);
		if (i & 1 && len >= 8) {
			/* Right head, random body and type. */
			struct hs_head hd = { HS_MAGIC, HS_VERSION,
					      (uint16_t)(1 + i % 3) };
			memcpy(buf, &hd, sizeof(hd));
		}
		int r = decode(buf, len, &out);
		assert_true(r == -CRS_EPROTO || r == -CRS_EVERSION ||
			    r == HS_HELLO || r == HS_WELCOME || r == HS_REJECT);
		if (r == HS_HELLO)
			assert_non_null(memchr(out.hello.name, 0,
					       sizeof(out.hello.name)));
		if (r == HS_REJECT)
			assert_true(out.reject.code > 0);
	}
}

/* ---- names and options ------------------------------------------------ */

static void test_names(void **state)
{
	(void)state;
	char max[CRS_NAME_MAX + 1], over[CRS_NAME_MAX + 2];
	memset(max, 'n', CRS_NAME_MAX);
	max[CRS_NAME_MAX] = 0;
	memset(over, 'n', CRS_NAME_MAX + 1);
	over[CRS_NAME_MAX + 1] = 0;
	const char *good[] = { "a", "Z", "0", "stream", "A-z_0.9", "a..b",
			       "a.", "a-", "_x", max };
	for (size_t i = 0; i < sizeof(good) / sizeof(good[0]); i++) {
		if (crs_name_check(good[i]) != 0)
			fail_msg("good name refused: \"%s\"", good[i]);
	}
	const char *bad[] = { "",	 ".hidden", ".",      "..",   "a/b",
			      "/abs",	 "a b",	    "a\nb",   "tab\t", "\x7f",
			      "caf\xc3\xa9", "\xff", "a*",    "a\\b", "$x",
			      "-", "-q", "--help", over };
	for (size_t i = 0; i < sizeof(bad) / sizeof(bad[0]); i++) {
		if (crs_name_check(bad[i]) != -EINVAL)
			fail_msg("bad name accepted: \"%s\"", bad[i]);
	}
	assert_int_equal(crs_name_check(NULL), -EINVAL);

	/* The entry points refuse bad names too. */
	crs_pub *pub = NULL;
	crs_sub *sub = NULL;
	for (size_t i = 0; i < sizeof(bad) / sizeof(bad[0]); i++) {
		assert_int_equal(crs_pub_create(bad[i], NULL, &pub), -EINVAL);
		assert_int_equal(crs_sub_open(bad[i], NULL, &sub), -EINVAL);
	}
	/* A 64-character name works end to end (socket path fits). */
	assert_int_equal(crs_pub_create(max, NULL, &pub), 0);
	crs_pub_close(pub);
}

static void test_pub_options(void **state)
{
	(void)state;
	struct crs_pub_opts o;
	crs_pub_opts_init(&o);
	assert_int_equal(o.mode, CRS_MODE_PUBLISH);
	assert_int_equal(o.ring_bytes, 1 << 20);
	assert_int_equal(o.max_message, 0); /* ring/4 */
	assert_int_equal(o.max_subscribers, 64);
	assert_int_equal(o.allow_uid_any, 0);
	struct crs_sub_opts so;
	crs_sub_opts_init(&so);
	assert_int_equal(so.prefetch, 1u << 20);
	assert_int_equal(so.wait_ms, 0);
	assert_int_equal(so.handshake_ms, 5000);

	char name[64];
	tu_name(name, sizeof(name), "opts");
	crs_pub *pub = NULL;
	const struct {
		uint64_t ring;
		uint32_t max, subs, mode;
		int want;
	} cases[] = {
		{ 4096, 0, 0, 0, 0 },
		{ 4096, 1024, 1, 0, 0 },
		{ 1 << 16, 1, 64, 0, 0 },
		{ 1000, 0, 0, 0, -EINVAL },	    /* not a power of two */
		{ 4096 + 8, 0, 0, 0, -EINVAL },	    /* not a power of two */
		{ 2048, 0, 0, 0, -EINVAL },	    /* below the minimum */
		{ 1ULL << 31, 0, 0, 0, -EINVAL },   /* above the maximum */
		{ 4096, 1025, 0, 0, -EINVAL },	    /* max_message > ring/4 */
		{ 4096, UINT32_MAX, 0, 0, -EINVAL },
		{ 4096, 0, 65, 0, -EINVAL },	    /* too many subscribers */
		{ 4096, 0, UINT32_MAX, 0, -EINVAL },
		{ 4096, 0, 0, CRS_MODE_REPLAY + 1, -EINVAL }, /* no such mode */
		{ 4096, 0, 0, UINT32_MAX, -EINVAL },
	};
	for (size_t i = 0; i < sizeof(cases) / sizeof(cases[0]); i++) {
		crs_pub_opts_init(&o);
		o.ring_bytes = cases[i].ring;
		o.max_message = cases[i].max;
		o.max_subscribers = cases[i].subs;
		o.mode = cases[i].mode;
		int r = crs_pub_create(name, &o, &pub);
		if (r != cases[i].want)
			fail_msg("case %zu: ring %llu max %u subs %u mode %u: "
				 "got %d want %d",
				 i, (unsigned long long)cases[i].ring,
				 cases[i].max, cases[i].subs, cases[i].mode, r,
				 cases[i].want);
		if (r == 0)
			crs_pub_close(pub);
	}
	/* NULL options mean the defaults. */
	assert_int_equal(crs_pub_create(name, NULL, &pub), 0);
	crs_pub_close(pub);
}

static void test_strerror(void **state)
{
	(void)state;
	for (int c = CRS_EBASE + 1; c < CRS_ELAST; c++) {
		const char *s = crs_strerror(-c);
		assert_non_null(s);
		assert_true(strlen(s) > 0);
		assert_null(strstr(s, "Unknown"));
		assert_string_equal(s, crs_strerror(c));
		for (int d = CRS_EBASE + 1; d < c; d++)
			assert_string_not_equal(s, crs_strerror(-d));
	}
	assert_string_equal(crs_strerror(-ENOENT), strerror(ENOENT));
	assert_string_equal(crs_strerror(-EEXIST), strerror(EEXIST));
	assert_non_null(crs_strerror(0));
}

static void test_runtime_dir(void **state)
{
	(void)state;
	char buf[256];
	int n = crs_runtime_dir(buf, sizeof(buf));
	assert_int_equal(n, (int)strlen(tu_dir()));
	assert_string_equal(buf, tu_dir());
	assert_true(crs_runtime_dir(buf, 4) < 0); /* too small */

	/* A world-writable runtime directory is refused, so no other user
	 * can plant a socket or a lock there. */
	char unsafe[128];
	snprintf(unsafe, sizeof(unsafe), "%s/unsafe", tu_dir());
	assert_int_equal(mkdir(unsafe, 0700), 0);
	assert_int_equal(chmod(unsafe, 0777), 0);
	assert_int_equal(setenv("CRS_DIR", unsafe, 1), 0);
	crs_pub *pub = NULL;
	int r = crs_pub_create("unsafe", NULL, &pub);
	crs_sub *sub = NULL;
	int s = crs_sub_open("unsafe", NULL, &sub);
	assert_int_equal(setenv("CRS_DIR", tu_dir(), 1), 0);
	rmdir(unsafe);
	assert_int_equal(r, -EPERM);
	assert_true(s < 0);
	/* A missing runtime directory is created, private to the user. */
	snprintf(unsafe, sizeof(unsafe), "%s/fresh", tu_dir());
	assert_int_equal(setenv("CRS_DIR", unsafe, 1), 0);
	r = crs_pub_create("fresh", NULL, &pub);
	assert_int_equal(setenv("CRS_DIR", tu_dir(), 1), 0);
	assert_int_equal(r, 0);
	struct stat st;
	assert_int_equal(stat(unsafe, &st), 0);
	assert_true(S_ISDIR(st.st_mode));
	assert_int_equal(st.st_mode & 0777, 0700);
	crs_pub_close(pub);
	rmdir(unsafe);
	/* A runtime path that is a file is refused. */
	snprintf(unsafe, sizeof(unsafe), "%s/afile", tu_dir());
	FILE *f = fopen(unsafe, "w");
	assert_non_null(f);
	fclose(f);
	assert_int_equal(setenv("CRS_DIR", unsafe, 1), 0);
	r = crs_pub_create("file", NULL, &pub);
	assert_int_equal(setenv("CRS_DIR", tu_dir(), 1), 0);
	unlink(unsafe);
	assert_true(r < 0);
}

/* ---- a live publisher answering raw handshakes ------------------------- */

static int raw_connect(const char *name)
{
	struct sockaddr_un sa = { .sun_family = AF_UNIX };
	snprintf(sa.sun_path, sizeof(sa.sun_path), "%s/%s.sock", tu_dir(),
		 name);
	int fd = socket(AF_UNIX, SOCK_SEQPACKET | SOCK_CLOEXEC, 0);
	assert_true(fd >= 0);
	assert_int_equal(connect(fd, (struct sockaddr *)&sa, sizeof(sa)), 0);
	return fd;
}

static void raw_send(int fd, const void *buf, size_t len, int pass_fd)
{
	struct iovec iov = { .iov_base = (void *)buf, .iov_len = len };
	struct msghdr msg = { .msg_iov = &iov, .msg_iovlen = 1 };
	union {
		char b[CMSG_SPACE(sizeof(int))];
		struct cmsghdr align;
	} ctl;
	if (pass_fd >= 0) {
		memset(&ctl, 0, sizeof(ctl));
		msg.msg_control = ctl.b;
		msg.msg_controllen = sizeof(ctl.b);
		struct cmsghdr *c = CMSG_FIRSTHDR(&msg);
		c->cmsg_level = SOL_SOCKET;
		c->cmsg_type = SCM_RIGHTS;
		c->cmsg_len = CMSG_LEN(sizeof(int));
		memcpy(CMSG_DATA(c), &pass_fd, sizeof(int));
	}
	assert_int_equal(sendmsg(fd, &msg, MSG_NOSIGNAL), (ssize_t)len);
}

/* Serve pub until fd has an answer (or hangs up). Returns the decoded
 * type, 0 on hangup without an answer, and closes received fds after
 * counting them in *nfds. */
static int raw_answer(crs_pub *pub, int fd, union hs_msg *out, int *nfds)
{
	int64_t deadline = tu_now_ms() + 10000;
	*nfds = 0;
	for (;;) {
		crs_pub_serve(pub);
		struct pollfd p = { .fd = fd, .events = POLLIN };
		if (poll(&p, 1, 1) > 0)
			break;
		if (tu_now_ms() > deadline)
			fail_msg("publisher never answered the handshake");
	}
	char buf[sizeof(union hs_msg) + 16];
	union {
		char b[CMSG_SPACE(sizeof(int) * 8)];
		struct cmsghdr align;
	} ctl;
	struct iovec iov = { .iov_base = buf, .iov_len = sizeof(buf) };
	struct msghdr msg = { .msg_iov = &iov,
			      .msg_iovlen = 1,
			      .msg_control = ctl.b,
			      .msg_controllen = sizeof(ctl.b) };
	ssize_t n = recvmsg(fd, &msg, MSG_DONTWAIT);
	for (struct cmsghdr *c = CMSG_FIRSTHDR(&msg); n >= 0 && c;
	     c = CMSG_NXTHDR(&msg, c)) {
		if (c->cmsg_type != SCM_RIGHTS)
			continue;
		int cnt = (int)((c->cmsg_len - CMSG_LEN(0)) / sizeof(int));
		for (int i = 0; i < cnt; i++) {
			int got;
			memcpy(&got, CMSG_DATA(c) + i * sizeof(int), sizeof(int));
			close(got);
		}
		*nfds += cnt;
	}
	if (n <= 0)
		return 0;
	return hs_decode(buf, (size_t)n, out);
}

static void expect_reject(crs_pub *pub, const char *name, const void *m,
			  size_t len, int pass_fd, int code)
{
	int before = crs_pub_subscribers(pub);
	int fd = raw_connect(name);
	raw_send(fd, m, len, pass_fd);
	union hs_msg out;
	int nfds;
	int type = raw_answer(pub, fd, &out, &nfds);
	close(fd);
	if (nfds != 0) /* never the memfds */
		fail_msg("handshake of %zu bytes (fd %d) got %d fds, type %d "
			 "(code %d, role %u, magic %x, version %u)",
			 len, pass_fd, nfds, type, code,
			 ((const struct hs_hello *)m)->role,
			 ((const struct hs_hello *)m)->head.magic,
			 ((const struct hs_hello *)m)->head.version);
	if (code == 0) {
		/* Either a REJECT or a plain hangup, never a WELCOME. */
		assert_true(type == 0 || type == HS_REJECT);
	} else {
		assert_int_equal(type, HS_REJECT);
		assert_int_equal(out.reject.code, code);
	}
	assert_int_equal(crs_pub_subscribers(pub), before);
}

struct recv_arg {
	const char *name;
	int count;
	int expect_open;
};

/* Child: subscribe and receive count patterned messages, then the end. */
static int child_receive(void *p, int chan)
{
	struct recv_arg *a = p;
	crs_sub *sub;
	int r = tu_sub_open(a->name, 128, &sub);
	if (a->expect_open) {
		CHECK_EQ(r, a->expect_open);
		return 0;
	}
	CHECK_EQ(r, 0);
	CHECK_EQ(tu_send(chan, 1, 0), 0);
	struct crs_msg m;
	for (int i = 0; i < a->count; i++) {
		CHECK_EQ(tu_sub_next(sub, &m, 10000), 1);
		CHECK_EQ(m.seq, i);
		CHECK_EQ(tu_verify(m.data, m.len, m.seq), -1);
	}
	CHECK_EQ(tu_sub_next(sub, &m, 10000), -CRS_EEND);
	CHECK_EQ(crs_sub_end(sub)->code, 0);
	crs_sub_close(sub);
	return 0;
}

static void test_raw_handshakes(void **state)
{
	(void)state;
	char name[64];
	tu_name(name, sizeof(name), "raw");
	crs_pub *pub;
	struct crs_pub_opts o;
	crs_pub_opts_init(&o);
	o.ring_bytes = 1 << 16;
	o.max_message = 0; /* ring/4 */
	o.max_subscribers = 1;
	assert_int_equal(crs_pub_create(name, &o, &pub), 0);

	struct hs_hello h;
	hs_hello_init(&h, HS_ROLE_SUBSCRIBER, name);
	struct hs_hello bad = h;
	bad.head.magic = 0xdeadbeef;
	expect_reject(pub, name, &bad, sizeof(bad), -1, CRS_EPROTO);
	bad = h;
	bad.head.version = HS_VERSION + 1;
	expect_reject(pub, name, &bad, sizeof(bad), -1, CRS_EVERSION);
	expect_reject(pub, name, &h, 3, -1, CRS_EPROTO);
	expect_reject(pub, name, &h, sizeof(h) - 1, -1, CRS_EPROTO);
	/* An inspector is welcomed with the read-only data memfd only (no
	 * control segment) and takes no subscriber slot. */
	bad = h;
	bad.role = HS_ROLE_INSPECTOR;
	int ifd = raw_connect(name);
	raw_send(ifd, &bad, sizeof(bad), -1);
	union hs_msg iout;
	int infds;
	assert_int_equal(raw_answer(pub, ifd, &iout, &infds), HS_WELCOME);
	assert_int_equal(infds, 1);
	close(ifd);
	assert_int_equal(crs_pub_subscribers(pub), 0);
	bad = h;
	bad.role = 77;
	expect_reject(pub, name, &bad, sizeof(bad), -1, CRS_EPROTO);
	bad = h;
	memset(bad.name, 'x', sizeof(bad.name));
	expect_reject(pub, name, &bad, sizeof(bad), -1, CRS_EPROTO);
	/* A WELCOME sent to the publisher is not a HELLO. */
	struct hs_welcome w;
	hs_welcome_init(&w);
	expect_reject(pub, name, &w, sizeof(w), -1, CRS_EPROTO);
	/* A HELLO must not carry file descriptors. */
	expect_reject(pub, name, &h, sizeof(h), 0, CRS_EPROTO);
	/* Oversized: truncated by the socket, refused or hung up on. */
	char huge[4096];
	memset(huge, 0x5a, sizeof(huge));
	memcpy(huge, &h, sizeof(h));
	expect_reject(pub, name, huge, sizeof(huge), -1, 0);

	/* Connect and hang up without a word. */
	int fd = raw_connect(name);
	close(fd);
	for (int i = 0; i < 20; i++) {
		crs_pub_serve(pub);
		tu_sleep_ms(1);
	}
	assert_int_equal(crs_pub_subscribers(pub), 0);

	/* A well-formed raw HELLO is welcomed with the two memfds and
	 * counts as a subscriber until it hangs up. */
	fd = raw_connect(name);
	raw_send(fd, &h, sizeof(h), -1);
	union hs_msg out;
	int nfds;
	assert_int_equal(raw_answer(pub, fd, &out, &nfds), HS_WELCOME);
	assert_int_equal(nfds, 2);
	assert_int_equal(crs_pub_subscribers(pub), 1);
	/* The only slot is taken: the next one is refused. */
	expect_reject(pub, name, &h, sizeof(h), -1, EUSERS);
	assert_int_equal(tu_pub_await_count(pub, 1, 1000), 0);
	close(fd);
	assert_int_equal(tu_pub_await_count(pub, 0, 10000), 0);

	/* Through the library, a refused subscriber gets -EUSERS. */
	fd = raw_connect(name);
	raw_send(fd, &h, sizeof(h), -1);
	assert_int_equal(raw_answer(pub, fd, &out, &nfds), HS_WELCOME);
	struct recv_arg refused = { name, 0, -EUSERS };
	pid_t pid = tu_spawn(child_receive, &refused, NULL, 30);
	assert_int_equal(tu_serve_wait_child(pub, pid, 15000), 0);
	close(fd);
	assert_int_equal(tu_pub_await_count(pub, 0, 10000), 0);

	/* After all that the publisher still serves a real subscriber. */
	struct recv_arg ok = { name, 50, 0 };
	int chan;
	pid = tu_spawn(child_receive, &ok, &chan, 30);
	assert_int_equal(crs_pub_wait_subscribers(pub, 1, 10000), 0);
	assert_int_equal(tu_expect(chan, 1, NULL, 10000), 0);
	for (int i = 0; i < 50; i++)
		assert_int_equal(tu_pub_send(pub, (uint64_t)i, (size_t)i * 7,
					     10000),
				 0);
	assert_int_equal(crs_pub_complete(pub), 0);
	assert_int_equal(crs_pub_wait_consumed(pub, 10000), 0);
	assert_int_equal(tu_wait_child(pid, 10000), 0);
	close(chan);
	crs_pub_close(pub);
}

int main(void)
{
	tu_init();
	const struct CMUnitTest tests[] = {
		TU_TEST(test_decode_valid),
		TU_TEST(test_decode_reject_reason_truncated),
		TU_TEST(test_decode_bad_magic_version),
		TU_TEST(test_decode_bad_length),
		TU_TEST(test_decode_bad_type),
		TU_TEST(test_decode_unterminated),
		TU_TEST(test_decode_bad_role_and_code),
		TU_TEST(test_decode_garbage),
		TU_TEST(test_names),
		TU_TEST(test_pub_options),
		TU_TEST(test_strerror),
		TU_TEST(test_runtime_dir),
		TU_TEST(test_raw_handshakes),
	};
	return cmocka_run_group_tests_name("handshake", tests, NULL, NULL);
}
