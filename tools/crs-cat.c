/*
 * crs-cat.c - the crs shell tool, written on the public API alone.
 *
 *   crs-cat -P NAME   publish stdin: a message per line (or per -d byte,
 *                     or per -b fixed-size chunk)
 *   crs-cat -C NAME   copy the stream to stdout, each message followed by
 *                     the delimiter (raw bytes with -b, or as -f formats
 *                     it); -F follows the name across publishers
 *
 * NAME is the argument of -P/-C or a trailing operand (crs-cat -C -W
 * logs): stream names never start with '-', so an option is never taken
 * for one.
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
#include <grp.h>
#include <inttypes.h>
#include <limits.h>
#include <poll.h>
#include <pwd.h>
#include <signal.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>

#include "crs/crs.h"
#include "toolutil.h"

#define EXIT_STREAM 1
#define EXIT_USAGE 2
#define PARSE_OK (-1)

#define TICK_MS 100	       /* -b: hold a chunk this long before staging */
#define FLUSH_IDLE_MS 1	       /* flush stdout once the stream paused this long */
#define READ_BLOCK (64 * 1024) /* line mode reads at least this much */
#define OUT_BUF (256 * 1024)
#define DEFAULT_RING (1ULL << 20)
#define DEFAULT_PREFETCH 128
#define DEFAULT_TIMEOUT_S 10.0

/* Long options have codes above any byte. */
enum {
	OPT_REPLAY_BYTES = 256,
	OPT_REPLAY_AGE,
	OPT_ON_DISCONNECT,
	OPT_OVERFLOW,
	OPT_LINGER,
	OPT_UNTETHERED,
	OPT_ALLOW_UID,
	OPT_ALLOW_GROUP,
	OPT_ALLOW_ANY,
	OPT_SHARED,
	OPT_END
};

static const struct option long_opts[] = {
	{ "replay-bytes", required_argument, NULL, OPT_REPLAY_BYTES },
	{ "replay-age", required_argument, NULL, OPT_REPLAY_AGE },
	{ "on-disconnect", required_argument, NULL, OPT_ON_DISCONNECT },
	{ "overflow", required_argument, NULL, OPT_OVERFLOW },
	{ "linger", required_argument, NULL, OPT_LINGER },
	{ "untethered", required_argument, NULL, OPT_UNTETHERED },
	{ "allow-uid", required_argument, NULL, OPT_ALLOW_UID },
	{ "allow-group", required_argument, NULL, OPT_ALLOW_GROUP },
	{ "allow-any", no_argument, NULL, OPT_ALLOW_ANY },
	{ "shared", no_argument, NULL, OPT_SHARED },
	{ "follow", no_argument, NULL, 'F' },
	{ "format", required_argument, NULL, 'f' },
	{ "help", no_argument, NULL, 'h' },
	{ NULL, 0, NULL, 0 },
};

