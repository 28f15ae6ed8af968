/*
 * bridge-bench.c - crs-bridge end to end over a local nats-server beside
 * what the nats C client itself does over the same server in the same
 * run, as JSON.
 *
 * Per message size and round, alternately:
 *   bridge:   an origin crs publisher (a child) -> crs-bridge out ->
 *             JetStream -> crs-bridge in -> a crs subscriber (here);
 *   baseline: one thread publishing with js_PublishAsync (asynchronous
 *             acks, at most 1024 pending) while another fetches the same
 *             subject in batches of 500 (natsSubscription_Fetch, AckAll
 *             once per batch): the client's own publish/fetch pipeline;
 *   baseline with ids: the same, each message carrying the bridge's
 *             Nats-Msg-Id and Nats-Expected-Last-Msg-Id, which the server
 *             checks: what no loss and no duplicate cost the engine.
 * Both are timed at the receiver, first message to last, on a memory
 * stream, and every message received is checked for its sequence. The
 * ratio bridge/baseline of each round and their medians are reported.
 *
 * usage: crs-bridge-bench CRS_BRIDGE [--rounds N] [--count N] [--sizes 32,4096]
 */
#include <errno.h>
#include <inttypes.h>
#include <pthread.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include <nats/nats.h>

#include "../tests/bridge/natsd.h"
#include "crs/crs.h"

static struct natsd srv;
static const char *bridge_bin;
static char rundir[256];

static int64_t now_ns(void)
{
	struct timespec t;
	clock_gettime(CLOCK_MONOTONIC, &t);
	return (int64_t)t.tv_sec * 1000000000 + t.tv_nsec;
}

static void die(const char *what)
{
	fprintf(stderr, "crs-bridge-bench: %s\n", what);
	natsd_cleanup(&srv);
	exit(1);
}

/* ---- the bridge ---------------------------------------------------------- */

static void origin(const char *name, uint64_t n, size_t size)
{
	crs_pub *pub;
	if (crs_pub_create(name, NULL, &pub))
		_exit(1);
	for (uint64_t seq = 0; seq < n;) {
		void *buf;
		int r = crs_pub_claim(pub, size, &buf);
		if (r == 0) {
			memset(buf, 0, size);
			memcpy(buf, &seq, sizeof(seq));
			crs_pub_commit(pub, size);
			seq++;
		} else if (r == -CRS_ENODEMAND || r == -CRS_ENOROOM) {
			crs_pub_wait(pub, size, 1000);
		} else {
			_exit(1);
		}
	}
	crs_pub_complete(pub);
	crs_pub_wait_consumed(pub, 60000);
	crs_pub_close(pub);
	_exit(0);
}

static pid_t run(char **argv)
{
	pid_t pid = natsd_spawn(argv, NULL, NULL);
	if (pid < 0)
		die("spawn");
	return pid;
}

/* Messages per second through the bridges, or -1. */
static double bridge_round(int round, uint64_t n, size_t size)
{
	char name[64], far[64], subject[64], durable[32];
	snprintf(name, sizeof(name), "bb-o-%d-%zu", round, size);
	snprintf(far, sizeof(far), "bb-f-%d-%zu", round, size);
	snprintf(subject, sizeof(subject), "bb%d_%zu", round, size);
	snprintf(durable, sizeof(durable), "d%d", round);
	pid_t opid = fork();
	if (opid == 0)
		origin(name, n, size);
	char *out[] = { (char *)bridge_bin, "out", name, "--nats", srv.url,
			"--subject", subject, "--memory", NULL };
	char *in[] = { (char *)bridge_bin, "in", "--nats", srv.url, "--subject",
		       subject, "--durable", durable, "--memory", far, NULL };
	pid_t po = run(out), pi = run(in);
	struct crs_sub_opts so;
	crs_sub_opts_init(&so);
	so.prefetch = 1024;
	so.wait_ms = 30000;
	crs_sub *sub;
	if (crs_sub_open(far, &so, &sub))
		die("far stream did not appear");
	int64_t t0 = 0, t1 = 0;
	uint64_t next = 0;
	while (next < n) {
		struct crs_msg m;
		int r = crs_sub_poll(sub, &m);
		if (r == 0) {
			if (crs_sub_wait(sub, 30000) == -ETIMEDOUT)
				die("bridge round stalled");
			continue;
		}
		if (r < 0)
			die("far stream ended early");
		uint64_t seq;
		memcpy(&seq, m.data, sizeof(seq));
		if (seq != next || m.len != size)
			die("bridge: wrong message");
		if (next == 0)
			t0 = now_ns();
		next++;
		t1 = now_ns();
		crs_sub_release(sub);
	}
	crs_sub_close(sub);
	int st;
	waitpid(opid, &st, 0);
	waitpid(po, &st, 0);
	waitpid(pi, &st, 0);
	return t1 > t0 ? (double)(n - 1) * 1e9 / (double)(t1 - t0) : -1;
}

