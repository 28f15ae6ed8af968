/*
 * layout.h - the shared-memory layout of a stream, version 1.
 *
 * Two kinds of segment (memfds):
 *
 * Data segment, one per stream, written by the publisher only and mapped
 * read-only by subscribers and inspectors (sealed with FUTURE_WRITE):
 *   [0, 256)        struct crs_seg_header   written once before sharing
 *   [256, 320)      struct crs_pub_signal   wakeup words (hot)
 *   [320, 512)      struct crs_terminal     how the stream ended
 *   [512, 1024)     struct crs_pub_stats    counters for the inspector
 *   [1024, 5120)    struct crs_sub_stats[64] per-subscriber mirror
 *   [5120, 8192)    reserved (replay retention, epochs)
 *   [8192, +ring)   the ring of frames
 *
 * Control segment, one per subscriber (4 KiB, both sides map it
 * read-write; only that subscriber can see it): struct crs_ctl. Keeping
 * each subscriber's words in its own memfd means a buggy or hostile
 * subscriber can scribble on nothing but its own demand.
 *
 * Every word has one writer; words of different writers sit on different
 * cache lines. Positions are monotonic 64-bit byte offsets into an endless
 * stream; the ring index is pos & (ring_size - 1).
 */
#ifndef CRS_LAYOUT_H
#define CRS_LAYOUT_H

#include <stdatomic.h>
#include <stddef.h>
#include <stdint.h>

#include "crs/crs.h"

#define CRS_CACHELINE 64
#define CRS_LAYOUT_MAGIC 0x3153524f4e535243ULL /* "CRSNORS1" */
#define CRS_CTL_MAGIC 0x314c544353524331ULL
#define CRS_LAYOUT_VERSION 1
#define CRS_RING_OFFSET 8192
#define CRS_CTL_SIZE 4096
/* CRS_SUBSCRIBERS_MAX, CRS_RING_MIN and CRS_RING_MAX: in crs/crs.h. */

/* crs_seg_header.flags */
#define CRS_SEG_PUB_FENCES                                                     \
	1u /* publisher fences every commit: subscribers                       \
	      need no membarrier before a long sleep */
#define CRS_SEG_PUB_FENCE_ASK                                                  \
	2u /* publisher fences its commits while a                             \
	      park word carries CRS_PARK_FENCE */

/* crs_ctl.parked, the park word (src/park.h): */
#define CRS_PARK_ASLEEP                                                        \
	(1ULL << 32) /* low 32 bits: the data_signal value                     \
			it sleeps on */
#define CRS_PARK_FENCE                                                         \
	(1ULL << 33) /* fence every commit for me (kept                        \
			across sleeps; see park.h) */

/* Written by the publisher before the segment is shared; read-only after. */
struct crs_seg_header {
	uint64_t magic;
	uint32_t version;
	uint32_t pad0; /* 0 (ring_offset says where the ring starts) */
	uint64_t segment_size;
	uint64_t ring_offset;
	uint64_t ring_size;
	uint32_t max_message;
	uint32_t max_subscribers;
	uint32_t mode;
	uint32_t flags;
	int32_t pub_pid;
	uint32_t pub_uid;
	uint64_t created_ns; /* CLOCK_REALTIME */
	char name[CRS_NAME_MAX + 8];
	uint64_t stream_id; /* random, chosen at creation: tells this
			       publisher's stream from an earlier or later
			       one of the same name (0: never chosen) */
	uint8_t reserved[256 - 152];
};
_Static_assert(sizeof(struct crs_seg_header) == 256, "seg header size");
_Static_assert(offsetof(struct crs_seg_header, ring_size) == 32, "ring_size");
_Static_assert(offsetof(struct crs_seg_header, name) == 72, "name");
_Static_assert(offsetof(struct crs_seg_header, stream_id) == 144, "id");

