/*
 * test_nowaitv.c - crs where io_uring and futex_waitv are both refused
 * (kernels before 5.16, strict seccomp profiles): a seccomp filter makes
 * io_uring_setup and futex_waitv fail with ENOSYS in this process and
 * every child, and crs must fall back to plain FUTEX_WAIT (engine
 * "futex"), deliver everything and sleep when idle.
 */
#include <errno.h>
#include <linux/audit.h>
#include <linux/filter.h>
#include <linux/seccomp.h>
#include <stddef.h>
#include <string.h>
#include <sys/prctl.h>
#include <sys/resource.h>
#include <sys/syscall.h>

#include "util.h"

#define MSGS 20000
#define MAX_LEN 200

#ifndef __NR_futex_waitv
#define __NR_futex_waitv 449
#endif

/* 0, or -1 where this architecture is not covered (the test skips). */
static int refuse_uring_and_waitv(void)
{
#if defined(__x86_64__)
	const unsigned arch = AUDIT_ARCH_X86_64;
#elif defined(__aarch64__)
	const unsigned arch = AUDIT_ARCH_AARCH64;
#else
	return -1;
#endif
	struct sock_filter f[] = {
		BPF_STMT(BPF_LD | BPF_W | BPF_ABS,
			 offsetof(struct seccomp_data, arch)),
		BPF_JUMP(BPF_JMP | BPF_JEQ | BPF_K, arch, 1, 0),
		BPF_STMT(BPF_RET | BPF_K, SECCOMP_RET_KILL_PROCESS),
		BPF_STMT(BPF_LD | BPF_W | BPF_ABS,
			 offsetof(struct seccomp_data, nr)),
		BPF_JUMP(BPF_JMP | BPF_JEQ | BPF_K, __NR_io_uring_setup, 2, 0),
		BPF_JUMP(BPF_JMP | BPF_JEQ | BPF_K, __NR_futex_waitv, 1, 0),
		BPF_STMT(BPF_RET | BPF_K, SECCOMP_RET_ALLOW),
		BPF_STMT(BPF_RET | BPF_K, SECCOMP_RET_ERRNO | ENOSYS),
	};
	struct sock_fprog prog = { .len = sizeof(f) / sizeof(f[0]),
				   .filter = f };
	if (prctl(PR_SET_NO_NEW_PRIVS, 1, 0, 0, 0) ||
	    prctl(PR_SET_SECCOMP, SECCOMP_MODE_FILTER, &prog))
		return -1;
	return 0;
}

static int64_t cpu_ms(void)
{
	struct rusage u;
	getrusage(RUSAGE_SELF, &u);
	return (int64_t)(u.ru_utime.tv_sec + u.ru_stime.tv_sec) * 1000 +
	       (u.ru_utime.tv_usec + u.ru_stime.tv_usec) / 1000;
}

static void test_engine_is_futex(void **state)
{
	(void)state;
	crs_loop *loop;
	assert_int_equal(crs_loop_create(&loop), 0);
	assert_string_equal(crs_loop_engine(loop), "futex");
	crs_loop_close(loop);
}

/* Subscriber child: read everything, sleeping in crs_sub_wait. */
static int reader(void *arg, int chan)
{
	(void)chan;
	struct crs_sub_opts o;
	crs_sub_opts_init(&o);
	o.wait_ms = 10000;
	o.prefetch = 64;
	o.spin_us = -1; /* sleep at once: every wait goes to the kernel */
	crs_sub *sub;
	CHECK_EQ(crs_sub_open(arg, &o, &sub), 0);
	uint64_t seq = 0;
	for (;;) {
		struct crs_msg m;
		int r = crs_sub_poll(sub, &m);
		if (r == 0) {
			CHECK_EQ(crs_sub_wait(sub, 20000), 0);
			continue;
		}
		if (r < 0)
			break;
		CHECK_EQ(m.seq, seq);
		CHECK_EQ(m.len, tu_len(seq, MAX_LEN));
		CHECK(tu_verify(m.data, m.len, seq) < 0);
		crs_sub_release(sub);
		seq++;
	}
	CHECK_EQ(crs_sub_end(sub)->code, 0);
	CHECK_EQ(seq, MSGS);
	crs_sub_close(sub);
	return 0;
}

