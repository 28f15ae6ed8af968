/*
 * crs-cat.c - the crs shell tool, written on the public API alone.
 *
 *   crs-cat -P NAME   publish stdin: a message per line (or per -d byte,
 *                     or per -b fixed-size chunk)
 *   crs-cat -C NAME   copy the stream to stdout, each message followed by
 *                     the delimiter (raw bytes with -b)
 *
 * This file owns option parsing, the stdin reader that fills claimed ring
 * space (-b chunks are read straight into the ring; lines are split out
 * of a read buffer and copied once, into space claimed for their length),
 * the buffered stdout writer, and the exit status: 0 done, 1 stream or
 * I/O error (one line on stderr naming the stream), 2 usage error. A line
 * longer than the max message (-m) fails the stream with EMSGSIZE.
 *
 * Both roles run on one crs_loop: the consumer registers its
 * subscription (on_next copies to the output buffer); the publisher
 * registers the stream (on_ready publishes what demand and room allow)
 * and stdin (read only while there is somewhere to put the input, so a
 * held stream holds its input). A self-pipe in the loop wakes it for
 * signals, so an idle tool sleeps in one wait with no timeout.
 *
 * SIGINT, SIGTERM and SIGHUP disconnect a publisher's stream with its
 * --on-disconnect strategy (default: ECANCELED) or cancel a subscription,
 * then the signal is raised again so that the shell sees how the tool
 * ended.
 */
#include <errno.h>
#include <fcntl.h>
#include <getopt.h>
#include <inttypes.h>
#include <limits.h>
#include <libutil.h> /* expand_number(3), from libbsd-overlay */
#include <poll.h>
#include <signal.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include "crs/crs.h"

#define EXIT_STREAM 1
#define EXIT_USAGE 2
#define PARSE_OK (-1)

#define TICK_MS 100	       /* -b: hold a chunk this long before staging */
#define FLUSH_IDLE_MS 1	       /* flush stdout once the stream paused this long */
#define READ_BLOCK (64 * 1024) /* line mode reads at least this much */
#define OUT_BUF (256 * 1024)
#define DEFAULT_RING (1ULL << 20)
#define RING_MIN (4ULL << 10)
#define RING_MAX (1ULL << 30)
#define DEFAULT_PREFETCH 128
#define DEFAULT_TIMEOUT_S 10.0
#define MAX_SUBSCRIBERS 64

/* Long options have codes above any byte. */
enum {
	OPT_REPLAY_BYTES = 256,
	OPT_REPLAY_AGE,
	OPT_ON_DISCONNECT,
	OPT_OVERFLOW,
	OPT_END
};

static const struct option long_opts[] = {
	{ "replay-bytes", required_argument, NULL, OPT_REPLAY_BYTES },
	{ "replay-age", required_argument, NULL, OPT_REPLAY_AGE },
	{ "on-disconnect", required_argument, NULL, OPT_ON_DISCONNECT },
	{ "overflow", required_argument, NULL, OPT_OVERFLOW },
	{ NULL, 0, NULL, 0 },
};

struct cat_opts {
	int role;		/* 'P' publish stdin, 'C' copy to stdout */
	const char *name;
	int delim;		/* message delimiter byte */
	int binary;		/* -b: fixed-size chunks / raw output */
	uint64_t chunk;		/* -b SIZE */
	uint64_t ring_bytes;	/* -r; 0 until derive_sizes() */
	uint64_t max_message;	/* -m; 0 until derive_sizes() */
	uint64_t wait_subs;	/* -w N */
	uint64_t auto_connect;	/* -a N: connect at N subscribers */
	int replay;		/* -R, --replay-bytes, --replay-age */
	uint64_t replay_count;	/* -R COUNT */
	uint64_t replay_bytes;	/* --replay-bytes SIZE */
	uint64_t replay_age_ms; /* --replay-age SECONDS */
	uint32_t on_disconnect; /* enum crs_disconnect */
	uint32_t overflow;	/* enum crs_overflow */
	double timeout_s;	/* -t */
	uint64_t count;		/* -c N; 0: no limit */
	uint64_t prefetch;	/* -p N */
	int wait_stream;	/* -W */
	int quiet;		/* -q */
};

static volatile sig_atomic_t g_signal;
static int g_quiet;
static int g_sigpipe[2] = { -1, -1 }; /* the handler writes, the loop reads */

/* ---- Messages ---------------------------------------------------------- */

static void say(const char *fmt, va_list ap)
{
	fputs("crs-cat: ", stderr);
	vfprintf(stderr, fmt, ap);
	fputc('\n', stderr);
}

/* An informational line, silenced by -q. */
static void info(const char *fmt, ...)
{
	if (g_quiet)
		return;
	va_list ap;
	va_start(ap, fmt);
	say(fmt, ap);
	va_end(ap);
}

/* The one error line: names the stream, what failed, the code and its
 * explanation (msg, or crs_strerror(code)). Returns EXIT_STREAM. */
static int fail(const char *name, const char *what, int code, const char *msg)
{
	code = code < 0 ? -code : code;
	fprintf(stderr, "crs-cat: stream '%s': %s (code %d: %s)\n", name, what,
		code, msg && *msg ? msg : crs_strerror(code));
	return EXIT_STREAM;
}

static int usage_error(const char *fmt, ...)
{
	va_list ap;
	va_start(ap, fmt);
	say(fmt, ap);
	va_end(ap);
	fputs("Try 'crs-cat -h' for help.\n", stderr);
	return EXIT_USAGE;
}

