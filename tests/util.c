/*
 * util.c - the shared test helpers declared in util.h.
 */
#include "util.h"

#include <dirent.h>
#include <errno.h>
#include <poll.h>
#include <signal.h>
#include <string.h>
#include <sys/prctl.h>
#include <sys/socket.h>
#include <sys/wait.h>
#include <time.h>

static char dir_path[64];
static pid_t main_pid;
static int name_counter;

/* Handlers in force before cmocka ran (ASan's, or the defaults). */
static const int fault_signals[] = { SIGSEGV, SIGBUS, SIGILL, SIGFPE,
				     SIGSYS, SIGABRT };
#define NFAULT (int)(sizeof(fault_signals) / sizeof(fault_signals[0]))
static struct sigaction saved_fault[NFAULT];

#define MAX_CHILDREN 256
static pid_t children[MAX_CHILDREN];

static void remove_dir(void)
{
	if (getpid() != main_pid || !dir_path[0])
		return;
	DIR *d = opendir(dir_path);
	if (d) {
		struct dirent *e;
		while ((e = readdir(d))) {
			if (!strcmp(e->d_name, ".") || !strcmp(e->d_name, ".."))
				continue;
			char p[sizeof(dir_path) + 256];
			snprintf(p, sizeof(p), "%s/%s", dir_path, e->d_name);
			unlink(p);
		}
		closedir(d);
	}
	rmdir(dir_path);
}

static void kill_children(void)
{
	if (getpid() != main_pid)
		return;
	for (int i = 0; i < MAX_CHILDREN; i++) {
		if (children[i] > 0) {
			kill(children[i], SIGKILL);
			waitpid(children[i], NULL, 0);
			children[i] = 0;
		}
	}
}

static void on_terminate(int sig)
{
	kill_children();
	remove_dir();
	signal(sig, SIG_DFL);
	raise(sig);
}

void tu_init(void)
{
	main_pid = getpid();
	snprintf(dir_path, sizeof(dir_path), "/tmp/crs-test-XXXXXX");
	if (!mkdtemp(dir_path)) {
		perror("mkdtemp");
		exit(1);
	}
	if (setenv("CRS_DIR", dir_path, 1) != 0) {
		perror("setenv");
		exit(1);
	}
	for (int i = 0; i < NFAULT; i++)
		sigaction(fault_signals[i], NULL, &saved_fault[i]);
	/* A dead peer must show up as an error, never kill the test. */
	signal(SIGPIPE, SIG_IGN);
	atexit(remove_dir);
	atexit(kill_children);
	/* Killed by a timeout (meson sends SIGTERM): clean up as at exit. */
	struct sigaction sa = { .sa_handler = on_terminate };
	sigemptyset(&sa.sa_mask);
	sigaction(SIGTERM, &sa, NULL);
	sigaction(SIGINT, &sa, NULL);
	sigaction(SIGHUP, &sa, NULL);
}

const char *tu_dir(void)
{
	return dir_path;
}

void tu_name(char *buf, size_t size, const char *prefix)
{
	snprintf(buf, size, "%s-%d-%d", prefix, (int)getpid(), ++name_counter);
}

int tu_teardown(void **state)
{
	(void)state;
	kill_children();
	return 0;
}

int64_t tu_now_ms(void)
{
	struct timespec ts;
	clock_gettime(CLOCK_MONOTONIC, &ts);
	return (int64_t)ts.tv_sec * 1000 + ts.tv_nsec / 1000000;
}

void tu_sleep_ms(int ms)
{
	struct timespec ts = { ms / 1000, (long)(ms % 1000) * 1000000 };
	while (nanosleep(&ts, &ts) < 0 && errno == EINTR)
		;
}

/* ---- children ---------------------------------------------------------- */

static void track(pid_t pid)
{
	for (int i = 0; i < MAX_CHILDREN; i++) {
		if (children[i] <= 0) {
			children[i] = pid;
			return;
		}
	}
}

static void untrack(pid_t pid)
{
	for (int i = 0; i < MAX_CHILDREN; i++)
		if (children[i] == pid)
			children[i] = 0;
}

