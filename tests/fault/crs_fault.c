/*
 * crs_fault.c - the crash matrix. Round after round, a publisher process
 * and a few subscriber processes exchange checked messages while this
 * program SIGKILLs them or SIGSTOPs and later SIGCONTs them at random
 * moments (mid-claim, mid-commit, mid-handshake, asleep, replaying: the
 * moments are random, so over many rounds all of them are hit).
 *
 * After each round:
 *   - no surviving process may still run past a deadline (a hang);
 *   - no subscriber may have seen a torn, duplicated, reordered or
 *     skipped message (a violation): each reports through its exit code;
 *   - a subscriber that completed has every message from where it
 *     joined to the end, exactly once;
 *   - the stream name can be taken again at once by a new publisher.
 * Messages come in stretches of any length up to MAX_LEN and of small
 * ones, which the publisher writes into ring it zeroed ahead.
 *
 * Every third round is a shared stream (crs_pub_opts.shared): several
 * publisher processes, one of which is SIGKILLed at a random moment
 * (mid-claim, mid-commit, mid-handshake...), the others only stopped and
 * continued; merged subscribers with delay_errors. Each subscriber must
 * then have every message of every surviving publisher, exactly once and
 * in that publisher's order, and of the victim a whole prefix: no
 * partial message, nothing after a gap.
 *
 *   crs-fault [--rounds N] [--seed S] [--faults-min F] [--max-faults M]
 *             [--shared] [--json]
 *
 * --shared makes every round a shared one.
 *
 * Prints one summary line (and JSON with --json); exits 1 on any hang or
 * violation.
 */
#include <errno.h>
#include <getopt.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/prctl.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include "crs/crs.h"
#include "tests/util.h"

#define MAX_SUBS 3
#define MESSAGES 3000
#define MAX_LEN 2000
#define ROUND_DEADLINE_MS 15000
#define MAX_SHARED_PUBS 4

/* Subscriber exit codes. */
enum { SUB_COMPLETED = 0, SUB_PUBLISHER_GONE = 10, SUB_VIOLATION = 20,
       SUB_ERROR = 30 };

static uint64_t rng_state;
static int max_faults = 3; /* per round */
static int shared_only;	    /* --shared: every round a shared one */
static uint64_t rnd(uint64_t n)
{
	rng_state = rng_state * 6364136223846793005ULL + 1442695040888963407ULL;
	return (rng_state >> 33) % (n ? n : 1);
}

/* Stretches of SMALL_RUN messages of any length below MAX_LEN alternate
 * with stretches of small ones (below SMALL_LEN), ahead of which the
 * publisher zeroes its ring (pubring_clean_ahead): kills land in both. */
#define SMALL_RUN 512
#define SMALL_LEN 64

static size_t msg_len(uint64_t seq)
{
	uint64_t m = tu_mix(seq);
	return (size_t)((seq / SMALL_RUN) & 1 ? m % SMALL_LEN : m % MAX_LEN);
}

/* A shared round: its publishers and subscribers (set before forking). */
static int shared_pubs, shared_subs, shared_index, shared_victim;

/* A shared round's message: the publisher's index, then the pattern of
 * its own key, so that a message is checked whole for its publisher. */
static uint64_t shared_key(uint64_t pub, uint64_t seq)
{
	return pub << 32 | seq;
}

static size_t shared_len(uint64_t pub, uint64_t seq)
{
	return sizeof(uint64_t) + msg_len(shared_key(pub, seq));
}

static int64_t now_ms(void)
{
	return tu_now_ms();
}

static void die_with_parent(void)
{
	prctl(PR_SET_PDEATHSIG, SIGKILL);
}

