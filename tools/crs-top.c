/*
 * crs-top.c - the live inspector: a top-like view of every stream in the
 * runtime directory and of the subscribers of one, read straight from the
 * publishers' statistics through the read-only inspection API
 * (crs/inspect.h). Observing takes no subscriber slot and adds no demand.
 *
 * This file owns option parsing; the sampler, which keeps one inspector
 * per stream open across refreshes (opening is a handshake with the
 * publisher, so it happens once per stream, again only when the stream is
 * replaced, and on a thread of its own: a publisher that does not answer,
 * stopped or in a debugger, never holds up the screen; it is shown as
 * not answering) and turns two snapshots into rates and activity (live,
 * idle, stalled, stopped); the column fitter, which keeps every number
 * whole and the holding-back marker in sight at any width, dropping the
 * least useful columns and eliding long names in the middle; and the
 * three outputs:
 * the ncurses view, plain text lines (-b) and one JSON document per line
 * (--json). The terminal is restored on every way out: the SIGINT,
 * SIGTERM and SIGHUP handlers only set a flag the main loop watches, and
 * the signal is raised again once the terminal is back, so that the shell
 * sees how the tool ended.
 */
#include <curses.h>
#include <errno.h>
#include <fcntl.h>
#include <getopt.h>
#include <inttypes.h>
#include <libutil.h> /* humanize_number(3), from libbsd-overlay */
#include <limits.h>
#include <poll.h>
#include <pthread.h>
#include <signal.h>
#include <stdatomic.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>

#include "crs/crs.h"
#include "crs/inspect.h"
#include "toolutil.h"

#define EXIT_RUNTIME 1
#define EXIT_USAGE 2

#define TOP_ERROR 100		/* states beyond enum crs_stream_state: */
#define TOP_OPENING 101		/* the first handshake is under way */
#define TOP_NO_ANSWER 102	/* the publisher has not answered in time */
#define ANSWER_NS 250000000LL	/* a handshake slower than this: no answer */
#define FIRST_DRAW_NS 150000000LL /* the first screen waits this long at most */
#define COLLECT_MS 20		/* look for finished handshakes this often */
#define ERR_BYTES 160		/* an error's words, as shown */
#define RETRY_NS 2000000000LL	/* re-try a failed handshake this much later, */
#define RETRY_MAX_NS 32000000000LL /* doubling up to this */
#define NS_PER_S 1000000000.0
#define DEFAULT_DELAY_S 1.0
#define MIN_DELAY_S 0.01
#define MAX_DELAY_S 86400.0
#define LINE_BYTES 512		/* longest line any output formats */
#define ESC_DELAY_MS 25		/* tell a lone Esc from an arrow key */

enum sort_key { SORT_NAME, SORT_RATE, SORT_LAG, SORT_SUBS, SORT_NKEYS };

static const char *const sort_names[SORT_NKEYS] = { "name", "rate", "lag",
						    "subs" };

struct top_opts {
	double delay_s;	/* -d */
	long count;	/* -n; 0: until stopped */
	int batch;	/* -b, or stdout is not a terminal */
	int json;	/* --json */
	int sort;	/* enum sort_key, -o */
	int reverse;	/* -R */
};

static volatile sig_atomic_t g_stop; /* the signal that asks us to quit */

/* ---- Small helpers ------------------------------------------------------ */

static int64_t now_ns(void)
{
	struct timespec ts;
	clock_gettime(CLOCK_MONOTONIC, &ts);
	return (int64_t)ts.tv_sec * 1000000000 + ts.tv_nsec;
}

/* Wall-clock time of day, for titles. */
static void clock_text(char *buf, size_t size, int with_date)
{
	time_t t = time(NULL);
	struct tm tm;
	if (!localtime_r(&t, &tm) ||
	    !strftime(buf, size, with_date ? "%Y-%m-%d %H:%M:%S" : "%H:%M:%S",
		      &tm))
		snprintf(buf, size, "?");
}

static const char *state_name(int state)
{
	switch (state) {
	case CRS_STREAM_LIVE:
		return "live";
	case CRS_STREAM_COMPLETED:
		return "completed";
	case CRS_STREAM_FAILED:
		return "failed";
	case CRS_STREAM_CLOSED:
		return "closed";
	case CRS_STREAM_DEAD:
		return "dead";
	case CRS_STREAM_DENIED:
		return "denied";
	case TOP_OPENING:
		return "opening";
	case TOP_NO_ANSWER:
		return "no-answer";
	default:
		return "error";
	}
}

static void mode_text(char *buf, size_t size, uint32_t mode)
{
	if (mode == CRS_MODE_PUBLISH)
		snprintf(buf, size, "publish");
	else if (mode == CRS_MODE_REPLAY)
		snprintf(buf, size, "replay");
	else
		snprintf(buf, size, "mode-%" PRIu32, mode);
}

/* ---- The sampler -------------------------------------------------------- */

/* What a live stream or a subscriber did over the last interval. */
enum activity {
	ACT_UNKNOWN, /* no previous snapshot, or not live */
	ACT_LIVE,    /* stream: published; subscriber: consumed */
	ACT_IDLE,    /* nothing moved and nothing waits: all caught up */
	ACT_STALLED, /* nothing moved although messages wait to be read */
	ACT_STOPPED, /* the process is stopped (SIGSTOP, a debugger) */
};

static const char *const activity_names[] = { "-", "live", "idle", "stalled",
					      "stopped" };

struct top_sub {
	struct crs_sub_info i;
	double wake_rate; /* wakeups/s over the last interval; < 0 unknown */
	int activity;	  /* enum activity */
	char comm[20];	  /* the process's command name, or "?" */
};

/* An inspector being opened on a thread of its own. The thread and the
 * sampler share it: whoever comes second (the thread finishing, or the
 * sampler giving up on the stream) frees it. */
enum { JOB_RUNNING, JOB_DONE, JOB_ABANDONED };

struct open_job {
	char name[CRS_NAME_MAX + 1];
	_Atomic int state;
	int err;	  /* written before state becomes JOB_DONE */
	char why[ERR_BYTES]; /* crs_errmsg() of the thread, on an error */
	crs_inspector *in;
	int64_t started_ns;
};

struct top_stream {
	char name[CRS_NAME_MAX + 1];
	crs_inspector *in;
	struct open_job *job;	/* a handshake under way, or NULL */
	dev_t dev;		/* the socket the inspector came through */
	ino_t ino;
	int state;		/* enum crs_stream_state, or TOP_* */
	int err;		/* why it could not be inspected, or 0 */
	char why[ERR_BYTES];	/* the library's words for err, or "" */
	int have;		/* info and subs hold a snapshot */
	struct crs_stream_info info;
	double msg_rate;	/* messages/s over the interval; < 0 unknown */
	double byte_rate;	/* bytes/s likewise */
	int activity;		/* enum activity, for a live stream */
	char comm[20];		/* the publisher's command name */
	struct top_sub subs[CRS_SUBSCRIBERS_MAX];
	int nsubs;		/* active subscribers (may exceed the array) */
	int64_t retry_ns;	/* no new handshake before this time */
	int64_t backoff_ns;	/* the wait after the next failed handshake */
	int listed;		/* in the latest directory listing */
	int gone;		/* left the directory: shown once more */
};

/* A dead stream pruned from the view (its stale socket stays until a
 * new publisher replaces it): hidden while the socket is the same. */
struct pruned {
	char name[CRS_NAME_MAX + 1];
	dev_t dev;
	ino_t ino;
};

struct top_set {
	struct top_stream **v;
	int n, cap;
	char (*names)[CRS_NAME_MAX + 1];
	int names_cap;
	int list_err;	/* the latest listing's error, or 0 */
	char dir[PATH_MAX];
	struct pruned *pruned;
	int npruned;
};

static int shown_subs(const struct top_stream *s)
{
	return s->nsubs < CRS_SUBSCRIBERS_MAX ? s->nsubs : CRS_SUBSCRIBERS_MAX;
}

static double fill_of(const struct top_stream *s)
{
	if (!s->have || !s->info.ring_size)
		return -1;
	return (double)s->info.ring_used / (double)s->info.ring_size;
}

static uint64_t max_lag(const struct top_stream *s)
{
	uint64_t m = 0;
	for (int k = 0; k < shown_subs(s); k++)
		if (s->subs[k].i.lag_messages > m)
			m = s->subs[k].i.lag_messages;
	return m;
}

/* The first subscriber holding the publisher back, or NULL. */
static const struct top_sub *holder(const struct top_stream *s)
{
	for (int k = 0; k < shown_subs(s); k++)
		if (s->subs[k].i.holding_back)
			return &s->subs[k];
	return NULL;
}