pid_t tu_spawn_engine(tu_child_fn fn, void *arg, int *chan, int timeout_s,
		      int no_uring)
{
	int sv[2] = { -1, -1 };
	if (chan && socketpair(AF_UNIX, SOCK_SEQPACKET, 0, sv) < 0) {
		perror("socketpair");
		return -1;
	}
	fflush(NULL);
	pid_t parent = getpid();
	pid_t pid = fork();
	if (pid < 0) {
		perror("fork");
		return -1;
	}
	if (pid == 0) {
		/* Never return into cmocka from here: fault handlers back to
		 * what they were before it, exit with _exit only. */
		for (int i = 0; i < NFAULT; i++)
			sigaction(fault_signals[i], &saved_fault[i], NULL);
		memset(children, 0, sizeof(children));
		prctl(PR_SET_PDEATHSIG, SIGKILL);
		if (getppid() != parent)
			_exit(TU_CHILD_FAIL);
		alarm((unsigned)timeout_s);
		/* Otherwise inherit: a run with CRS_NO_URING=1 (the nouring
		 * suite) keeps every process on the fallback engine. */
		if (no_uring)
			setenv("CRS_NO_URING", "1", 1);
		if (chan)
			close(sv[0]);
		int rc = fn(arg, chan ? sv[1] : -1);
		fflush(NULL);
		_exit(rc);
	}
	track(pid);
	if (chan) {
		close(sv[1]);
		*chan = sv[0];
	}
	return pid;
}

pid_t tu_spawn(tu_child_fn fn, void *arg, int *chan, int timeout_s)
{
	return tu_spawn_engine(fn, arg, chan, timeout_s, 0);
}

static int decode_status(pid_t pid, int status)
{
	untrack(pid);
	if (WIFEXITED(status)) {
		int rc = WEXITSTATUS(status);
		if (rc)
			fprintf(stderr, "child %d exited with %d\n", (int)pid,
				rc);
		return rc;
	}
	if (WIFSIGNALED(status)) {
		fprintf(stderr, "child %d killed by signal %d (%s)\n", (int)pid,
			WTERMSIG(status), strsignal(WTERMSIG(status)));
		return 128 + WTERMSIG(status);
	}
	return -1;
}

static int wait_loop(crs_pub *pub, pid_t pid, int timeout_ms)
{
	int64_t deadline = tu_now_ms() + timeout_ms;
	int status;
	for (;;) {
		pid_t r = waitpid(pid, &status, WNOHANG);
		if (r == pid)
			return decode_status(pid, status);
		if (r < 0 && errno != EINTR) {
			perror("waitpid");
			untrack(pid);
			return -1;
		}
		if (tu_now_ms() >= deadline) {
			fprintf(stderr, "child %d did not finish in %d ms: "
					"killed\n",
				(int)pid, timeout_ms);
			tu_kill(pid);
			return -1;
		}
		if (pub)
			crs_pub_serve(pub);
		tu_sleep_ms(1);
	}
}

int tu_wait_child(pid_t pid, int timeout_ms)
{
	return wait_loop(NULL, pid, timeout_ms);
}

int tu_serve_wait_child(crs_pub *pub, pid_t pid, int timeout_ms)
{
	return wait_loop(pub, pid, timeout_ms);
}

void tu_kill(pid_t pid)
{
	if (pid <= 0)
		return;
	kill(pid, SIGKILL);
	while (waitpid(pid, NULL, 0) < 0 && errno == EINTR)
		;
	untrack(pid);
}

/* ---- channel ----------------------------------------------------------- */

struct tu_wire {
	uint64_t tag;
	uint64_t val;
};

int tu_send(int fd, uint64_t tag, uint64_t val)
{
	struct tu_wire w = { tag, val };
	ssize_t n = send(fd, &w, sizeof(w), MSG_NOSIGNAL);
	if (n < 0)
		return -errno;
	return n == sizeof(w) ? 0 : -EMSGSIZE;
}