static int publisher(const char *name, int replay)
{
	struct crs_pub_opts o;
	crs_pub_opts_init(&o);
	o.ring_bytes = 64 * 1024;
	if (replay) {
		o.mode = CRS_MODE_REPLAY;
		o.replay_count = 500;
	}
	crs_pub *pub;
	if (crs_pub_create(name, &o, &pub))
		return 2;
	crs_pub_wait_subscribers(pub, 1, 2000);
	/* Half the publishers batch: deferred commits flushed every few
	 * messages, so kills also land between a batch and its flush. */
	int batch = getpid() % 2 ? 1 + (int)(getpid() % 7) : 0;
	for (uint64_t seq = 0; seq < MESSAGES; seq++) {
		size_t len = msg_len(seq);
		for (;;) {
			void *buf;
			int r = crs_pub_claim(pub, len, &buf);
			if (r == 0) {
				tu_fill(buf, len, seq);
				if (!batch) {
					crs_pub_commit(pub, len);
				} else {
					crs_pub_commit_more(pub, len);
					if ((seq + 1) % (uint64_t)batch == 0)
						crs_pub_flush(pub);
				}
				break;
			}
			if (r != -CRS_ENODEMAND && r != -CRS_ENOROOM)
				return 3;
			/* All subscribers gone (killed): lockstep holds
			 * forever by contract, so this publisher gives up. */
			if (crs_pub_wait(pub, len, 1000) == -ETIMEDOUT &&
			    crs_pub_subscribers(pub) == 0 && !replay) {
				crs_pub_close(pub);
				return 0;
			}
		}
	}
	crs_pub_complete(pub);
	crs_pub_wait_consumed(pub, 3000);
	crs_pub_close(pub);
	return 0;
}

static int shared_publisher(const char *name)
{
	struct crs_pub_opts o;
	crs_pub_opts_init(&o);
	o.ring_bytes = 64 * 1024;
	o.shared = 1;
	crs_pub *pub;
	if (crs_pub_create(name, &o, &pub))
		return 2;
	/* Created: the parent starts the subscribers, which find every
	 * member at once (none completes before the last joined). */
	if (write(STDOUT_FILENO, "", 1) != 1)
		return 2;
	/* Every subscriber's merge opened us: they have it all from 0. */
	if (crs_pub_wait_subscribers(pub, shared_subs, 10000)) {
		fprintf(stderr, "shared publisher %d: %d of %d subscribers "
				"after 10 s\n",
			shared_index, crs_pub_subscribers(pub), shared_subs);
		return 4;
	}
	uint64_t me = (uint64_t)shared_index;
	for (uint64_t seq = 0; seq < MESSAGES; seq++) {
		size_t len = shared_len(me, seq);
		void *buf;
		if (crs_pub_wait(pub, len, 10000) ||
		    crs_pub_claim(pub, len, &buf))
			return 3;
		memcpy(buf, &me, sizeof(me));
		tu_fill((char *)buf + sizeof(me), len - sizeof(me),
			shared_key(me, seq));
		crs_pub_commit(pub, len);
	}
	crs_pub_complete(pub);
	crs_pub_wait_consumed(pub, 3000);
	crs_pub_close(pub);
	return 0;
}

/* Check one message of a shared round against what came before it from
 * the same publisher (next[], ids[]): 0 if right. */
static int shared_check(const struct crs_msg *m, uint64_t *next,
			uint64_t *ids)
{
	uint64_t pub;
	if (m->len < sizeof(pub))
		return -1;
	memcpy(&pub, m->data, sizeof(pub));
	if (pub >= (uint64_t)shared_pubs || m->seq != next[pub] ||
	    m->len != shared_len(pub, m->seq) || !m->stream_id ||
	    (ids[pub] && ids[pub] != m->stream_id) ||
	    tu_verify((const char *)m->data + sizeof(pub),
		      m->len - sizeof(pub), shared_key(pub, m->seq)) >= 0)
		return -1;
	for (int i = 0; i < shared_pubs; i++)
		if (i != (int)pub && ids[i] == m->stream_id)
			return -1; /* two publishers, one stream id */
	ids[pub] = m->stream_id;
	next[pub]++;
	return 0;
}