#define FORMAT_MAX 256	 /* -f, after its escapes are expanded */

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
	double linger_s;	/* --linger */
	uint32_t untethered_ms; /* --untethered */
	uint32_t allow_uids[CRS_ALLOW_UIDS_MAX]; /* --allow-uid */
	uint32_t n_allow_uids;
	int allow_group;	/* --allow-group */
	uint32_t allow_gid;
	int allow_any;		/* --allow-any */
	int shared;		/* --shared */
	uint64_t count;		/* -c N; 0: no limit */
	uint64_t prefetch;	/* -p N */
	int wait_stream;	/* -W (and -F) */
	int follow;		/* -F */
	int caught_up_exit;	/* -e */
	char format[FORMAT_MAX]; /* -f, escapes expanded; "" none */
	size_t format_len;
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
"                       [--replay-age SECONDS] [--linger SECONDS]\n"
"                       [--untethered SECONDS] [--on-disconnect WHAT]\n"
"                       [--overflow WHAT] [--allow-uid UID]\n"
"                       [--allow-group GROUP] [--allow-any] [-q]\n"
"       crs-cat -C NAME [-c N] [-p N] [-W] [-F] [-e] [-d C | -b | -f FMT]\n"
"                       [-q]\n"
"Publish stdin to the crs stream NAME, or copy stream NAME to stdout.\n"
"NAME may also follow the options: crs-cat -C -W logs.\n"
"\n"
"  -P NAME     publish stdin, one message per line (without the newline);\n"
"              at end of input complete the stream, wait for subscribers\n"
"              to consume it, exit. With no subscriber, nothing is sent:\n"
"              the publisher holds its input until one requests.\n"
"  -C NAME     write each message to stdout followed by the delimiter\n"
"  -d C        delimiter instead of newline: one byte, or \\0 \\t \\n \\r \\\\\n"
"              (an empty -d '' is not a delimiter: use -d '\\0' for NUL)\n"
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
"  --linger SECONDS\n"
"              -P: keep the stream open this long after the end of input,\n"
"              so that late subscribers of a replay stream still get the\n"
"              retained messages and the completion\n"
"  --untethered SECONDS\n"
"              -P: cut off a subscriber that holds the stream back\n"
"              without reading or requesting for this long (it fails\n"
"              with ETIMEDOUT); by default a stopped subscriber holds\n"
"              every other one\n"
"  --on-disconnect none|error|complete\n"
"              -P: what subscribers get when a signal stops the publisher:\n"
"              nothing (EPIPE once it closes), ECANCELED (the default),\n"
"              or the completion\n"
"  --overflow block|error|drop|latest\n"
"              -P: input that finds no demand or room is held until it\n"
"              can go (block, the default), fails the stream with ENOBUFS\n"
"              (error), is discarded and counted (drop), or only the\n"
"              newest is kept (latest)\n"
"  --allow-uid UID\n"
"              -P: let user UID (a number or a name) subscribe too; up to\n"
"              8 times\n"
"  --allow-group GROUP\n"
"              -P: let members of GROUP (by their primary group) subscribe\n"
"  --allow-any -P: let any user subscribe\n"
"  --shared    -P: publish into shared stream NAME beside other\n"
"              publishers (each has its own member stream NAME~<id>);\n"
"              -C: read NAME as a shared stream, merging every\n"
"              publisher, even before one has marked it shared\n"
"  -c N        -C: exit after N messages, cancelling the subscription\n"
"  -p N        -C: prefetch, request N messages at a time (default 128)\n"
"  -W          -C: wait for the stream to appear instead of failing\n"
"  -F, --follow\n"
"              -C: like tail -F: when the stream ends or its publisher\n"
"              goes away, say so and wait for a new publisher of NAME,\n"
"              then go on with its messages (implies -W)\n"
"  -e          -C: exit once caught up: when everything published so far\n"
"              has been read (or the stream ended)\n"
"  -f, --format FMT\n"
"              -C: write each message as FMT says: %s payload, %S its\n"
"              length, %o its sequence number, %T receive time (ms since\n"
"              the epoch), %t the stream name, %% a %; \\n \\t \\r \\0 \\\\\n"
"  -q          no informational lines on stderr\n"
"  -h, --help  show this help\n"
"Sizes take K, M, G, T suffixes (powers of 1024). Stream names use\n"
"[A-Za-z0-9._-] and start with neither '.' nor '-'. Streams live in\n"
"$CRS_DIR, else $XDG_RUNTIME_DIR/crs, else /tmp/crs-$UID.\n"
"Exit status: 0 done, 1 stream or I/O error, 2 usage error.\n",
	      stdout);
}

/* ---- Option parsing ---------------------------------------------------- */

/* Option opt's byte count s, with an optional K/M/G/T suffix
 * (toolutil.h), > 0: PARSE_OK, or a usage error saying what is wrong. */