int tu_recv(int fd, uint64_t *tag, uint64_t *val, int timeout_ms)
{
	struct pollfd p = { .fd = fd, .events = POLLIN };
	int64_t deadline = tu_now_ms() + timeout_ms;
	for (;;) {
		int64_t left = deadline - tu_now_ms();
		if (left < 0)
			left = 0;
		int r = poll(&p, 1, (int)left);
		if (r < 0 && errno == EINTR)
			continue;
		if (r < 0)
			return -errno;
		if (r == 0)
			return -ETIMEDOUT;
		break;
	}
	struct tu_wire w;
	ssize_t n = recv(fd, &w, sizeof(w), 0);
	if (n < 0)
		return -errno;
	if (n == 0)
		return -EPIPE;
	if (n != sizeof(w))
		return -EBADMSG;
	*tag = w.tag;
	if (val)
		*val = w.val;
	return 0;
}

/* What tu_expect and tu_serve_expect make of tu_recv's result r. */
static int expected(int r, uint64_t tag, uint64_t t, uint64_t v,
		    uint64_t *val)
{
	if (r) {
		fprintf(stderr, "[pid %d] waiting for message %llu: %s\n",
			(int)getpid(), (unsigned long long)tag, strerror(-r));
		return r;
	}
	if (t != tag) {
		fprintf(stderr, "[pid %d] expected message %llu, got %llu\n",
			(int)getpid(), (unsigned long long)tag,
			(unsigned long long)t);
		return -EBADMSG;
	}
	if (val)
		*val = v;
	return 0;
}

int tu_expect(int fd, uint64_t tag, uint64_t *val, int timeout_ms)
{
	uint64_t t = 0, v = 0;
	int r = tu_recv(fd, &t, &v, timeout_ms);
	return expected(r, tag, t, v, val);
}

int tu_serve_expect(crs_pub *pub, int fd, uint64_t tag, uint64_t *val,
		    int timeout_ms)
{
	int64_t deadline = tu_now_ms() + timeout_ms;
	uint64_t t = 0, v = 0;
	int r;
	for (;;) {
		if (pub)
			crs_pub_serve(pub);
		r = tu_recv(fd, &t, &v, 5);
		if (r != -ETIMEDOUT || tu_now_ms() >= deadline)
			break;
	}
	return expected(r, tag, t, v, val);
}

/* ---- payloads ---------------------------------------------------------- */

uint64_t tu_mix(uint64_t x)
{
	x += 0x9e3779b97f4a7c15ULL;
	x = (x ^ (x >> 30)) * 0xbf58476d1ce4e5b9ULL;
	x = (x ^ (x >> 27)) * 0x94d049bb133111ebULL;
	return x ^ (x >> 31);
}

static uint64_t pattern_word(uint64_t seed, size_t i)
{
	return tu_mix(seed + (uint64_t)i * 0x9e3779b97f4a7c15ULL);
}

static uint64_t pattern_seed(size_t len, uint64_t seq)
{
	return tu_mix(seq * 0x100000001b3ULL ^ (uint64_t)len << 40);
}

void tu_fill(void *buf, size_t len, uint64_t seq)
{
	uint8_t *p = buf;
	uint64_t seed = pattern_seed(len, seq);
	size_t i = 0;
	for (; i + 8 <= len; i += 8) {
		uint64_t w = pattern_word(seed, i / 8);
		memcpy(p + i, &w, 8);
	}
	if (i < len) {
		uint64_t w = pattern_word(seed, i / 8);
		memcpy(p + i, &w, len - i);
	}
}

long tu_verify(const void *buf, size_t len, uint64_t seq)
{
	const uint8_t *p = buf;
	uint64_t seed = pattern_seed(len, seq);
	for (size_t i = 0; i < len; i += 8) {
		uint64_t w = pattern_word(seed, i / 8);
		size_t n = len - i < 8 ? len - i : 8;
		if (memcmp(p + i, &w, n) != 0) {
			for (size_t k = 0; k < n; k++)
				if (p[i + k] != ((uint8_t *)&w)[k])
					return (long)(i + k);
		}
	}
	return -1;
}

