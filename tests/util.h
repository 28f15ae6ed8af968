/*
 * util.h - helpers shared by every crs test program: a private runtime
 * directory per test program, unique stream names, child processes that
 * cannot outlive or hang their test, a small parent/child channel, checks
 * for child code (which must never fail through cmocka: a longjmp there
 * would resume the parent's test runner inside the child), and the
 * payload pattern and checksum that multi-process tests verify.
 *
 * Usage: call tu_init() first in main(); register tests with TU_TEST()
 * so that children left behind by a failed test are killed.
 */
#ifndef CRS_TESTS_UTIL_H
#define CRS_TESTS_UTIL_H

#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <sys/types.h>
#include <unistd.h>

#include <cmocka.h>

#include "crs/crs.h"

/* ---- setup ------------------------------------------------------------ */

/* Create a fresh CRS_DIR (mkdtemp under /tmp) and export it, remember the
 * signal handlers in force before cmocka installs its own, and remove
 * the directory at exit. Aborts the program on failure. */
void tu_init(void);
const char *tu_dir(void);

/* A stream name unique to this process and call: "<prefix>-<pid>-<n>". */
void tu_name(char *buf, size_t size, const char *prefix);

/* cmocka teardown: kill and reap every child still alive. */
int tu_teardown(void **state);
#define TU_TEST(f) cmocka_unit_test_teardown(f, tu_teardown)

/* Deadline helpers (CLOCK_MONOTONIC, ms). */
int64_t tu_now_ms(void);
void tu_sleep_ms(int ms);

/* ---- child processes -------------------------------------------------- */

/* Body of a child: arg from tu_spawn, chan its end of the channel (-1 if
 * none was asked for). The return value is the child's exit status. */
typedef int (*tu_child_fn)(void *arg, int chan);

/* Fork a child running fn. The child dies by SIGALRM after timeout_s
 * seconds, and with its parent (PDEATHSIG). If chan is not NULL a
 * SEQPACKET socketpair is made and *chan gets the parent's end. */
pid_t tu_spawn(tu_child_fn fn, void *arg, int *chan, int timeout_s);

/* Reap pid, waiting at most timeout_ms (then SIGKILL). Returns the exit
 * status (0..255), 128 + signal if it was killed by a signal, or -1 on
 * timeout. Prints a diagnostic for anything but 0. */
int tu_wait_child(pid_t pid, int timeout_ms);

/* Like tu_wait_child, but keeps serving pub (crs_pub_serve) meanwhile, for
 * children that open or leave subscriptions while the parent waits. */
int tu_serve_wait_child(crs_pub *pub, pid_t pid, int timeout_ms);

/* SIGKILL pid and reap it. */
void tu_kill(pid_t pid);

/* Same as tu_spawn with engine selection for the child's waits: if
 * no_uring, the child sets CRS_NO_URING=1 (poll/futex fallback);
 * otherwise it inherits the parent's environment. */
pid_t tu_spawn_engine(tu_child_fn fn, void *arg, int *chan, int timeout_s,
		      int no_uring);

/* ---- channel ---------------------------------------------------------- */

/* One message: a tag and a value. Returns 0 or -errno. */
int tu_send(int fd, uint64_t tag, uint64_t val);
/* 0 (message in *tag, *val), -ETIMEDOUT, -EPIPE (peer gone) or -errno. */
int tu_recv(int fd, uint64_t *tag, uint64_t *val, int timeout_ms);
/* Receive a message that must carry tag; 0 or a negative error (also
 * -EBADMSG for another tag, which it prints). val may be NULL. */
int tu_expect(int fd, uint64_t tag, uint64_t *val, int timeout_ms);
/* Like tu_expect, but serves pub (crs_pub_serve; pub may be NULL) every
 * 5 ms meanwhile: for a child whose handshake or request the publisher
 * must answer before it can say anything. */
int tu_serve_expect(crs_pub *pub, int fd, uint64_t tag, uint64_t *val,
		    int timeout_ms);

/* ---- checks in children ----------------------------------------------- */

#define TU_CHILD_FAIL 3