static int take_size(const char *opt, const char *s, uint64_t *out)
{
	int err = tool_parse_size(s, 1, UINT64_MAX, out);
	return err ? usage_error("%s: bad size '%s' (%s)", opt, s,
				 err == -ERANGE ? "0 or too large"
						: tool_size_why(err))
		   : PARSE_OK;
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
		if (r < CRS_RING_MIN || r > CRS_RING_MAX || (r & (r - 1)))
			return usage_error("-r: the ring size must be a power "
					   "of two from 4K to 1G");
	} else {
		o->ring_bytes = DEFAULT_RING;
		while (o->ring_bytes / 4 < need && o->ring_bytes < CRS_RING_MAX)
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
		OPT_ON_DISCONNECT, OPT_OVERFLOW, OPT_LINGER, OPT_UNTETHERED,
		OPT_ALLOW_UID, OPT_ALLOW_GROUP, OPT_ALLOW_ANY, 0
	};
	static const int only_sub[] = { 'c', 'p', 'W', 'F', 'e', 'f', 0 };
	for (const int *c = only_pub; *c; c++)
		if (o->role == 'C' && seen[*c])
			return usage_error("%s is an option of -P", opt_name(*c));
	for (const int *c = only_sub; *c; c++)
		if (o->role == 'P' && seen[*c])
			return usage_error("%s is an option of -C", opt_name(*c));
	if (seen['d'] && seen['b'])
		return usage_error("-d and -b exclude each other");
	if (seen['f'] && (seen['d'] || seen['b']))
		return usage_error("-f writes each message as it says: it "
				   "excludes -d and -b");
	if (seen['F'] && seen['e'])
		return usage_error("-F follows the stream for ever; -e exits "
				   "once caught up: give one of them");
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
	return arg ? take_size("-b", arg, &o->chunk) : PARSE_OK;
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
		return take_size("--replay-bytes", optarg, &o->replay_bytes);
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

/* The option getopt stopped at, for the error line: "-Z" or "--bogus". */
static const char *bad_opt(char **argv)
{
	static char buf[4];
	if (optopt > 0 && optopt < 256) {
		snprintf(buf, sizeof(buf), "-%c", optopt);
		return buf;
	}
	if (optopt >= 256)
		return opt_name(optopt);
	return argv[optind - 1];
}

/* --untethered SECONDS: fractions allowed, rounded up to a millisecond. */
static int take_untethered(struct cat_opts *o)
{
	double t;
	if (parse_seconds(optarg, &t) || t <= 0 || t * 1000.0 > UINT32_MAX)
		return usage_error("--untethered: bad seconds '%s'", optarg);
	o->untethered_ms = (uint32_t)(t * 1000.0);
	if ((double)o->untethered_ms < t * 1000.0)
		o->untethered_ms++;
	return PARSE_OK;
}

/* A user or group: a number, or a name the system knows. */
static int parse_id(const char *s, int group, uint32_t *out)
{
	uint64_t n;
	if (parse_count(s, 0, UINT32_MAX - 1, &n) == 0) {
		*out = (uint32_t)n;
		return 0;
	}
	if (group) {
		const struct group *g = getgrnam(s);
		if (!g)
			return -1;
		*out = g->gr_gid;
	} else {
		const struct passwd *pw = getpwnam(s);
		if (!pw)
			return -1;
		*out = pw->pw_uid;
	}
	return 0;
}

static int take_allow_uid(struct cat_opts *o)
{
	if (o->n_allow_uids == CRS_ALLOW_UIDS_MAX)
		return usage_error("--allow-uid: at most %d users (for more, "
				   "--allow-group or --allow-any)",
				   CRS_ALLOW_UIDS_MAX);
	if (parse_id(optarg, 0, &o->allow_uids[o->n_allow_uids]) < 0)
		return usage_error("--allow-uid: no such user '%s'", optarg);
	o->n_allow_uids++;
	return PARSE_OK;
}

static int take_allow_group(struct cat_opts *o)
{
	if (parse_id(optarg, 1, &o->allow_gid) < 0)
		return usage_error("--allow-group: no such group '%s'", optarg);
	o->allow_group = 1;
	return PARSE_OK;
}

/* -f FMT: expand the backslash escapes into o->format and check the %
 * directives, so that writing a message never meets a bad one. */
