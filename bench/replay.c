/*
 * replay.c - a late joiner catching up on a replay stream, against the
 * machine's memory read bandwidth measured in the same run.
 *
 * crs: a publisher in CRS_MODE_REPLAY with a ring of catchup_ring bytes
 * (1 GiB, CRS_RING_MAX; quick: 64 MiB) publishes catchup_bytes (about
 * 900 MiB) of catchup_msg-byte messages with no subscriber at all, then
 * waits, asleep (spin_us -1). A subscriber process, started before and
 * idle until then, opens the stream: it starts at the oldest retained
 * message and reads every one in place (every byte summed, index words
 * checked) with the default prefetch. Catch-up time runs from the call
 * of crs_sub_open to the last retained message read; "read" from the
 * first to the last message. The subscriber's page faults are counted:
 * its mapping of the ring is new, every page is faulted in as it reads.
 *
 * Baselines, each in a fresh process, in the same round:
 *   mem-read    the same read loop (64 KiB at a time) over an anonymous
 *               buffer of catchup_ring bytes, filled first; median of
 *               three passes. The brief's "memory read bandwidth".
 *   memfd-read  one pass of the same loop over a fresh read-only mapping
 *               of a filled memfd (shared memory, like crs's ring): page
 *               faults included, as a late joiner pays them; then a
 *               second pass over the same mapping (no faults: shows what
 *               the faults cost), and a pass over a fresh MAP_POPULATE
 *               mapping with the mmap call timed (what populating at
 *               subscribe time would give).
 */
#include <errno.h>
#include <inttypes.h>
#include <stdlib.h>
#include <sys/mman.h>
#include <sys/resource.h>
#include <unistd.h>

#include "bench.h"
#include "crs/crs.h"

struct cu {
	const struct config *cfg;
	char name[80];
	struct ctl *ctl;
	uint64_t nmsgs;
};

static uint64_t minflt(void)
{
	struct rusage ru;
	getrusage(RUSAGE_SELF, &ru);
	return (uint64_t)ru.ru_minflt;
}

static uint64_t read_region(const uint8_t *p, uint64_t bytes, size_t chunk)
{
	uint64_t sum = 0;
	for (uint64_t off = 0; off < bytes; off += chunk)
		sum += sum_msg(p + off, bytes - off < chunk ? bytes - off : chunk);
	return sum;
}

