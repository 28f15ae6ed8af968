/*
 * inspect.h - read-only inspection of live streams, for crs-top and
 * scripts. An inspector maps a stream's data segment read-only and reads
 * the statistics its publisher keeps there: it takes no subscriber slot,
 * adds no demand and never slows the publisher.
 *
 * Figures are snapshots: the publisher refreshes per-subscriber figures
 * when it serves (about once a millisecond while it publishes, and when it
 * waits), so they may trail the truth by that much.
 */
#ifndef CRS_INSPECT_H
#define CRS_INSPECT_H

#include <stdint.h>

#include "crs/crs.h"

#ifdef __cplusplus
extern "C" {
#endif

typedef struct crs_inspector crs_inspector;

enum crs_stream_state {
	CRS_STREAM_LIVE = 0,  /* publishing, or between epochs (before
				 connect, after a disconnect) */
	CRS_STREAM_COMPLETED, /* completed; publisher still present */
	CRS_STREAM_FAILED,    /* terminated with an error */
	CRS_STREAM_CLOSED,    /* publisher closed the stream
				 (crs_pub_close) */
	CRS_STREAM_DEAD,      /* publisher process is gone */
	CRS_STREAM_DENIED,    /* exists, but we may not inspect it */
};

struct crs_stream_info {
	char name[CRS_NAME_MAX + 1];
	int state; /* enum crs_stream_state */
	int pub_pid;
	uint32_t mode; /* enum crs_mode */
	uint64_t ring_size;
	uint32_t max_message;
	uint32_t subscribers;
	uint64_t published; /* messages committed */
	uint64_t bytes;	    /* payload bytes committed */
	uint64_t dropped;   /* dropped by an overflow policy */
	uint64_t ring_used; /* bytes not yet consumed by the slowest */
	uint64_t wakes;	    /* wakeups sent to sleeping subscribers */
	uint64_t no_demand; /* claims refused: no demand */
	uint64_t no_room;   /* claims refused: ring full */
	uint64_t evicted;   /* subscribers cut off (violation, stall) */
	uint64_t refused;   /* peers refused admission (access control) */
	uint64_t epoch;	    /* connection epoch, 0 before the first */
	uint64_t retained;  /* replay: messages a late joiner gets now */
	uint64_t retained_bytes;
	int64_t retained_age_ns; /* age of the oldest retained; -1 unknown */
	int end_code;		 /* for COMPLETED/FAILED: 0 or the error code */
	char end_message[CRS_ERRMSG_MAX + 1];
	int64_t sampled_ns; /* CLOCK_MONOTONIC when this was read */
	uint64_t stream_id; /* as crs_sub_stream_id() */
};

struct crs_sub_info {
	int slot;
	int pid;
	uint64_t requested;    /* total demand, CRS_UNBOUNDED if unbounded */
	uint64_t outstanding;  /* demand not yet met, CRS_UNBOUNDED ... */
	uint64_t consumed;     /* sequence number it has consumed up to (the
				  next message it will read) */
	uint64_t joined;       /* sequence number of its first message: it
				  has consumed consumed - joined messages,
				  in the unit of requested */
	uint64_t lag_messages; /* published but not yet consumed */
	uint64_t lag_bytes;
	uint64_t wakeups; /* times this subscriber woke from sleep */
	uint64_t paced;	  /* times it waited for the publisher to get
			     ahead (streaming right behind it slows both;
			     docs/PROTOCOL.md, "Keeping a distance") */
	int holding_back; /* 1: it limits the publisher now: no demand
			     left (lockstep), or a ring's worth unread */
};

/* Open stream `name` for inspection (the publisher must accept and
 * answer within 2 s of the first attempt: a stopped publisher with a
 * full backlog never holds this call longer). Returns 0, -ENOENT (no
 * such stream), -ECONNREFUSED (a stale stream: its publisher died),
 * -EACCES (another user's), -ETIMEDOUT or -errno; crs_errmsg() says
 * more. */
int crs_inspect_open(const char *name, crs_inspector **out);

/* Take a snapshot. Fills *info and up to max entries of subs (may be
 * NULL with max 0). Returns the number of active subscribers (which may
 * exceed max) or -errno. A publisher that died meanwhile shows as
 * CRS_STREAM_DEAD. */
int crs_inspect_read(crs_inspector *in, struct crs_stream_info *info,
		     struct crs_sub_info *subs, int max);

void crs_inspect_close(crs_inspector *in);

/* Names of the streams in the runtime directory, sorted, as published
 * sockets (live or stale). Fills up to max names; returns the count
 * found (may exceed max) or -errno. */
int crs_inspect_list(char (*names)[CRS_NAME_MAX + 1], int max);

#ifdef __cplusplus
}
#endif
#endif
