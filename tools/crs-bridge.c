/*
 * crs-bridge.c - carry a crs stream across machines over NATS JetStream:
 * the command line. `crs-bridge out` subscribes to a local stream and
 * publishes it to a JetStream subject (crs-bridge-out.c); `crs-bridge in`
 * pulls that subject and publishes it as a local stream (crs-bridge-in.c).
 * Demand, order, retention and terminal signals cross; see
 * man/crs-bridge.1.
 *
 * Exit status: 0 the stream ended and its end crossed (or a signal
 * stopped the bridge), 1 stream, engine or I/O error, 2 usage error.
 */
#define _XOPEN_SOURCE 700
#include <ctype.h>
#include <errno.h>
#include <inttypes.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "crs-bridge.h"
#include "toolutil.h"

int bridge_out(const struct bridge_opts *o);
int bridge_in(const struct bridge_opts *o);

static void usage(FILE *f)
{
	fputs(
"usage: crs-bridge out STREAM --subject S [options]\n"
"       crs-bridge in --subject S --durable NAME STREAM [options]\n"
"\n"
"out: subscribe to the local crs stream STREAM and publish each message\n"
"to JetStream subject S; in: pull subject S with the durable consumer\n"
"NAME and publish what arrives as the local stream STREAM.\n"
"\n"
"Both directions:\n"
"  --nats URL           NATS server(s), comma-separated (nats://127.0.0.1:4222)\n"
"  --subject S          the JetStream subject (required)\n"
"  --js-stream NAME     JetStream stream holding S (CRS_ and S with _ for .)\n"
"  --max-msgs N         stream limit: messages retained (on creation/update)\n"
"  --max-bytes B        stream limit: bytes retained (K, M, G, T suffixes)\n"
"  --max-age SECONDS    stream limit: age of retained messages\n"
"  --memory             create the stream in memory instead of files\n"
"  --window N           out: messages unacknowledged at most (1024);\n"
"                       in: messages asked for and not yet committed (256)\n"
"  --outage SECONDS     end with an error once the engine is gone this long (30)\n"
"  --json               print a JSON status line every --status-ms and at exit\n"
"  --status-ms MS       status interval (1000)\n"
"  -h, --help           this text\n"
"out only:\n"
"  --follow DURABLE     count a message unacknowledged until the far\n"
"                       consumer DURABLE has acknowledged it: demand end to end\n"
"in only:\n"
"  --durable NAME       the pull consumer (required)\n"
"  --deliver WHAT       where a new consumer starts: all, new, last N,\n"
"                       from SEQ, since TIME (unix seconds or\n"
"                       YYYY-MM-DDTHH:MM:SSZ); default all\n"
"  --ack-wait SECONDS   before JetStream redelivers an unacked message (30)\n"
"  --state FILE         where the position survives a restart\n"
"                       (runtime directory, .crs-bridge-STREAM-DURABLE.state)\n"
"  --ring BYTES         the local ring (1M)\n"
"  --max-message BYTES  the largest message (ring/4)\n"
"  --replay N           replay mode, retaining N messages for late joiners\n"
"  --replay-bytes B     replay mode, retaining B payload bytes\n"
"  --replay-age SECONDS replay mode, retaining messages this young\n"
"\n"
"Exit status: 0 the stream ended and its end crossed, 1 stream or engine\n"
"error, 2 usage error.\n",
	      f);
}

static int usage_error(const char *fmt, ...)
{
	va_list ap;
	va_start(ap, fmt);
	fputs("crs-bridge: ", stderr);
	vfprintf(stderr, fmt, ap);
	fputs(" (crs-bridge -h for help)\n", stderr);
	va_end(ap);
	return 2;
}

static int parse_seconds(const char *s, int64_t *ms)
{
	char *end;
	errno = 0;
	double v = strtod(s, &end);
	if (errno || end == s || *end || v < 0 || v > 1e9)
		return -1;
	*ms = (int64_t)(v * 1000);
	return 0;
}