/* rep[0].stamp[0] = ns per pass (median of 3). */
static int mem_read(void *arg, int idx)
{
	struct cu *c = arg;
	struct proc_rep *rep = &c->ctl->rep[idx];
	uint64_t bytes = c->cfg->catchup_ring;
	uint8_t *buf = mmap(NULL, bytes, PROT_READ | PROT_WRITE,
			    MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
	if (buf == MAP_FAILED) {
		rep_err(rep, errno, "mmap %" PRIu64 " bytes", bytes);
		return 1;
	}
	memset(buf, 0x5a, bytes);
	double t[3];
	for (int i = 0; i < 3; i++) {
		int64_t t0 = now_ns();
		bench_sink += read_region(buf, bytes, c->cfg->catchup_msg);
		t[i] = (double)(now_ns() - t0);
	}
	rep->stamp[0] = (int64_t)median(t, 3);
	rep->msgs = bytes;
	munmap(buf, bytes);
	return 0;
}

/* rep.stamp: [0] ns for one pass over a fresh mapping (minflt faults),
 * [1] a second pass over it, [2] mmap(MAP_POPULATE) and one pass. */
static int memfd_read(void *arg, int idx)
{
	struct cu *c = arg;
	struct proc_rep *rep = &c->ctl->rep[idx];
	uint64_t bytes = c->cfg->catchup_bytes;
	int fd = memfd_create("crs-bench-memfd", MFD_CLOEXEC);
	if (fd < 0 || ftruncate(fd, (off_t)bytes) < 0) {
		rep_err(rep, errno, "memfd");
		return 1;
	}
	uint8_t *w = mmap(NULL, bytes, PROT_READ | PROT_WRITE, MAP_SHARED, fd,
			  0);
	if (w == MAP_FAILED) {
		rep_err(rep, errno, "mmap memfd");
		return 1;
	}
	memset(w, 0x5a, bytes);
	munmap(w, bytes);
	const uint8_t *r = mmap(NULL, bytes, PROT_READ, MAP_SHARED, fd, 0);
	if (r == MAP_FAILED) {
		rep_err(rep, errno, "mmap memfd");
		return 1;
	}
	uint64_t f0 = minflt();
	int64_t t0 = now_ns();
	bench_sink += read_region(r, bytes, c->cfg->catchup_msg);
	int64_t t1 = now_ns();
	rep->minflt = minflt() - f0;
	bench_sink += read_region(r, bytes, c->cfg->catchup_msg);
	int64_t t2 = now_ns();
	munmap((void *)r, bytes);
	rep->stamp[0] = t1 - t0;
	rep->stamp[1] = t2 - t1;
	t0 = now_ns();
	r = mmap(NULL, bytes, PROT_READ, MAP_SHARED | MAP_POPULATE, fd, 0);
	if (r == MAP_FAILED) {
		rep_err(rep, errno, "mmap memfd");
		return 1;
	}
	bench_sink += read_region(r, bytes, c->cfg->catchup_msg);
	rep->stamp[2] = now_ns() - t0;
	rep->msgs = bytes;
	munmap((void *)r, bytes);
	close(fd);
	return 0;
}

/* The publisher: fill the ring with no subscriber, then serve the late
 * joiner while asleep. stamp[0] = ns spent publishing. */
static int cu_pub(void *arg, int idx)
{
	struct cu *c = arg;
	struct proc_rep *rep = &c->ctl->rep[idx];
	const size_t size = c->cfg->catchup_msg;
	struct crs_pub_opts po;
	crs_pub_opts_init(&po);
	po.mode = CRS_MODE_REPLAY;
	po.ring_bytes = c->cfg->catchup_ring;
	po.spin_us = -1;
	crs_pub *pub;
	int err = crs_pub_create(c->name, &po, &pub);
	if (err) {
		rep_err(rep, err, "crs_pub_create: %s", crs_strerror(err));
		return 1;
	}
	int64_t t0 = now_ns();
	for (uint64_t seq = 0; seq < c->nmsgs; seq++) {
		void *buf;
		err = crs_pub_claim(pub, size, &buf);
		if (err) {
			rep_err(rep, err, "claim %" PRIu64 " with no "
				"subscriber: %s", seq, crs_strerror(err));
			goto out;
		}
		fill_msg(buf, size, seq);
		crs_pub_commit(pub, size);
	}
	rep->stamp[0] = now_ns() - t0;
	atomic_store(&c->ctl->nready, 1); /* the joiner may come */
	err = crs_pub_wait_subscribers(pub, 1, 60000);
	if (!err)
		err = crs_pub_wait_consumed(pub, 120000);
	if (!err)
		err = crs_pub_complete(pub);
	if (!err)
		err = crs_pub_wait_consumed(pub, 30000);
	if (err)
		rep_err(rep, err, "serving the joiner: %s", crs_strerror(err));
out:
	crs_pub_close(pub);
	return rep->err ? 1 : 0;
}

/* The late joiner. stamp: [0] open called, [1] first message, [2] last
 * message read. */
static int cu_sub(void *arg, int idx)
{
	struct cu *c = arg;
	struct proc_rep *rep = &c->ctl->rep[idx];
	const size_t size = c->cfg->catchup_msg;
	int64_t deadline = now_ns() + WATCHDOG_NS;
	while (!atomic_load(&c->ctl->nready)) {
		if (now_ns() > deadline) {
			rep_err(rep, ETIMEDOUT, "publisher never ready");
			return 1;
		}
		sleep_ns(1000000);
	}
	struct crs_sub_opts so;
	crs_sub_opts_init(&so);
	so.wait_ms = 20000;
	crs_sub *sub;
	uint64_t f0 = minflt();
	int64_t cpu0 = cpu_ns();
	rep->stamp[0] = now_ns();
	int err = crs_sub_open(c->name, &so, &sub);
	if (err) {
		rep_err(rep, err, "subscribe: %s", crs_strerror(err));
		return 1;
	}
	uint64_t seq = 0, sum = 0, bad = 0;
	struct crs_msg m;
	while (seq < c->nmsgs) {
		int n = crs_sub_poll(sub, &m);
		if (n == 1) {
			if (!seq)
				rep->stamp[1] = now_ns();
			if (m.seq != seq || m.len != size ||
			    !read_msg(m.data, m.len, seq, &sum))
				bad++;
			crs_sub_release(sub);
			seq++;
			continue;
		}
		if (n < 0) {
			rep_err(rep, n, "stream ended after %" PRIu64
				" messages", seq);
			break;
		}
		if (now_ns() > deadline) {
			rep_err(rep, ETIMEDOUT, "stuck after %" PRIu64, seq);
			break;
		}
		cpu_relax();
	}
	rep->stamp[2] = now_ns();
	rep->cpu = cpu_ns() - cpu0;
	rep->minflt = minflt() - f0;
	rep->msgs = seq;
	rep->bad = bad;
	bench_sink += sum;
	if (!rep->err && bad)
		rep_err(rep, EPROTO, "%" PRIu64 " bad messages", bad);
	/* The stream must then complete. */
	while (!rep->err) {
		int n = crs_sub_poll(sub, &m);
		if (n == 1) {
			rep_err(rep, EPROTO, "message beyond the retained");
		} else if (n < 0) {
			const struct crs_end *e = crs_sub_end(sub);
			if (!e || e->code)
				rep_err(rep, EPROTO, "no completion: %s",
					e ? e->message : "?");
			break;
		} else if (crs_sub_wait(sub, 30000)) {
			rep_err(rep, ETIMEDOUT, "no terminal signal");
		}
	}
	crs_sub_close(sub);
	return rep->err ? 1 : 0;
}

static unsigned next_cu_id;

static int run_procs(struct cu *c, int n, int (*fn[])(void *, int),
		     char *err, size_t errlen)
{
	pid_t pids[4];
	for (int i = 0; i < n; i++)
		pids[i] = spawn(c->cfg, i, fn[i], c, i);
	int failed = reap_all(pids, n, now_ns() + WATCHDOG_NS);
	for (int i = 0; i < n; i++)
		if (c->ctl->rep[i].err) {
			snprintf(err, errlen, "%s", c->ctl->rep[i].msg);
			return -1;
		}
	if (failed) {
		snprintf(err, errlen, "%d processes failed", failed);
		return -1;
	}
	return 0;
}

static void cu_measure(const struct config *cfg, struct catchup_sample *s)
{
	memset(s, 0, sizeof(*s));
	struct cu c = { .cfg = cfg };
	c.nmsgs = cfg->catchup_bytes / cfg->catchup_msg;
	stream_name(c.name, sizeof(c.name), 200000 + next_cu_id++);
	s->msgs = (double)c.nmsgs;
	s->bytes = (double)(c.nmsgs * cfg->catchup_msg);

	int (*mem[1])(void *, int) = { mem_read };
	int (*mfd[1])(void *, int) = { memfd_read };
	int (*crs[2])(void *, int) = { cu_pub, cu_sub };

	c.ctl = ctl_new(1, 0);
	if (!c.ctl || run_procs(&c, 1, mem, s->err, sizeof(s->err)))
		goto out;
	s->membw_gbps = (double)c.ctl->rep[0].msgs / (double)c.ctl->rep[0].stamp[0];
	ctl_free(c.ctl);

	c.ctl = ctl_new(1, 0);
	if (!c.ctl || run_procs(&c, 1, mfd, s->err, sizeof(s->err)))
		goto out;
	s->memfd_gbps = (double)c.ctl->rep[0].msgs / (double)c.ctl->rep[0].stamp[0];
	s->memfd_warm_gbps =
		(double)c.ctl->rep[0].msgs / (double)c.ctl->rep[0].stamp[1];
	s->memfd_populate_gbps =
		(double)c.ctl->rep[0].msgs / (double)c.ctl->rep[0].stamp[2];
	s->memfd_minflt = (double)c.ctl->rep[0].minflt;
	ctl_free(c.ctl);

	c.ctl = ctl_new(1, 0);
	if (!c.ctl || run_procs(&c, 2, crs, s->err, sizeof(s->err)))
		goto out;
	const struct proc_rep *p = &c.ctl->rep[0], *r = &c.ctl->rep[1];
	s->publish_gbps = s->bytes / (double)p->stamp[0];
	s->catchup_gbps = s->bytes / (double)(r->stamp[2] - r->stamp[0]);
	s->read_gbps = s->bytes / (double)(r->stamp[2] - r->stamp[1]);
	s->open_ms = (double)(r->stamp[1] - r->stamp[0]) / 1e6;
	s->minflt = (double)r->minflt;
	s->ok = r->msgs == c.nmsgs;
	if (!s->ok)
		snprintf(s->err, sizeof(s->err), "read %" PRIu64 " of %" PRIu64,
			 r->msgs, c.nmsgs);
out:
	ctl_free(c.ctl);
}

int catchup_run(const struct config *cfg, struct results *res)
{
	if (!scenario_selected(cfg, "catchup", 1, 0))
		return 0;
	for (int round = 0; round < cfg->catchup_rounds; round++) {
		struct catchup_sample *s = &res->catchup[res->ncatchup++];
		if (isatty(2))
			fprintf(stderr, "\r%d/%d catch-up...                 ",
				round + 1, cfg->catchup_rounds);
		cu_measure(cfg, s);
		if (!s->ok) {
			res->failures++;
			fprintf(stderr, "crs-bench: catch-up round %d failed: %s\n",
				round + 1, s->err);
		}
	}
	return 0;
}