static int parse_format(const char *s, struct cat_opts *o)
{
	size_t n = 0;
	for (const char *p = s; *p; p++) {
		if (n + 2 >= sizeof(o->format))
			return usage_error("-f: longer than %d bytes",
					   FORMAT_MAX - 2);
		int d;
		char e[3] = { '\\', p[1], 0 };
		if (*p == '\\') {
			if (!p[1] || parse_delim(e, &d) < 0)
				return usage_error("-f: bad escape '\\%.1s' (\\n "
						   "\\t \\r \\0 \\\\)",
						   p + 1);
			o->format[n++] = (char)d;
			p++;
		} else if (*p == '%') {
			if (!p[1] || !strchr("sSoTt%", p[1]))
				return usage_error("-f: bad directive '%%%.1s' "
						   "(%%s %%S %%o %%T %%t %%%%)",
						   p + 1);
			o->format[n++] = '%';
			o->format[n++] = *++p;
		} else {
			o->format[n++] = *p;
		}
	}
	o->format[n] = 0;
	o->format_len = n;
	return PARSE_OK;
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
		/* -CNAME, -C NAME, or NAME after the options: a next word
		 * that starts with '-' is an option (names never do). */
		if (optarg)
			o->name = optarg;
		else if (optind < argc && argv[optind][0] != '-')
			o->name = argv[optind++];
		return PARSE_OK;
	case 'd':
		if (!*optarg)
			return usage_error("-d: the delimiter is one byte, and "
					   "'' is none (for NUL say -d '\\0'; "
					   "for raw messages, -b)");
		return parse_delim(optarg, &o->delim) < 0
			       ? usage_error("-d: bad delimiter '%s' (one byte, "
					     "or \\0 \\t \\n \\r \\\\)",
					     optarg)
			       : PARSE_OK;
	case 'f':
		return parse_format(optarg, o);
	case OPT_LINGER:
		return parse_seconds(optarg, &o->linger_s)
			       ? usage_error("--linger: bad seconds '%s'", optarg)
			       : PARSE_OK;
	case OPT_UNTETHERED:
		return take_untethered(o);
	case OPT_ALLOW_UID:
		return take_allow_uid(o);
	case OPT_ALLOW_GROUP:
		return take_allow_group(o);
	case OPT_ALLOW_ANY:
		o->allow_any = 1;
		return PARSE_OK;
	case OPT_SHARED:
		o->shared = 1;
		return PARSE_OK;
	case 'F':
		o->follow = o->wait_stream = 1;
		return PARSE_OK;
	case 'e':
		o->caught_up_exit = 1;
		return PARSE_OK;
	case 'b':
		return take_chunk(o, argc, argv);
	case 'r':
	case 'm':
		return take_size(c == 'r' ? "-r" : "-m", optarg,
				 c == 'r' ? &o->ring_bytes : &o->max_message);
	case 'w':
	case 'a':
		return parse_count(optarg, 0, CRS_SUBSCRIBERS_MAX,
				   c == 'w' ? &o->wait_subs : &o->auto_connect)
			       ? usage_error("-%c: bad count '%s' (0..%d)", c,
					     optarg, CRS_SUBSCRIBERS_MAX)
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
	case ':':
		return usage_error("%s needs an argument", bad_opt(argv));
	default:
		return usage_error("unknown option %s", bad_opt(argv));
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
	const char *operand = NULL;
	for (;;) {
		c = getopt_long(argc, argv, "+:P::C::d:b::r:m:w:a:t:c:p:R:WFef:qh",
				long_opts, NULL);
		if (c == -1) {
			/* A word that is no option: the one NAME operand,
			 * after which options may go on, unless "--" ended
			 * them (getopt then keeps returning to the word
			 * after it: parse no further). */
			int ended = !strcmp(argv[optind - 1], "--");
			if (optind >= argc || operand)
				break;
			operand = argv[optind++];
			if (ended)
				break;
			continue;
		}
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
	if (operand && o->name)
		return usage_error("two stream names: '%s' and '%s'", o->name,
				   operand);
	if (operand)
		o->name = operand;
	if (!o->name)
		return usage_error("-%c needs a stream NAME (as its argument or "
				   "after the options)",
				   o->role);
	if (crs_name_check(o->name) < 0)
		return usage_error("bad stream name '%s' (use [A-Za-z0-9._-], "
				   "at most %d, starting with neither '.' nor "
				   "'-')",
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
	int err = crs_loop_create(loop);
	if (err) {
		*loop = NULL;
		return err;
	}
	err = crs_loop_add_fd(*loop, g_sigpipe[0], POLLIN, on_sigpipe, NULL);
	if (err) {
		crs_loop_close(*loop);
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

static const char *plural(uint64_t n)
{
	return n == 1 ? "" : "s";
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
	int64_t linger_until; /* ms: --linger, from the completion; 0 none */
	int told_waiting; /* said once that nobody has subscribed */
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
 * crs_pub_serve() then makes sends a held message, unless a subscriber
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
	if (crs_pub_serve(p->pub) == n)
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
		info("published %" PRIu64 " message%s (%" PRIu64 " byte%s) to "
		     "'%s', dropped %" PRIu64,
		     p->messages, plural(p->messages), p->bytes,
		     plural(p->bytes), o->name, crs_pub_dropped(p->pub));
	else
		info("published %" PRIu64 " message%s (%" PRIu64 " byte%s) to "
		     "'%s'",
		     p->messages, plural(p->messages), p->bytes,
		     plural(p->bytes), o->name);
	if (o->linger_s > 0) {
		p->linger_until = now_ms() + (int64_t)(o->linger_s * 1000.0 + 0.5);
		p->deadline = p->linger_until +
			      (int64_t)(o->timeout_s * 1000.0 + 0.5);
		info("lingering %g s for late subscribers of '%s'", o->linger_s,
		     o->name);
	}
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
		o->name, n, plural((uint64_t)n),
		o->timeout_s + (p->linger_until ? o->linger_s : 0));
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
		if (p->held && !p->told_waiting && o->wait_subs == 0 &&
		    crs_pub_subscribers(p->pub) == 0) {
			/* Lockstep with nobody there: nothing can go. */
			p->told_waiting = 1;
			info("waiting for a subscriber on '%s' (nothing is sent "
			     "before one requests)",
			     o->name);
		}
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
	if (p->phase == PH_DRAINING && now_ms() >= p->linger_until &&
	    crs_pub_wait_consumed(p->pub, 0) == 0)
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
		if (p->linger_until && p->phase == PH_DRAINING &&
		    p->linger_until < due)
			due = p->linger_until;
		/* --untethered: the loop sleeps until something happens,
		 * and a stopped subscriber makes nothing happen; look a few
		 * times per period, so that crs_pub_serve() evicts it. */
		int64_t evict_at = INT64_MAX;
		if (p->o->untethered_ms) {
			int64_t step = p->o->untethered_ms / 4;
			evict_at = now_ms() + (step > 10 ? step : 10);
			if (evict_at < due)
				due = evict_at;
		}
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
		if (now >= evict_at && crs_pub_serve(p->pub) >= 0)
			pump(p);
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
		if (p->linger_until && now >= p->linger_until &&
		    p->phase == PH_DRAINING)
			pump(p); /* the linger is over */
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
	po.untethered_ms = o->untethered_ms;
	po.allow_uid_any = (uint32_t)o->allow_any;
	po.shared = o->shared;
	po.allow_group = (uint32_t)o->allow_group;
	po.allow_gid = o->allow_gid;
	po.n_allow_uids = o->n_allow_uids;
	memcpy(po.allow_uids, o->allow_uids, sizeof(po.allow_uids));
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
		crs_loop_close(p.loop);
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
	uint64_t messages; /* over every publisher followed (-F) */
	uint64_t bytes;
	uint64_t this_messages; /* from the current publisher */
	int err;	  /* -errno: stdout failed (or the loop did) */
	const char *what;
	int stop;	  /* -c reached, stdout failed, or the stream ended */
	int ended;	  /* the terminal signal arrived */
	struct crs_end end;
};

/* The socket a stream is published on ("<dir>/<name>.sock", where
 * crs_runtime_dir() says), so that -F can tell the publisher it followed
 * from a new one of the same name. 0, or -errno if there is none. */
static int sock_ident(const char *name, struct stat *st)
{
	char dir[4096], path[4096 + CRS_NAME_MAX + 8];
	int err = crs_runtime_dir(dir, sizeof(dir));
	if (err < 0)
		return err;
	snprintf(path, sizeof(path), "%s/%s.sock", dir, name);
	return stat(path, st) < 0 ? -errno : 0;
}

static int same_ident(const struct stat *a, const struct stat *b)
{
	return a->st_dev == b->st_dev && a->st_ino == b->st_ino &&
	       a->st_ctim.tv_sec == b->st_ctim.tv_sec &&
	       a->st_ctim.tv_nsec == b->st_ctim.tv_nsec;
}

/* Whether a failed open is worth another try while waiting (-W, -F):
 * no stream yet, a publisher that went away during the handshake, and
 * with -F one that does not answer (stopped) or left a stale socket. */
static int retry_open(const struct cat_opts *o, int err)
{
	return err == -ENOENT || err == -ECONNRESET ||
	       (o->follow && (err == -ETIMEDOUT || err == -ECONNREFUSED));
}

/* A tick's pause between attempts; a signal cuts it short. */
static void nap_tick(void)
{
	struct timespec nap = { 0, TICK_MS * 1000000L };
	nanosleep(&nap, NULL);
}

/* Open the stream; with -W, retry until it appears (or a signal), also
 * after a publisher that went away during the handshake. With -F, after
 * an end (gap), only a publisher other than the one followed so far
 * (*old_id, its stream id) is kept: a lingering one is not subscribed
 * again. The stream id is what tells them apart; the socket (*old) only
 * saves subscribing to the old publisher over and over: we wait while
 * it is the one noted, and note it only if it was the same before and
 * after subscribing (all zero, matching none, if it changed meanwhile). */
static int sub_open(const struct cat_opts *o, struct stat *old,
		    uint64_t *old_id, int gap, crs_sub **sub)
{
	struct crs_sub_opts so;
	crs_sub_opts_init(&so);
	/* -c N is take(N): demand is managed by sub_take_more(). */
	so.prefetch = o->count ? 0 : (uint32_t)o->prefetch;
	so.wait_ms = o->wait_stream ? TICK_MS : 0;
	so.shared = o->shared;
	struct stat st, after;
	for (;;) {
		while (gap && !g_signal && sock_ident(o->name, &st) == 0 &&
		       same_ident(&st, old))
			nap_tick();
		if (g_signal)
			return -EINTR;
		int before = o->follow ? sock_ident(o->name, &st) : -1;
		int err = crs_sub_open(o->name, &so, sub);
		if (!err && o->follow) {
			/* The socket before and after subscribing: the same
			 * one is surely ours; one that appeared meanwhile
			 * (-W waits inside crs_sub_open) most likely. */
			memset(old, 0, sizeof(*old));
			if (sock_ident(o->name, &after) == 0 &&
			    (before < 0 || same_ident(&st, &after)))
				*old = after;
			/* The socket alone can mislead: the publisher chmods
			 * it between bind and listen, changing its ctime, so
			 * one first seen in between looks replaced after. A
			 * merged (--shared) one has no stream id (0). */
			uint64_t id = crs_sub_stream_id(*sub);
			if (!gap || !id || id != *old_id) {
				*old_id = id;
				return 0;
			}
			crs_sub_close(*sub); /* the old one, still there */
			*sub = NULL;
			nap_tick();
			continue;
		}
		if (!retry_open(o, err) || !o->wait_stream)
			return err;
		if (err != -ENOENT)
			nap_tick();
	}
}

/* -c N: request in prefetch-sized batches, replenishing at 75% as the
 * library's prefetch does, but never asking for more than N in all
 * (over every publisher followed). The count requested is never 0, so
 * the request cannot fail. */
static void sub_take_more(struct sub_run *s)
{
	uint64_t owed = crs_sub_requested(s->sub) - crs_sub_received(s->sub);
	uint64_t batch = s->o->prefetch, need = s->o->count - s->messages;
	if (owed >= need || owed > batch / 4)
		return;
	uint64_t n = batch - owed;
	crs_sub_request(s->sub, n < need - owed ? n : need - owed);
}

/* -f: one message as the format says. */
static int out_format(struct out *w, const struct cat_opts *o,
		      const struct crs_msg *m)
{
	const char *f = o->format, *end = f + o->format_len;
	char num[32];
	int err = 0;
	while (!err && f < end) {
		const char *pct = memchr(f, '%', (size_t)(end - f));
		size_t lit = pct ? (size_t)(pct - f) : (size_t)(end - f);
		if (lit)
			err = out_put(w, f, lit, -1);
		if (err || !pct)
			break;
		f = pct + 2;
		switch (pct[1]) {
		case 's':
			err = out_put(w, m->data, m->len, -1);
			continue;
		case 't':
			err = out_put(w, o->name, strlen(o->name), -1);
			continue;
		case '%':
			err = out_put(w, "%", 1, -1);
			continue;
		case 'S':
			snprintf(num, sizeof(num), "%zu", m->len);
			break;
		case 'o':
			snprintf(num, sizeof(num), "%" PRIu64, m->seq);
			break;
		default: { /* 'T' */
			struct timespec ts;
			clock_gettime(CLOCK_REALTIME, &ts);
			snprintf(num, sizeof(num), "%lld",
				 (long long)ts.tv_sec * 1000 +
					 ts.tv_nsec / 1000000);
			break;
		}
		}
		err = out_put(w, num, strlen(num), -1);
	}
	return err;
}

/* on_next: copy to the output. Reaching -c N or failing to write
 * cancels at once, so that the loop delivers nothing more. */
static void sub_on_next(void *ctx, const struct crs_msg *m)
{
	struct sub_run *s = ctx;
	if (s->stop)
		return;
	int err = s->o->format_len
			  ? out_format(&s->out, s->o, m)
			  : out_put(&s->out, m->data, m->len, s->delim);
	s->messages++;
	s->this_messages++;
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
	sub_on_next, sub_on_complete, sub_on_error, NULL
};

/* -e: deliver what is there without waiting. A poll that finds nothing
 * while the subscription has demand left has read everything the
 * publisher committed: caught up. */
static void sub_catch_up(struct sub_run *s)
{
	while (!s->stop && !g_signal) {
		int n = crs_sub_dispatch(s->sub, &sub_callbacks, s, 256);
		if (n == 0 && crs_sub_requested(s->sub) >
				      crs_sub_received(s->sub))
			break; /* caught up */
		if (n == 0 && s->o->count)
			sub_take_more(s);
		else if (n < 0)
			break; /* ended: the callbacks saw it */
	}
	if (!s->stop)
		crs_sub_cancel(s->sub);
	s->stop = 1;
}

/* Copy messages to stdout until the stream ends, -c N is reached, a
 * signal arrives or stdout fails (with -e: until caught up). Output is
 * flushed whenever the stream pauses for FLUSH_IDLE_MS; with nothing to
 * flush, the loop sleeps until the stream or a signal wakes it. Returns
 * 0 or -errno with s->what. */
static int sub_copy(struct sub_run *s)
{
	crs_loop *loop = NULL;
	int err = s->o->caught_up_exit ? 0 : loop_new(&loop);
	if (!err && loop)
		err = crs_loop_add_sub(loop, s->sub, &sub_callbacks, s);
	if (err) {
		if (loop)
			crs_loop_close(loop);
		s->what = "cannot create the event loop";
		return err;
	}
	if (s->o->count)
		sub_take_more(s);
	if (!loop)
		sub_catch_up(s);
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
	if (loop)
		crs_loop_close(loop);
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
	info("received %" PRIu64 " message%s (%" PRIu64 " byte%s) from "
	     "'%s'%s",
	     s->messages, plural(s->messages), s->bytes, plural(s->bytes),
	     o->name,
	     s->ended		   ? ""
	     : o->caught_up_exit ? ", caught up (-e)"
				   : ", then cancelled (-c)");
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

/* -F: the stream ended; say how, as the one line of this gap's start. */
static void follow_gap(const struct sub_run *s)
{
	char how[CRS_ERRMSG_MAX + 64];
	int code = s->end.code;
	if (!code)
		snprintf(how, sizeof(how), "completed");
	else
		snprintf(how, sizeof(how), "ended (code %d: %s)", code,
			 s->end.message[0] ? s->end.message
					   : crs_strerror(code));
	fprintf(stderr,
		"crs-cat: stream '%s': %s after %" PRIu64 " message%s; "
		"following: waiting for a new publisher\n",
		s->o->name, how, s->this_messages, plural(s->this_messages));
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
	/* -F: the publisher subscribed to (stream id, socket), so that
	 * after it ended (a gap) only a new one is subscribed. */
	struct stat old;
	uint64_t old_id = 0;
	int gap = 0, rc = EXIT_SUCCESS;
	for (;;) {
		int err = sub_open(o, &old, &old_id, gap, &s.sub);
		if (err) {
			rc = g_signal ? EXIT_STREAM : open_error(o, err);
			break;
		}
		if (gap)
			fprintf(stderr,
				"crs-cat: stream '%s': following a new "
				"publisher; what was published in between "
				"is not seen\n",
				o->name);
		err = sub_copy(&s);
		if (!o->follow || err || g_signal || !s.ended) {
			rc = sub_report(&s, err);
			crs_sub_close(s.sub); /* cancels after a signal */
			break;
		}
		/* -F: this publisher is done with us; wait for the next. */
		follow_gap(&s);
		gap = 1;
		crs_sub_close(s.sub);
		s.sub = NULL;
		s.stop = s.ended = 0;
		s.this_messages = 0;
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