/* A process's command name and run state from /proc/PID/stat ("PID
 * (COMM) S ..."; COMM may hold anything, so the state follows the last
 * ')'). The name is made printable and spaceless, for columns. Returns
 * the state letter ('T' or 't': stopped), or 0 if unknown. */
static int proc_look(int pid, char *comm, size_t size)
{
	char path[32], buf[256];
	snprintf(comm, size, "?");
	if (pid <= 0)
		return 0;
	snprintf(path, sizeof(path), "/proc/%d/stat", pid);
	int fd = open(path, O_RDONLY | O_CLOEXEC);
	if (fd < 0)
		return 0;
	ssize_t n = read(fd, buf, sizeof(buf) - 1);
	close(fd);
	if (n <= 0)
		return 0;
	buf[n] = 0;
	char *open_paren = strchr(buf, '('), *close_paren = strrchr(buf, ')');
	if (!open_paren || !close_paren || close_paren < open_paren ||
	    close_paren[1] != ' ')
		return 0;
	size_t len = (size_t)(close_paren - open_paren - 1);
	if (len >= size)
		len = size - 1;
	for (size_t k = 0; k < len; k++) {
		unsigned char c = (unsigned char)open_paren[1 + k];
		comm[k] = c > ' ' && c < 0x7f ? (char)c : '_';
	}
	comm[len] = 0;
	return (unsigned char)close_paren[2];
}

static int is_stopped(int pstate)
{
	return pstate == 'T' || pstate == 't';
}

/* The identity of the socket a stream is published on, so that a stream
 * replaced by a new publisher of the same name is noticed and re-opened,
 * and a stale socket told from a vanished one. The path is the one
 * crs_inspect_list() reads names from: "<dir>/<name>.sock". */
static int sock_id(const struct top_set *t, const char *name, struct stat *st)
{
	char path[sizeof(t->dir) + CRS_NAME_MAX + 8];
	if (!t->dir[0])
		return -ENOENT;
	snprintf(path, sizeof(path), "%s/%s.sock", t->dir, name);
	return stat(path, st) < 0 ? -errno : 0;
}

static void *open_worker(void *arg)
{
	struct open_job *job = arg;
	job->err = crs_inspect_open(job->name, &job->in);
	if (job->err) /* thread-local: keep the words for the sampler */
		snprintf(job->why, sizeof(job->why), "%s", crs_errmsg());
	if (atomic_exchange(&job->state, JOB_DONE) == JOB_ABANDONED) {
		if (!job->err)
			crs_inspect_close(job->in);
		free(job);
	}
	return NULL;
}

/* Start opening an inspector on a thread. Returns 0 or -errno. */
static int job_start(struct top_stream *s, int64_t now)
{
	struct open_job *job = calloc(1, sizeof(*job));
	if (!job)
		return -ENOMEM;
	snprintf(job->name, sizeof(job->name), "%s", s->name);
	atomic_init(&job->state, JOB_RUNNING);
	job->started_ns = now;
	pthread_attr_t attr;
	pthread_t th;
	int err = pthread_attr_init(&attr);
	if (!err) {
		pthread_attr_setdetachstate(&attr, PTHREAD_CREATE_DETACHED);
		err = pthread_create(&th, &attr, open_worker, job);
		pthread_attr_destroy(&attr);
	}
	if (err) {
		free(job);
		return -err;
	}
	s->job = job;
	return 0;
}

/* Leave an unfinished handshake to its thread. */
static void job_abandon(struct top_stream *s)
{
	struct open_job *job = s->job;
	if (!job)
		return;
	s->job = NULL;
	if (atomic_exchange(&job->state, JOB_ABANDONED) == JOB_DONE) {
		if (!job->err)
			crs_inspect_close(job->in);
		free(job);
	}
}

static int jobs_pending(const struct top_set *t)
{
	for (int i = 0; i < t->n; i++)
		if (t->v[i]->job)
			return 1;
	return 0;
}

static void stream_close(struct top_stream *s)
{
	crs_inspect_close(s->in);
	s->in = NULL;
	s->have = 0;
	s->nsubs = 0;
	s->msg_rate = s->byte_rate = -1;
	s->activity = ACT_UNKNOWN;
}

static struct top_stream *stream_find(const struct top_set *t, const char *name)
{
	for (int i = 0; i < t->n; i++)
		if (!strcmp(t->v[i]->name, name))
			return t->v[i];
	return NULL;
}

static struct top_stream *stream_add(struct top_set *t, const char *name)
{
	if (t->n == t->cap) {
		int cap = t->cap ? 2 * t->cap : 16;
		void *p = realloc(t->v, (size_t)cap * sizeof(*t->v));
		if (!p)
			return NULL;
		t->v = p;
		t->cap = cap;
	}
	struct top_stream *s = calloc(1, sizeof(*s));
	if (!s)
		return NULL;
	snprintf(s->name, sizeof(s->name), "%s", name);
	s->state = TOP_OPENING;
	s->msg_rate = s->byte_rate = -1;
	t->v[t->n++] = s;
	return s;
}

static void stream_remove(struct top_set *t, int i)
{
	job_abandon(t->v[i]);
	stream_close(t->v[i]);
	free(t->v[i]);
	memmove(&t->v[i], &t->v[i + 1], (size_t)(t->n - i - 1) * sizeof(*t->v));
	t->n--;
}

/* What a live stream did: published, or had a subscriber consume, in
 * the interval (live); else whether messages wait for a subscriber that
 * does not read them (stalled) or everyone is caught up (idle). A
 * stopped publisher is stopped, whatever its figures say. */
static int stream_activity(const struct top_stream *s, int pstate, int rated,
			   uint64_t published_before, int consumed_moved)
{
	if (s->info.state != CRS_STREAM_LIVE)
		return ACT_UNKNOWN;
	if (is_stopped(pstate))
		return ACT_STOPPED;
	if (!rated)
		return ACT_UNKNOWN;
	if (s->info.published != published_before || consumed_moved)
		return ACT_LIVE;
	return max_lag(s) ? ACT_STALLED : ACT_IDLE;
}

/* Read a snapshot and derive the rates and activity from the previous
 * one. */
static void stream_read(struct top_stream *s)
{
	struct crs_sub_info old[CRS_SUBSCRIBERS_MAX], cur[CRS_SUBSCRIBERS_MAX];
	int nold = s->have ? shown_subs(s) : 0;
	for (int k = 0; k < nold; k++)
		old[k] = s->subs[k].i;
	struct crs_stream_info prev = s->info, info;
	int had = s->have;
	int n = crs_inspect_read(s->in, &info, cur, CRS_SUBSCRIBERS_MAX);
	if (n < 0) {
		stream_close(s);
		s->state = TOP_ERROR;
		s->err = n;
		return;
	}
	s->info = info;
	s->have = 1;
	s->state = info.state;
	s->err = 0;
	double dt = (double)(info.sampled_ns - prev.sampled_ns) / NS_PER_S;
	int rated = had && dt > 0;
	if (rated && info.published >= prev.published &&
	    info.bytes >= prev.bytes) {
		s->msg_rate = (double)(info.published - prev.published) / dt;
		s->byte_rate = (double)(info.bytes - prev.bytes) / dt;
	} else {
		s->msg_rate = s->byte_rate = -1;
	}
	/* A dead publisher's slots still read as active; nobody is. */
	s->nsubs = info.state == CRS_STREAM_DEAD ? 0 : n;
	int moved = 0;
	for (int k = 0; k < shown_subs(s); k++) {
		struct top_sub *d = &s->subs[k];
		int pstate = proc_look(cur[k].pid, d->comm, sizeof(d->comm));
		d->i = cur[k];
		d->wake_rate = -1;
		d->activity = is_stopped(pstate) ? ACT_STOPPED : ACT_UNKNOWN;
		for (int j = 0; rated && j < nold; j++) {
			if (old[j].slot != cur[k].slot ||
			    old[j].pid != cur[k].pid ||
			    old[j].wakeups > cur[k].wakeups)
				continue;
			d->wake_rate =
				(double)(cur[k].wakeups - old[j].wakeups) / dt;
			int ate = cur[k].consumed != old[j].consumed;
			moved |= ate;
			if (d->activity == ACT_UNKNOWN)
				d->activity = ate		 ? ACT_LIVE
					      : cur[k].lag_messages ? ACT_STALLED
								    : ACT_IDLE;
			break;
		}
	}
	int pstate = proc_look(info.pub_pid, s->comm, sizeof(s->comm));
	s->activity = stream_activity(s, pstate, rated, prev.published, moved);
}

/* Start inspecting s through a freshly opened inspector: no previous
 * snapshot to take rates from, and remember which socket it came from. */
static void stream_attach(const struct top_set *t, struct top_stream *s,
			  crs_inspector *in)
{
	struct stat st;
	int id = sock_id(t, s->name, &st);
	stream_close(s);
	s->in = in;
	s->dev = id ? 0 : st.st_dev;
	s->ino = id ? 0 : st.st_ino;
	s->err = 0;
	s->backoff_ns = 0;
}