static int shared_subscriber(const char *name)
{
	struct crs_sub_opts o;
	crs_sub_opts_init(&o);
	o.shared = 1;
	o.delay_errors = 1; /* the victim's death ends it only at the end */
	o.handshake_ms = 5000;
	o.prefetch = 1 + (uint32_t)(getpid() % 64);
	crs_sub *sub;
	if (crs_sub_open(name, &o, &sub)) {
		fprintf(stderr, "shared subscriber: open failed\n");
		return SUB_ERROR;
	}
	uint64_t next[MAX_SHARED_PUBS] = { 0 }, ids[MAX_SHARED_PUBS] = { 0 };
	struct crs_msg ms[16];
	size_t take = getpid() % 2 ? 16 : 1;
	int r;
	for (;;) {
		r = crs_sub_take(sub, ms, take, 0);
		if (r == 0) {
			crs_sub_wait(sub, 1000);
			continue;
		}
		if (r < 0)
			break;
		for (int i = 0; i < r; i++)
			if (shared_check(&ms[i], next, ids)) {
				fprintf(stderr, "violation: shared message "
						"seq %llu\n",
					(unsigned long long)ms[i].seq);
				return SUB_VIOLATION;
			}
		crs_sub_release(sub);
	}
	/* Ended (0, or EPIPE: the victim died; a victim killed before it
	 * answered our open never joined): every survivor complete. */
	const struct crs_end *end = crs_sub_end(sub);
	int code = end->code;
	int short_pubs = 0;
	for (int i = 0; i < shared_pubs; i++)
		short_pubs += i != shared_victim && next[i] != MESSAGES;
	if ((code && code != EPIPE && code != ECONNRESET) || short_pubs) {
		fprintf(stderr, "shared subscriber: ended with %d (%s), %d "
				"survivors short\n", code, end->message,
			short_pubs);
		crs_sub_close(sub);
		return SUB_VIOLATION;
	}
	crs_sub_close(sub);
	return SUB_COMPLETED;
}

static int subscriber(const char *name)
{
	struct crs_sub_opts o;
	crs_sub_opts_init(&o);
	o.wait_ms = 2000;
	o.handshake_ms = 2000;
	o.prefetch = 1 + (uint32_t)(getpid() % 64);
	crs_sub *sub;
	int r = crs_sub_open(name, &o, &sub);
	if (r && r != -ENOENT && r != -ETIMEDOUT && r != -ECONNRESET)
		fprintf(stderr, "subscriber: open: %s\n", crs_strerror(r));
	if (r)
		return r == -ENOENT || r == -ETIMEDOUT || r == -ECONNRESET
			       ? SUB_PUBLISHER_GONE
			       : SUB_ERROR;
	int64_t expect = -1;
	struct crs_msg ms[16];
	/* Half the subscribers take batches (crs_sub_take). */
	size_t take = getpid() % 2 ? 16 : 0;
	for (;;) {
		r = take ? crs_sub_take(sub, ms, take, 0)
			 : crs_sub_poll(sub, &ms[0]);
		if (r == 0) {
			crs_sub_wait(sub, 1000);
			continue;
		}
		if (r < 0)
			break;
		for (int i = 0; i < r; i++) {
			const struct crs_msg *m = &ms[i];
			if ((expect >= 0 && m->seq != (uint64_t)expect) ||
			    m->len != msg_len(m->seq) ||
			    tu_verify(m->data, m->len, m->seq) >= 0) {
				fprintf(stderr,
					"violation: seq %llu (expected %lld)\n",
					(unsigned long long)m->seq,
					(long long)expect);
				return SUB_VIOLATION;
			}
			expect = (int64_t)m->seq + 1;
		}
		crs_sub_release(sub);
	}
	int code = crs_sub_end(sub)->code;
	if (code && code != EPIPE)
		fprintf(stderr, "subscriber: ended with %d: %s\n", code,
			crs_sub_end(sub)->message);
	crs_sub_close(sub);
	if (code == 0)
		/* Completed: it must have everything up to the end. */
		return expect == MESSAGES || expect == -1 ? SUB_COMPLETED
							  : SUB_VIOLATION;
	return code == EPIPE ? SUB_PUBLISHER_GONE : SUB_ERROR;
}

struct stats {
	uint64_t rounds, faults, kills, stops, hangs, violations, errors;
	uint64_t completed, gone, reused, shared, victims_killed;
};

static pid_t spawn(int (*fn)(const char *), const char *name)
{
	pid_t pid = fork();
	if (pid == 0) {
		die_with_parent();
		alarm(60); /* a hang shows as SIGALRM, never forever */
		_exit(fn(name));
	}
	return pid;
}