static void usage(void)
{
	fputs(
"usage: crs-cat -P NAME [-w N] [-a N] [-t SECONDS] [-r BYTES] [-m BYTES]\n"
"                       [-d C | -b SIZE] [-R COUNT] [--replay-bytes SIZE]\n"
"                       [--replay-age SECONDS] [--on-disconnect WHAT]\n"
"                       [--overflow WHAT] [-q]\n"
"       crs-cat -C NAME [-c N] [-p N] [-W] [-d C | -b] [-q]\n"
"Publish stdin to the crs stream NAME, or copy stream NAME to stdout.\n"
"\n"
"  -P NAME     publish stdin, one message per line (without the newline);\n"
"              at end of input complete the stream, wait for subscribers\n"
"              to consume it, exit. With no subscriber, nothing is sent:\n"
"              the publisher holds its input until one requests.\n"
"  -C NAME     write each message to stdout followed by the delimiter\n"
"  -d C        delimiter instead of newline: one byte, or \\0 \\t \\n \\r \\\\\n"
"  -b SIZE     -P: publish SIZE-byte chunks (the last may be shorter);\n"
"              -C: write messages as raw bytes (SIZE is optional there)\n"
"  -w N        -P: publish nothing before N subscribers are present\n"
"              (with --overflow error, drop or latest: and requested)\n"
"  -a N        -P: connect the stream once N subscribers arrived (default\n"
"              0: at once); they all see it from its first message\n"
"  -t SECONDS  -P: wait at most this long at the end (default 10)\n"
"  -r BYTES    -P: ring size, a power of two from 4K to 1G (default 1M,\n"
"              or larger to hold four of the largest message)\n"
"  -m BYTES    -P: largest message (default a quarter of the ring); a\n"
"              longer line fails the stream and the tool exits 1\n"
"  -R COUNT    -P: a replay stream: a late subscriber first gets the last\n"
"              COUNT messages (0: as many as the ring holds). A replay\n"
"              stream runs ahead of demand, bounded by the ring, and\n"
"              publishes with no subscriber present\n"
"  --replay-bytes SIZE\n"
"              -P: a replay stream keeping at most SIZE bytes of messages\n"
"  --replay-age SECONDS\n"
"              -P: a replay stream keeping messages younger than this\n"
"              (fractions allowed); bounds given together all apply\n"
"  --on-disconnect none|error|complete\n"
"              -P: what subscribers get when a signal stops the publisher:\n"
"              nothing (EPIPE once it closes), ECANCELED (the default),\n"
"              or the completion\n"
"  --overflow block|error|drop|latest\n"
"              -P: input that finds no demand or room is held until it\n"
"              can go (block, the default), fails the stream with ENOBUFS\n"
"              (error), is discarded and counted (drop), or only the\n"
"              newest is kept (latest)\n"
"  -c N        -C: exit after N messages, cancelling the subscription\n"
"  -p N        -C: prefetch, request N messages at a time (default 128)\n"
"  -W          -C: wait for the stream to appear instead of failing\n"
"  -q          no informational lines on stderr\n"
"  -h          show this help\n"
"Sizes take K, M, G suffixes (powers of 1024). Streams live in $CRS_DIR,\n"
"else $XDG_RUNTIME_DIR/crs, else /tmp/crs-$UID.\n"
"Exit status: 0 done, 1 stream or I/O error, 2 usage error.\n",
	      stdout);
}

/* ---- Option parsing ---------------------------------------------------- */

/* A byte count with an optional K/M/G suffix; > 0. */
static int parse_size(const char *s, uint64_t *out)
{
	uint64_t n;
	errno = 0;
	if (*s == '-' || expand_number(s, &n) < 0 || errno || n == 0)
		return -1;
	*out = n;
	return 0;
}

/* A decimal count from min to max. */
static int parse_count(const char *s, uint64_t min, uint64_t max,
		       uint64_t *out)
{
	char *end;
	errno = 0;
	unsigned long long n = strtoull(s, &end, 10);
	if (*s < '0' || *s > '9' || *end || errno || n < min || n > max)
		return -1;
	*out = n;
	return 0;
}

static int parse_seconds(const char *s, double *out)
{
	char *end;
	errno = 0;
	double t = strtod(s, &end);
	if (end == s || *end || errno || !(t >= 0 && t <= 86400.0 * 365))
		return -1;
	*out = t;
	return 0;
}

/* One byte, or one of the escapes \0 \t \n \r \\. */
static int parse_delim(const char *s, int *out)
{
	static const char esc[] = "0\0t\tn\nr\r\\\\";
	if (s[0] && !s[1]) {
		*out = (unsigned char)s[0];
		return 0;
	}
	if (s[0] != '\\' || !s[1] || s[2])
		return -1;
	for (size_t i = 0; i + 1 < sizeof(esc); i += 2) {
		if (esc[i] == s[1]) {
			*out = (unsigned char)esc[i + 1];
			return 0;
		}
	}
	return -1;
}

/* One of a list of words (NULL-terminated); its index, or -1. */
static int parse_word(const char *s, const char *const *words)
{
	for (int i = 0; words[i]; i++)
		if (strcmp(s, words[i]) == 0)
			return i;
	return -1;
}

/* Indexed by enum crs_disconnect and enum crs_overflow. */
static const char *const disconnect_words[] = { "error", "none", "complete",
						NULL };
static const char *const overflow_words[] = { "block", "error", "drop",
					      "latest", NULL };

/* Ring and max message for a publisher: -r and -m as given, else a ring
 * of at least 1 MiB that holds four of the largest message (-m or -b). */
static int derive_sizes(struct cat_opts *o)
{
	uint64_t need = o->max_message > o->chunk ? o->max_message : o->chunk;
	if (o->ring_bytes) {
		uint64_t r = o->ring_bytes;
		if (r < RING_MIN || r > RING_MAX || (r & (r - 1)))
			return usage_error("-r: the ring size must be a power "
					   "of two from 4K to 1G");
	} else {
		o->ring_bytes = DEFAULT_RING;
		while (o->ring_bytes / 4 < need && o->ring_bytes < RING_MAX)
			o->ring_bytes *= 2;
	}
	uint64_t cap = o->ring_bytes / 4;
	if (!o->max_message)
		o->max_message = cap;
	if (o->max_message > cap)
		return usage_error("-m: the largest message is at most a "
				   "quarter of the ring (%" PRIu64 " bytes)",
				   cap);
	if (o->chunk > o->max_message)
		return usage_error("-b: chunks of %" PRIu64 " bytes exceed the "
				   "largest message (%" PRIu64 " bytes)",
				   o->chunk, o->max_message);
	return PARSE_OK;
}