/* A handshake ended with err: show why, and when to try again. Returns
 * -ENOENT if the stream vanished meanwhile. */
static int stream_open_failed(struct top_set *t, struct top_stream *s,
			      int err, int64_t now)
{
	struct stat st;
	int id = sock_id(t, s->name, &st);
	s->have = 0;
	s->nsubs = 0;
	s->err = err;
	s->retry_ns = 0;
	/* A handshake that failed may have cost seconds (a publisher that
	 * does not answer): wait longer each time before the next. */
	int64_t backoff = s->backoff_ns ? s->backoff_ns : RETRY_NS;
	s->backoff_ns = backoff * 2 < RETRY_MAX_NS ? backoff * 2 : RETRY_MAX_NS;
	switch (err) {
	case -ENOENT:
		/* The library reports a stale socket (its publisher died)
		 * as -ENOENT too: the socket file tells the two apart. */
		if (id)
			return -ENOENT;
		s->state = CRS_STREAM_DEAD;
		break;
	case -ECONNREFUSED:
		s->state = CRS_STREAM_DEAD;
		break;
	case -EACCES:
	case -EPERM:
		s->state = CRS_STREAM_DENIED;
		s->retry_ns = now + backoff;
		break;
	case -ETIMEDOUT:
		s->state = TOP_NO_ANSWER;
		s->retry_ns = now + backoff;
		break;
	default:
		s->state = TOP_ERROR;
		s->retry_ns = now + backoff;
		break;
	}
	if (s->state == CRS_STREAM_DEAD) {
		s->err = 0; /* dead says it all; trying again costs nothing */
		s->backoff_ns = 0;
	}
	return 0;
}

/* Drive the handshake of a listed stream that has no inspector: start
 * it when due, collect it when done, say so when it takes too long.
 * Returns 0, or -ENOENT when the stream vanished. */
static int stream_open(struct top_set *t, struct top_stream *s, int64_t now)
{
	if (!s->job) {
		if (now < s->retry_ns)
			return 0; /* keep showing the last failure */
		if (job_start(s, now) < 0) {
			/* No thread: open here, as a last resort. */
			crs_inspector *in;
			int err = crs_inspect_open(s->name, &in);
			snprintf(s->why, sizeof(s->why), "%s",
				 err ? crs_errmsg() : "");
			if (err)
				return stream_open_failed(t, s, err, now);
			stream_attach(t, s, in);
			stream_read(s);
			return 0;
		}
	}
	struct open_job *job = s->job;
	if (atomic_load(&job->state) != JOB_DONE) {
		if (now - job->started_ns > ANSWER_NS &&
		    s->state != CRS_STREAM_DEAD)
			s->state = TOP_NO_ANSWER;
		return 0;
	}
	int err = job->err;
	crs_inspector *in = job->in;
	snprintf(s->why, sizeof(s->why), "%s", job->why);
	s->job = NULL;
	free(job);
	if (err && s->in)
		return 0; /* still dead: keep the last figures */
	if (err)
		return stream_open_failed(t, s, err, now);
	stream_attach(t, s, in);
	stream_read(s);
	return 0;
}

/* Refresh one listed stream. Returns -ENOENT if it vanished. */
static int stream_refresh(struct top_set *t, struct top_stream *s, int64_t now)
{
	struct stat st;
	int id = sock_id(t, s->name, &st);
	if (s->in && id == 0 && (st.st_dev != s->dev || st.st_ino != s->ino)) {
		/* A new publisher took the name: inspect the new stream. */
		stream_close(s);
		job_abandon(s);
		s->retry_ns = s->backoff_ns = 0;
		s->state = TOP_OPENING;
	}
	if (!s->in)
		return stream_open(t, s, now);
	stream_read(s);
	if (s->state == CRS_STREAM_DEAD)
		/* Keep the last figures, and ask (on the thread; a stale
		 * socket refuses at once) whether a new publisher answers
		 * on the name: its socket may have the old one's inode. */
		stream_open(t, s, now);
	return 0;
}

/* The runtime directory's stream names into t->names; the count or
 * -errno. The directory may gain names between two calls: grow and ask
 * again. */
static int list_names(struct top_set *t)
{
	for (;;) {
		int n = crs_inspect_list(t->names, t->names_cap);
		if (n < 0 || n <= t->names_cap)
			return n;
		int cap = n + 16;
		void *p = realloc(t->names, (size_t)cap * sizeof(*t->names));
		if (!p)
			return -ENOMEM;
		t->names = p;
		t->names_cap = cap;
	}
}

static int set_init(struct top_set *t)
{
	memset(t, 0, sizeof(*t));
	t->names_cap = 64;
	t->names = calloc((size_t)t->names_cap, sizeof(*t->names));
	return t->names ? 0 : -ENOMEM;
}

static void set_free(struct top_set *t)
{
	while (t->n)
		stream_remove(t, t->n - 1);
	free(t->v);
	free(t->names);
	free(t->pruned);
}

/* Whether a listed name is a pruned dead stream, still on the same
 * socket; a pruned name whose socket changed is forgotten. */
static int is_pruned(struct top_set *t, const char *name)
{
	for (int k = 0; k < t->npruned; k++) {
		struct pruned *p = &t->pruned[k];
		if (strcmp(p->name, name))
			continue;
		struct stat st;
		if (sock_id(t, name, &st) == 0 && st.st_dev == p->dev &&
		    st.st_ino == p->ino)
			return 1;
		*p = t->pruned[--t->npruned];
		return 0;
	}
	return 0;
}

/* Drop the dead streams from the view. Returns how many. */
static int set_prune(struct top_set *t)
{
	int n = 0;
	for (int i = 0; i < t->n;) {
		struct top_stream *s = t->v[i];
		struct stat st;
		if (s->state != CRS_STREAM_DEAD || sock_id(t, s->name, &st) < 0) {
			i++;
			continue;
		}
		void *p = realloc(t->pruned,
				  (size_t)(t->npruned + 1) * sizeof(*t->pruned));
		if (!p)
			break;
		t->pruned = p;
		struct pruned *e = &t->pruned[t->npruned++];
		snprintf(e->name, sizeof(e->name), "%s", s->name);
		e->dev = st.st_dev;
		e->ino = st.st_ino;
		stream_remove(t, i);
		n++;
	}
	return n;
}

/* Collect the handshakes that finished, and mark those taking too
 * long. Returns nonzero if a stream changed. */
static int set_collect(struct top_set *t)
{
	int64_t now = now_ns();
	int changed = 0;
	for (int i = 0; i < t->n;) {
		struct top_stream *s = t->v[i];
		if (s->job) {
			int state = s->state;
			changed |= atomic_load(&s->job->state) == JOB_DONE;
			if (stream_open(t, s, now) == -ENOENT) {
				stream_remove(t, i);
				changed = 1;
				continue;
			}
			changed |= s->state != state;
		}
		i++;
	}
	return changed;
}

/* Let the handshakes just started finish, up to `ns`, so that a first
 * screen shows figures for every publisher that answers at once. */
static void set_settle(struct top_set *t, int64_t ns)
{
	int64_t until = now_ns() + ns;
	while (!g_stop && jobs_pending(t) && now_ns() < until) {
		struct timespec nap = { 0, 2000000 };
		nanosleep(&nap, NULL);
		set_collect(t);
	}
	set_collect(t);
}

/* One refresh: list the directory, follow streams that came and went,
 * take a snapshot of each. */
static void set_refresh(struct top_set *t)
{
	if (crs_runtime_dir(t->dir, sizeof(t->dir)) < 0)
		t->dir[0] = 0; /* not created yet: nothing to show */
	int n = list_names(t);
	t->list_err = n < 0 ? n : 0;
	if (n >= 0) {
		for (int i = 0; i < t->n; i++)
			t->v[i]->listed = 0;
		for (int i = 0; i < n; i++) {
			struct top_stream *s = stream_find(t, t->names[i]);
			if (!s && is_pruned(t, t->names[i]))
				continue;
			if (!s)
				s = stream_add(t, t->names[i]);
			if (s) {
				s->listed = 1;
				s->gone = 0;
			}
		}
	}
	int64_t now = now_ns();
	for (int i = 0; i < t->n;) {
		struct top_stream *s = t->v[i];
		if (!s->listed) {
			/* Gone from the directory: show the final state (a
			 * closed stream) once, then forget it. */
			if (s->gone || !s->in) {
				stream_remove(t, i);
				continue;
			}
			s->gone = 1;
			stream_read(s);
		} else if (stream_refresh(t, s, now) == -ENOENT) {
			stream_remove(t, i);
			continue;
		}
		i++;
	}
}

