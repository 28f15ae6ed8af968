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
 * SIGINT, SIGTERM and SIGHUP end a publisher's stream with ECANCELED or
 * cancel a subscription, then the signal is raised again so that the
 * shell sees how the tool ended.
 */
#include <errno.h>
#include <getopt.h>
#include <inttypes.h>
#include <libutil.h> /* expand_number(3), from libbsd-overlay */
#include <poll.h>
#include <signal.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "crs/crs.h"

#define EXIT_STREAM 1
#define EXIT_USAGE 2
#define PARSE_OK (-1)

#define TICK_MS 100	       /* longest sleep before looking at signals */
#define IDLE_POLL_MS 50	       /* stdin idle: serve subscribers this often */
#define FLUSH_IDLE_MS 1	       /* flush stdout once the stream paused this long */
#define READ_BLOCK (64 * 1024) /* line mode reads at least this much */
#define OUT_BUF (256 * 1024)
#define DEFAULT_RING (1ULL << 20)
#define RING_MIN (4ULL << 10)
#define RING_MAX (1ULL << 30)
#define DEFAULT_PREFETCH 128
#define DEFAULT_TIMEOUT_S 10.0
#define MAX_SUBSCRIBERS 64

struct cat_opts {
	int role;		/* 'P' publish stdin, 'C' copy to stdout */
	const char *name;
	int delim;		/* message delimiter byte */
	int binary;		/* -b: fixed-size chunks / raw output */
	uint64_t chunk;		/* -b SIZE */
	uint64_t ring_bytes;	/* -r; 0 until derive_sizes() */
	uint64_t max_message;	/* -m; 0 until derive_sizes() */
	uint64_t wait_subs;	/* -w N */
	double timeout_s;	/* -t */
	uint64_t count;		/* -c N; 0: no limit */
	uint64_t prefetch;	/* -p N */
	int wait_stream;	/* -W */
	int quiet;		/* -q */
};

static volatile sig_atomic_t g_signal;
static int g_quiet;

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
"usage: crs-cat -P NAME [-w N] [-t SECONDS] [-r BYTES] [-m BYTES] [-d C | -b SIZE] [-q]\n"
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
"  -t SECONDS  -P: wait at most this long at the end (default 10)\n"
"  -r BYTES    -P: ring size, a power of two from 4K to 1G (default 1M,\n"
"              or larger to hold four of the largest message)\n"
"  -m BYTES    -P: largest message (default a quarter of the ring); a\n"
"              longer line fails the stream and the tool exits 1\n"
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