#define CHECK(cond)                                                         \
	do {                                                                \
		if (!(cond)) {                                              \
			fprintf(stderr, "[pid %d] %s:%d: check failed: %s\n", \
				(int)getpid(), __FILE__, __LINE__, #cond);  \
			_exit(TU_CHILD_FAIL);                               \
		}                                                           \
	} while (0)

#define CHECK_EQ(a, b)                                                      \
	do {                                                                \
		unsigned long long va_ = (unsigned long long)(a);           \
		unsigned long long vb_ = (unsigned long long)(b);           \
		if (va_ != vb_) {                                           \
			fprintf(stderr,                                     \
				"[pid %d] %s:%d: check failed: %s == %s "   \
				"(%lld (0x%llx) != %lld (0x%llx))\n",       \
				(int)getpid(), __FILE__, __LINE__, #a, #b,  \
				(long long)va_, va_, (long long)vb_, vb_);  \
			_exit(TU_CHILD_FAIL);                               \
		}                                                           \
	} while (0)

/* ---- payloads --------------------------------------------------------- */

uint64_t tu_mix(uint64_t x); /* splitmix64 finaliser */
/* Fill buf with the pattern of message seq (depends on seq and len). */
void tu_fill(void *buf, size_t len, uint64_t seq);
/* -1 if buf holds the pattern of seq, else the first wrong offset. */
long tu_verify(const void *buf, size_t len, uint64_t seq);
/* A 32-bit checksum (FNV-1a over 64-bit words, folded). */
uint32_t tu_crc(const void *buf, size_t len);

/* ---- crs conveniences ------------------------------------------------- */

/* crs_sub_open waiting up to 10 s for the stream, with this prefetch. */
int tu_sub_open(const char *name, uint32_t prefetch, crs_sub **out);

/* Poll, waiting up to timeout_ms in total: returns 1 (message),
 * -CRS_EEND, or 0 when the time ran out with nothing. */
int tu_sub_next(crs_sub *sub, struct crs_msg *msg, int timeout_ms);

/* Publish one message of len bytes with the pattern of seq, waiting up
 * to timeout_ms for demand and room. Returns 0 or the failing error. */
int tu_pub_send(crs_pub *pub, uint64_t seq, size_t len, int timeout_ms);

/* crs_pub_create with this ring size (max_message ring/4), or fail the
 * cmocka test. Parent side only. */
crs_pub *tu_make_pub(const char *name, uint64_t ring);

/* Publish n messages with the pattern of *seq, *seq + 1 ... (lengths
 * tu_len(seq, max_len)), waiting for demand; fail the test on error.
 * Advances *seq. Parent side only. */
void tu_publish(crs_pub *pub, size_t max_len, uint64_t *seq, uint64_t n);

/* Serve the publisher (crs_pub_serve) until it has exactly n
 * subscribers. 0 or -ETIMEDOUT. */
int tu_pub_await_count(crs_pub *pub, int n, int timeout_ms);

/* The lowest fd of this process whose /proc/self/fd link contains s
 * (e.g. "memfd:crs-ctl"), or -1. */
int tu_find_fd(const char *s);

/* ---- scripted subscriber ("agent") ------------------------------------ */

/* A child that subscribes and then obeys commands from the parent over
 * its channel, replying TU_ACK with a value to each. Every message it
 * receives is checked: sequence numbers consecutive from first_seq (or
 * from the first one seen if first_seq is TU_ANY), length tu_len(seq,
 * max_len) and the pattern of tu_fill(). Any violation ends the child
 * with a diagnostic and status TU_CHILD_FAIL. */
#define TU_ANY UINT64_MAX
struct tu_agent_arg {
	const char *name;
	uint32_t prefetch;
	uint64_t first_seq;
	size_t max_len;
};

enum {
	TU_READY = 100, /* sent once subscribed: val = 0 or the -errno */
	TU_ACK,		/* reply to a command */
	TU_CMD_REQUEST, /* crs_sub_request(val); ACK: requested total */
	TU_CMD_RECV,	/* receive exactly val messages; ACK: received total */
	TU_CMD_NOMORE,	/* nothing may arrive within val ms; ACK: 0 */
	TU_CMD_END,	/* wait for the end, check code == val; ACK: received */
	TU_CMD_CANCEL,	/* crs_sub_cancel twice; ACK: 0 */
	TU_CMD_REQUESTED, /* ACK: crs_sub_requested() */
	TU_CMD_EXIT,	/* close and exit 0; ACK first */
};

int tu_agent(void *arg, int chan);

/* Send cmd(val) to an agent and wait for its ACK (value in *reply, may
 * be NULL). 0 or a negative error. */
int tu_cmd(int chan, uint64_t cmd, uint64_t val, uint64_t *reply,
	   int timeout_ms);

/* A group of agents on one stream. Agent i uses the fallback wait
 * engine (CRS_NO_URING=1) when i is odd, so both engines are covered. */
#define TU_MAX_AGENTS 64
struct tu_agents {
	int n;
	pid_t pid[TU_MAX_AGENTS];
	int chan[TU_MAX_AGENTS];
};
/* Fork n agents with arg (copied into each child). 0 or -1. */
int tu_agents_start(struct tu_agents *g, int n, const struct tu_agent_arg *arg);
/* Serve pub until all n have subscribed and reported READY. 0 or -1. */
int tu_agents_ready(struct tu_agents *g, crs_pub *pub);
/* Send cmd(val) to every agent, then collect every ACK; replies[i] (if
 * replies is not NULL) gets agent i's value. 0 or -1. */
int tu_agents_cmd(struct tu_agents *g, uint64_t cmd, uint64_t val,
		  uint64_t *replies);
/* Send cmd(val) to every agent without waiting (collect with
 * tu_agents_collect). */
int tu_agents_send(struct tu_agents *g, uint64_t cmd, uint64_t val);
int tu_agents_collect(struct tu_agents *g, uint64_t *replies, int timeout_ms);
/* Ask every agent to exit and reap them, serving pub meanwhile (pub may
 * be NULL). 0 if all exited with status 0. */
int tu_agents_finish(struct tu_agents *g, crs_pub *pub);

/* The varied message length the agents expect for seq. */
size_t tu_len(uint64_t seq, size_t max_len);

#endif