static int cmp_double_desc(double a, double b)
{
	return a < b ? 1 : a > b ? -1 : 0;
}

static int cmp_streams(const void *a, const void *b, void *ctx)
{
	const struct top_stream *x = *(struct top_stream *const *)a;
	const struct top_stream *y = *(struct top_stream *const *)b;
	const struct top_opts *o = ctx;
	int r = 0;
	switch (o->sort) {
	case SORT_RATE:
		r = cmp_double_desc(x->msg_rate, y->msg_rate);
		break;
	case SORT_LAG:
		r = cmp_double_desc(fill_of(x), fill_of(y));
		if (!r)
			r = cmp_double_desc((double)max_lag(x),
					    (double)max_lag(y));
		break;
	case SORT_SUBS:
		r = (y->have ? y->nsubs : -1) - (x->have ? x->nsubs : -1);
		break;
	}
	if (!r)
		r = strcmp(x->name, y->name);
	return o->reverse ? -r : r;
}

static void set_sort(struct top_set *t, const struct top_opts *o)
{
	if (t->n > 1)
		qsort_r(t->v, (size_t)t->n, sizeof(*t->v), cmp_streams,
			(void *)o);
}

/* ---- Cells shared by the text outputs ----------------------------------- */

/* A count or rate for a column: "-" when unknown (v < 0); exact with
 * human == 0, else in at most four characters through humanize_number(3):
 * bytes scale by 1024 (720B, 1.0M), messages by 1000 (99.8, 1.5K). */
static void cell_num(char *buf, size_t size, double v, int bytes, int rate,
		     int human)
{
	if (v < 0) {
		snprintf(buf, size, "-");
	} else if (!human) {
		snprintf(buf, size, rate ? "%.1f" : "%.0f", v);
	} else if (rate && !bytes && v < 99.95) { /* not "100.0" */
		snprintf(buf, size, "%.1f", v);
	} else if (v >= 9.2e18) {
		snprintf(buf, size, "huge");
	} else {
		int flags = HN_NOSPACE | HN_DECIMAL |
			    (bytes ? HN_B : HN_DIVISOR_1000);
		if (humanize_number(buf, size < 5 ? size : 5,
				    (int64_t)(v + 0.5), "", HN_AUTOSCALE,
				    flags) < 0)
			snprintf(buf, size, "%.0f", v);
	}
}

static void cell_u64(char *buf, size_t size, uint64_t v, int bytes, int human)
{
	if (!human)
		snprintf(buf, size, "%" PRIu64, v);
	else
		cell_num(buf, size, (double)v, bytes, 0, 1);
}

static void cell_demand(char *buf, size_t size, uint64_t v, int human)
{
	if (v == CRS_UNBOUNDED)
		snprintf(buf, size, "unbounded");
	else
		cell_u64(buf, size, v, 0, human);
}

/* ---- Columns that fit ---------------------------------------------------- */

/* A table column. Narrow screens drop the columns of highest prio first
 * (prio 0 always stays); the flex column (names) gives up width first,
 * down to FLEX_MIN, its text elided in the middle. Numbers are never cut:
 * a column that does not fit whole is dropped whole. */
struct col {
	const char *head;
	int left;  /* left-aligned (text), else right-aligned (numbers) */
	int prio;
	int flex;
};

#define CELL (CRS_NAME_MAX + 1) /* a name fits */
#define MAX_COLS 12
#define FLEX_MIN 12

struct table {
	const struct col *cols;
	int ncols, nrows;
	char (*cells)[CELL]; /* row-major, nrows * ncols; NULL if no memory */
	int width[MAX_COLS]; /* 0: not shown */
};

static int table_new(struct table *tb, const struct col *cols, int ncols,
		     int nrows)
{
	memset(tb, 0, sizeof(*tb));
	tb->cols = cols;
	tb->ncols = ncols;
	tb->nrows = nrows;
	tb->cells = calloc((size_t)(nrows ? nrows : 1) * (size_t)ncols,
			   sizeof(*tb->cells));
	return tb->cells ? 0 : -ENOMEM;
}

static char *table_cell(struct table *tb, int row, int c)
{
	return tb->cells[(size_t)row * (size_t)tb->ncols + (size_t)c];
}

/* Choose the columns and widths for a line of `budget` characters (<= 0:
 * no limit, everything at its natural width). */
static void table_fit(struct table *tb, int budget)
{
	int natural[MAX_COLS], used = -1, flex = -1;
	for (int c = 0; c < tb->ncols; c++) {
		int w = (int)strlen(tb->cols[c].head);
		for (int r = 0; r < tb->nrows; r++) {
			int len = (int)strlen(table_cell(tb, r, c));
			if (len > w)
				w = len;
		}
		natural[c] = w;
		tb->width[c] = 0;
		if (tb->cols[c].flex)
			flex = c;
	}
	int flex_min = flex < 0			 ? 0
		       : natural[flex] < FLEX_MIN ? natural[flex]
						  : FLEX_MIN;
	for (int prio = 0; prio < 10; prio++) {
		for (int c = 0; c < tb->ncols; c++) {
			if (tb->cols[c].prio != prio)
				continue;
			int w = c == flex ? flex_min : natural[c];
			if (budget > 0 && prio > 0 && used + 1 + w > budget)
				continue;
			tb->width[c] = w;
			used += 1 + w;
		}
	}
	if (flex >= 0 && tb->width[flex]) {
		int room = budget > 0 ? budget - used : natural[flex];
		int w = flex_min + (room > 0 ? room : 0);
		tb->width[flex] = w < natural[flex] ? w : natural[flex];
	}
}

/* s in w characters: as it is, or its two ends around a '~'. */
static void elide(char *out, size_t size, const char *s, int w)
{
	int len = (int)strlen(s);
	if (len <= w || w < 3) {
		snprintf(out, size, "%.*s", w, s);
		return;
	}
	int head = (w - 1) / 2, tail = w - 1 - head;
	snprintf(out, size, "%.*s~%s", head, s, s + len - tail);
}

/* Row `row` (-1: the heads) as one line. */
static void table_line(const struct table *tb, int row, char *buf, size_t size)
{
	size_t at = 0;
	buf[0] = 0;
	for (int c = 0; c < tb->ncols && at < size; c++) {
		int w = tb->width[c];
		if (!w)
			continue;
		const char *text = row < 0 ? tb->cols[c].head
					   : tb->cells[(size_t)row * (size_t)tb->ncols +
						       (size_t)c];
		char cut[CELL];
		elide(cut, sizeof(cut), text, w);
		int n = snprintf(buf + at, size - at, "%s%*s%s",
				 at ? " " : "", tb->cols[c].left ? 0 : w - (int)strlen(cut),
				 "", cut);
		if (n < 0)
			break;
		at += (size_t)n;
		if (tb->cols[c].left && c + 1 < tb->ncols && at < size) {
			n = snprintf(buf + at, size - at, "%*s",
				     w - (int)strlen(cut), "");
			at += n > 0 ? (size_t)n : 0;
		}
	}
	/* No trailing blanks: a left-aligned last column pads nothing. */
	while (at > 0 && at < size && buf[at - 1] == ' ')
		buf[--at] = 0;
}

/* ---- The stream and subscriber tables ------------------------------------ */

enum { SC_NAME, SC_PID, SC_MODE, SC_STATE, SC_RATE, SC_BRATE, SC_FILL,
       SC_DROPS, SC_SUBS, SC_REPLAY, SC_HELD, SC_N };

static const struct col stream_cols[SC_N] = {
	[SC_NAME] = { "NAME", 1, 0, 1 },     [SC_PID] = { "PID", 0, 4, 0 },
	[SC_MODE] = { "MODE", 1, 7, 0 },     [SC_STATE] = { "STATE", 1, 0, 0 },
	[SC_RATE] = { "MSG/S", 0, 1, 0 },    [SC_BRATE] = { "BYTES/S", 0, 5, 0 },
	[SC_FILL] = { "FILL%", 0, 2, 0 },    [SC_DROPS] = { "DROPS", 0, 6, 0 },
	[SC_SUBS] = { "SUBS", 0, 1, 0 },     [SC_REPLAY] = { "REPLAY", 0, 3, 0 },
	[SC_HELD] = { "HELD-BY", 0, 0, 0 },
};

enum { UC_SLOT, UC_PID, UC_COMM, UC_STATE, UC_LAG, UC_LAGB, UC_DEMAND,
       UC_REQ, UC_CONS, UC_WAKE, UC_HOLD, UC_N };