uint32_t tu_crc(const void *buf, size_t len)
{
	/* FNV-1a over 64-bit words (then the tail bytes), folded to 32. */
	const uint8_t *p = buf;
	uint64_t h = 0xcbf29ce484222325ULL ^ len;
	size_t i = 0;
	for (; i + 8 <= len; i += 8) {
		uint64_t w;
		memcpy(&w, p + i, 8);
		h = (h ^ w) * 0x100000001b3ULL;
		h ^= h >> 29;
	}
	for (; i < len; i++)
		h = (h ^ p[i]) * 0x100000001b3ULL;
	return (uint32_t)(h ^ (h >> 32));
}

int tu_find_fd(const char *s)
{
	DIR *d = opendir("/proc/self/fd");
	if (!d)
		return -1;
	int best = -1;
	struct dirent *e;
	while ((e = readdir(d))) {
		if (e->d_name[0] == '.')
			continue;
		char path[300], link[256];
		snprintf(path, sizeof(path), "/proc/self/fd/%s", e->d_name);
		ssize_t n = readlink(path, link, sizeof(link) - 1);
		if (n <= 0)
			continue;
		link[n] = 0;
		int fd = atoi(e->d_name);
		if (strstr(link, s) && fd != dirfd(d) && (best < 0 || fd < best))
			best = fd;
	}
	closedir(d);
	return best;
}

/* ---- crs conveniences -------------------------------------------------- */

int tu_sub_open(const char *name, uint32_t prefetch, crs_sub **out)
{
	struct crs_sub_opts o;
	crs_sub_opts_init(&o);
	o.prefetch = prefetch;
	o.wait_ms = 10000;
	o.handshake_ms = 10000;
	return crs_sub_open(name, &o, out);
}

int tu_sub_next(crs_sub *sub, struct crs_msg *msg, int timeout_ms)
{
	int64_t deadline = tu_now_ms() + timeout_ms;
	for (;;) {
		int r = crs_sub_poll(sub, msg);
		if (r != 0)
			return r;
		int64_t left = deadline - tu_now_ms();
		if (left <= 0)
			return 0;
		r = crs_sub_wait(sub, (int)left);
		if (r == -ETIMEDOUT) {
			r = crs_sub_poll(sub, msg);
			return r;
		}
	}
}

int tu_pub_send(crs_pub *pub, uint64_t seq, size_t len, int timeout_ms)
{
	int64_t deadline = tu_now_ms() + timeout_ms;
	for (;;) {
		void *buf;
		int r = crs_pub_claim(pub, len, &buf);
		if (r == 0) {
			tu_fill(buf, len, seq);
			return crs_pub_commit(pub, len);
		}
		if (r != -CRS_ENODEMAND && r != -CRS_ENOROOM)
			return r;
		int64_t left = deadline - tu_now_ms();
		if (left <= 0)
			return r;
		r = crs_pub_wait(pub, len, (int)left);
		if (r && r != -ETIMEDOUT)
			return r;
	}
}

int tu_pub_await_count(crs_pub *pub, int n, int timeout_ms)
{
	int64_t deadline = tu_now_ms() + timeout_ms;
	for (;;) {
		int r = crs_pub_serve(pub);
		if (r == n)
			return 0;
		if (tu_now_ms() >= deadline)
			return -ETIMEDOUT;
		tu_sleep_ms(1);
	}
}

/* ---- agent -------------------------------------------------------------- */

size_t tu_len(uint64_t seq, size_t max_len)
{
	if (!max_len)
		return 0;
	uint64_t r = tu_mix(seq ^ 0x5eed);
	/* Mostly small, sometimes up to max_len, sometimes empty. */
	if (r % 16 == 0)
		return (size_t)((r >> 8) % (max_len + 1));
	if (r % 16 == 1)
		return 0;
	return (size_t)((r >> 8) % (max_len < 200 ? max_len + 1 : 201));
}

static void agent_check(const struct tu_agent_arg *a, uint64_t *next,
			const struct crs_msg *m)
{
	if (*next == TU_ANY)
		*next = m->seq;
	if (m->seq != *next) {
		fprintf(stderr, "[agent %d] expected seq %llu, got %llu\n",
			(int)getpid(), (unsigned long long)*next,
			(unsigned long long)m->seq);
		_exit(TU_CHILD_FAIL);
	}
	CHECK_EQ(m->len, tu_len(m->seq, a->max_len));
	long bad = tu_verify(m->data, m->len, m->seq);
	if (bad >= 0) {
		fprintf(stderr, "[agent %d] message %llu (%zu bytes) differs "
				"at byte %ld\n",
			(int)getpid(), (unsigned long long)m->seq, m->len, bad);
		_exit(TU_CHILD_FAIL);
	}
	(*next)++;
}