/* How an option is spelt, for messages: "-w" or "--overflow". */
static const char *opt_name(int c)
{
	static char buf[4];
	for (const struct option *l = long_opts; l->name; l++) {
		if (l->val == c) {
			static char lbuf[32];
			snprintf(lbuf, sizeof(lbuf), "--%s", l->name);
			return lbuf;
		}
	}
	snprintf(buf, sizeof(buf), "-%c", c);
	return buf;
}

/* Options valid for one role only, and the role they belong to. */
static int check_role(const struct cat_opts *o, const unsigned char *seen)
{
	static const int only_pub[] = {
		'w', 'a', 't', 'r', 'm', 'R', OPT_REPLAY_BYTES, OPT_REPLAY_AGE,
		OPT_ON_DISCONNECT, OPT_OVERFLOW, 0
	};
	static const int only_sub[] = { 'c', 'p', 'W', 0 };
	for (const int *c = only_pub; *c; c++)
		if (o->role == 'C' && seen[*c])
			return usage_error("%s is an option of -P", opt_name(*c));
	for (const int *c = only_sub; *c; c++)
		if (o->role == 'P' && seen[*c])
			return usage_error("%s is an option of -C", opt_name(*c));
	if (seen['d'] && seen['b'])
		return usage_error("-d and -b exclude each other");
	if (o->role == 'P' && o->binary && !o->chunk)
		return usage_error("-b needs a chunk SIZE with -P");
	return PARSE_OK;
}

/* -b takes an optional SIZE with -C: "-b" alone, or "-b SIZE". */
static int take_chunk(struct cat_opts *o, int argc, char **argv)
{
	const char *arg = optarg;
	if (!arg && optind < argc && argv[optind][0] != '-')
		arg = argv[optind++];
	o->binary = 1;
	if (arg && parse_size(arg, &o->chunk) < 0)
		return usage_error("-b: bad size '%s'", arg);
	return PARSE_OK;
}

/* The replay options: any of them makes a replay stream. */
static int take_replay(struct cat_opts *o, int c)
{
	double t;
	o->replay = 1;
	switch (c) {
	case 'R':
		return parse_count(optarg, 0, UINT64_MAX, &o->replay_count)
			       ? usage_error("-R: bad count '%s'", optarg)
			       : PARSE_OK;
	case OPT_REPLAY_BYTES:
		return parse_size(optarg, &o->replay_bytes)
			       ? usage_error("--replay-bytes: bad size '%s'",
					     optarg)
			       : PARSE_OK;
	default:
		if (parse_seconds(optarg, &t) || t <= 0)
			return usage_error("--replay-age: bad seconds '%s'",
					   optarg);
		/* Rounded up: a bound never ends up 0 (no bound). */
		o->replay_age_ms = (uint64_t)(t * 1000.0);
		if ((double)o->replay_age_ms < t * 1000.0)
			o->replay_age_ms++;
		return PARSE_OK;
	}
}

/* One option. Returns PARSE_OK, or an exit status. */
static int take_opt(struct cat_opts *o, int c, int argc, char **argv)
{
	int w;
	switch (c) {
	case 'P':
	case 'C':
		if (o->role)
			return usage_error("give one of -P and -C, once");
		o->role = c;
		o->name = optarg;
		return PARSE_OK;
	case 'd':
		return parse_delim(optarg, &o->delim) < 0
			       ? usage_error("-d: bad delimiter '%s'", optarg)
			       : PARSE_OK;
	case 'b':
		return take_chunk(o, argc, argv);
	case 'r':
	case 'm':
		return parse_size(optarg, c == 'r' ? &o->ring_bytes
						   : &o->max_message) < 0
			       ? usage_error("-%c: bad size '%s'", c, optarg)
			       : PARSE_OK;
	case 'w':
	case 'a':
		return parse_count(optarg, 0, MAX_SUBSCRIBERS,
				   c == 'w' ? &o->wait_subs : &o->auto_connect)
			       ? usage_error("-%c: bad count '%s' (0..%d)", c,
					     optarg, MAX_SUBSCRIBERS)
			       : PARSE_OK;
	case 'c':
	case 'p':
		return parse_count(optarg, 1,
				   c == 'c' ? UINT64_MAX : UINT32_MAX,
				   c == 'c' ? &o->count : &o->prefetch)
			       ? usage_error("-%c: bad count '%s'", c, optarg)
			       : PARSE_OK;
	case 't':
		return parse_seconds(optarg, &o->timeout_s)
			       ? usage_error("-t: bad seconds '%s'", optarg)
			       : PARSE_OK;
	case 'R':
	case OPT_REPLAY_BYTES:
	case OPT_REPLAY_AGE:
		return take_replay(o, c);
	case OPT_ON_DISCONNECT:
		if ((w = parse_word(optarg, disconnect_words)) < 0)
			return usage_error("--on-disconnect: '%s' is not none, "
					   "error or complete",
					   optarg);
		o->on_disconnect = (uint32_t)w;
		return PARSE_OK;
	case OPT_OVERFLOW:
		if ((w = parse_word(optarg, overflow_words)) < 0)
			return usage_error("--overflow: '%s' is not block, "
					   "error, drop or latest",
					   optarg);
		o->overflow = (uint32_t)w;
		return PARSE_OK;
	case 'W':
		o->wait_stream = 1;
		return PARSE_OK;
	case 'q':
		o->quiet = 1;
		return PARSE_OK;
	case 'h':
		usage();
		return EXIT_SUCCESS;
	default:
		return usage_error("unknown option or missing argument");
	}
}

