/*
 * inspect.c - the read-only inspection API (include/crs/inspect.h). It
 * attaches as an inspector (data segment only, no slot), then turns the
 * publisher's statistics region into plain structs. The region is
 * untrusted like all shared memory: derived figures are clamped, never
 * used as indexes.
 */
#include "crs/inspect.h"

#include <errno.h>
#include <stdlib.h>
#include <string.h>

#include "atomics.h"
#include "attach.h"
#include "credit.h"
#include "errmsg.h"
#include "frame.h"
#include "ipc/clock.h"
#include "ipc/memfd.h"
#include "ipc/proc.h"
#include "ipc/rundir.h"
#include "layout.h"
#include "name.h"
#include "ring.h"
#include "terminal.h"

struct crs_inspector {
	struct attach at;
	int pidfd;
	char name[CRS_NAME_MAX + 1];
};

int crs_inspect_open(const char *name, crs_inspector **out)
{
	struct crs_inspector *in = calloc(1, sizeof(*in));
	if (!in)
		return errmsg_set(-ENOMEM, "out of memory");
	int err = attach_open(name, HS_ROLE_INSPECTOR, 0, 2000, &in->at);
	if (err) {
		free(in);
		/* A dead member's leftovers are a stale stream like any. */
		return err == -ESTALE ? -ECONNREFUSED : err;
	}
	strlcpy(in->name, name, sizeof(in->name));
	in->pidfd = ipc_pidfd_open(in->at.seg.pub_pid);
	/* The publisher answered, so it lives; the socket is done. */
	ipc_close(in->at.sock);
	in->at.sock = -1;
	*out = in;
	return 0;
}

void crs_inspect_close(crs_inspector *in)
{
	if (!in)
		return;
	ipc_close(in->pidfd);
	attach_close(&in->at);
	free(in);
}

static uint64_t sat_sub(uint64_t a, uint64_t b)
{
	return a > b ? a - b : 0;
}

/* Frames past the mirrored position we look at, at most: the publisher
 * mirrors every 16 messages, so more than that only arrive while we walk. */
#define WALK_MAX 64

/* Ring position, messages and bytes published. The publisher mirrors
 * them every few commits (pubring_mirror), so they may trail its last
 * commits, and a publisher that then stops (or sleeps elsewhere) would
 * show stale figures for ever: read the mirror as one (its seqlock;
 * bounded, since a hostile count must not make us spin), then count what
 * lies committed in the ring past it. The walk trusts nothing: it stops
 * at the first header that is not a committed frame of this lap. */
static void read_figures(const crs_inspector *in, uint64_t *pos,
			 uint64_t *published, uint64_t *bytes)
{
	const struct crs_pub_stats *st = &in->at.hdr->stats;
	for (int tries = 0; tries < 64; tries++) {
		/* Pairs with the release store of the even count in
		 * pubring_mirror(): the figures read are at least that new. */
		uint64_t s1 = shm_load_acquire(&st->mirror_seq);
		*pos = shm_load_relaxed(&st->position);
		*published = shm_load_relaxed(&st->published);
		*bytes = shm_load_relaxed(&st->bytes);
		/* Orders the loads above before the re-read of the count;
		 * pairs with the release fence after the odd count. */
		shm_fence_acquire();
		if (!(s1 & 1) && s1 == shm_load_relaxed(&st->mirror_seq))
			break;
		spin_relax();
	}
	const struct ring_view v = {
		.base = (const uint8_t *)in->at.hdr + CRS_RING_OFFSET,
		.size = in->at.seg.ring_size, /* checked: a power of two */
		.mask = in->at.seg.ring_size - 1,
		.max_message = in->at.seg.max_message,
	};
	uint64_t p = *pos;
	if (!frame_aligned(p))
		return;
	for (int i = 0; i < WALK_MAX && p - *pos < v.size; i++) {
		uint64_t len;
		/* ring_load: a frame seen committed has its length written. */
		enum ring_frame k = ring_frame_at(&v, p, &len);
		if (k == RING_MESSAGE) {
			++*published;
			*bytes += len;
			p += frame_size(len);
		} else if (k == RING_PADDING) {
			p += len;
		} else {
			break;
		}
	}
	*pos = p;
}