int tu_agent(void *arg, int chan)
{
	const struct tu_agent_arg *a = arg;
	crs_sub *sub;
	int r = tu_sub_open(a->name, a->prefetch, &sub);
	CHECK_EQ(tu_send(chan, TU_READY, (uint64_t)(int64_t)r), 0);
	if (r)
		return 0;
	uint64_t next = a->first_seq;
	struct crs_msg m;
	for (;;) {
		uint64_t cmd, val;
		r = tu_recv(chan, &cmd, &val, 60000);
		if (r) {
			fprintf(stderr, "[agent %d] no command: %s\n",
				(int)getpid(), strerror(-r));
			return TU_CHILD_FAIL;
		}
		uint64_t reply = 0;
		switch (cmd) {
		case TU_CMD_REQUEST:
			r = crs_sub_request(sub, val);
			CHECK_EQ(r, 0);
			reply = crs_sub_requested(sub);
			break;
		case TU_CMD_RECV:
			for (uint64_t i = 0; i < val; i++) {
				r = tu_sub_next(sub, &m, 20000);
				if (r != 1) {
					fprintf(stderr,
						"[agent %d] message %llu of "
						"%llu: %d (%s)\n",
						(int)getpid(),
						(unsigned long long)i,
						(unsigned long long)val, r,
						r ? crs_strerror(r) : "timeout");
					if (crs_sub_end(sub))
						fprintf(stderr, "  end %d %s\n",
							crs_sub_end(sub)->code,
							crs_sub_end(sub)->message);
					_exit(TU_CHILD_FAIL);
				}
				agent_check(a, &next, &m);
				crs_sub_release(sub);
			}
			reply = crs_sub_received(sub);
			break;
		case TU_CMD_NOMORE:
			r = tu_sub_next(sub, &m, (int)val);
			if (r == 1)
				fprintf(stderr, "[agent %d] unexpected message "
						"%llu\n",
					(int)getpid(), (unsigned long long)m.seq);
			else if (r < 0)
				fprintf(stderr, "[agent %d] unexpected end %d "
						"(%s)\n",
					(int)getpid(), crs_sub_end(sub)->code,
					crs_sub_end(sub)->message);
			CHECK_EQ(r, 0);
			break;
		case TU_CMD_END:
			r = tu_sub_next(sub, &m, 20000);
			if (r == 1)
				fprintf(stderr, "[agent %d] message %llu "
						"instead of the end\n",
					(int)getpid(),
					(unsigned long long)m.seq);
			CHECK_EQ(r, -CRS_EEND);
			CHECK(crs_sub_end(sub) != NULL);
			if ((uint64_t)(int64_t)crs_sub_end(sub)->code != val)
				fprintf(stderr, "[agent %d] end: %d (%s)\n",
					(int)getpid(), crs_sub_end(sub)->code,
					crs_sub_end(sub)->message);
			CHECK_EQ(crs_sub_end(sub)->code, val);
			/* The end is sticky. */
			CHECK_EQ(crs_sub_poll(sub, &m), -CRS_EEND);
			reply = crs_sub_received(sub);
			break;
		case TU_CMD_CANCEL:
			crs_sub_cancel(sub);
			crs_sub_cancel(sub);
			break;
		case TU_CMD_REQUESTED:
			reply = crs_sub_requested(sub);
			break;
		case TU_CMD_EXIT:
			crs_sub_close(sub);
			CHECK_EQ(tu_send(chan, TU_ACK, 0), 0);
			return 0;
		default:
			fprintf(stderr, "[agent %d] unknown command %llu\n",
				(int)getpid(), (unsigned long long)cmd);
			return TU_CHILD_FAIL;
		}
		CHECK_EQ(tu_send(chan, TU_ACK, reply), 0);
	}
}