/* Unix seconds (fractions allowed) or YYYY-MM-DDTHH:MM:SS[Z], UTC. */
static int parse_time(const char *s, uint64_t *ns)
{
	int64_t ms;
	if (parse_seconds(s, &ms) == 0) {
		*ns = (uint64_t)ms * 1000000;
		return 0;
	}
	struct tm tm = { 0 };
	const char *end = strptime(s, "%Y-%m-%dT%H:%M:%S", &tm);
	if (!end || (*end && strcmp(end, "Z")))
		return -1;
	time_t t = timegm(&tm);
	if (t < 0)
		return -1;
	*ns = (uint64_t)t * 1000000000;
	return 0;
}

/* JetStream names: no '.', '*', '>', spaces; we keep [A-Za-z0-9_-]. */
static int js_name_ok(const char *s)
{
	if (!*s || strlen(s) > 48)
		return 0;
	for (; *s; s++)
		if (!isalnum((unsigned char)*s) && *s != '_' && *s != '-')
			return 0;
	return 1;
}

static int parse_deliver(struct bridge_opts *o, const char *what,
			 const char *arg, int *used)
{
	*used = 0;
	if (!strcmp(what, "all")) {
		o->deliver = DELIVER_ALL;
		return 0;
	}
	if (!strcmp(what, "new")) {
		o->deliver = DELIVER_NEW;
		return 0;
	}
	*used = 1;
	if (!arg)
		return usage_error("--deliver %s needs a value", what);
	if (!strcmp(what, "last") || !strcmp(what, "from")) {
		o->deliver = what[0] == 'l' ? DELIVER_LAST : DELIVER_FROM;
		if (tool_parse_size(arg, 0, UINT64_MAX, &o->deliver_arg))
			return usage_error("--deliver %s: bad number %s", what, arg);
		return 0;
	}
	if (!strcmp(what, "since")) {
		o->deliver = DELIVER_SINCE;
		if (parse_time(arg, &o->deliver_arg))
			return usage_error("--deliver since: bad time %s", arg);
		return 0;
	}
	return usage_error("--deliver: all, new, last N, from SEQ or since TIME");
}

/* Options are long only; their values follow as the next word or after
 * '='. Returns 0, or the exit status of a usage error (2) or help (-1). */