/* ---- the baseline: the nats C client alone ------------------------------ */

struct fetcher {
	natsSubscription *sub;
	uint64_t n;
	size_t size;
	int64_t t0, t1;
	int bad;
};

static void *fetch_all(void *arg)
{
	struct fetcher *f = arg;
	uint64_t next = 0;
	while (next < f->n && !f->bad) {
		natsMsgList list = { 0 };
		natsStatus s = natsSubscription_Fetch(&list, f->sub, 500, 5000, NULL);
		if (s == NATS_TIMEOUT)
			continue;
		if (s != NATS_OK) {
			f->bad = 1;
			break;
		}
		for (int i = 0; i < list.Count; i++) {
			natsMsg *m = list.Msgs[i];
			uint64_t seq = UINT64_MAX;
			if ((size_t)natsMsg_GetDataLength(m) == f->size)
				memcpy(&seq, natsMsg_GetData(m), sizeof(seq));
			if (seq != next)
				f->bad = 1;
			if (next == 0)
				f->t0 = now_ns();
			next++;
		}
		f->t1 = now_ns();
		if (list.Count)
			natsMsg_Ack(list.Msgs[list.Count - 1], NULL);
		natsMsgList_Destroy(&list);
	}
	return NULL;
}

/* with_ids: each message also carries the bridge's headers, Nats-Msg-Id
 * and Nats-Expected-Last-Msg-Id, which the server checks. */
static double baseline_round(jsCtx *js, int round, uint64_t n, size_t size,
			     int with_ids)
{
	char stream[64], subject[64];
	snprintf(stream, sizeof(stream), "BASE_%d_%zu_%d", round, size, with_ids);
	snprintf(subject, sizeof(subject), "base%d_%zu_%d", round, size, with_ids);
	jsStreamConfig cfg;
	jsStreamConfig_Init(&cfg);
	const char *subjects[] = { subject };
	cfg.Name = stream;
	cfg.Subjects = subjects;
	cfg.SubjectsLen = 1;
	cfg.Storage = js_MemoryStorage;
	jsStreamInfo *si = NULL;
	if (js_AddStream(&si, js, &cfg, NULL, NULL) != NATS_OK)
		die("baseline stream");
	jsStreamInfo_Destroy(si);
	jsSubOptions so;
	jsSubOptions_Init(&so);
	so.Stream = stream;
	so.Config.AckPolicy = js_AckAll;
	so.Config.MaxAckPending = 100000;
	struct fetcher f = { .n = n, .size = size };
	if (js_PullSubscribe(&f.sub, js, subject, "base", NULL, &so, NULL) !=
	    NATS_OK)
		die("baseline pull subscription");
	pthread_t th;
	pthread_create(&th, NULL, fetch_all, &f);
	char *buf = calloc(1, size);
	char id[2][40];
	for (uint64_t seq = 0; seq < n; seq++) {
		memcpy(buf, &seq, sizeof(seq));
		if (!with_ids) {
			while (js_PublishAsync(js, subject, buf, (int)size, NULL) !=
			       NATS_OK)
				usleep(1000);
			continue;
		}
		natsMsg *m;
		if (natsMsg_Create(&m, subject, NULL, buf, (int)size) != NATS_OK)
			die("natsMsg_Create");
		snprintf(id[seq & 1], sizeof(id[0]), "0123456789abcdef:%" PRIu64, seq);
		natsMsgHeader_Set(m, "Nats-Msg-Id", id[seq & 1]);
		if (seq)
			natsMsgHeader_Set(m, "Nats-Expected-Last-Msg-Id",
					  id[(seq - 1) & 1]);
		while (js_PublishMsgAsync(js, &m, NULL) != NATS_OK)
			usleep(1000);
	}
	jsPubOptions po;
	jsPubOptions_Init(&po);
	po.MaxWait = 30000;
	js_PublishAsyncComplete(js, &po);
	pthread_join(th, NULL);
	free(buf);
	natsSubscription_Destroy(f.sub);
	js_DeleteStream(js, stream, NULL, NULL);
	if (f.bad)
		die("baseline: wrong or missing message");
	return f.t1 > f.t0 ? (double)(n - 1) * 1e9 / (double)(f.t1 - f.t0) : -1;
}

/* ---- driver ------------------------------------------------------------- */

static int cmp(const void *a, const void *b)
{
	double x = *(const double *)a, y = *(const double *)b;
	return x < y ? -1 : x > y;
}