/* Parse argv into o. Returns PARSE_OK, or the status to exit with. */
static int parse_args(int argc, char **argv, struct cat_opts *o)
{
	unsigned char seen[OPT_END] = { 0 };
	*o = (struct cat_opts){ .delim = '\n',
				.timeout_s = DEFAULT_TIMEOUT_S,
				.prefetch = DEFAULT_PREFETCH,
				.on_disconnect = CRS_DISCONNECT_SEND_ERROR,
				.overflow = CRS_OVERFLOW_BLOCK };
	opterr = 0;
	int c;
	while ((c = getopt_long(argc, argv, "+P:C:d:b::r:m:w:a:t:c:p:R:Wqh",
				long_opts, NULL)) != -1) {
		int rc = take_opt(o, c, argc, argv);
		if (rc != PARSE_OK)
			return rc;
		if (c > 0 && c < OPT_END)
			seen[c] = 1;
	}
	if (optind < argc)
		return usage_error("unexpected argument '%s'", argv[optind]);
	if (!o->role)
		return usage_error("give -P NAME to publish or -C NAME to "
				   "consume");
	if (crs_name_check(o->name) < 0)
		return usage_error("bad stream name '%s' (use [A-Za-z0-9._-], "
				   "at most %d, not starting with '.')",
				   o->name, CRS_NAME_MAX);
	int rc = check_role(o, seen);
	if (rc == PARSE_OK && o->role == 'P')
		rc = derive_sizes(o);
	return rc;
}

/* ---- Signals ----------------------------------------------------------- */

static void on_signal(int sig)
{
	int saved = errno;
	g_signal = sig;
	if (g_sigpipe[1] >= 0 && write(g_sigpipe[1], "", 1) < 0) {
		/* full: the loop has a wakeup pending already */
	}
	errno = saved;
}

/* No SA_RESTART: a signal interrupts read(2); the loop, which retries
 * its wait on EINTR, wakes on the self-pipe instead. A signal ignored at
 * start (nohup, a background job's SIGINT) stays ignored. */
static int signals_init(void)
{
	static const int sigs[] = { SIGINT, SIGTERM, SIGHUP };
	if (pipe2(g_sigpipe, O_CLOEXEC | O_NONBLOCK) < 0)
		return -errno;
	struct sigaction sa = { .sa_handler = on_signal }, old;
	sigemptyset(&sa.sa_mask);
	for (size_t i = 0; i < sizeof(sigs) / sizeof(sigs[0]); i++)
		if (sigaction(sigs[i], NULL, &old) == 0 &&
		    old.sa_handler != SIG_IGN)
			sigaction(sigs[i], &sa, NULL);
	signal(SIGPIPE, SIG_IGN); /* a closed stdout is EPIPE from write */
	return 0;
}

/* The loop's view of the self-pipe: empty it; the caller's loop sees
 * g_signal once crs_loop_run() returns. */
static void on_sigpipe(void *ctx, int fd, short revents)
{
	(void)ctx;
	(void)revents;
	char b[16];
	while (read(fd, b, sizeof(b)) > 0)
		;
}

/* A loop with the self-pipe in it. Returns 0 or -errno. */
static int loop_new(crs_loop **loop)
{
	int err = crs_loop_new(loop);
	if (err) {
		*loop = NULL;
		return err;
	}
	err = crs_loop_add_fd(*loop, g_sigpipe[0], POLLIN, on_sigpipe, NULL);
	if (err) {
		crs_loop_free(*loop);
		*loop = NULL;
	}
	return err;
}

/* Die of the signal that stopped us, as the shell expects. */
static void signals_reraise(void)
{
	if (!g_signal)
		return;
	signal(g_signal, SIG_DFL);
	raise(g_signal);
}

static int64_t now_ms(void)
{
	struct timespec ts;
	clock_gettime(CLOCK_MONOTONIC, &ts);
	return (int64_t)ts.tv_sec * 1000 + ts.tv_nsec / 1000000;
}

/* ---- Publisher --------------------------------------------------------- */

/* The publisher is a state machine driven by the loop: on_ready (demand
 * or room may have come, subscribers came or went), stdin readable, and
 * two timers (the -b hold tick, the -t deadline at the end). */
enum pub_phase {
	PH_WAITING,  /* -w N / -a N: for subscribers, stdin unread */
	PH_RUNNING,  /* reading stdin and publishing */
	PH_FLUSHING, /* --overflow latest, input done: the newest may
			still be held for demand */
	PH_DRAINING, /* completed: for subscribers to consume (-t) */
	PH_DONE
};

struct pub_run {
	crs_pub *pub;
	crs_loop *loop;
	const struct cat_opts *o;
	int phase;	  /* enum pub_phase */
	int err;	  /* -errno: stop, fail the stream */
	const char *what; /* what failed, for the error line */
	uint64_t messages;
	uint64_t bytes;
	int watching;	 /* stdin is in the loop */
	int eof;	 /* stdin ended */
	int held;	 /* input waits for demand or room (block) */
	int64_t deadline; /* ms: -t at the end; 0 none */
	/* Lines: buf[start, end) is unpublished input, of which the first
	 * `scanned` bytes hold no delimiter. */
	char *buf;
	size_t cap, start, scanned, end;
	/* -b: a chunk is filled in claimed ring space (claim) or, while
	 * nothing can be claimed, in the stage; `have` bytes so far. */
	void *claim;
	char *stage;
	int staging;
	size_t have;
	int64_t stage_at; /* ms: block held this long: stage; 0 none */
	/* latest: a message may be held inside the stream (offer kept it
	 * for want of demand); its length. */
	int maybe_held;
	size_t last_len;
};

