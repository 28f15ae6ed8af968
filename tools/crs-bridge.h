/*
 * crs-bridge.h - what the parts of crs-bridge share: its options, the
 * NATS side (one connection, an inbox whose messages a libnats thread
 * hands to the crs event loop through an eventfd), message ids and
 * headers, and the status figures both directions print.
 *
 * Both directions run one thread on a crs_loop; libnats runs its own
 * threads, which touch nothing but the inbox queue and a few atomics.
 */
#ifndef CRS_BRIDGE_H
#define CRS_BRIDGE_H

#include <pthread.h>
#include <stdatomic.h>
#include <stdint.h>
#include <stdio.h>

#include <nats/nats.h>

#include "crs/crs.h"

/* Headers of a bridged message. A data message carries only its id; the
 * final message of a stream carries CRS_HDR_END ("complete" or "error")
 * and, for an error, its code and (if not empty: NATS cannot carry empty
 * values) its message. */
#define CRS_HDR_ID "Nats-Msg-Id"
#define CRS_HDR_EXPECT_ID "Nats-Expected-Last-Msg-Id"
#define CRS_HDR_EXPECT_SEQ "Nats-Expected-Last-Sequence"
#define CRS_HDR_END "Crs-End"
#define CRS_HDR_CODE "Crs-Error-Code"
#define CRS_HDR_MESSAGE "Crs-Error-Message"

/* "<stream id, 16 hex digits>:<crs seq>", as in Nats-Msg-Id. */
#define BRIDGE_ID_MAX 40

enum bridge_deliver {
	DELIVER_ALL,
	DELIVER_NEW,
	DELIVER_LAST, /* the last N messages: a start sequence */
	DELIVER_FROM, /* from stream sequence N */
	DELIVER_SINCE, /* from a time (ns since the epoch) */
};

struct bridge_opts {
	int out; /* 1: crs -> NATS, 0: NATS -> crs */
	const char *stream; /* the local crs stream */
	const char *url;
	const char *subject;
	char js_stream[64]; /* JetStream stream name */
	int64_t max_msgs, max_bytes, max_age_s; /* stream limits, 0: none */
	int memory;	     /* memory storage instead of files */
	uint32_t window;     /* out: unacknowledged messages; in: most
				messages asked for and not yet committed */
	const char *follow;  /* out: the consumer whose acks count */
	const char *durable; /* in */
	int deliver;	     /* enum bridge_deliver */
	uint64_t deliver_arg;
	int64_t ack_wait_ms;	/* in: before JetStream redelivers */
	int64_t outage_ms;	/* end after the engine is gone this long */
	const char *state_path; /* in: where the position survives us */
	struct crs_pub_opts pub; /* in */
	int json;
	int64_t status_ms;
};

/* Figures for the status line, JSON or text. */
struct bridge_figures {
	const char *dir;
	uint64_t received;   /* out: from crs; in: from JetStream */
	uint64_t sent;	     /* out: to JetStream; in: committed to crs */
	uint64_t acked;	     /* out: stored by JetStream; in: acked */
	uint64_t in_flight;  /* out: unacked; in: asked for, not committed */
	uint64_t skipped;    /* duplicates left out (already stored/sent) */
	uint64_t rejected;   /* in: garbage or oversized messages */
	uint64_t gaps;	     /* messages missing between two that arrived */
	uint64_t redeliveries; /* in: delivered more than once */
	uint64_t resyncs;    /* out: times it asked JetStream where it is;
				in: times it created its consumer again */
	uint64_t errors;     /* negative acks, failed publishes/requests */
	uint64_t lag;	     /* out: unread in crs; in: pending in JetStream */
	int connected;
};
void bridge_figures_print(FILE *f, const struct bridge_figures *fig, int json);

/* ---- the NATS side ------------------------------------------------------ */

struct bridge_nats {
	natsConnection *nc;
	jsCtx *js;
	natsSubscription *inbox_sub;
	char inbox[64]; /* our reply subjects are inbox.<n> */
	int efd;	/* eventfd: the queue has messages, or the link moved */
	pthread_mutex_t lock;
	natsMsg **queue; /* ring of messages arrived at the inbox */
	size_t q_head, q_len, q_cap;
	int q_overflow;			/* the queue could not grow */
	int waiting; /* the loop may sleep: wake it through efd */
	_Atomic int connected;		/* 1 while the link is up */
	_Atomic int64_t down_since_ns;	/* when it went down */
	_Atomic uint64_t reconnects;
};

/* Connect (retrying, for up to outage_ms, if the server is not there
 * yet), subscribe to our inbox and make sure the JetStream stream exists
 * (creating it with o's limits). 0 or -1 with a message on stderr. */
int bridge_nats_open(struct bridge_nats *n, const struct bridge_opts *o);
/* Close the connection and shut libnats down (one connection per
 * process), waiting for its threads, so that n may be freed. */
void bridge_nats_close(struct bridge_nats *n);
/* The next message from the inbox (ours to destroy), or NULL. */
natsMsg *bridge_nats_next(struct bridge_nats *n);
/* Before the loop sleeps: timeout_ms, or 0 if messages wait already;
 * arrivals from then on wake it. After: bridge_nats_awake(). Messages
 * arriving while the loop works wake nobody (it looks before it sleeps),
 * which saves a syscall and a wakeup per message under load. */
int bridge_nats_sleep_ms(struct bridge_nats *n, int timeout_ms);
void bridge_nats_awake(struct bridge_nats *n);
/* Empty the eventfd (called when it polled readable). */
void bridge_nats_drain_efd(struct bridge_nats *n);
/* How long the link has been down, ms; 0 while it is up. */
int64_t bridge_nats_down_ms(struct bridge_nats *n);

int64_t bridge_now_ns(void); /* CLOCK_MONOTONIC */

/* ---- ids and headers ---------------------------------------------------- */

void bridge_id_format(char *buf, uint64_t stream_id, uint64_t seq);
/* 0 if s is an id of ours (*stream_id, *seq filled), else -1. */
int bridge_id_parse(const char *s, uint64_t *stream_id, uint64_t *seq);
/* A header's value, or NULL. */
const char *bridge_header(natsMsg *m, const char *key);
/* The number after "key": in a JSON text (e.g. a PubAck), or -1. */
int64_t bridge_json_number(const char *json, int len, const char *key);

#endif