/* Past a round's deadline: name every process still alive (with
 * CRS_FAULT_DEBUG, its backtrace too), kill it and count a hang. The
 * first npubs of pids are publishers, the rest subscribers. */
static void kill_hung(struct stats *st, int round, const char *kind,
		      const pid_t *pids, const int *alive, int n, int npubs)
{
	for (int i = 0; i < n; i++) {
		if (!alive[i])
			continue;
		fprintf(stderr, "round %d: %s%s pid %d hung\n", round, kind,
			i < npubs ? "publisher" : "subscriber", (int)pids[i]);
		if (getenv("CRS_FAULT_DEBUG")) {
			char cmd[128];
			snprintf(cmd, sizeof(cmd),
				 "gdb -p %d -batch -ex bt 2>/dev/null | grep '^#'",
				 (int)pids[i]);
			if (system(cmd) < 0)
				perror("gdb");
		}
		kill(pids[i], SIGKILL);
		waitpid(pids[i], NULL, 0);
		st->hangs++;
	}
}

/* Wait for a child and sort its end into st: 1 once it ended. */
static int reap(struct stats *st, int round, pid_t pid, int is_pub,
		int victim)
{
	int status;
	if (waitpid(pid, &status, WNOHANG) != pid)
		return 0;
	if (WIFSIGNALED(status)) {
		if (WTERMSIG(status) == SIGALRM) {
			st->hangs++;
			fprintf(stderr, "round %d: pid %d hung\n", round,
				(int)pid);
		} else if (victim) {
			st->victims_killed++; /* before it completed */
		} else {
			st->errors++;
			fprintf(stderr, "round %d: pid %d killed by %d\n",
				round, (int)pid, WTERMSIG(status));
		}
		return 1;
	}
	int code = WEXITSTATUS(status);
	if (code)
		fprintf(stderr, "round %d: %s exited with %d\n", round,
			is_pub ? "publisher" : "subscriber", code);
	if (is_pub)
		st->errors += code != 0;
	else if (code == SUB_COMPLETED)
		st->completed++;
	else if (code == SUB_VIOLATION)
		st->violations++;
	else
		st->errors++;
	return 1;
}

/* A shared round: see the top. */
static void shared_round(struct stats *st, int round)
{
	char name[64];
	snprintf(name, sizeof(name), "m-%d-%d", (int)getpid(), round);
	shared_pubs = 2 + (int)rnd(MAX_SHARED_PUBS - 1);
	shared_subs = 1 + (int)rnd(MAX_SUBS);
	shared_victim = (int)rnd((uint64_t)shared_pubs);
	int n = shared_pubs + shared_subs;
	pid_t pids[MAX_SHARED_PUBS + MAX_SUBS];
	int alive[MAX_SHARED_PUBS + MAX_SUBS];
	for (int i = 0; i < shared_pubs; i++) {
		int fds[2];
		if (pipe(fds)) {
			perror("crs-fault: pipe");
			exit(2);
		}
		shared_index = i;
		pids[i] = fork();
		if (pids[i] == 0) {
			die_with_parent();
			alarm(60);
			dup2(fds[1], STDOUT_FILENO);
			_exit(shared_publisher(name));
		}
		close(fds[1]);
		char c;
		if (read(fds[0], &c, 1) != 1) /* created (or it failed) */
			fprintf(stderr, "round %d: publisher %d did not start\n",
				round, i);
		close(fds[0]);
		alive[i] = 1;
	}
	for (int i = shared_pubs; i < n; i++) {
		pids[i] = spawn(shared_subscriber, name);
		alive[i] = 1;
	}
	/* The victim dies at a random moment; the others only pause. */
	int kill_at = (int)rnd(60), stops = (int)rnd((uint64_t)max_faults + 1);
	for (int t = 0, f = 0; t <= kill_at || f < stops; t++) {
		struct timespec ms = { 0, 1000000 };
		nanosleep(&ms, NULL);
		if (t == kill_at) {
			kill(pids[shared_victim], SIGKILL);
			st->kills++;
			st->faults++;
		}
		if (f < stops && rnd(10) == 0) {
			int v = (int)rnd((uint64_t)n);
			kill(pids[v], SIGSTOP);
			struct timespec pause = { 0, (long)rnd(20) * 1000000 };
			nanosleep(&pause, NULL);
			kill(pids[v], SIGCONT);
			st->stops++;
			st->faults++;
			f++;
		}
	}
	int64_t deadline = now_ms() + ROUND_DEADLINE_MS;
	for (int left = n; left > 0;) {
		for (int i = 0; i < n; i++)
			if (alive[i] && reap(st, round, pids[i], i < shared_pubs,
					     i == shared_victim)) {
				alive[i] = 0;
				left--;
			}
		if (left && now_ms() > deadline) {
			kill_hung(st, round, "shared ", pids, alive, n,
				  shared_pubs);
			break;
		}
		struct timespec ms = { 0, 1000000 };
		nanosleep(&ms, NULL);
	}
	st->shared++;
	st->rounds++;
}