static int parse(int argc, char **argv, struct bridge_opts *o)
{
	if (argc < 2)
		return usage_error("out or in?");
	if (!strcmp(argv[1], "-h") || !strcmp(argv[1], "--help"))
		return -1;
	if (strcmp(argv[1], "out") && strcmp(argv[1], "in"))
		return usage_error("the first word is out or in, not %s", argv[1]);
	o->out = argv[1][0] == 'o';
	int window_set = 0, replay = 0;
	for (int i = 2; i < argc; i++) {
		char *a = argv[i];
		if (a[0] != '-') {
			if (o->stream)
				return usage_error("one stream only: %s", a);
			o->stream = a;
			continue;
		}
		if (!strcmp(a, "-h") || !strcmp(a, "--help"))
			return -1;
		if (!strcmp(a, "--memory")) {
			o->memory = 1;
			continue;
		}
		if (!strcmp(a, "--json")) {
			o->json = 1;
			continue;
		}
		char *v = strchr(a, '=');
		if (v)
			*v++ = '\0';
		else if (i + 1 < argc)
			v = argv[++i];
		else
			return usage_error("%s needs a value", a);
		uint64_t n = 0;
		int64_t ms;
		int bad = 0;
		if (!strcmp(a, "--nats")) {
			o->url = v;
		} else if (!strcmp(a, "--subject")) {
			o->subject = v;
		} else if (!strcmp(a, "--js-stream")) {
			if (!js_name_ok(v))
				return usage_error("--js-stream: [A-Za-z0-9_-], "
						   "at most 48");
			snprintf(o->js_stream, sizeof(o->js_stream), "%s", v);
		} else if (!strcmp(a, "--max-msgs")) {
			bad = tool_parse_size(v, 0, INT64_MAX, &n);
			o->max_msgs = (int64_t)n;
		} else if (!strcmp(a, "--max-bytes")) {
			bad = tool_parse_size(v, 0, INT64_MAX, &n);
			o->max_bytes = (int64_t)n;
		} else if (!strcmp(a, "--max-age")) {
			bad = parse_seconds(v, &ms) || ms < 1000;
			o->max_age_s = ms / 1000;
		} else if (!strcmp(a, "--window")) {
			bad = tool_parse_size(v, 1, 1 << 20, &n);
			o->window = (uint32_t)n;
			window_set = 1;
		} else if (!strcmp(a, "--outage")) {
			bad = parse_seconds(v, &o->outage_ms) || o->outage_ms < 100;
		} else if (!strcmp(a, "--status-ms")) {
			bad = tool_parse_size(v, 10, 3600000, &n);
			o->status_ms = (int64_t)n;
		} else if (!strcmp(a, "--follow") && o->out) {
			bad = !js_name_ok(v);
			o->follow = v;
		} else if (!strcmp(a, "--durable") && !o->out) {
			bad = !js_name_ok(v);
			o->durable = v;
		} else if (!strcmp(a, "--deliver") && !o->out) {
			int used;
			int r = parse_deliver(o, v, i + 1 < argc ? argv[i + 1] : NULL,
					      &used);
			if (r)
				return r;
			i += used;
		} else if (!strcmp(a, "--ack-wait") && !o->out) {
			bad = parse_seconds(v, &o->ack_wait_ms) || o->ack_wait_ms < 100;
		} else if (!strcmp(a, "--state") && !o->out) {
			o->state_path = v;
		} else if (!strcmp(a, "--ring") && !o->out) {
			bad = tool_parse_size(v, 0, UINT64_MAX, &o->pub.ring_bytes);
		} else if (!strcmp(a, "--max-message") && !o->out) {
			bad = tool_parse_size(v, 0, UINT32_MAX, &n);
			o->pub.max_message = (uint32_t)n;
		} else if (!strcmp(a, "--replay") && !o->out) {
			bad = tool_parse_size(v, 0, UINT64_MAX, &o->pub.replay_count);
			replay = 1;
		} else if (!strcmp(a, "--replay-bytes") && !o->out) {
			bad = tool_parse_size(v, 0, UINT64_MAX, &o->pub.replay_bytes);
			replay = 1;
		} else if (!strcmp(a, "--replay-age") && !o->out) {
			bad = parse_seconds(v, &ms);
			o->pub.replay_age_ms = (uint64_t)ms;
			replay = 1;
		} else {
			return usage_error("unknown option %s for %s", a,
					   o->out ? "out" : "in");
		}
		if (bad)
			return usage_error("%s: bad value %s", a, v);
	}
	if (!o->stream)
		return usage_error("which local stream?");
	if (crs_name_check(o->stream))
		return usage_error("bad stream name %s", o->stream);
	if (!o->subject || !*o->subject)
		return usage_error("--subject is required");
	if (!o->out && !o->durable)
		return usage_error("in needs --durable NAME");
	if (!o->js_stream[0]) {
		snprintf(o->js_stream, sizeof(o->js_stream), "CRS_%s", o->subject);
		for (char *p = o->js_stream; *p; p++)
			if (!isalnum((unsigned char)*p) && *p != '-')
				*p = '_';
	}
	if (!window_set)
		o->window = o->out ? 1024 : 256;
	if (replay)
		o->pub.mode = CRS_MODE_REPLAY;
	return 0;
}

int main(int argc, char **argv)
{
	struct bridge_opts o = {
		.url = "nats://127.0.0.1:4222",
		.ack_wait_ms = 30000,
		.outage_ms = 30000,
		.status_ms = 1000,
	};
	crs_pub_opts_init(&o.pub);
	int r = parse(argc, argv, &o);
	if (r < 0) {
		usage(stdout);
		return 0;
	}
	if (r)
		return r;
	return o.out ? bridge_out(&o) : bridge_in(&o);
}