static const struct col sub_cols[UC_N] = {
	[UC_SLOT] = { "SLOT", 0, 6, 0 },      [UC_PID] = { "PID", 0, 0, 0 },
	[UC_COMM] = { "COMMAND", 1, 2, 1 },   [UC_STATE] = { "STATE", 1, 1, 0 },
	[UC_LAG] = { "LAG(MSG)", 0, 1, 0 },   [UC_LAGB] = { "LAG(BYTES)", 0, 5, 0 },
	[UC_DEMAND] = { "DEMAND", 0, 1, 0 },  [UC_REQ] = { "REQUESTED", 0, 3, 0 },
	[UC_CONS] = { "CONSUMED", 0, 3, 0 },  [UC_WAKE] = { "WAKEUPS/S", 0, 4, 0 },
	[UC_HOLD] = { "HOLDING", 1, 0, 0 },
};

/* Why a stream cannot be read, in words, or NULL: the library's account
 * of the failure, or for a handshake still waiting, our own deadline. */
static const char *stream_why(const struct top_stream *s)
{
	if (s->err)
		return s->why[0] && strcmp(s->why, "no error") ? s->why
							       : crs_strerror(s->err);
	if (s->state == TOP_NO_ANSWER)
		return "the publisher did not answer within 0.25 s (timed "
		       "out waiting; stopped?)";
	return NULL;
}

/* What the STATE column says: for a live stream what it did over the
 * interval, else how it ended or why it cannot be read. */
static const char *stream_state_text(const struct top_stream *s)
{
	if (s->state == CRS_STREAM_LIVE && s->activity != ACT_UNKNOWN)
		return activity_names[s->activity];
	return state_name(s->state);
}

static void stream_cells(struct table *tb, int row, const struct top_stream *s,
			 int human)
{
	char *c[SC_N];
	for (int k = 0; k < SC_N; k++) {
		c[k] = table_cell(tb, row, k);
		snprintf(c[k], CELL, "-");
	}
	const struct crs_stream_info *i = &s->info;
	snprintf(c[SC_NAME], CELL, "%s", s->name);
	if (s->have) {
		snprintf(c[SC_PID], CELL, "%d", i->pub_pid);
		mode_text(c[SC_MODE], CELL, i->mode);
		snprintf(c[SC_FILL], CELL, "%.1f", 100 * fill_of(s));
		cell_u64(c[SC_DROPS], CELL, i->dropped, 0, human);
		snprintf(c[SC_SUBS], CELL, "%d", s->nsubs);
		if (i->mode == CRS_MODE_REPLAY)
			cell_u64(c[SC_REPLAY], CELL, i->retained, 0, human);
		const struct top_sub *h = holder(s);
		if (h)
			snprintf(c[SC_HELD], CELL, "%d", h->i.pid);
	}
	snprintf(c[SC_STATE], CELL, "%s", stream_state_text(s));
	cell_num(c[SC_RATE], CELL, s->msg_rate, 0, 1, human);
	cell_num(c[SC_BRATE], CELL, s->byte_rate, 1, 1, human);
}

static int stream_table(struct table *tb, const struct top_set *t, int human,
			int budget)
{
	if (table_new(tb, stream_cols, SC_N, t->n) < 0)
		return -ENOMEM;
	for (int r = 0; r < t->n; r++)
		stream_cells(tb, r, t->v[r], human);
	table_fit(tb, budget);
	return 0;
}

/* Row r of the stream table (-1: the heads) and, after the columns, why
 * the stream cannot be read. */
static void stream_line(const struct table *tb, const struct top_set *t, int r,
			char *buf, size_t size)
{
	table_line(tb, r, buf, size);
	size_t len = strlen(buf);
	const char *why = r >= 0 ? stream_why(t->v[r]) : NULL;
	if (why && len + 3 < size)
		snprintf(buf + len, size - len, "  %s", why);
}

static void sub_cells(struct table *tb, int row, const struct top_sub *d,
		      int human)
{
	char *c[UC_N];
	for (int k = 0; k < UC_N; k++)
		c[k] = table_cell(tb, row, k);
	snprintf(c[UC_SLOT], CELL, "%d", d->i.slot);
	snprintf(c[UC_PID], CELL, "%d", d->i.pid);
	snprintf(c[UC_COMM], CELL, "%s", d->comm);
	snprintf(c[UC_STATE], CELL, "%s", activity_names[d->activity]);
	cell_u64(c[UC_LAG], CELL, d->i.lag_messages, 0, human);
	cell_u64(c[UC_LAGB], CELL, d->i.lag_bytes, 1, human);
	cell_demand(c[UC_DEMAND], CELL, d->i.outstanding, human);
	cell_demand(c[UC_REQ], CELL, d->i.requested, human);
	/* Messages consumed since it joined: the unit of REQUESTED. */
	cell_u64(c[UC_CONS], CELL,
		 d->i.consumed > d->i.joined ? d->i.consumed - d->i.joined : 0,
		 0, human);
	cell_num(c[UC_WAKE], CELL, d->wake_rate, 0, 1, human);
	snprintf(c[UC_HOLD], CELL, "%s", d->i.holding_back ? "yes" : "");
}

static int sub_table(struct table *tb, const struct top_stream *s, int human,
		     int budget)
{
	if (table_new(tb, sub_cols, UC_N, shown_subs(s)) < 0)
		return -ENOMEM;
	for (int k = 0; k < shown_subs(s); k++)
		sub_cells(tb, k, &s->subs[k], human);
	table_fit(tb, budget);
	return 0;
}

/* ---- Batch output: plain text ------------------------------------------- */

static void print_text(FILE *f, const struct top_set *t,
		       const struct top_opts *o)
{
	char line[LINE_BYTES], when[32];
	clock_text(when, sizeof(when), 1);
	fprintf(f, "crs-top %s  dir %s  streams %d  sort %s%s\n", when,
		t->dir[0] ? t->dir : "(none)", t->n, sort_names[o->sort],
		o->reverse ? " reversed" : "");
	if (t->list_err)
		fprintf(f, "error: cannot list the runtime directory: %s\n",
			crs_strerror(t->list_err));
	struct table tb;
	if (stream_table(&tb, t, 0, 0) < 0) {
		fprintf(f, "error: out of memory\n\n");
		return;
	}
	stream_line(&tb, t, -1, line, sizeof(line));
	fprintf(f, "%s\n", line);
	for (int i = 0; i < t->n; i++) {
		const struct top_stream *s = t->v[i];
		stream_line(&tb, t, i, line, sizeof(line));
		fprintf(f, "%s\n", line);
		struct table st;
		if (!shown_subs(s) || sub_table(&st, s, 0, 0) < 0)
			continue;
		table_line(&st, -1, line, sizeof(line));
		fprintf(f, "  %s\n", line);
		for (int k = 0; k < shown_subs(s); k++) {
			table_line(&st, k, line, sizeof(line));
			fprintf(f, "  %s\n", line);
		}
		free(st.cells);
	}
	free(tb.cells);
	fputc('\n', f);
}

/* ---- Batch output: JSON, one document per line -------------------------- */

static void json_rate(FILE *f, const char *key, double v)
{
	if (v < 0)
		fprintf(f, ",\"%s\":null", key);
	else
		fprintf(f, ",\"%s\":%.3f", key, v);
}

static void json_demand(FILE *f, const char *key, uint64_t v)
{
	if (v == CRS_UNBOUNDED)
		fprintf(f, ",\"%s\":\"unbounded\"", key);
	else
		fprintf(f, ",\"%s\":%" PRIu64, key, v);
}

static void json_activity(FILE *f, int activity)
{
	if (activity == ACT_UNKNOWN)
		fputs("null", f);
	else
		fprintf(f, "\"%s\"", activity_names[activity]);
}

static void json_sub(FILE *f, const struct top_sub *d)
{
	const struct crs_sub_info *i = &d->i;
	fprintf(f, "{\"slot\":%d,\"pid\":%d,\"command\":", i->slot, i->pid);
	tool_json_str(f, d->comm);
	fprintf(f, ",\"activity\":");
	json_activity(f, d->activity);
	fprintf(f, ",\"joined\":%" PRIu64, i->joined);
	json_demand(f, "requested", i->requested);
	json_demand(f, "outstanding", i->outstanding);
	fprintf(f,
		",\"consumed\":%" PRIu64 ",\"lag_messages\":%" PRIu64
		",\"lag_bytes\":%" PRIu64 ",\"wakeups\":%" PRIu64
		",\"paced\":%" PRIu64,
		i->consumed, i->lag_messages, i->lag_bytes, i->wakeups,
		i->paced);
	json_rate(f, "wakeups_per_s", d->wake_rate);
	fprintf(f, ",\"holding_back\":%s}", i->holding_back ? "true" : "false");
}