static void test_delivers_everything(void **state)
{
	(void)state;
	char name[64];
	tu_name(name, sizeof(name), "nowaitv");
	struct crs_pub_opts o;
	crs_pub_opts_init(&o);
	o.ring_bytes = 1 << 14; /* small: the publisher waits for room too */
	o.spin_us = -1;
	crs_pub *pub;
	assert_int_equal(crs_pub_create(name, &o, &pub), 0);
	pid_t pid = tu_spawn(reader, name, NULL, 120);
	assert_int_equal(crs_pub_wait_subscribers(pub, 1, 10000), 0);
	for (uint64_t seq = 0; seq < MSGS; seq++)
		assert_int_equal(
			tu_pub_send(pub, seq, tu_len(seq, MAX_LEN), 20000), 0);
	assert_int_equal(crs_pub_complete(pub), 0);
	assert_int_equal(crs_pub_wait_consumed(pub, 20000), 0);
	assert_int_equal(tu_serve_wait_child(pub, pid, 20000), 0);
	crs_pub_close(pub);
}

/* Publisher child: a stream that stays idle until told to go. */
static int idle_stream(void *arg, int chan)
{
	crs_pub *pub;
	CHECK_EQ(crs_pub_create(arg, NULL, &pub), 0);
	CHECK_EQ(tu_send(chan, 1, 0), 0);
	CHECK_EQ(crs_pub_wait_subscribers(pub, 1, 10000), 0);
	uint64_t tag;
	tu_recv(chan, &tag, NULL, 30000);
	crs_pub_close(pub);
	return 0;
}

static void test_sleeps_when_idle(void **state)
{
	(void)state;
	char name[64];
	int chan;
	tu_name(name, sizeof(name), "idle");
	pid_t pid = tu_spawn(idle_stream, name, &chan, 60);
	assert_int_equal(tu_expect(chan, 1, NULL, 10000), 0);
	struct crs_sub_opts o;
	crs_sub_opts_init(&o);
	o.wait_ms = 10000;
	crs_sub *sub;
	assert_int_equal(crs_sub_open(name, &o, &sub), 0);
	int64_t cpu = cpu_ms();
	assert_int_equal(crs_sub_wait(sub, 1000), -ETIMEDOUT);
	crs_loop *loop;
	assert_int_equal(crs_loop_create(&loop), 0);
	struct crs_sub_callbacks cb = { 0 };
	assert_int_equal(crs_loop_add_sub(loop, sub, &cb, NULL), 0);
	assert_int_equal(crs_loop_run(loop, 1000), 0);
	cpu = cpu_ms() - cpu;
	/* Two idle seconds; spinning would cost about that much CPU. */
	print_message("idle: %lld ms of CPU in 2 s\n", (long long)cpu);
	assert_true(cpu < 400);
	crs_loop_close(loop);
	crs_sub_close(sub);
	assert_int_equal(tu_send(chan, 2, 0), 0);
	close(chan);
	assert_int_equal(tu_wait_child(pid, 10000), 0);
}

int main(void)
{
	tu_init();
	if (refuse_uring_and_waitv()) {
		fprintf(stderr, "seccomp filter not available: skipped\n");
		return 77;
	}
	/* The filter really refuses both calls. */
	if (syscall(__NR_io_uring_setup, 1, NULL) != -1 || errno != ENOSYS ||
	    syscall(__NR_futex_waitv, NULL, 0, 0, NULL, 0) != -1 ||
	    errno != ENOSYS) {
		fprintf(stderr, "seccomp filter not effective\n");
		return 1;
	}
	const struct CMUnitTest tests[] = {
		TU_TEST(test_engine_is_futex),
		TU_TEST(test_delivers_everything),
		TU_TEST(test_sleeps_when_idle),
	};
	return cmocka_run_group_tests(tests, NULL, NULL);
}