/* Options valid for one role only, and the role they belong to. */
static int check_role(const struct cat_opts *o, const char *seen)
{
	static const char only_pub[] = "wtrm", only_sub[] = "cpW";
	for (const char *c = seen; *c; c++) {
		if (o->role == 'C' && strchr(only_pub, *c))
			return usage_error("-%c is an option of -P", *c);
		if (o->role == 'P' && strchr(only_sub, *c))
			return usage_error("-%c is an option of -C", *c);
	}
	if (strchr(seen, 'd') && strchr(seen, 'b'))
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

/* One option. Returns PARSE_OK, or an exit status. */
static int take_opt(struct cat_opts *o, int c, int argc, char **argv)
{
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
		return parse_count(optarg, 0, MAX_SUBSCRIBERS, &o->wait_subs)
			       ? usage_error("-w: bad count '%s' (0..%d)",
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
	char seen[32] = "";
	size_t nseen = 0;
	*o = (struct cat_opts){ .delim = '\n',
				.timeout_s = DEFAULT_TIMEOUT_S,
				.prefetch = DEFAULT_PREFETCH };
	opterr = 0;
	int c;
	while ((c = getopt(argc, argv, "+P:C:d:b::r:m:w:t:c:p:Wqh")) != -1) {
		int rc = take_opt(o, c, argc, argv);
		if (rc != PARSE_OK)
			return rc;
		if (!strchr(seen, c) && nseen + 1 < sizeof(seen))
			seen[nseen++] = (char)c;
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
	g_signal = sig;
}

/* No SA_RESTART: a signal interrupts poll(2) and read(2); every wait
 * below is bounded by TICK_MS, so g_signal is seen promptly. A signal
 * ignored at start (nohup, a background job's SIGINT) stays ignored. */
static void signals_init(void)
{
	static const int sigs[] = { SIGINT, SIGTERM, SIGHUP };
	struct sigaction sa = { .sa_handler = on_signal }, old;
	sigemptyset(&sa.sa_mask);
	for (size_t i = 0; i < sizeof(sigs) / sizeof(sigs[0]); i++)
		if (sigaction(sigs[i], NULL, &old) == 0 &&
		    old.sa_handler != SIG_IGN)
			sigaction(sigs[i], &sa, NULL);
	signal(SIGPIPE, SIG_IGN); /* a closed stdout is EPIPE from write */
}

/* Die of the signal that stopped us, as the shell expects. */
static void signals_reraise(void)
{
	if (!g_signal)
		return;
	signal(g_signal, SIG_DFL);
	raise(g_signal);
}

/* ---- Publisher --------------------------------------------------------- */

struct pub_run {
	crs_pub *pub;
	const struct cat_opts *o;
	uint64_t messages;
	uint64_t bytes;
	char *stage;	  /* -b: a chunk read while the stream was held */
	const char *what; /* what failed, for the error line */
};

/* Claim len bytes, waiting for demand and ring room (timeout_ms < 0:
 * for as long as it takes) while serving subscribers. Returns 0 with
 * *buf, -ETIMEDOUT, or -errno (-EINTR on a signal). */
static int pub_claim(struct pub_run *p, size_t len, void **buf,
		     int timeout_ms)
{
	int waited = 0, err;
	while ((err = crs_pub_claim(p->pub, len, buf)) == -CRS_ENODEMAND ||
	       err == -CRS_ENOROOM) {
		if (g_signal)
			return -EINTR;
		if (timeout_ms >= 0 && waited >= timeout_ms)
			return -ETIMEDOUT;
		err = crs_pub_wait(p->pub, len, TICK_MS);
		if (err && err != -ETIMEDOUT)
			break;
		if (timeout_ms >= 0)
			waited += TICK_MS;
	}
	if (err)
		p->what = "cannot publish";
	return err;
}

static void pub_commit(struct pub_run *p, size_t len)
{
	crs_pub_commit(p->pub, len);
	p->messages++;
	p->bytes += len;
}

/* Publish a copy of data, waiting for demand as long as it takes. */
static int pub_send(struct pub_run *p, const char *data, size_t len)
{
	void *buf;
	int err = pub_claim(p, len, &buf, -1);
	if (err)
		return err;
	memcpy(buf, data, len);
	pub_commit(p, len);
	return 0;
}

/* read(2) from stdin, serving subscribers while it is idle so that new
 * ones are admitted promptly. Returns the count, 0 at EOF, or -errno. */
static ssize_t pub_read(crs_pub *pub, void *buf, size_t len)
{
	struct pollfd pfd = { .fd = STDIN_FILENO, .events = POLLIN };
	for (;;) {
		if (g_signal)
			return -EINTR;
		int r = poll(&pfd, 1, IDLE_POLL_MS);
		if (r == 0) {
			int err = crs_pub_poll(pub);
			if (err < 0)
				return err;
			continue;
		}
		if (r < 0) {
			if (errno != EINTR)
				return -errno;
			continue;
		}
		ssize_t n = read(STDIN_FILENO, buf, len);
		if (n >= 0)
			return n;
		if (errno != EINTR && errno != EAGAIN)
			return -errno;
	}
}

/* Fill buf with len bytes of stdin, fewer at EOF: *have says how many. */
static int pub_read_full(struct pub_run *p, char *buf, size_t len,
			 size_t *have)
{
	*have = 0;
	while (*have < len) {
		ssize_t n = pub_read(p->pub, buf + *have, len - *have);
		if (n < 0) {
			p->what = "cannot read stdin";
			return (int)n;
		}
		if (n == 0)
			break;
		*have += (size_t)n;
	}
	return 0;
}

/* One -b chunk. Normally it is read straight into claimed ring space
 * (no copy; subscribers are served while the claim waits for input).
 * When demand or room stay away for a tick (nobody is taking), the
 * chunk is read into the stage and published once they come: so the
 * end of input is seen, and the stream completed, even while held.
 * Returns 0 with *have (0: end of input), or -errno. */
static int pub_chunk(struct pub_run *p, size_t *have)
{
	size_t chunk = p->o->chunk;
	void *claim;
	int err = pub_claim(p, chunk, &claim, TICK_MS);
	if (!err) {
		err = pub_read_full(p, claim, chunk, have);
		if (err || !*have)
			crs_pub_abort(p->pub);
		else
			pub_commit(p, *have);
		return err;
	}
	if (err != -ETIMEDOUT)
		return err;
	if (!p->stage && !(p->stage = malloc(chunk))) {
		p->what = "cannot allocate the chunk buffer";
		return -ENOMEM;
	}
	err = pub_read_full(p, p->stage, chunk, have);
	if (!err && *have)
		err = pub_send(p, p->stage, *have);
	return err;
}

/* -b: fixed-size chunks, the last may be shorter. */
static int pub_chunks(struct pub_run *p)
{
	size_t have;
	int err;
	do
		err = pub_chunk(p, &have);
	while (!err && have == p->o->chunk);
	return err;
}

/* Lines: read stdin in big blocks, split at the delimiter and publish
 * each line. The buffer holds the longest line plus a READ_BLOCK, so
 * every read asks for at least READ_BLOCK bytes and a line that does not
 * fit is too long. A last line without delimiter is a message too. */
static int pub_lines(struct pub_run *p)
{
	size_t max = p->o->max_message, cap = max + READ_BLOCK;
	size_t start = 0, scanned = 0, end = 0; /* scanned: no delim there */
	int eof = 0, err = 0;
	char *buf = malloc(cap);
	if (!buf) {
		p->what = "cannot allocate the line buffer";
		return -ENOMEM;
	}
	while (!err) {
		char *line = buf + start;
		char *d = memchr(line + scanned, p->o->delim,
				 end - start - scanned);
		if (d) {
			err = pub_send(p, line, (size_t)(d - line));
			start += (size_t)(d - line) + 1;
			scanned = 0;
			continue;
		}
		scanned = end - start;
		if (scanned > max) {
			p->what = "line longer than the largest message, "
				  "see -m";
			err = -EMSGSIZE;
		} else if (eof) {
			if (scanned)
				err = pub_send(p, line, scanned);
			break;
		} else {
			memmove(buf, line, scanned);
			start = 0;
			end = scanned;
			ssize_t n = pub_read(p->pub, buf + end, cap - end);
			if (n < 0) {
				p->what = "cannot read stdin";
				err = (int)n;
			}
			eof = n == 0;
			end += n > 0 ? (size_t)n : 0;
		}
	}
	free(buf);
	return err;
}

static int pub_wait_subscribers(struct pub_run *p)
{
	int n = (int)p->o->wait_subs;
	if (!n)
		return 0;
	info("waiting for %d subscriber%s on '%s'", n, n == 1 ? "" : "s",
	     p->o->name);
	for (;;) {
		if (g_signal)
			return -EINTR;
		int err = crs_pub_wait_subscribers(p->pub, n, TICK_MS);
		if (!err)
			return 0;
		if (err != -ETIMEDOUT) {
			p->what = "cannot wait for subscribers";
			return err;
		}
	}
}

/* Complete, then give the subscribers present up to -t seconds to
 * consume everything. Running out of time is worth a line, not a
 * failure: the stream itself completed. */
static int pub_finish(struct pub_run *p)
{
	const struct cat_opts *o = p->o;
	crs_pub_complete(p->pub);
	info("published %" PRIu64 " messages (%" PRIu64 " bytes) to '%s'",
	     p->messages, p->bytes, o->name);
	long left_ms = (long)(o->timeout_s * 1000.0 + 0.5);
	for (;;) {
		int step = left_ms < TICK_MS ? (int)left_ms : TICK_MS;
		if (crs_pub_wait_consumed(p->pub, step) == 0)
			return 0;
		if (g_signal)
			return -EINTR;
		left_ms -= step;
		if (left_ms <= 0)
			break;
	}
	int n = crs_pub_subscribers(p->pub);
	fprintf(stderr,
		"crs-cat: stream '%s': %d subscriber%s had not consumed "
		"everything after %g s\n",
		o->name, n, n == 1 ? "" : "s", o->timeout_s);
	return 0;
}

static int run_publisher(const struct cat_opts *o)
{
	struct crs_pub_opts po;
	crs_pub_opts_init(&po);
	po.ring_bytes = o->ring_bytes;
	po.max_message = (uint32_t)o->max_message;
	crs_pub *pub;
	int err = crs_pub_create(o->name, &po, &pub);
	if (err)
		return fail(o->name,
			    err == -EEXIST ? "another publisher owns the name"
					   : "cannot create the stream",
			    err, NULL);
	struct pub_run p = { .pub = pub, .o = o };
	err = pub_wait_subscribers(&p);
	if (!err)
		err = o->binary ? pub_chunks(&p) : pub_lines(&p);
	if (!err)
		err = pub_finish(&p);
	free(p.stage);
	int rc = EXIT_SUCCESS;
	if (g_signal) {
		crs_pub_error(pub, ECANCELED, "publisher interrupted");
	} else if (err) {
		crs_pub_error(pub, -err, p.what);
		rc = fail(o->name, p.what, err, NULL);
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
	uint64_t messages;
	uint64_t bytes;
	const char *what;
};

/* Open the stream; with -W, retry until it appears (or a signal). */
static int sub_open(const struct cat_opts *o, crs_sub **sub)
{
	struct crs_sub_opts so;
	crs_sub_opts_init(&so);
	/* -c N is take(N): demand is managed by sub_take_more(). */
	so.prefetch = o->count ? 0 : (uint32_t)o->prefetch;
	so.wait_ms = o->wait_stream ? TICK_MS : 0;
	for (;;) {
		int err = crs_sub_open(o->name, &so, sub);
		if (err != -ENOENT || !o->wait_stream || g_signal)
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

/* Copy messages to stdout until the stream ends, -c N is reached, a
 * signal arrives or stdout fails. Output is flushed whenever the stream
 * pauses. Returns 0 or -errno with s->what set. */
static int sub_copy(struct sub_run *s)
{
	const struct cat_opts *o = s->o;
	int delim = o->binary ? -1 : o->delim, err = 0;
	if (o->count)
		sub_take_more(s);
	while (!err && !g_signal) {
		struct crs_msg m;
		int r = crs_sub_poll(s->sub, &m);
		if (r > 0) {
			err = out_put(&s->out, m.data, m.len, delim);
			crs_sub_release(s->sub);
			s->messages++;
			s->bytes += m.len;
			if (o->count && s->messages == o->count)
				break;
			if (o->count)
				sub_take_more(s);
			continue;
		}
		if (r < 0)
			break;
		/* Idle: a short pause is common (the publisher refills on
		 * our demand), so flush only after FLUSH_IDLE_MS. */
		if (!s->out.len)
			crs_sub_wait(s->sub, TICK_MS);
		else if (crs_sub_wait(s->sub, FLUSH_IDLE_MS) < 0)
			err = out_flush(&s->out);
	}
	if (!err)
		err = out_flush(&s->out);
	if (err)
		s->what = "cannot write stdout";
	return err;
}

/* The exit status once copying stopped, with its line on stderr. */
static int sub_report(struct sub_run *s, int err)
{
	const struct cat_opts *o = s->o;
	const struct crs_end *end = crs_sub_end(s->sub);
	if (err == -EPIPE)
		return EXIT_SUCCESS; /* our reader left: a quiet, clean end */
	if (err)
		return fail(o->name, s->what, err, NULL);
	if (g_signal)
		return EXIT_STREAM;
	if (end && end->code)
		return fail(o->name, "the stream failed", end->code,
			    end->message);
	info("received %" PRIu64 " messages (%" PRIu64 " bytes) from '%s'%s",
	     s->messages, s->bytes, o->name,
	     end ? "" : ", then cancelled (-c)");
	return EXIT_SUCCESS;
}

static int open_error(const struct cat_opts *o, int err)
{
	if (err != -ENOENT)
		return fail(o->name, "cannot subscribe", err, NULL);
	char dir[4096], what[4200];
	if (crs_runtime_dir(dir, sizeof(dir)) < 0)
		snprintf(dir, sizeof(dir), "the runtime directory (none yet)");
	snprintf(what, sizeof(what),
		 "no such stream: no publisher in %s (-W waits for one)", dir);
	return fail(o->name, what, err, NULL);
}

static int run_consumer(const struct cat_opts *o)
{
	struct sub_run s = { .o = o, .out = { .cap = OUT_BUF } };
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
		crs_sub_close(s.sub); /* cancels after -c, EPIPE, a signal */
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
	signals_init();
	rc = o.role == 'P' ? run_publisher(&o) : run_consumer(&o);
	signals_reraise();
	return rc;
}