/* Every key is always present: null where a stream could not be read. */
static void json_stream(FILE *f, const struct top_stream *s)
{
	static const char *const stat_keys[] = {
		"pid", "command", "activity", "mode", "ring_size", "ring_used",
		"ring_fill",
		"max_message", "published", "bytes", "dropped", "msgs_per_s",
		"bytes_per_s", "subscriber_count", "wakes", "no_demand",
		"no_room", "evicted", "refused", "epoch", "retained",
		"retained_bytes", "retained_age_ns", "end_code", "end_message",
		"sampled_ns"
	};
	const struct crs_stream_info *i = &s->info;
	fputs("{\"name\":", f);
	tool_json_str(f, s->name);
	fprintf(f, ",\"state\":\"%s\",\"gone\":%s,\"error\":",
		state_name(s->state), s->gone ? "true" : "false");
	if (stream_why(s))
		tool_json_str(f, stream_why(s));
	else
		fputs("null", f);
	if (!s->have) {
		for (size_t k = 0; k < sizeof(stat_keys) / sizeof(*stat_keys);
		     k++)
			fprintf(f, ",\"%s\":null", stat_keys[k]);
		fputs(",\"subscribers\":[]}", f);
		return;
	}
	char mode[16];
	mode_text(mode, sizeof(mode), i->mode);
	fprintf(f, ",\"pid\":%d,\"command\":", i->pub_pid);
	tool_json_str(f, s->comm);
	fputs(",\"activity\":", f);
	json_activity(f, s->activity);
	fprintf(f,
		",\"mode\":\"%s\",\"ring_size\":%" PRIu64
		",\"ring_used\":%" PRIu64 ",\"ring_fill\":%.6f"
		",\"max_message\":%" PRIu32 ",\"published\":%" PRIu64
		",\"bytes\":%" PRIu64 ",\"dropped\":%" PRIu64,
		mode, i->ring_size, i->ring_used, fill_of(s),
		i->max_message, i->published, i->bytes, i->dropped);
	json_rate(f, "msgs_per_s", s->msg_rate);
	json_rate(f, "bytes_per_s", s->byte_rate);
	fprintf(f,
		",\"subscriber_count\":%d,\"wakes\":%" PRIu64
		",\"no_demand\":%" PRIu64 ",\"no_room\":%" PRIu64
		",\"evicted\":%" PRIu64 ",\"refused\":%" PRIu64
		",\"epoch\":%" PRIu64 ",\"retained\":%" PRIu64
		",\"retained_bytes\":%" PRIu64,
		s->nsubs, i->wakes, i->no_demand, i->no_room, i->evicted,
		i->refused, i->epoch, i->retained, i->retained_bytes);
	if (i->retained_age_ns < 0)
		fputs(",\"retained_age_ns\":null", f);
	else
		fprintf(f, ",\"retained_age_ns\":%" PRId64, i->retained_age_ns);
	fprintf(f, ",\"end_code\":%d,\"end_message\":", i->end_code);
	tool_json_str(f, i->end_message);
	fprintf(f, ",\"sampled_ns\":%" PRId64 ",\"subscribers\":[",
		i->sampled_ns);
	for (int k = 0; k < shown_subs(s); k++) {
		if (k)
			fputc(',', f);
		json_sub(f, &s->subs[k]);
	}
	fputs("]}", f);
}

static void print_json(FILE *f, const struct top_set *t,
		       const struct top_opts *o)
{
	struct timespec wall;
	clock_gettime(CLOCK_REALTIME, &wall);
	fprintf(f, "{\"time\":%lld.%03ld,\"dir\":", (long long)wall.tv_sec,
		wall.tv_nsec / 1000000);
	tool_json_str(f, t->dir);
	fprintf(f, ",\"interval_s\":%.3f,\"sort\":\"%s\",\"error\":",
		o->delay_s, sort_names[o->sort]);
	if (t->list_err)
		tool_json_str(f, crs_strerror(t->list_err));
	else
		fputs("null", f);
	fputs(",\"streams\":[", f);
	for (int i = 0; i < t->n; i++) {
		if (i)
			fputc(',', f);
		json_stream(f, t->v[i]);
	}
	fputs("]}\n", f);
}

/* Sleep until the monotonic deadline. Returns nonzero if a signal asked
 * us to stop meanwhile. */
static int nap_until(int64_t deadline)
{
	while (!g_stop) {
		int64_t left = deadline - now_ns();
		if (left <= 0)
			return 0;
		struct timespec ts = { left / 1000000000, left % 1000000000 };
		nanosleep(&ts, NULL);
	}
	return 1;
}

/* Batch mode: a first snapshot, then a report after every interval, so
 * that every report carries rates (a stream first seen in a report has
 * none yet: null, or "-"). */
static int run_batch(struct top_set *t, const struct top_opts *o)
{
	int64_t step = (int64_t)(o->delay_s * NS_PER_S);
	set_refresh(t);
	set_settle(t, FIRST_DRAW_NS);
	int64_t next = now_ns() + step;
	for (long it = 0; !o->count || it < o->count; it++) {
		if (nap_until(next))
			break;
		next += step;
		int64_t now = now_ns();
		if (next < now)
			next = now + step; /* fell behind: do not bunch up */
		set_refresh(t);
		set_sort(t, o);
		if (o->json)
			print_json(stdout, t, o);
		else
			print_text(stdout, t, o);
		if (fflush(stdout) == EOF || ferror(stdout)) {
			fprintf(stderr, "crs-top: cannot write: %s\n",
				strerror(errno));
			return EXIT_RUNTIME;
		}
	}
	return EXIT_SUCCESS;
}

/* ---- The interactive view ----------------------------------------------- */

enum { VIEW_LIST, VIEW_SUBS };
enum { TUI_NONE, TUI_QUIT, TUI_REFRESH };

struct tui {
	struct top_opts *o;
	int view;
	int help;
	char sel[CRS_NAME_MAX + 1]; /* selected stream, kept across sorts */
	int sel_idx;
	int first;	/* first stream row on screen */
	int sub_first;	/* first subscriber row on screen */
};

/* Print row y, clipped to the width and padded across it (so that a
 * highlighted row is a full bar). Rows off screen are skipped. */
__attribute__((format(printf, 3, 4))) static void
put_line(int y, attr_t attr, const char *fmt, ...)
{
	if (y < 0 || y >= LINES || COLS <= 0)
		return;
	char buf[LINE_BYTES];
	va_list ap;
	va_start(ap, fmt);
	int len = vsnprintf(buf, sizeof(buf), fmt, ap);
	va_end(ap);
	if (len < 0)
		len = 0;
	if (len > (int)sizeof(buf) - 1)
		len = (int)sizeof(buf) - 1;
	int width = COLS < (int)sizeof(buf) - 1 ? COLS : (int)sizeof(buf) - 1;
	if (y == LINES - 1)
		width--; /* the last cell would scroll the screen */
	while (len < width)
		buf[len++] = ' ';
	buf[len] = 0;
	attrset(attr);
	mvaddnstr(y, 0, buf, width);
	attrset(A_NORMAL);
}

/* The selected stream's index now (after a sort or a change), or -1. */
static int tui_select(struct tui *u, const struct top_set *t)
{
	if (!t->n)
		return -1;
	int i;
	for (i = 0; i < t->n; i++)
		if (!strcmp(t->v[i]->name, u->sel))
			break;
	if (i == t->n) /* it left: keep the place */
		i = u->sel_idx < t->n ? u->sel_idx : t->n - 1;
	if (i < 0)
		i = 0;
	u->sel_idx = i;
	snprintf(u->sel, sizeof(u->sel), "%s", t->v[i]->name);
	return i;
}

static void tui_move(struct tui *u, const struct top_set *t, int delta)
{
	if (u->view == VIEW_SUBS) {
		u->sub_first += delta;
		if (u->sub_first < 0)
			u->sub_first = 0;
		return;
	}
	int i = tui_select(u, t);
	if (i < 0)
		return;
	long j = (long)i + delta;
	j = j < 0 ? 0 : j >= t->n ? t->n - 1 : j;
	u->sel_idx = (int)j;
	snprintf(u->sel, sizeof(u->sel), "%s", t->v[j]->name);
}

static void draw_title(const struct tui *u, const struct top_set *t,
		       const char *what)
{
	char when[16];
	clock_text(when, sizeof(when), 0);
	put_line(0, A_BOLD, "crs-top %s  %s  refresh %gs  sort %s%s  dir %s",
		 when, what, u->o->delay_s, sort_names[u->o->sort],
		 u->o->reverse ? " (reversed)" : "",
		 t->dir[0] ? t->dir : "(none)");
}