int tu_cmd(int chan, uint64_t cmd, uint64_t val, uint64_t *reply,
	   int timeout_ms)
{
	int r = tu_send(chan, cmd, val);
	if (r)
		return r;
	return tu_expect(chan, TU_ACK, reply, timeout_ms);
}

int tu_agents_start(struct tu_agents *g, int n, const struct tu_agent_arg *arg)
{
	memset(g, 0, sizeof(*g));
	if (n > TU_MAX_AGENTS)
		return -1;
	for (int i = 0; i < n; i++) {
		g->pid[i] = tu_spawn_engine(tu_agent, (void *)arg, &g->chan[i],
					    120, i & 1);
		if (g->pid[i] < 0)
			return -1;
		g->n = i + 1;
	}
	return 0;
}

int tu_agents_ready(struct tu_agents *g, crs_pub *pub)
{
	/* Serve while waiting: an agent's handshake needs the publisher. */
	int64_t deadline = tu_now_ms() + 20000;
	for (int i = 0; i < g->n; i++) {
		uint64_t tag, v;
		int r;
		for (;;) {
			if (pub)
				crs_pub_serve(pub);
			r = tu_recv(g->chan[i], &tag, &v, pub ? 1 : 20000);
			if (r != -ETIMEDOUT || tu_now_ms() > deadline)
				break;
		}
		if (r || tag != TU_READY) {
			fprintf(stderr, "agent %d did not report: %s\n", i,
				r ? strerror(-r) : "wrong message");
			return -1;
		}
		if (v != 0) {
			fprintf(stderr, "agent %d could not subscribe: %s\n", i,
				crs_strerror((int)(int64_t)v));
			return -1;
		}
	}
	if (pub && crs_pub_wait_subscribers(pub, g->n, 20000) != 0) {
		fprintf(stderr, "only %d of %d subscribers arrived\n",
			crs_pub_subscribers(pub), g->n);
		return -1;
	}
	return 0;
}

int tu_agents_send(struct tu_agents *g, uint64_t cmd, uint64_t val)
{
	for (int i = 0; i < g->n; i++)
		if (tu_send(g->chan[i], cmd, val) != 0)
			return -1;
	return 0;
}

int tu_agents_collect(struct tu_agents *g, uint64_t *replies, int timeout_ms)
{
	int bad = 0;
	for (int i = 0; i < g->n; i++) {
		uint64_t v = 0;
		if (tu_expect(g->chan[i], TU_ACK, &v, timeout_ms) != 0) {
			fprintf(stderr, "agent %d failed\n", i);
			bad = -1;
		}
		if (replies)
			replies[i] = v;
	}
	return bad;
}

int tu_agents_cmd(struct tu_agents *g, uint64_t cmd, uint64_t val,
		  uint64_t *replies)
{
	if (tu_agents_send(g, cmd, val))
		return -1;
	return tu_agents_collect(g, replies, 30000);
}

int tu_agents_finish(struct tu_agents *g, crs_pub *pub)
{
	int bad = 0;
	for (int i = 0; i < g->n; i++)
		tu_send(g->chan[i], TU_CMD_EXIT, 0);
	for (int i = 0; i < g->n; i++) {
		if (tu_expect(g->chan[i], TU_ACK, NULL, 20000) != 0)
			bad = -1;
		if (tu_serve_wait_child(pub, g->pid[i], 20000) != 0)
			bad = -1;
		close(g->chan[i]);
	}
	g->n = 0;
	return bad;
}

crs_pub *tu_make_pub(const char *name, uint64_t ring)
{
	struct crs_pub_opts o;
	crs_pub_opts_init(&o);
	o.ring_bytes = ring;
	o.max_message = 0;
	crs_pub *pub = NULL;
	assert_int_equal(crs_pub_create(name, &o, &pub), 0);
	return pub;
}

void tu_publish(crs_pub *pub, size_t max_len, uint64_t *seq, uint64_t n)
{
	for (uint64_t i = 0; i < n; i++, (*seq)++) {
		int r = tu_pub_send(pub, *seq, tu_len(*seq, max_len), 20000);
		if (r)
			fail_msg("message %llu: %s", (unsigned long long)*seq,
				 crs_strerror(r));
	}
}