/* Wakeup words. Publisher-written; subscribers only read and futex-wait. */
struct crs_pub_signal {
	_Atomic uint32_t data_signal; /* bumped to wake parked subscribers */
	_Atomic uint32_t pub_parked;  /* 1 while the publisher sleeps for
					 demand or room */
	_Atomic uint32_t progress_wanted; /* bumped when the publisher wants
					     every consumed position now:
					     subscribers answer at their next
					     release */
	uint8_t pad[CRS_CACHELINE - 12];
};
_Static_assert(sizeof(struct crs_pub_signal) == CRS_CACHELINE, "signal");
_Static_assert(offsetof(struct crs_pub_signal, progress_wanted) == 8,
	       "progress_wanted");

enum crs_term_state {
	CRS_TERM_NONE = 0,
	CRS_TERM_COMPLETE,
	CRS_TERM_ERROR,
	CRS_TERM_EVICTED,  /* cut off by the publisher, effective at once */
	CRS_TERM_DETACHED, /* the epoch ended at pos without a signal
			      (NO_EVENT): nothing more; code and message
			      already say EPIPE, and the publisher's close
			      turns state alone into ERROR */
};

/* A terminal signal: applies once a subscriber has consumed up to pos.
 * code, pos, seq and message are written before state (release). The
 * data segment holds the stream's (for inspectors); each control
 * segment holds its subscriber's. */
struct crs_terminal {
	_Atomic uint32_t state; /* enum crs_term_state */
	int32_t code;
	uint64_t pos;
	uint64_t seq;
	char message[CRS_ERRMSG_MAX + 8];
	uint8_t pad[192 - 24 - (CRS_ERRMSG_MAX + 8)];
};
_Static_assert(sizeof(struct crs_terminal) == 192, "terminal size");

/* crs_pub_stats.state, for inspectors (crs_stream_state). A publisher
 * between epochs (before its first connect, or after a disconnect) is
 * live: it is there and may connect again. Closed is crs_pub_close()
 * alone, so a disconnected publisher that dies reads as dead. */
enum crs_stats_state {
	CRS_STATS_LIVE = 0,
	CRS_STATS_COMPLETED = 1,
	CRS_STATS_FAILED = 2,
	CRS_STATS_CLOSED = 3,
};

/* Publisher counters for the inspector, kept up to date by the publisher
 * alone (relaxed stores; readers tolerate a slightly stale snapshot). */
struct crs_pub_stats {
	/* The next three are figures, mirrored from the publisher's handle
	 * every 16 messages, at each flush and serve: readers go by frame
	 * headers, never by these (a streaming reader paces itself by
	 * position, a bounded wait: sub_keep_distance). */
	_Atomic uint64_t position;  /* ring position after the last commit */
	_Atomic uint64_t published; /* messages committed */
	_Atomic uint64_t bytes;	    /* payload bytes committed */
	_Atomic uint64_t dropped;   /* messages dropped by overflow policy */
	_Atomic uint64_t wakes;	    /* futex wakes sent to subscribers */
	_Atomic uint64_t no_demand; /* claims refused for lack of demand */
	_Atomic uint64_t no_room;   /* claims refused for lack of room */
	_Atomic uint64_t evicted;   /* subscribers cut off for violations */
	_Atomic uint32_t subscribers;
	_Atomic uint32_t state;	    /* enum crs_stats_state */
	_Atomic uint64_t served_ns; /* CLOCK_MONOTONIC of the last serve */
	_Atomic uint64_t epoch;	    /* connection epoch, 0 before the first */
	_Atomic uint64_t retained;  /* replay: messages a late joiner gets */
	_Atomic uint64_t retained_bytes;
	_Atomic int64_t retained_since_ns; /* commit time of the oldest, on
					      the publisher's clock (or
					      INT64_MIN if unknown) */
	_Atomic int64_t clock_ns;	   /* the publisher's clock then */
	_Atomic uint64_t refused;	   /* peers refused admission */
	_Atomic uint64_t mirror_seq;	   /* seqlock of position, published and
					      bytes: odd while they change */
	uint8_t pad[512 - 136];
};
_Static_assert(sizeof(struct crs_pub_stats) == 512, "pub stats size");

/* Mirror of one subscriber, refreshed by the publisher when it serves. */
struct crs_sub_stats {
	_Atomic uint32_t active;
	int32_t pid;
	_Atomic uint64_t join_seq;
	_Atomic uint64_t requested;
	_Atomic uint64_t consumed; /* ring position */
	_Atomic uint64_t consumed_seq;
	_Atomic uint64_t wakeups;
	_Atomic uint64_t paced;
	uint8_t pad[CRS_CACHELINE - 56];
};
_Static_assert(sizeof(struct crs_sub_stats) == CRS_CACHELINE, "sub stats");