static void read_stream(const crs_inspector *in, struct crs_stream_info *f,
			uint64_t *position)
{
	const struct crs_data_header *h = in->at.hdr;
	const struct crs_pub_stats *st = &h->stats;
	memset(f, 0, sizeof(*f));
	strlcpy(f->name, in->name, sizeof(f->name));
	f->pub_pid = in->at.seg.pub_pid; /* the checked copy */
	f->mode = in->at.seg.mode;
	f->ring_size = in->at.seg.ring_size;
	f->max_message = in->at.seg.max_message;
	f->stream_id = in->at.seg.stream_id;
	f->subscribers = shm_load_relaxed(&st->subscribers);
	read_figures(in, position, &f->published, &f->bytes);
	f->dropped = shm_load_relaxed(&st->dropped);
	f->wakes = shm_load_relaxed(&st->wakes);
	f->no_demand = shm_load_relaxed(&st->no_demand);
	f->no_room = shm_load_relaxed(&st->no_room);
	f->evicted = shm_load_relaxed(&st->evicted);
	f->refused = shm_load_relaxed(&st->refused);
	f->epoch = shm_load_relaxed(&st->epoch);
	f->retained = shm_load_relaxed(&st->retained);
	f->retained_bytes = shm_load_relaxed(&st->retained_bytes);
	int64_t since = shm_load_relaxed(&st->retained_since_ns);
	int64_t clock = shm_load_relaxed(&st->clock_ns);
	f->retained_age_ns = f->mode != CRS_MODE_REPLAY || since == INT64_MIN ||
					     clock < since
				     ? -1
				     : clock - since;
	f->sampled_ns = ipc_now_ns();
	uint32_t state = shm_load_relaxed(&st->state);
	struct terminal_view t;
	if (terminal_get(&h->terminal, &t) == CRS_TERM_ERROR) {
		f->end_code = t.code;
		memcpy(f->end_message, t.message, sizeof(f->end_message));
	}
	f->state = state == CRS_STATS_COMPLETED ? CRS_STREAM_COMPLETED
		   : state == CRS_STATS_FAILED	? CRS_STREAM_FAILED
		   : state == CRS_STATS_CLOSED	? CRS_STREAM_CLOSED
						: CRS_STREAM_LIVE;
	/* Gone without closing is dead; closed and gone stays closed. */
	if (f->state != CRS_STREAM_CLOSED && in->pidfd >= 0 &&
	    !ipc_pidfd_alive(in->pidfd))
		f->state = CRS_STREAM_DEAD;
}

/* Who limits the publisher now: in lockstep, whoever has no demand left;
 * in any mode, whoever has not read a ring's worth minus one message (the
 * publisher cannot place another). Nobody, if neither holds. */
static void mark_holding_back(const struct crs_stream_info *f,
			      struct crs_sub_info *s, int n)
{
	uint64_t full = f->ring_size > (uint64_t)f->max_message + 16
				? f->ring_size - f->max_message - 16
				: 0;
	for (int i = 0; i < n; i++)
		s[i].holding_back = (f->mode == CRS_MODE_PUBLISH &&
				     s[i].outstanding == 0) ||
				    s[i].lag_bytes >= full;
}

int crs_inspect_read(crs_inspector *in, struct crs_stream_info *info,
		     struct crs_sub_info *subs, int max)
{
	uint64_t position;
	read_stream(in, info, &position);
	const struct crs_data_header *h = in->at.hdr;
	uint64_t min_consumed = position;
	uint32_t nslots = in->at.seg.max_subscribers;
	int n = 0;
	if (nslots > CRS_SUBSCRIBERS_MAX)
		nslots = CRS_SUBSCRIBERS_MAX;
	struct crs_sub_info all[CRS_SUBSCRIBERS_MAX];
	for (uint32_t i = 0; i < nslots; i++) {
		const struct crs_sub_stats *ss = &h->subs[i];
		if (!shm_load_relaxed(&ss->active))
			continue;
		struct crs_sub_info *s = &all[n++];
		memset(s, 0, sizeof(*s));
		uint64_t join = shm_load_relaxed(&ss->join_seq);
		uint64_t consumed_pos = shm_load_relaxed(&ss->consumed);
		s->slot = (int)i;
		s->pid = ss->pid;
		s->requested = shm_load_relaxed(&ss->requested);
		s->outstanding =
			credit_outstanding(credit_seq_limit(join, s->requested),
					   info->published);
		s->consumed = shm_load_relaxed(&ss->consumed_seq);
		s->joined = join;
		s->lag_messages = sat_sub(info->published, s->consumed);
		s->lag_bytes = sat_sub(position, consumed_pos);
		s->wakeups = shm_load_relaxed(&ss->wakeups);
		s->paced = shm_load_relaxed(&ss->paced);
		if (consumed_pos < min_consumed)
			min_consumed = consumed_pos;
	}
	info->ring_used = sat_sub(position, min_consumed);
	if (info->ring_used > info->ring_size)
		info->ring_used = info->ring_size;
	mark_holding_back(info, all, n);
	if (subs && max > 0)
		memcpy(subs, all, sizeof(*subs) * (size_t)(n < max ? n : max));
	return n;
}

int crs_inspect_list(char (*names)[CRS_NAME_MAX + 1], int max)
{
	errmsg_begin();
	struct ipc_rundir dir;
	int err = name_rundir_open(&dir, 0);
	if (err == -ENOENT)
		return 0; /* no directory yet: no stream */
	if (err < 0)
		return err;
	int n = ipc_dir_list(dir.fd, ".sock", names ? names[0] : NULL,
			     CRS_NAME_MAX + 1, names ? max : 0);
	ipc_rundir_close(&dir);
	return errmsg_code(n);
}