static int pub_main(const char *name)
{
	return publisher(name, name[0] == 'r');
}

static void one_round(struct stats *st, int round)
{
	if (round % 3 == 2 || shared_only) {
		shared_round(st, round);
		return;
	}
	char name[64];
	int replay = (int)rnd(2);
	snprintf(name, sizeof(name), "%s-%d-%d", replay ? "r" : "p",
		 (int)getpid(), round);
	pid_t pids[1 + MAX_SUBS];
	int alive[1 + MAX_SUBS] = { 0 };
	int n = 1 + 1 + (int)rnd(MAX_SUBS);
	pids[0] = spawn(pub_main, name);
	alive[0] = 1;
	for (int i = 1; i < n; i++) {
		pids[i] = spawn(subscriber, name);
		alive[i] = 1;
	}
	int faults = (int)rnd((uint64_t)max_faults + 1);
	for (int f = 0; f < faults; f++) {
		struct timespec ts = { 0, (long)rnd(30) * 1000000 };
		nanosleep(&ts, NULL);
		int v = (int)rnd((uint64_t)n);
		if (rnd(2)) {
			kill(pids[v], SIGKILL);
			st->kills++;
		} else {
			kill(pids[v], SIGSTOP);
			struct timespec pause = { 0, (long)rnd(20) * 1000000 };
			nanosleep(&pause, NULL);
			kill(pids[v], SIGCONT);
			st->stops++;
		}
		st->faults++;
	}
	int64_t deadline = now_ms() + ROUND_DEADLINE_MS;
	int left = n;
	int pub_killed = 0;
	while (left > 0) {
		for (int i = 0; i < n; i++) {
			if (!alive[i])
				continue;
			int status;
			pid_t r = waitpid(pids[i], &status, WNOHANG);
			if (r != pids[i])
				continue;
			alive[i] = 0;
			left--;
			if (WIFSIGNALED(status)) {
				if (WTERMSIG(status) == SIGALRM) {
					st->hangs++;
					fprintf(stderr, "round %d: pid %d hung\n",
						round, (int)pids[i]);
				}
				if (i == 0)
					pub_killed = 1;
				continue;
			}
			int code = WEXITSTATUS(status);
			if (code && code != SUB_PUBLISHER_GONE)
				fprintf(stderr, "round %d: %s exited with %d\n",
					round, i ? "subscriber" : "publisher",
					code);
			if (i == 0) {
				if (code)
					st->errors++;
				continue;
			}
			if (code == SUB_COMPLETED)
				st->completed++;
			else if (code == SUB_PUBLISHER_GONE)
				st->gone++;
			else if (code == SUB_VIOLATION)
				st->violations++;
			else
				st->errors++;
		}
		if (left && now_ms() > deadline) {
			kill_hung(st, round, "", pids, alive, n, 1);
			break;
		}
		struct timespec ts = { 0, 1000000 };
		nanosleep(&ts, NULL);
	}
	/* The name is free again at once, also after a killed publisher. */
	crs_pub *again;
	int r = crs_pub_create(name, NULL, &again);
	if (r == 0) {
		crs_pub_close(again);
		st->reused += pub_killed;
	} else {
		fprintf(stderr, "round %d: name not reusable: %s\n", round,
			crs_strerror(r));
		st->errors++;
	}
	st->rounds++;
}