static void draw_list(struct tui *u, const struct top_set *t)
{
	char line[LINE_BYTES], what[32], total[16];
	double rate = 0;
	for (int i = 0; i < t->n; i++)
		rate += t->v[i]->msg_rate > 0 ? t->v[i]->msg_rate : 0;
	cell_num(total, sizeof(total), rate, 0, 1, 1);
	snprintf(what, sizeof(what), "streams %d", t->n);
	draw_title(u, t, what);
	if (t->list_err)
		put_line(1, A_BOLD, "cannot list the runtime directory: %s",
			 crs_strerror(t->list_err));
	else
		put_line(1, A_NORMAL,
			 "total %s msg/s  Enter subscribers  n r l s sort  "
			 "x prune dead  h help  q quit",
			 total);
	struct table tb;
	if (stream_table(&tb, t, 1, COLS) < 0) {
		put_line(2, A_BOLD, "out of memory");
		return;
	}
	stream_line(&tb, t, -1, line, sizeof(line));
	put_line(2, A_REVERSE, "%s", line);
	int rows = LINES - 3;
	int sel = tui_select(u, t);
	if (!t->n)
		put_line(3, A_NORMAL, "no streams in %s",
			 t->dir[0] ? t->dir : "the runtime directory");
	if (sel >= 0 && rows >= 1) {
		if (sel < u->first)
			u->first = sel;
		if (sel >= u->first + rows)
			u->first = sel - rows + 1;
		if (u->first > t->n - rows)
			u->first = t->n - rows > 0 ? t->n - rows : 0;
		for (int r = 0; r < rows && u->first + r < t->n; r++) {
			int i = u->first + r;
			stream_line(&tb, t, i, line, sizeof(line));
			attr_t a = i == sel ? A_REVERSE | A_BOLD : A_NORMAL;
			if (t->v[i]->activity == ACT_STALLED ||
			    t->v[i]->activity == ACT_STOPPED ||
			    t->v[i]->state == TOP_NO_ANSWER)
				a |= A_BOLD;
			put_line(3 + r, a, "%s", line);
		}
	}
	free(tb.cells);
}

static void draw_subs(struct tui *u, const struct top_set *t)
{
	char line[LINE_BYTES], what[CRS_NAME_MAX + 16];
	snprintf(what, sizeof(what), "stream %s", u->sel);
	draw_title(u, t, what);
	const struct top_stream *s = stream_find(t, u->sel);
	if (!s) {
		put_line(2, A_BOLD, "the stream is gone; Esc to go back");
		return;
	}
	const struct crs_stream_info *i = &s->info;
	if (!s->have) {
		put_line(1, A_NORMAL, "state %s%s%s", state_name(s->state),
			 stream_why(s) ? ": " : "",
			 stream_why(s) ? stream_why(s) : "");
		put_line(3, A_NORMAL, "no statistics; Esc to go back");
		return;
	}
	char mode[16], used[16], size[16], mr[16], br[16], pub[24], bytes[24],
		maxm[16];
	mode_text(mode, sizeof(mode), i->mode);
	cell_u64(used, sizeof(used), i->ring_used, 1, 1);
	cell_u64(size, sizeof(size), i->ring_size, 1, 1);
	cell_u64(maxm, sizeof(maxm), i->max_message, 1, 1);
	cell_num(mr, sizeof(mr), s->msg_rate, 0, 1, 1);
	cell_num(br, sizeof(br), s->byte_rate, 1, 1, 1);
	cell_u64(pub, sizeof(pub), i->published, 0, 1);
	cell_u64(bytes, sizeof(bytes), i->bytes, 1, 1);
	/* Short lines, so that an 80-column screen shows them whole. */
	put_line(1, A_NORMAL, "pid %d %s  %s  %s%s  ring %s/%s (%.1f%%)  max %s",
		 i->pub_pid, s->comm, mode, stream_state_text(s),
		 s->gone ? " (gone)" : "", used, size, 100 * fill_of(s), maxm);
	put_line(2, A_NORMAL,
		 "%s msg/s  %s/s  published %s  bytes %s  drops %" PRIu64
		 "  wakes %" PRIu64,
		 mr, br, pub, bytes, i->dropped, i->wakes);
	put_line(3, A_NORMAL,
		 "refused claims: no demand %" PRIu64 ", no room %" PRIu64
		 "  evicted %" PRIu64 "  refused %" PRIu64 "  epoch %" PRIu64,
		 i->no_demand, i->no_room, i->evicted, i->refused, i->epoch);
	char rb[24], age[24] = "-";
	cell_u64(rb, sizeof(rb), i->retained_bytes, 1, 1);
	if (i->retained_age_ns >= 0)
		snprintf(age, sizeof(age), "%.1fs",
			 (double)i->retained_age_ns / NS_PER_S);
	int y = 4;
	if (i->mode == CRS_MODE_REPLAY)
		put_line(y++, A_NORMAL,
			 "replay: %" PRIu64 " messages retained (%s), oldest %s",
			 i->retained, rb, age);
	if (s->state == CRS_STREAM_COMPLETED || s->state == CRS_STREAM_FAILED)
		put_line(y++, A_NORMAL, "ended: code %d%s%s", i->end_code,
			 i->end_message[0] ? ", " : "", i->end_message);
	put_line(y++, A_NORMAL,
		 "subscribers %d   Esc back  j k scroll  h help  q quit",
		 s->nsubs);
	struct table tb;
	if (sub_table(&tb, s, 1, COLS) < 0)
		return;
	table_line(&tb, -1, line, sizeof(line));
	put_line(y++, A_REVERSE, "%s", line);
	int rows = LINES - y, n = shown_subs(s);
	if (rows >= 1) {
		if (u->sub_first > n - rows)
			u->sub_first = n - rows > 0 ? n - rows : 0;
		for (int r = 0; r < rows && u->sub_first + r < n; r++) {
			int k = u->sub_first + r;
			table_line(&tb, k, line, sizeof(line));
			put_line(y + r,
				 s->subs[k].i.holding_back ? A_BOLD : A_NORMAL,
				 "%s", line);
		}
	}
	free(tb.cells);
}

static void draw_help(const struct tui *u)
{
	static const char *const text[] = {
		"crs-top: the streams in the runtime directory, refreshed live.",
		"",
		"Keys",
		"  j, Down     select the next stream (scroll, in a stream)",
		"  k, Up       select the previous stream",
		"  PgDn PgUp   a page down / up;  g Home, G End: first / last",
		"  Enter       show the selected stream's subscribers",
		"  Esc, Bksp   back to the stream list",
		"  n r l s     sort by name, message rate, lag (ring fill),",
		"              subscriber count;  R reverses the order",
		"  Space       refresh now",
		"  h, ?        this help;  q quit",
		"",
		"  x           prune dead streams from the list",
		"",
		"MSG/S, BYTES/S: over the refresh interval. FILL%: ring bytes",
		"not yet consumed by the slowest subscriber. REPLAY: messages",
		"a late joiner of a replay stream gets now. HELD-BY, HOLDING:",
		"the subscriber whose demand or position limits the publisher.",
		"STATE of a live stream or subscriber over the interval: live",
		"(moved), idle (all caught up), stalled (messages wait for a",
		"reader that does not move), stopped (SIGSTOP, a debugger);",
		"no-answer: the publisher does not answer the inspection.",
		"",
		"Press any key to continue.",
	};
	put_line(0, A_BOLD, "crs-top help  (refresh %gs)", u->o->delay_s);
	for (size_t k = 0; k < sizeof(text) / sizeof(*text); k++)
		put_line(2 + (int)k, A_NORMAL, "%s", text[k]);
}

static void tui_draw(struct tui *u, const struct top_set *t)
{
	erase();
	if (u->help)
		draw_help(u);
	else if (u->view == VIEW_SUBS)
		draw_subs(u, t);
	else
		draw_list(u, t);
	refresh();
}

static int tui_key(struct tui *u, struct top_set *t, int c)
{
	int page = LINES > 8 ? LINES - 4 : 1;
	if (c == KEY_RESIZE)
		return TUI_NONE;
	if (u->help) {
		u->help = 0; /* any key leaves the help */
		return TUI_NONE;
	}
	switch (c) {
	case 'q':
	case 'Q':
		return TUI_QUIT;
	case 'h':
	case '?':
		u->help = 1;
		break;
	case 'n':
		u->o->sort = SORT_NAME;
		break;
	case 'r':
		u->o->sort = SORT_RATE;
		break;
	case 'l':
		u->o->sort = SORT_LAG;
		break;
	case 's':
		u->o->sort = SORT_SUBS;
		break;
	case 'R':
		u->o->reverse = !u->o->reverse;
		break;
	case 'j':
	case KEY_DOWN:
		tui_move(u, t, 1);
		break;
	case 'k':
	case KEY_UP:
		tui_move(u, t, -1);
		break;
	case KEY_NPAGE:
		tui_move(u, t, page);
		break;
	case KEY_PPAGE:
		tui_move(u, t, -page);
		break;
	case 'g':
	case KEY_HOME:
		tui_move(u, t, -INT_MAX / 2);
		break;
	case 'G':
	case KEY_END:
		tui_move(u, t, INT_MAX / 2);
		break;
	case '\n':
	case '\r':
	case KEY_ENTER:
	case KEY_RIGHT:
		if (u->view == VIEW_LIST && tui_select(u, t) >= 0) {
			u->view = VIEW_SUBS;
			u->sub_first = 0;
		}
		break;
	case 27: /* Esc */
	case 127:
	case 8:
	case KEY_BACKSPACE:
	case KEY_LEFT:
		u->view = VIEW_LIST;
		break;
	case ' ':
		return TUI_REFRESH;
	case 'x':
		set_prune(t);
		break;
	default:
		break;
	}
	set_sort(t, u->o);
	return TUI_NONE;
}