static void pump(struct pub_run *p);

static int would_wait(int err)
{
	return err == -CRS_ENODEMAND || err == -CRS_ENOROOM || err == -ENOTCONN;
}

static void pub_fail(struct pub_run *p, int err, const char *what)
{
	if (!p->err) {
		p->err = err;
		p->what = what;
	}
}

static void counted(struct pub_run *p, size_t len)
{
	p->messages++;
	p->bytes += len;
}

/* Publish a copy of data. block: claim, copy, commit; returns 1 if it
 * must wait for demand or room. The other strategies: crs_pub_offer(),
 * which never waits (latest first tries claim/commit when nothing can
 * be held, so that messages leave in order). Returns 0, 1 or -errno. */
static int pub_put(struct pub_run *p, const void *data, size_t len)
{
	uint32_t overflow = p->o->overflow;
	void *buf;
	int err;
	if (overflow == CRS_OVERFLOW_BLOCK ||
	    (overflow == CRS_OVERFLOW_LATEST && !p->maybe_held)) {
		err = crs_pub_claim(p->pub, len, &buf);
		if (!err) {
			memcpy(buf, data, len);
			crs_pub_commit(p->pub, len);
			counted(p, len);
			return 0;
		}
		if (!would_wait(err)) {
			pub_fail(p, err, "cannot publish");
			return err;
		}
		if (overflow == CRS_OVERFLOW_BLOCK)
			return 1;
	}
	uint64_t dropped = crs_pub_dropped(p->pub);
	err = crs_pub_offer(p->pub, data, len);
	if (err) {
		if (would_wait(err) && overflow == CRS_OVERFLOW_ERROR)
			pub_fail(p, -ENOBUFS, "no demand or room for the "
					      "input (--overflow error)");
		else
			pub_fail(p, err, "cannot publish");
		return err;
	}
	int drop = crs_pub_dropped(p->pub) != dropped;
	if (overflow == CRS_OVERFLOW_LATEST) {
		/* Held, perhaps; a drop is the one held before, replaced. */
		if (drop) {
			p->messages--;
			p->bytes -= p->last_len;
		}
		counted(p, len);
		p->maybe_held = 1;
		p->last_len = len;
	} else if (!drop) {
		counted(p, len);
	}
	return 0;
}

/* latest: prove that nothing is held any more. A claim of the held
 * length succeeding means demand and room are there; the flush that
 * crs_pub_poll() then makes sends a held message, unless a subscriber
 * came or went in between (then try again at the next round). */
static void latest_probe(struct pub_run *p)
{
	void *buf;
	if (!p->maybe_held)
		return;
	int n = crs_pub_subscribers(p->pub);
	if (crs_pub_claim(p->pub, p->last_len, &buf) != 0)
		return;
	crs_pub_abort(p->pub);
	if (crs_pub_poll(p->pub) == n)
		p->maybe_held = 0;
}

/* Lines: publish every complete line in the buffer (and, at the end of
 * input, the last one without delimiter); stop at one that must wait. */
static void lines_pump(struct pub_run *p)
{
	size_t max = p->o->max_message;
	p->held = 0;
	while (!p->err) {
		char *line = p->buf + p->start;
		size_t avail = p->end - p->start, len;
		char *d = memchr(line + p->scanned, p->o->delim,
				 avail - p->scanned);
		if (d) {
			len = (size_t)(d - line);
		} else {
			p->scanned = avail;
			if (avail <= max && (!p->eof || !avail)) {
				/* Room for at least READ_BLOCK more. */
				memmove(p->buf, line, avail);
				p->start = 0;
				p->end = avail;
				return;
			}
			len = avail; /* a last line without delimiter */
		}
		if (len > max) {
			pub_fail(p, -EMSGSIZE, "line longer than the largest "
					       "message, see -m");
			return;
		}
		int r = pub_put(p, line, len);
		if (r) {
			p->held = r > 0;
			return;
		}
		p->start += len + (d != NULL);
		p->scanned = 0;
	}
}

/* -b: commit a filled claim, publish a filled stage, or find a place
 * for the next chunk: claimed ring space (zero copy) if possible. With
 * block, a chunk that cannot be claimed waits TICK_MS for demand, then
 * is read into the stage, so the end of input is seen even while the
 * stream is held; the other strategies stage (and offer) at once. */
static void chunks_pump(struct pub_run *p)
{
	size_t chunk = p->o->chunk;
	p->held = 0;
	while (!p->err) {
		if (p->claim) {
			if (p->have < chunk && !p->eof)
				return; /* for more input */
			if (p->have) {
				crs_pub_commit(p->pub, p->have);
				counted(p, p->have);
			} else {
				crs_pub_abort(p->pub);
			}
			p->claim = NULL;
			p->have = 0;
			continue;
		}
		if (p->staging) {
			if (p->have < chunk && !p->eof)
				return;
			if (p->have) {
				int r = pub_put(p, p->stage, p->have);
				if (r) {
					p->held = r > 0;
					return;
				}
			}
			p->staging = 0;
			p->have = 0;
			continue;
		}
		if (p->eof)
			return;
		int err = -CRS_ENODEMAND;
		if (p->o->overflow != CRS_OVERFLOW_LATEST)
			err = crs_pub_claim(p->pub, chunk, &p->claim);
		if (!err) {
			p->stage_at = 0;
			continue;
		}
		p->claim = NULL;
		if (!would_wait(err)) {
			pub_fail(p, err, "cannot publish");
			return;
		}
		if (p->o->overflow == CRS_OVERFLOW_BLOCK) {
			if (!p->stage_at)
				p->stage_at = now_ms() + TICK_MS;
			p->held = 1;
			return;
		}
		p->staging = 1;
	}
}

static void on_stdin(void *ctx, int fd, short revents);