int main(int argc, char **argv)
{
	uint64_t rounds = 50, faults_min = 0, seed = (uint64_t)time(NULL);
	int json = 0;
	static const struct option opts[] = {
		{ "rounds", required_argument, NULL, 'r' },
		{ "seed", required_argument, NULL, 's' },
		{ "faults-min", required_argument, NULL, 'f' },
		{ "max-faults", required_argument, NULL, 'm' },
		{ "json", no_argument, NULL, 'j' },
		{ "shared", no_argument, NULL, 'S' },
		{ NULL, 0, NULL, 0 }
	};
	int c;
	while ((c = getopt_long(argc, argv, "", opts, NULL)) != -1) {
		switch (c) {
		case 'r':
			rounds = strtoull(optarg, NULL, 0);
			break;
		case 's':
			seed = strtoull(optarg, NULL, 0);
			break;
		case 'f':
			faults_min = strtoull(optarg, NULL, 0);
			break;
		case 'j':
			json = 1;
			break;
		case 'm':
			max_faults = atoi(optarg);
			break;
		case 'S':
			shared_only = 1;
			break;
		default:
			fprintf(stderr, "usage: crs-fault [--rounds N] [--seed S] "
					"[--faults-min F] [--max-faults M] "
					"[--shared] [--json]\n");
			return 2;
		}
	}
	rng_state = seed;
	signal(SIGPIPE, SIG_IGN);
	char dir[] = "/tmp/crs-fault-XXXXXX";
	if (!mkdtemp(dir) || setenv("CRS_DIR", dir, 1)) {
		perror("crs-fault: runtime directory");
		return 2;
	}
	struct stats st = { 0 };
	int64_t t0 = now_ms();
	for (int round = 0; st.rounds < rounds || st.faults < faults_min;
	     round++)
		one_round(&st, round);
	double secs = (double)(now_ms() - t0) / 1000.0;
	char cmd[64];
	snprintf(cmd, sizeof(cmd), "rm -rf %s", dir);
	if (system(cmd) != 0)
		fprintf(stderr, "crs-fault: could not remove %s\n", dir);
	printf("crs-fault: seed %llu: %llu rounds, %llu faults (%llu kills, "
	       "%llu stop/cont), %llu hangs, %llu violations, %llu errors; "
	       "subscribers: %llu completed, %llu saw the publisher die; "
	       "name reused after %llu killed publishers; "
	       "%llu shared rounds (%llu victims killed before completing); "
	       "%.1f s\n",
	       (unsigned long long)seed, (unsigned long long)st.rounds,
	       (unsigned long long)st.faults, (unsigned long long)st.kills,
	       (unsigned long long)st.stops, (unsigned long long)st.hangs,
	       (unsigned long long)st.violations, (unsigned long long)st.errors,
	       (unsigned long long)st.completed, (unsigned long long)st.gone,
	       (unsigned long long)st.reused, (unsigned long long)st.shared,
	       (unsigned long long)st.victims_killed, secs);
	if (json)
		printf("{\"seed\":%llu,\"rounds\":%llu,\"faults\":%llu,"
		       "\"kills\":%llu,\"stops\":%llu,\"hangs\":%llu,"
		       "\"violations\":%llu,\"errors\":%llu,\"completed\":%llu,"
		       "\"publisher_gone\":%llu,\"shared_rounds\":%llu,"
		       "\"seconds\":%.1f}\n",
		       (unsigned long long)seed, (unsigned long long)st.rounds,
		       (unsigned long long)st.faults,
		       (unsigned long long)st.kills, (unsigned long long)st.stops,
		       (unsigned long long)st.hangs,
		       (unsigned long long)st.violations,
		       (unsigned long long)st.errors,
		       (unsigned long long)st.completed,
		       (unsigned long long)st.gone,
		       (unsigned long long)st.shared, secs);
	printf("%d passed, %d failed\n",
	       st.hangs || st.violations || st.errors ? 0 : 1,
	       st.hangs || st.violations || st.errors ? 1 : 0);
	return st.hangs || st.violations || st.errors ? 1 : 0;
}