static int run_tui(struct top_set *t, struct top_opts *o)
{
	SCREEN *scr = newterm(NULL, stdout, stdin);
	if (!scr) {
		fprintf(stderr, "crs-top: cannot drive this terminal (TERM=%s); "
				"try -b\n",
			getenv("TERM") ? getenv("TERM") : "");
		return EXIT_RUNTIME;
	}
	set_escdelay(ESC_DELAY_MS);
	cbreak();
	noecho();
	nonl();
	keypad(stdscr, TRUE);
	nodelay(stdscr, TRUE);
	curs_set(0);

	struct tui u = { .o = o, .view = VIEW_LIST };
	int64_t step = (int64_t)(o->delay_s * NS_PER_S);
	set_refresh(t);
	set_settle(t, FIRST_DRAW_NS);
	set_sort(t, o);
	tui_draw(&u, t);
	int64_t next = now_ns() + step;
	long shown = 1;
	while (!g_stop) {
		int64_t left = next - now_ns();
		int ms = left <= 0 ? 0 : (int)((left + 999999) / 1000000);
		if (jobs_pending(t) && ms > COLLECT_MS)
			ms = COLLECT_MS; /* show answers as they come */
		struct pollfd p = { .fd = STDIN_FILENO, .events = POLLIN };
		int r = poll(&p, 1, ms);
		if (r > 0 && (p.revents & (POLLHUP | POLLERR | POLLNVAL)))
			break; /* the terminal went away */
		int act = TUI_NONE, redraw = 0, c;
		while (act != TUI_QUIT && (c = getch()) != ERR) {
			act = tui_key(&u, t, c);
			redraw = 1;
			if (act == TUI_REFRESH)
				next = now_ns();
		}
		if (act == TUI_QUIT)
			break;
		if (jobs_pending(t) && set_collect(t)) {
			set_sort(t, o);
			redraw = 1;
		}
		int64_t now = now_ns();
		if (now >= next) {
			if (o->count && shown >= o->count)
				break;
			set_refresh(t);
			set_sort(t, o);
			shown++;
			next += step;
			if (next < now)
				next = now + step;
			redraw = 1;
		}
		if (redraw)
			tui_draw(&u, t);
	}
	endwin();
	delscreen(scr);
	return EXIT_SUCCESS;
}

/* ---- Options and main --------------------------------------------------- */

static void usage(FILE *f)
{
	fputs(
"usage: crs-top [-b] [--json] [-d SECONDS] [-n COUNT] [-o KEY] [-R]\n"
"Show the crs streams in the runtime directory and their subscribers, live.\n"
"\n"
"  -d SECONDS  refresh interval, fractions allowed (default 1)\n"
"  -n COUNT    exit after COUNT refreshes (default: run until stopped)\n"
"  -b          batch mode: plain text lines instead of the full screen\n"
"  -j, --json  batch mode, one JSON document per line and refresh\n"
"  -o KEY      sort by name, rate, lag (ring fill) or subs (default name)\n"
"  -R          reverse the sort order\n"
"  -h          show this help\n"
"Keys in the full screen: j k or arrows select, Enter shows subscribers,\n"
"Esc goes back, n r l s sort, R reverses, x prunes dead streams,\n"
"h help, q quits.\n"
"Streams live in $CRS_DIR, else $XDG_RUNTIME_DIR/crs, else /tmp/crs-$UID.\n"
"Exit status: 0 done, 1 error, 2 usage error.\n",
	      f);
}

__attribute__((format(printf, 1, 2))) static int usage_error(const char *fmt,
								 ...)
{
	va_list ap;
	va_start(ap, fmt);
	fputs("crs-top: ", stderr);
	vfprintf(stderr, fmt, ap);
	fputs("\nTry 'crs-top -h' for help.\n", stderr);
	va_end(ap);
	return EXIT_USAGE;
}

static int parse_sort(const char *s)
{
	for (int k = 0; k < SORT_NKEYS; k++)
		if (!strcmp(s, sort_names[k]))
			return k;
	if (!strcmp(s, "fill"))
		return SORT_LAG;
	if (!strcmp(s, "subscribers"))
		return SORT_SUBS;
	return -1;
}

/* Returns -1 to go on, or the status to exit with. */
static int parse_args(int argc, char **argv, struct top_opts *o)
{
	static const struct option longs[] = {
		{ "json", no_argument, NULL, 'j' },
		{ "batch", no_argument, NULL, 'b' },
		{ "delay", required_argument, NULL, 'd' },
		{ "iterations", required_argument, NULL, 'n' },
		{ "sort", required_argument, NULL, 'o' },
		{ "help", no_argument, NULL, 'h' },
		{ NULL, 0, NULL, 0 },
	};
	*o = (struct top_opts){ .delay_s = DEFAULT_DELAY_S, .sort = SORT_NAME };
	opterr = 0;
	int c;
	char *end;
	while ((c = getopt_long(argc, argv, "+bjd:n:o:Rh", longs, NULL)) != -1) {
		switch (c) {
		case 'b':
			o->batch = 1;
			break;
		case 'j':
			o->json = o->batch = 1;
			break;
		case 'd':
			errno = 0;
			o->delay_s = strtod(optarg, &end);
			if (end == optarg || *end || errno ||
			    !(o->delay_s >= MIN_DELAY_S &&
			      o->delay_s <= MAX_DELAY_S))
				return usage_error("-d: bad interval '%s' "
						   "(0.01 to 86400 seconds)",
						   optarg);
			break;
		case 'n':
			errno = 0;
			o->count = strtol(optarg, &end, 10);
			if (end == optarg || *end || errno || o->count < 1)
				return usage_error("-n: bad count '%s'", optarg);
			break;
		case 'o':
			o->sort = parse_sort(optarg);
			if (o->sort < 0)
				return usage_error("-o: unknown sort key '%s' "
						   "(name, rate, lag, subs)",
						   optarg);
			break;
		case 'R':
			o->reverse = 1;
			break;
		case 'h':
			usage(stdout);
			return EXIT_SUCCESS;
		default:
			return usage_error("unknown option or missing "
					   "argument");
		}
	}
	if (optind < argc)
		return usage_error("unexpected argument '%s'", argv[optind]);
	if (!isatty(STDIN_FILENO) || !isatty(STDOUT_FILENO))
		o->batch = 1; /* no terminal to draw on */
	return -1;
}

static void on_signal(int sig)
{
	g_stop = sig;
}

/* No SA_RESTART: a signal ends the current wait at once. A signal
 * ignored at start (nohup, a background job's SIGINT) stays ignored. */
static void catch_signals(void)
{
	static const int sigs[] = { SIGINT, SIGTERM, SIGHUP };
	struct sigaction sa, old;
	memset(&sa, 0, sizeof(sa));
	sa.sa_handler = on_signal;
	sigemptyset(&sa.sa_mask);
	for (size_t i = 0; i < sizeof(sigs) / sizeof(*sigs); i++)
		if (sigaction(sigs[i], NULL, &old) == 0 &&
		    old.sa_handler != SIG_IGN)
			sigaction(sigs[i], &sa, NULL);
}

int main(int argc, char **argv)
{
	struct top_opts o;
	int rc = parse_args(argc, argv, &o);
	if (rc >= 0)
		return rc;
	/* A directory that exists but may not be used is an error, not an
	 * empty screen; one not created yet just has no streams. */
	char dir[256];
	int dir_err = crs_runtime_dir(dir, sizeof(dir));
	if (dir_err < 0 && dir_err != -ENOENT) {
		fprintf(stderr, "crs-top: %s\n", crs_errmsg());
		return EXIT_RUNTIME;
	}
	struct top_set t;
	if (set_init(&t) < 0) {
		fputs("crs-top: out of memory\n", stderr);
		return EXIT_RUNTIME;
	}
	catch_signals();
	rc = o.batch ? run_batch(&t, &o) : run_tui(&t, &o);
	set_free(&t);
	if (g_stop) {
		/* The terminal is restored: end the way the signal asked. */
		fflush(stdout);
		signal(g_stop, SIG_DFL);
		raise(g_stop);
	}
	return rc;
}