/* Watch stdin while there is somewhere to put its input. */
static void pub_watch(struct pub_run *p, int want)
{
	if (want == p->watching)
		return;
	int err = want ? crs_loop_add_fd(p->loop, STDIN_FILENO, POLLIN,
					 on_stdin, p)
		       : crs_loop_remove_fd(p->loop, STDIN_FILENO);
	if (err && want)
		pub_fail(p, err, "cannot watch stdin");
	p->watching = want && !err;
}

/* Read stdin into the place pump() prepared. */
static void on_stdin(void *ctx, int fd, short revents)
{
	struct pub_run *p = ctx;
	(void)revents;
	char *dst;
	size_t room;
	if (!p->o->binary) {
		dst = p->buf + p->end;
		room = p->cap - p->end;
	} else {
		dst = p->claim ? p->claim : p->staging ? p->stage : NULL;
		room = p->o->chunk - p->have;
		if (!dst) {
			pub_watch(p, 0);
			return;
		}
		dst += p->have;
	}
	ssize_t n = read(fd, dst, room);
	if (n < 0) {
		if (errno != EINTR && errno != EAGAIN)
			pub_fail(p, -errno, "cannot read stdin");
	} else if (n == 0) {
		p->eof = 1;
	} else if (p->o->binary) {
		p->have += (size_t)n;
	} else {
		p->end += (size_t)n;
	}
	pump(p);
}

/* Complete, then give the subscribers present up to -t seconds (from
 * the end of input) to consume everything. A message that latest still
 * held is dropped (and counted) by the completion. */
static void pub_complete(struct pub_run *p)
{
	const struct cat_opts *o = p->o;
	uint64_t dropped = crs_pub_dropped(p->pub);
	crs_pub_complete(p->pub);
	if (crs_pub_dropped(p->pub) != dropped &&
	    o->overflow == CRS_OVERFLOW_LATEST) {
		p->messages--;
		p->bytes -= p->last_len;
	}
	if (o->overflow == CRS_OVERFLOW_DROP ||
	    o->overflow == CRS_OVERFLOW_LATEST)
		info("published %" PRIu64 " messages (%" PRIu64 " bytes) to "
		     "'%s', dropped %" PRIu64,
		     p->messages, p->bytes, o->name,
		     crs_pub_dropped(p->pub));
	else
		info("published %" PRIu64 " messages (%" PRIu64 " bytes) to "
		     "'%s'",
		     p->messages, p->bytes, o->name);
	p->phase = PH_DRAINING;
}

/* The -t deadline passed in phase FLUSHING or DRAINING. Running out of
 * time is worth a line, not a failure: the stream itself completed. */
static void pub_timeout(struct pub_run *p)
{
	const struct cat_opts *o = p->o;
	if (p->phase == PH_FLUSHING) {
		fprintf(stderr,
			"crs-cat: stream '%s': no demand within %g s for the "
			"newest message (--overflow latest)\n",
			o->name, o->timeout_s);
		pub_complete(p);
		if (crs_pub_wait_consumed(p->pub, 0) == 0) {
			p->phase = PH_DONE;
			return;
		}
	}
	int n = crs_pub_subscribers(p->pub);
	fprintf(stderr,
		"crs-cat: stream '%s': %d subscriber%s had not consumed "
		"everything after %g s\n",
		o->name, n, n == 1 ? "" : "s", o->timeout_s);
	p->phase = PH_DONE;
}

/* Connected, and -w N subscribers present. A strategy that does not
 * hold its input (error, drop, latest) also waits for those awaited to
 * have requested, or it would fail or drop the first messages in the
 * instant between a subscriber's arrival and its first request(n). */
static int pub_started(struct pub_run *p)
{
	const struct cat_opts *o = p->o;
	if (crs_pub_epoch(p->pub) < 1 ||
	    (uint64_t)crs_pub_subscribers(p->pub) < o->wait_subs)
		return 0;
	return o->overflow == CRS_OVERFLOW_BLOCK ||
	       (!o->wait_subs && !o->auto_connect) ||
	       crs_pub_demand(p->pub) > 0;
}

/* Advance as far as possible; called from every loop callback. */
static void pump(struct pub_run *p)
{
	const struct cat_opts *o = p->o;
	if (p->err || p->phase == PH_DONE)
		return;
	if (p->phase == PH_WAITING && pub_started(p))
		p->phase = PH_RUNNING;
	if (p->phase == PH_RUNNING) {
		latest_probe(p);
		if (o->binary)
			chunks_pump(p);
		else
			lines_pump(p);
		int done = p->eof && (o->binary ? !p->claim && !p->staging
					       : p->start == p->end);
		if (p->err || done) {
			pub_watch(p, 0);
		} else {
			int room = !o->binary || p->claim || p->staging;
			pub_watch(p, !p->held && room);
		}
		if (p->err || !done)
			return;
		p->deadline = now_ms() + (int64_t)(o->timeout_s * 1000.0 + 0.5);
		p->phase = PH_FLUSHING;
	}
	if (p->phase == PH_FLUSHING) {
		latest_probe(p);
		if (p->maybe_held)
			return;
		pub_complete(p);
	}
	if (p->phase == PH_DRAINING && crs_pub_wait_consumed(p->pub, 0) == 0)
		p->phase = PH_DONE;
}

static void on_ready(void *ctx, crs_pub *pub)
{
	(void)pub;
	pump(ctx);
}