struct crs_data_header {
	struct crs_seg_header seg;
	struct crs_pub_signal signal;
	struct crs_terminal terminal;
	struct crs_pub_stats stats;
	struct crs_sub_stats subs[CRS_SUBSCRIBERS_MAX];
};
_Static_assert(offsetof(struct crs_data_header, signal) == 256, "signal");
_Static_assert(offsetof(struct crs_data_header, terminal) == 320, "term");
_Static_assert(offsetof(struct crs_data_header, stats) == 512, "stats");
_Static_assert(offsetof(struct crs_data_header, subs) == 1024, "subs");
_Static_assert(sizeof(struct crs_data_header) <= CRS_RING_OFFSET, "fits");

/* Why a subscriber was evicted (crs_ctl.evict): never rewritten. */
struct crs_eviction {
	int32_t code;
	uint32_t pad0;
	char message[CRS_ERRMSG_MAX + 8];
	uint8_t pad[192 - 8 - (CRS_ERRMSG_MAX + 8)];
};
_Static_assert(sizeof(struct crs_eviction) == 192, "eviction size");

/* One subscriber's control segment. */
struct crs_ctl {
	/* Line 0: written by the publisher at admission. */
	uint64_t magic;
	uint32_t version;
	uint32_t slot;
	uint64_t start_pos;
	uint64_t start_seq;
	uint8_t pad0[CRS_CACHELINE - 32];

	/* Lines 1-3: how this subscription ends, written by the publisher:
	 * every field, then state (release). COMPLETE, ERROR and DETACHED
	 * apply once the subscriber has consumed up to pos (and it reads
	 * nothing at or past pos: the next epoch's frames follow there);
	 * EVICTED at once, with its reason in evict. Written once; after
	 * that only state changes (DETACHED to ERROR at close, anything to
	 * EVICTED). Kept per subscriber so that each connection epoch ends
	 * on its own. */
	struct crs_terminal term;

	/* Line 4: demand and progress, written by the subscriber only. */
	_Atomic uint64_t requested; /* total requested; UINT64_MAX unbounded */
	_Atomic uint64_t consumed;  /* ring position consumed up to */
	_Atomic uint64_t consumed_seq; /* messages consumed, as a sequence */
	_Atomic uint32_t progress;     /* futex: bumped after each change */
	_Atomic uint32_t cancelled;
	uint8_t pad4[CRS_CACHELINE - 32];

	/* Line 5: park word, written by the subscriber only:
	 * CRS_PARK_ASLEEP | the data_signal value it sleeps on while it
	 * sleeps, plus CRS_PARK_FENCE while it asks for commit fences. */
	_Atomic uint64_t parked;
	uint8_t pad5[CRS_CACHELINE - 8];

	/* Line 6: subscriber-side counters. paced: times it waited for
	 * the writer to get ahead (sub_keep_distance). */
	_Atomic uint64_t wakeups;
	_Atomic uint64_t paced;
	uint8_t pad6[CRS_CACHELINE - 16];

	/* Lines 7-9: why the publisher cut this subscriber off, written
	 * once, before term.state becomes EVICTED (release). The rest of
	 * term is left as it was: a subscriber whose epoch had ended may be
	 * reading that record at the same moment (terminal.h). */
	struct crs_eviction evict;
};
_Static_assert(offsetof(struct crs_ctl, term) == 64, "term");
_Static_assert(offsetof(struct crs_ctl, requested) == 256, "requested");
_Static_assert(offsetof(struct crs_ctl, parked) == 320, "parked");
_Static_assert(offsetof(struct crs_ctl, wakeups) == 384, "wakeups");
_Static_assert(offsetof(struct crs_ctl, paced) == 392, "paced");
_Static_assert(offsetof(struct crs_ctl, evict) == 448, "evict");
_Static_assert(sizeof(struct crs_ctl) <= CRS_CTL_SIZE, "ctl fits");

#endif