static double median(double *v, int n)
{
	double s[64];
	memcpy(s, v, (size_t)n * sizeof(*v));
	qsort(s, (size_t)n, sizeof(*s), cmp);
	return n % 2 ? s[n / 2] : (s[n / 2 - 1] + s[n / 2]) / 2;
}

int main(int argc, char **argv)
{
	if (argc < 2) {
		fprintf(stderr, "usage: crs-bridge-bench CRS_BRIDGE [--rounds N] "
				"[--count N] [--sizes 32,4096]\n");
		return 2;
	}
	bridge_bin = argv[1];
	int rounds = 3;
	uint64_t count = 0;
	size_t sizes[8] = { 32, 4096 };
	int nsizes = 2;
	for (int i = 2; i + 1 < argc; i += 2) {
		if (!strcmp(argv[i], "--rounds"))
			rounds = atoi(argv[i + 1]);
		else if (!strcmp(argv[i], "--count"))
			count = strtoull(argv[i + 1], NULL, 10);
		else if (!strcmp(argv[i], "--sizes")) {
			nsizes = 0;
			for (char *p = strtok(argv[i + 1], ","); p && nsizes < 8;
			     p = strtok(NULL, ","))
				sizes[nsizes++] = strtoull(p, NULL, 10);
		}
	}
	if (rounds < 1 || rounds > 64)
		rounds = 3;
	if (!natsd_binary()) {
		fprintf(stderr, "crs-bridge-bench: nats-server not installed\n");
		return 77;
	}
	snprintf(rundir, sizeof(rundir), "/tmp/crs-bridge-bench-XXXXXX");
	if (!mkdtemp(rundir))
		die("mkdtemp");
	setenv("CRS_DIR", rundir, 1);
	signal(SIGPIPE, SIG_IGN);
	if (natsd_start(&srv, 0))
		die("nats-server did not start");
	natsConnection *nc;
	jsCtx *js;
	jsOptions jo;
	jsOptions_Init(&jo);
	jo.PublishAsync.MaxPending = 1024;
	if (natsConnection_ConnectTo(&nc, srv.url) != NATS_OK ||
	    natsConnection_JetStream(&js, nc, &jo) != NATS_OK)
		die("connect");
	printf("{\"bench\":\"crs-bridge\",\"server\":\"nats-server (local, "
	       "memory storage)\",\"rounds\":%d,\"results\":[",
	       rounds);
	for (int s = 0; s < nsizes; s++) {
		size_t size = sizes[s] < 8 ? 8 : sizes[s];
		uint64_t n = count ? count : size <= 256 ? 200000 : 50000;
		double br[64], bl[64], bi[64], ratio[64], ratio_ids[64];
		for (int r = 0; r < rounds; r++) {
			br[r] = bridge_round(r, n, size);
			bl[r] = baseline_round(js, r, n, size, 0);
			bi[r] = baseline_round(js, r, n, size, 1);
			ratio[r] = br[r] / bl[r];
			ratio_ids[r] = br[r] / bi[r];
			fprintf(stderr, "size %zu round %d: bridge %.0f msg/s, "
					"nats client %.0f msg/s (ratio %.2f), "
					"with ids %.0f msg/s (ratio %.2f)\n",
				size, r, br[r], bl[r], ratio[r], bi[r],
				ratio_ids[r]);
		}
		printf("%s{\"size\":%zu,\"messages\":%" PRIu64
		       ",\"bridge_msgs_per_s\":%.0f,\"nats_client_msgs_per_s\":%.0f,"
		       "\"nats_client_ids_msgs_per_s\":%.0f,"
		       "\"ratio_median\":%.3f,\"ratio_ids_median\":%.3f,"
		       "\"bridge_MBps\":%.2f,\"rounds\":[",
		       s ? "," : "", size, n, median(br, rounds),
		       median(bl, rounds), median(bi, rounds),
		       median(ratio, rounds), median(ratio_ids, rounds),
		       median(br, rounds) * (double)size / 1e6);
		for (int r = 0; r < rounds; r++)
			printf("%s{\"bridge\":%.0f,\"nats_client\":%.0f,"
			       "\"nats_client_ids\":%.0f,\"ratio\":%.3f}",
			       r ? "," : "", br[r], bl[r], bi[r], ratio[r]);
		printf("]}");
	}
	printf("]}\n");
	jsCtx_Destroy(js);
	natsConnection_Destroy(nc);
	natsd_cleanup(&srv);
	char cmd[300];
	snprintf(cmd, sizeof(cmd), "rm -rf %s", rundir);
	if (system(cmd))
		return 1;
	nats_Close();
	return 0;
}