/* Run the loop until done, an error or a signal; timers in between. */
static void pub_loop(struct pub_run *p)
{
	while (p->phase != PH_DONE && !p->err && !g_signal) {
		int64_t due = INT64_MAX;
		if (p->stage_at)
			due = p->stage_at;
		if (p->deadline && p->deadline < due)
			due = p->deadline;
		int64_t left = due - now_ms();
		int timeout = due == INT64_MAX ? -1
			      : left <= 0	? 0
			      : left > INT_MAX	? INT_MAX
						: (int)left;
		int r = crs_loop_run(p->loop, timeout);
		if (r == -EINTR)
			continue; /* a signal: the loop condition looks */
		if (r < 0) {
			pub_fail(p, r, "cannot wait for input or subscribers");
			break;
		}
		int64_t now = now_ms();
		if (p->stage_at && now >= p->stage_at) {
			/* Held a tick: read on into the stage. */
			p->stage_at = 0;
			if (p->phase == PH_RUNNING && !p->claim && !p->eof) {
				if (!p->stage &&
				    !(p->stage = malloc(p->o->chunk))) {
					pub_fail(p, -ENOMEM, "cannot allocate "
							     "the chunk "
							     "buffer");
					break;
				}
				p->staging = 1;
			}
			pump(p);
		}
		if (p->deadline && now >= p->deadline &&
		    (p->phase == PH_FLUSHING || p->phase == PH_DRAINING)) {
			pump(p); /* a last look */
			if (p->phase != PH_DONE)
				pub_timeout(p);
		}
	}
}

static int pub_create(const struct cat_opts *o, crs_pub **pub)
{
	struct crs_pub_opts po;
	crs_pub_opts_init(&po);
	po.ring_bytes = o->ring_bytes;
	po.max_message = (uint32_t)o->max_message;
	po.auto_connect = (int32_t)o->auto_connect;
	po.on_disconnect = o->on_disconnect;
	po.overflow = o->overflow;
	if (o->replay) {
		po.mode = CRS_MODE_REPLAY;
		po.replay_count = o->replay_count;
		po.replay_bytes = o->replay_bytes;
		po.replay_age_ms = o->replay_age_ms;
	}
	return crs_pub_create(o->name, &po, pub);
}

static int run_publisher(const struct cat_opts *o)
{
	crs_pub *pub;
	int err = pub_create(o, &pub);
	if (err)
		return fail(o->name,
			    err == -EEXIST ? "another publisher owns the name"
					   : "cannot create the stream",
			    err, crs_errmsg());
	struct pub_run p = { .pub = pub, .o = o };
	if (!o->binary) {
		p.cap = o->max_message + READ_BLOCK;
		if (!(p.buf = malloc(p.cap)))
			pub_fail(&p, -ENOMEM, "cannot allocate the line buffer");
	} else if (o->overflow != CRS_OVERFLOW_BLOCK) {
		if (!(p.stage = malloc(o->chunk)))
			pub_fail(&p, -ENOMEM, "cannot allocate the chunk buffer");
	}
	if (!p.err && (err = loop_new(&p.loop)) != 0)
		pub_fail(&p, err, "cannot create the event loop");
	if (!p.err) {
		uint64_t n = o->wait_subs > o->auto_connect ? o->wait_subs
							   : o->auto_connect;
		if (n)
			info("waiting for %d subscriber%s on '%s'", (int)n,
			     n == 1 ? "" : "s", o->name);
		err = crs_loop_add_pub(p.loop, pub, on_ready, &p);
		if (err)
			pub_fail(&p, err, "cannot serve the stream");
		else
			pub_loop(&p);
	}
	if (p.loop)
		crs_loop_free(p.loop);
	free(p.buf);
	free(p.stage);
	int rc = EXIT_SUCCESS;
	if (g_signal) {
		/* The --on-disconnect strategy: ECANCELED by default. */
		crs_pub_disconnect(pub, crs_pub_epoch(pub));
	} else if (p.err) {
		crs_pub_error(pub, -p.err, p.what);
		rc = fail(o->name, p.what, p.err, NULL);
	}
	crs_pub_close(pub);
	return rc;
}

/* ---- Subscriber -------------------------------------------------------- */

struct out {
	char *buf;
	size_t len;
	size_t cap;
};

static int write_all(const char *p, size_t n)
{
	while (n) {
		ssize_t w = write(STDOUT_FILENO, p, n);
		if (w < 0) {
			if (errno == EINTR)
				continue;
			return -errno;
		}
		p += w;
		n -= (size_t)w;
	}
	return 0;
}

static int out_flush(struct out *w)
{
	int err = write_all(w->buf, w->len);
	w->len = 0;
	return err;
}

/* Append a message and its delimiter (delim < 0: none). A big message
 * is written straight from the ring instead of being copied. */
static int out_put(struct out *w, const void *data, size_t len, int delim)
{
	size_t need = len + (delim >= 0);
	if (need > w->cap - w->len) {
		int err = out_flush(w);
		if (!err && len >= w->cap / 2) {
			err = write_all(data, len);
			len = 0;
		}
		if (err)
			return err;
	}
	if (len)
		memcpy(w->buf + w->len, data, len);
	w->len += len;
	if (delim >= 0)
		w->buf[w->len++] = (char)delim;
	return 0;
}

struct sub_run {
	crs_sub *sub;
	const struct cat_opts *o;
	struct out out;
	int delim;
	uint64_t messages;
	uint64_t bytes;
	int err;	  /* -errno: stdout failed (or the loop did) */
	const char *what;
	int stop;	  /* -c reached, stdout failed, or the stream ended */
	int ended;	  /* the terminal signal arrived */
	struct crs_end end;
};

/* Open the stream; with -W, retry until it appears (or a signal), also
 * after a publisher that went away during the handshake. */
static int sub_open(const struct cat_opts *o, crs_sub **sub)
{
	struct crs_sub_opts so;
	crs_sub_opts_init(&so);
	/* -c N is take(N): demand is managed by sub_take_more(). */
	so.prefetch = o->count ? 0 : (uint32_t)o->prefetch;
	so.wait_ms = o->wait_stream ? TICK_MS : 0;
	for (;;) {
		int err = crs_sub_open(o->name, &so, sub);
		if ((err != -ENOENT && err != -ECONNRESET) ||
		    !o->wait_stream || g_signal)
			return err;
	}
}

/* -c N: request in prefetch-sized batches, replenishing at 75% as the
 * library's prefetch does, but never asking for more than N in all. The
 * count requested is never 0, so the request cannot fail. */
static void sub_take_more(struct sub_run *s)
{
	uint64_t req = crs_sub_requested(s->sub);
	uint64_t owed = req - crs_sub_received(s->sub);
	uint64_t batch = s->o->prefetch, limit = s->o->count;
	if (req >= limit || owed > batch / 4)
		return;
	uint64_t n = batch - owed;
	crs_sub_request(s->sub, n < limit - req ? n : limit - req);
}

/* on_next: copy to the output. Reaching -c N or failing to write
 * cancels at once, so that the loop delivers nothing more. */
static void sub_on_next(void *ctx, const struct crs_msg *m)
{
	struct sub_run *s = ctx;
	if (s->stop)
		return;
	int err = out_put(&s->out, m->data, m->len, s->delim);
	s->messages++;
	s->bytes += m->len;
	if (err) {
		s->err = err;
		s->what = "cannot write stdout";
	}
	if (err || (s->o->count && s->messages == s->o->count)) {
		s->stop = 1;
		crs_sub_cancel(s->sub);
	} else if (s->o->count) {
		sub_take_more(s);
	}
}

static void sub_on_end(struct sub_run *s, int code, const char *message)
{
	if (s->stop)
		return; /* our own cancel */
	s->stop = 1;
	s->ended = 1;
	s->end.code = code;
	snprintf(s->end.message, sizeof(s->end.message), "%s",
		 message ? message : "");
}

static void sub_on_complete(void *ctx)
{
	sub_on_end(ctx, 0, NULL);
}

static void sub_on_error(void *ctx, int code, const char *message)
{
	sub_on_end(ctx, code, message);
}

static const struct crs_sub_callbacks sub_callbacks = {
	sub_on_next, sub_on_complete, sub_on_error
};

/* Copy messages to stdout until the stream ends, -c N is reached, a
 * signal arrives or stdout fails. Output is flushed whenever the stream
 * pauses for FLUSH_IDLE_MS; with nothing to flush, the loop sleeps until
 * the stream or a signal wakes it. Returns 0 or -errno with s->what. */
static int sub_copy(struct sub_run *s)
{
	crs_loop *loop;
	int err = loop_new(&loop);
	if (!err)
		err = crs_loop_add_sub(loop, s->sub, &sub_callbacks, s);
	if (err) {
		if (loop)
			crs_loop_free(loop);
		s->what = "cannot create the event loop";
		return err;
	}
	if (s->o->count)
		sub_take_more(s);
	while (!s->stop && !g_signal) {
		int r = crs_loop_run(loop, s->out.len ? FLUSH_IDLE_MS : -1);
		if (r == -EINTR)
			continue; /* a signal: the loop condition looks */
		if (r < 0) {
			s->err = r;
			s->what = "cannot wait for the stream";
			break;
		}
		if (r == 0 && s->out.len && (err = out_flush(&s->out)) != 0) {
			s->err = err;
			s->what = "cannot write stdout";
			break;
		}
	}
	crs_loop_free(loop);
	if (!s->err && (err = out_flush(&s->out)) != 0) {
		s->err = err;
		s->what = "cannot write stdout";
	}
	return s->err;
}

/* The exit status once copying stopped, with its line on stderr. */
static int sub_report(struct sub_run *s, int err)
{
	const struct cat_opts *o = s->o;
	if (err == -EPIPE)
		return EXIT_SUCCESS; /* our reader left: a quiet, clean end */
	if (err)
		return fail(o->name, s->what, err, NULL);
	if (g_signal)
		return EXIT_STREAM;
	if (s->ended && s->end.code)
		return fail(o->name, "the stream failed", s->end.code,
			    s->end.message);
	info("received %" PRIu64 " messages (%" PRIu64 " bytes) from '%s'%s",
	     s->messages, s->bytes, o->name,
	     s->ended ? "" : ", then cancelled (-c)");
	return EXIT_SUCCESS;
}

static int open_error(const struct cat_opts *o, int err)
{
	if (err != -ENOENT)
		return fail(o->name, "cannot subscribe", err, crs_errmsg());
	char dir[4096], what[4200];
	if (crs_runtime_dir(dir, sizeof(dir)) < 0)
		snprintf(dir, sizeof(dir), "the runtime directory (none yet)");
	snprintf(what, sizeof(what),
		 "no such stream: no publisher in %s (-W waits for one)", dir);
	return fail(o->name, what, err, NULL);
}

static int run_consumer(const struct cat_opts *o)
{
	struct sub_run s = { .o = o,
			     .out = { .cap = OUT_BUF },
			     .delim = o->binary ? -1 : o->delim };
	s.out.buf = malloc(OUT_BUF);
	if (!s.out.buf)
		return fail(o->name, "cannot allocate the output buffer",
			    ENOMEM, NULL);
	int err = sub_open(o, &s.sub);
	int rc;
	if (err) {
		rc = g_signal ? EXIT_STREAM : open_error(o, err);
	} else {
		err = sub_copy(&s);
		rc = sub_report(&s, err);
		crs_sub_close(s.sub); /* cancels after a signal */
	}
	free(s.out.buf);
	return rc;
}

int main(int argc, char **argv)
{
	struct cat_opts o;
	int rc = parse_args(argc, argv, &o);
	if (rc != PARSE_OK)
		return rc;
	g_quiet = o.quiet;
	int err = signals_init();
	if (err)
		return fail(o.name, "cannot set up signals", err, NULL);
	rc = o.role == 'P' ? run_publisher(&o) : run_consumer(&o);
	signals_reraise();
	return rc;
}
