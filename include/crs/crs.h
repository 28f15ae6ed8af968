/*
 * crs.h - cross-process reactive streams: the public API.
 *
 * A publisher creates a named stream; subscribers in other processes open it
 * by name. Messages travel through a shared-memory ring without copies: the
 * publisher claims space, writes in place and commits; a subscriber polls a
 * view into the ring and releases it after use. Demand flows back as
 * Reactive Streams request(n) credit in shared memory.
 *
 * Conventions (as in liburing): every call returns 0 or a count on success
 * and a negative errno value (or a negative CRS_E* code) on failure;
 * crs_strerror() explains each, and crs_errmsg() says what the last
 * failing open or create found. Handles are opaque. A handle may be used by
 * one thread at a time; different handles are independent.
 */
#ifndef CRS_CRS_H
#define CRS_CRS_H

#include <stddef.h>
#include <stdint.h>

#ifdef __cplusplus
extern "C" {
#endif

#define CRS_VERSION_MAJOR 0
#define CRS_VERSION_MINOR 1

/* ---- Types ------------------------------------------------------------ */

typedef struct crs_pub crs_pub; /* one publisher of one stream */
typedef struct crs_sub crs_sub; /* one subscription to one stream */

/* Demand value meaning "unbounded" (the analogue of Long.MAX_VALUE). */
#define CRS_UNBOUNDED UINT64_MAX

/* Longest stream name; names use [A-Za-z0-9._-] and start with neither
 * '.' (no hidden or climbing names) nor '-' (a name on a command line
 * never reads as an option). */
#define CRS_NAME_MAX 64
/* Longest error message carried by a terminal signal (bytes, without NUL). */
#define CRS_ERRMSG_MAX 128
/* Most uids crs_pub_opts.allow_uids can list. */
#define CRS_ALLOW_UIDS_MAX 8
/* Ring sizes crs_pub_opts.ring_bytes may take: a power of two from
 * CRS_RING_MIN to CRS_RING_MAX bytes. */
#define CRS_RING_MIN 4096ULL
#define CRS_RING_MAX (1ULL << 30)
/* Most subscribers one stream can hold (crs_pub_opts.max_subscribers). */
#define CRS_SUBSCRIBERS_MAX 64

/* Library error codes beyond errno (returned negated, like errno values). */
enum {
	CRS_EBASE = 10000,
	CRS_ENODEMAND, /* claim: subscribers have not requested more */
	CRS_ENOROOM,   /* claim: the ring is full of unconsumed messages */
	CRS_EEND,      /* subscriber: the stream ended, see crs_sub_end() */
	CRS_EPROTO,    /* peer broke the protocol (bad frame, bad word,
			  bad handshake message, an error record without
			  a code); crs never uses plain EPROTO for that */
	CRS_EVERSION,  /* peer speaks another layout or handshake version */
	CRS_EGAP,      /* subscriber (follow): a new publisher took the name;
			  what was published between the old stream's end
			  and its first message is missed */
	CRS_ELAST
};

/* Stream modes. */
enum crs_mode {
	CRS_MODE_PUBLISH = 0, /* lockstep: emit the minimum demand of all */
	CRS_MODE_REPLAY = 1,  /* run ahead of demand, bounded by the ring;
				 late joiners get the retained messages */
};

/* What crs_pub_offer() does when it finds no demand or no room. */
enum crs_overflow {
	CRS_OVERFLOW_BLOCK = 0, /* wait for demand or room (default) */
	CRS_OVERFLOW_ERROR,	/* fail, and end the stream with ENOBUFS */
	CRS_OVERFLOW_DROP,	/* discard the new message, count it */
	CRS_OVERFLOW_LATEST,	/* keep only the newest unsent message */
};

/* What subscribers get when the publisher disconnects. */
enum crs_disconnect {
	CRS_DISCONNECT_SEND_ERROR = 0, /* on_error(ECANCELED) (default) */
	CRS_DISCONNECT_NO_EVENT,       /* nothing more, no terminal signal
					  (EPIPE once the publisher closes
					  or dies) */
	CRS_DISCONNECT_SEND_COMPLETED, /* on_complete */
};

/* auto_connect value: connect only with crs_pub_connect(). */
#define CRS_CONNECT_MANUAL (-1)

struct crs_pub_opts {
	uint32_t mode;		  /* enum crs_mode; default CRS_MODE_PUBLISH */
	uint64_t ring_bytes;	  /* power of two, CRS_RING_MIN..CRS_RING_MAX
				     (4 KiB..1 GiB); default 1 MiB;
				     allocated, mapped and touched in full
				     at creation (subscribers map one of at
				     most 64 MiB in full at open) */
	uint32_t max_message;	  /* largest message; 0 (default): ring/4,
				     which is also the cap */
	uint32_t max_subscribers; /* 1..CRS_SUBSCRIBERS_MAX (64); default 64 */
	/* Who may subscribe. Always our own uid; besides: anyone
	 * (allow_uid_any = 1), members of group allow_gid (allow_group = 1;
	 * the peer's primary gid as the kernel reports it), and the first
	 * n_allow_uids of allow_uids. Others are refused with EACCES. The
	 * runtime directory must let them reach the socket, too. */
	uint32_t allow_uid_any;
	uint32_t allow_group;
	uint32_t allow_gid;
	uint32_t n_allow_uids;
	uint32_t allow_uids[CRS_ALLOW_UIDS_MAX];
	/* Slot quotas, so that one process or one user cannot take every
	 * slot: most slots the subscribers of one process (by pid, as the
	 * kernel reports it) may hold, 0 (default): half of max_subscribers
	 * rounded up; most slots of one uid, 0 (default): no bound beyond
	 * max_subscribers. A subscriber over either is refused with
	 * EDQUOT, on a full stream with EUSERS; crs_errmsg() says which. */
	uint32_t max_per_process;
	uint32_t max_per_uid;
	uint32_t overflow;	/* enum crs_overflow, for crs_pub_offer */
	uint32_t on_disconnect; /* enum crs_disconnect */
	int32_t auto_connect;	/* connect once this many subscribers have
				   arrived; 0 (default): at creation;
				   CRS_CONNECT_MANUAL: never by itself */
	/* Replay mode: retain for late joiners at most this many messages,
	 * payload bytes, and messages younger than this (0: no bound;
	 * the ring's size always bounds what can be retained). */
	uint64_t replay_count;
	uint64_t replay_bytes;
	uint64_t replay_age_ms;
	/* Evict a subscriber that holds the stream back (no demand left,
	 * or unread messages) without requesting or consuming anything for
	 * this long: it gets on_error(ETIMEDOUT) and stops holding the
	 * others back. 0 (default): never; a slow subscriber holding the
	 * others back is the lockstep contract, and cutting one off loses
	 * its messages, so it has to be asked for. A released message
	 * counts as consumed: halfway through the timeout the publisher
	 * asks for fresh positions, which a subscriber gives at its next
	 * release, so one that releases a message at least every
	 * untethered_ms / 4 is never evicted, however slowly it reads. */
	uint32_t untethered_ms;
	/* crs_pub_wait polls this long before it sleeps in the kernel:
	 * 0: the default (20 us), -1: sleep at once. */
	int32_t spin_us;
	/* Time source for replay_age_ms, ns; NULL: CLOCK_MONOTONIC. */
	int64_t (*clock)(void *clock_ctx);
	void *clock_ctx;
	/* 1: publish into shared stream `name` beside other publishers
	 * (processes, or handles) that do the same. Each publisher creates
	 * its own member stream, named name~<8 hex digits> (shown as such
	 * by the inspector and crs-top; crs_sub_open of a member name reads
	 * that publisher alone), and marks name as shared (a file name~ in
	 * the runtime directory, left there). Everything else, including
	 * every other option, applies to the member stream alone: one
	 * writer per ring, as without sharing, so a publisher that dies
	 * (even mid-claim) affects only its own member. name may be at
	 * most CRS_NAME_MAX - 9 bytes. A plain crs_pub_create of name
	 * removes the mark: the name is then plain again. See
	 * crs_sub_open for how subscribers merge the members. */
	int shared;
};

struct crs_sub_opts {
	uint32_t prefetch; /* request this many up front and replenish at 75%;
			      0 = manual crs_sub_request() only; default
			      1048576 (the ring bounds it first) */
	int wait_ms;	   /* wait for the stream to appear: 0 fail at once
			      with -ENOENT (default), -1 forever */
	int handshake_ms;  /* how long the publisher may take to accept and
			      answer, from the first attempt that finds
			      its socket (a stopped publisher with a full
			      backlog included: no step blocks past it);
			      0 = default 5000, -1 forever */
	int spin_us;	   /* crs_sub_wait polls this long before it sleeps
			      in the kernel: 0 default (20 us), -1 never */
	/* 1: crs_sub_open returns at once, and the stream is opened by the
	 * polls, waits and crs_loop runs that follow, never blocking them
	 * (as Aeron's async add_subscription): polls return 0 until it is
	 * open. An open that fails (no stream within wait_ms, a refusal,
	 * no answer within handshake_ms) ends the subscription: -CRS_EEND,
	 * and crs_sub_end() holds the code crs_sub_open would have
	 * returned, as a positive number (ENOENT, EACCES, ETIMEDOUT...). */
	int async;
	/* 1: follow the name across publisher restarts, as tail -F does.
	 * When the stream ends (completion, error, EPIPE), the end is
	 * delivered as usual; the subscription then waits for the
	 * publisher to go away (close or die) and for a new publisher of
	 * the name, which may take forever (failed attempts are retried
	 * after 10 ms, doubling to 1 s), and reports it once: crs_sub_poll
	 * returns -CRS_EGAP (crs_sub_dispatch calls on_gap), crs_sub_end()
	 * is NULL again, crs_sub_stream_id() is the new publisher's, and
	 * the new stream's messages follow (sequence numbers are the new
	 * publisher's). Demand left outstanding carries over; with a
	 * prefetch it is replenished as usual. None of this ever blocks:
	 * a poll that finds the new publisher starts opening it as
	 * `async` does. Following stops for good at an end of the
	 * subscriber's own making: crs_sub_cancel, request(0), eviction
	 * by the publisher, or a protocol violation it found. */
	int follow;
	/* Merged subscriptions (shared streams, crs_pub_opts.shared):
	 * 1: open name as a shared stream even before it is marked as one
	 * (else crs_sub_open decides by the mark). Follow and async do not
	 * apply to a merged subscription (it never blocks in open). */
	int shared;
	/* Merged: 1: an error of one member (EPIPE for one that died or
	 * closed without completing) is held back until every other member
	 * has ended, then reported (the first one); 0 (default): it ends
	 * the merged subscription at once. */
	int delay_errors;
};

/* A message as the subscriber sees it: a read-only view into the ring,
 * valid until crs_sub_release() or the next crs_sub_poll(). */
struct crs_msg {
	const void *data;
	size_t len;
	uint64_t seq; /* sequence number in the stream, from 0 */
	/* The stream id of the publisher that published it
	 * (crs_sub_stream_id of its stream): in a merged subscription, the
	 * member publisher's, and seq counts that member's messages. */
	uint64_t stream_id;
};

/* How a stream ended for one subscriber. */
struct crs_end {
	int code; /* 0: completed; else an errno-style code (EPIPE: the
		     publisher died or closed without completing; ECANCELED;
		     EINVAL: request(0); or the publisher's own error code) */
	char message[CRS_ERRMSG_MAX + 1];
};

/* Callbacks for crs_sub_dispatch(). on_next may be NULL to count only.
 * The message view is valid only during the callback. */
struct crs_sub_callbacks {
	void (*on_next)(void *ctx, const struct crs_msg *msg);
	void (*on_complete)(void *ctx);
	void (*on_error)(void *ctx, int code, const char *message);
	/* follow: a new publisher took the name after the terminal signal
	 * above; messages may be missing before its first (may be NULL). */
	void (*on_gap)(void *ctx);
};

/* ---- Errors and options ----------------------------------------------- */

/* A static string for any code this library returns (negative or not). */
const char *crs_strerror(int code);

/* What the last failing call of this thread found, in words: which
 * runtime directory was refused and why (its mode and owner), which pid
 * owns a name, the reason text of a publisher that refused us, which
 * limit was hit. Thread-local: valid until this thread's next failing
 * call, and never freed by the caller (at most 511 bytes). Set by the
 * calls that open or create (crs_pub_create, crs_sub_open,
 * crs_inspect_open, crs_inspect_list, crs_runtime_dir, crs_name_check);
 * after any other failure it may still describe an older one, so use
 * crs_strerror(code) there. "no error" before any failure. Never
 * fails; safe from any thread. */
const char *crs_errmsg(void);

/* Fill with the defaults described above. */
void crs_pub_opts_init(struct crs_pub_opts *opts);
void crs_sub_opts_init(struct crs_sub_opts *opts);

/* The runtime directory streams live in ($CRS_DIR, else
 * $XDG_RUNTIME_DIR/crs, else /tmp/crs-$UID; its path at most 255
 * bytes). It must be a real directory, not a symlink (-ELOOP), owned by
 * us or by root and writable by nobody else (-EPERM). crs opens it once
 * per create or open and works relative to that descriptor (files are
 * never opened through a symlink), so nobody can swap it between the
 * check and the use. Any valid name works whatever the directory's path
 * length: sockets are addressed through /proc/self/fd (where /proc is
 * not mounted, the full path must fit the 108 bytes of a unix socket
 * address). Returns the length, -ENOENT if it does not exist yet, or
 * -errno; crs_errmsg() says which directory and why. */
int crs_runtime_dir(char *buf, size_t size);

/* 0 if name is a valid stream name, else -EINVAL. Besides plain names,
 * the member names of shared streams are valid: a plain name followed
 * by '~' and 8 lowercase hex digits (crs_pub_opts.shared makes them;
 * crs_pub_create refuses to be given one). */
int crs_name_check(const char *name);

/* ---- Publisher -------------------------------------------------------- */

/* Create stream `name` and start listening for subscribers. A stale
 * stream of a dead publisher is replaced. opts may be NULL.
 * Returns 0, -EEXIST (a live publisher owns the name; crs_errmsg()
 * gives its pid), -EPERM/-ELOOP/-ENOTDIR/-ENOENT (the runtime directory
 * is unsafe or cannot be made, see crs_runtime_dir), -EINVAL, -ENOMEM,
 * or another -errno from the system.
 *
 * Admission, the publisher's control work: a peer's credentials are
 * checked as soon as it connects (refused: EACCES with a reason, before
 * it may send anything). A peer gets a handshake entry only until its
 * HELLO arrives; honest subscribers send it at once. When all 32
 * entries hold silent peers, the one silent longest is dropped (REJECT
 * ETIMEDOUT), so silent or slow peers never delay an honest one; any
 * silent peer is dropped after 5 s. Connections are accepted at most 64
 * at once and 4000 a second on average, so connect/close churn cannot
 * take the data path's time; the rest wait in the listen backlog (128;
 * beyond it connects fail and crs_sub_open retries within its
 * handshake_ms). Out of descriptors, the publisher refuses queued peers
 * with EMFILE and a reason, and accepts again 50 ms later; a control
 * segment it cannot create is refused the same way, never by a bare
 * hangup. */
int crs_pub_create(const char *name, const struct crs_pub_opts *opts,
		   crs_pub **out);

/* Start emitting: a new connection epoch. Idempotent while connected.
 * Subscribers waiting for a connection join it from its start. Returns
 * the epoch (>= 1) or -errno. */
int64_t crs_pub_connect(crs_pub *pub);

/* End epoch `epoch` if it is the current, connected one, with the
 * on_disconnect strategy; a stale epoch is ignored. Returns 0.
 * A subscriber belongs to one epoch: once its epoch has ended (here,
 * or by crs_pub_complete/crs_pub_error) it never receives a message of
 * a later epoch, even while it still reads its own, and the ring space
 * it has not read stays protected until it reads it or leaves. After
 * NO_EVENT its polls find nothing (0) and its waits time out, until
 * the publisher closes or dies: then its stream ends with EPIPE. It
 * keeps its slot until then, or until it cancels or closes. */
int crs_pub_disconnect(crs_pub *pub, int64_t epoch);

/* The current (or last) epoch; 0 before the first connect. */
int64_t crs_pub_epoch(const crs_pub *pub);

/* Messages dropped by the DROP and LATEST overflow strategies. */
uint64_t crs_pub_dropped(const crs_pub *pub);

/* Reserve len bytes in the ring; *buf points at them, 8-byte aligned
 * (and only 8: frames are; for 16, claim len + 8 and round *buf up, and
 * let subscribers round msg.data up alike: both map the ring
 * page-aligned, so they find the same place). Hot path: no
 * syscall, no allocation. Returns 0, -CRS_ENODEMAND, -CRS_ENOROOM,
 * -EMSGSIZE (len > max_message), -EALREADY (a claim is open),
 * -ENOTCONN (not connected) or -ESHUTDOWN (the epoch has terminated).
 * Overflow strategies do not apply here: the caller decides. */
int crs_pub_claim(crs_pub *pub, size_t len, void **buf);

/* Publish the claimed message with its final length len (<= the claimed
 * length). Returns 0, -EINVAL (no claim, or len too long). */
int crs_pub_commit(crs_pub *pub, size_t len);

/* Batch publishing: as crs_pub_commit, but the message is not visible
 * to subscribers (and wakes nobody) until crs_pub_flush(): the frames
 * of a batch then appear at once, with one release store and one look
 * for sleeping subscribers, so readers do not chase the writer frame by
 * frame. Claims go on meanwhile; a claim that finds the demand or room
 * it knew of used up (whether or not it is then refused),
 * crs_pub_commit, crs_pub_offer, crs_pub_serve, the waits, a loop round
 * and the end of the epoch (complete, error, disconnect, close) flush
 * first. Deferred messages count as published for demand and sequence
 * numbers; a publisher that dies before flushing never delivers them.
 * In CRS_MODE_REPLAY this is crs_pub_commit. Returns as crs_pub_commit.
 * Not thread-safe (like every call on one publisher). */
int crs_pub_commit_more(crs_pub *pub, size_t len);

/* Make every message committed with crs_pub_commit_more visible, and
 * wake subscribers sleeping for them. Returns how many it published
 * (0: none was deferred). */
int crs_pub_flush(crs_pub *pub);

/* Drop the open claim, publishing nothing. */
void crs_pub_abort(crs_pub *pub);

/* Copying convenience: claim, copy, commit, applying the overflow
 * strategy when there is no demand or room: BLOCK waits (serving
 * subscribers), ERROR ends the stream with ENOBUFS and returns the
 * claim's error, DROP discards the message, LATEST keeps it as the one
 * message to send once possible (replacing, and dropping, an older one;
 * it goes out at the next offer, serve, wait or loop round; if the epoch
 * ends first, it is dropped and counted). Returns 0 (published, or
 * handled by DROP/LATEST) or the claim's errors. */
int crs_pub_offer(crs_pub *pub, const void *data, size_t len);

/* How many messages may be published now (demand), CRS_UNBOUNDED if
 * unbounded; 0 with no subscriber. Ring room is not counted. A getter:
 * it reads the admitted subscribers' demand words (and, as a claim
 * would, drops one that cancelled or broke the protocol) but does no
 * control work, so a subscriber still connecting does not count until
 * crs_pub_serve(), a claim, a wait or a loop round admits it. */
uint64_t crs_pub_demand(crs_pub *pub);

/* Wait until a claim of len bytes would succeed, serving subscribers
 * (accepting new ones, noticing departures) meanwhile. timeout_ms < 0
 * waits forever. A publisher not connected yet whose autoConnect has
 * not fired waits for it too (until enough subscribers have arrived and
 * requested): the blocking way to wait until connected. Returns 0,
 * -ETIMEDOUT, -EMSGSIZE, -ESHUTDOWN (the epoch terminated: call
 * crs_pub_connect for the next), -ENOTCONN at once when nothing but
 * crs_pub_connect can connect the stream (manual connect, after a
 * disconnect, or autoConnect already used). */
int crs_pub_wait(crs_pub *pub, size_t len, int timeout_ms);

/* Serve subscribers without blocking: accept and admit new ones, notice
 * those that left (the publisher's control work; it returns no message,
 * unlike crs_sub_poll). Claim and commit do this by themselves about once a
 * millisecond while you publish; a publisher that publishes rarely and
 * sleeps elsewhere should poll crs_pub_fd() (or use a crs_loop), or
 * newcomers wait for its next message. Returns the number of active
 * subscribers or -errno. A child forked after crs_pub_create() inherits
 * the stream's sockets: close it or exec, or it keeps them half alive. */
int crs_pub_serve(crs_pub *pub);

/* A file descriptor that polls readable (POLLIN) while control work is
 * waiting: a subscriber connecting, speaking or leaving. Put it in your
 * own poll/epoll loop and call crs_pub_serve() when it fires, so that new
 * subscribers are admitted promptly while you wait for something else.
 * Owned by the publisher: do not close it. */
int crs_pub_fd(const crs_pub *pub);

/* Number of active subscribers (as of the last serve). */
int crs_pub_subscribers(const crs_pub *pub);

/* Wait until at least n subscribers are active (present, whether or
 * not they have requested anything yet). 0 or -ETIMEDOUT. */
int crs_pub_wait_subscribers(crs_pub *pub, int n, int timeout_ms);

/* Terminate the current epoch: every subscriber in it gets on_complete
 * (or on_error with code and message, truncated to CRS_ERRMSG_MAX) after
 * the messages published before it. Needs no demand. Returns 0,
 * -ESHUTDOWN (already terminated) or -ENOTCONN (not connected). code
 * must be > 0 for crs_pub_error. A later crs_pub_connect() starts a new
 * epoch; in replay mode subscribers arriving before that get the
 * retained messages and this terminal signal. */
int crs_pub_complete(crs_pub *pub);
int crs_pub_error(crs_pub *pub, int code, const char *message);

/* Wait until every active subscriber has consumed everything published
 * (or left). Returns 0 or -ETIMEDOUT. A message counts as consumed once
 * released (crs_sub_release, the next crs_sub_poll or crs_sub_take, or
 * in crs_sub_dispatch the return of the last on_next of its batch), read
 * or not; one held or not yet polled is not. A subscriber
 * that released the last published message is seen at once, even if it
 * makes no further call. */
int crs_pub_wait_consumed(crs_pub *pub, int timeout_ms);

/* Close the stream and free the handle. A stream not yet terminated ends
 * for its subscribers with EPIPE "publisher closed without completing". */
void crs_pub_close(crs_pub *pub);

/* ---- Subscriber ------------------------------------------------------- */

/* Subscribe to stream `name`. opts may be NULL. The subscription starts
 * with the next message the publisher publishes (in replay mode: with
 * the oldest retained one). With opts->async it returns at once (only
 * -EINVAL, -ENOMEM), and the errors below end the subscription later;
 * see struct crs_sub_opts for async and follow. Returns 0, -ENOENT (no such
 * stream, or only the leftovers of a dead publisher), -ETIMEDOUT, -ECONNRESET
 * (the publisher went away during the handshake), -EACCES/-EPERM (refused),
 * -EUSERS (the publisher has no free slot), -EDQUOT (this process or
 * uid holds its quota of slots, see max_per_process), -EMFILE (this
 * process, or the publisher, is out of descriptors), -CRS_EVERSION,
 * -EINVAL, -ELOOP/-EPERM (unsafe runtime directory) or another -errno.
 * A refusal's reason, as the publisher words it, is in crs_errmsg(). */
int crs_sub_open(const char *name, const struct crs_sub_opts *opts,
		 crs_sub **out);
/* Shared streams (crs_pub_opts.shared): when name is marked shared (or
 * opts->shared), crs_sub_open returns at once (0, or -EINVAL, -ENOMEM,
 * an unsafe runtime directory's error) with a merged subscription: one
 * internal subscription per publisher (member), including publishers
 * that join later (found through the runtime directory), merged
 * round-robin behind the same calls (poll, take, release, request,
 * cancel, wait, dispatch, end, requested, received, and crs_loop_add_sub:
 * a loop takes it as one registration).
 *  - Demand: request(n) and the prefetch bound what is handed out from
 *    all members together (Reactive Streams 1.1 for the merged
 *    stream). Each member has its own credit, a window W of the
 *    prefetch (128 when prefetch is 0), replenished as its messages
 *    are released: in lockstep mode a publisher runs at most W messages
 *    ahead of what this subscriber took from it; in replay mode as far
 *    as its ring allows, as always.
 *  - msg.stream_id tells the publisher (its member's stream id); msg.seq
 *    counts that member's messages. crs_sub_stream_id() is 0.
 *  - Order: each publisher's messages keep their order; between
 *    publishers there is none beyond the fairness of the round-robin.
 *  - End: completion once at least one member has joined and every
 *    member found has completed (members that never joined, such as a
 *    dead publisher's leftovers or one that closed before this merge
 *    connected to it, do not count: with nothing else the merge waits
 *    for a live publisher); a member's error (EPIPE, "NAME~id:
 *    publisher died", for one that died or closed without completing:
 *    dying counts as an error) ends it at once, or with
 *    opts->delay_errors the first error is reported once every other
 *    member has ended. A publisher that joins after the merge ended is
 *    not seen. A member dying mid-claim never shows its partial frame
 *    and never blocks the others (each has its own ring). */

/* Next message, without blocking. Hot path: no syscall.
 * Returns 1 (*msg filled; the view stays valid until crs_sub_release()
 * or the next poll, which releases it), 0 (nothing yet, or still
 * opening), -CRS_EEND (the stream ended for this subscriber: see
 * crs_sub_end()), or, with follow, -CRS_EGAP once per new publisher
 * after the old stream's -CRS_EEND (see struct crs_sub_opts). A
 * following subscription returns -CRS_EEND once per stream, then 0
 * until the next publisher is there; one that does not follow returns
 * -CRS_EEND from then on. A
 * subscriber evicted by the publisher (untethered_ms, or a protocol
 * violation) learns it at its next poll; a view held at that moment may
 * already have been overwritten. */
int crs_sub_poll(crs_sub *sub, struct crs_msg *msg);

/* Release the message returned by the last poll (or every message of
 * the last crs_sub_take), so that its space can be reused. With a
 * prefetch, this also replenishes demand. */
void crs_sub_release(crs_sub *sub);

/* Batch form of crs_sub_poll: up to max messages in one call, into
 * msgs[0..n), and, with max_bytes > 0, no more than max_bytes of payload
 * (the first message is taken whatever its size). They stay held (the
 * views valid) until crs_sub_release(), which releases them all with
 * one consumed-position store and one demand update, or the next poll
 * or take, which releases them first. A batch stops early at the end of
 * what is committed, of demand, or of the ring (padding), and at a
 * frame that starts 4 KiB or more past the first (looking further ahead
 * over large frames costs more than a batch saves): the next call goes
 * on. Returns the count n >= 1, or as crs_sub_poll 0, -CRS_EEND or
 * -CRS_EGAP (then nothing is held). Hot path: no syscall. Not
 * thread-safe (like every call on one subscriber). */
int crs_sub_take(crs_sub *sub, struct crs_msg *msgs, size_t max,
		 size_t max_bytes);

/* Add n to this subscriber's demand (saturating at CRS_UNBOUNDED).
 * n == 0 violates the protocol: the subscription ends with EINVAL and
 * -EINVAL is returned. After cancel or end: a no-op returning 0. */
int crs_sub_request(crs_sub *sub, uint64_t n);

/* Stop receiving and release this subscriber's pressure on the
 * publisher at once. Idempotent. Polls then return -CRS_EEND and
 * crs_sub_end() reports code ECANCELED (or how the stream had ended
 * before, if a poll had already found it). Nothing is delivered after a
 * cancel (Reactive Streams 3.6): crs_sub_dispatch() and a crs_loop make
 * no further callback, no on_next and no terminal one (not even an end
 * already seen but not yet delivered), also when the cancel is made
 * inside on_next. */
void crs_sub_cancel(crs_sub *sub);

/* Wait until crs_sub_poll() would return non-zero. timeout_ms < 0 waits
 * forever. Returns 0 or -ETIMEDOUT. Sleeps in the kernel when idle, also
 * while an async open or a follow waits for its publisher. */
int crs_sub_wait(crs_sub *sub, int timeout_ms);

/* Deliver up to max messages (and, at the end, the terminal signal) to
 * the callbacks, without blocking. Returns the number of on_next calls
 * (0: nothing yet), or -CRS_EEND from a call that delivered no message
 * and found the stream ended: that call delivers the terminal signal,
 * exactly once (later calls return -CRS_EEND at once; with follow, 0
 * until the next publisher). With follow, -CRS_EGAP from the call that
 * delivered no message and called on_gap for a new publisher. After
 * crs_sub_cancel() it calls nothing and returns -CRS_EEND. */
int crs_sub_dispatch(crs_sub *sub, const struct crs_sub_callbacks *cb,
		     void *ctx, size_t max);

/* How the stream ended (valid after -CRS_EEND); NULL before. */
const struct crs_end *crs_sub_end(const crs_sub *sub);

/* Total demand requested so far (CRS_UNBOUNDED if unbounded) and number
 * of messages received (with follow: over all the streams followed). */
uint64_t crs_sub_requested(const crs_sub *sub);
uint64_t crs_sub_received(const crs_sub *sub);

/* The identity of the publisher's stream this subscription reads: a
 * random 64-bit id its publisher chose at creation, never 0. It stays
 * the same for every subscriber of that publisher (and across epochs)
 * and differs when another publisher creates the same name, so that
 * (stream id, seq) names one message across publisher restarts (the
 * NATS bridge builds its message ids from it). 0 while an async open
 * (or a follow) is under way; it changes only at a -CRS_EGAP. */
uint64_t crs_sub_stream_id(const crs_sub *sub);

/* Cancel if needed, unmap, close, free. */
void crs_sub_close(crs_sub *sub);

/* ---- Event loop ------------------------------------------------------- */

/* One thread waiting on many streams and fds at once. With io_uring (the
 * default where the kernel allows it) a sleeping loop is one
 * io_uring_enter covering every futex word, socket and timeout; without
 * it (or with CRS_NO_URING=1) the same API runs on futex_waitv and poll
 * (engine "poll"), and where futex_waitv is missing too (kernels before
 * 5.16, strict seccomp profiles) on plain FUTEX_WAIT ("futex"). The same
 * engines serve crs_sub_wait and crs_pub_wait*. A loop and the handles
 * registered with it are used from one thread. The io_uring is set up
 * for the thread that made the handle (the kernel then runs a wake
 * inside that thread's own wait); a handle used from another thread gets
 * a new ring there at its next wait, and from its second move on one
 * that any thread may use. */
typedef struct crs_loop crs_loop;

/* Called when a publisher may be able to publish more: a subscriber
 * requested or consumed, or subscribers came or went. Publish with
 * crs_pub_claim/commit until it fails with -CRS_ENODEMAND/-CRS_ENOROOM. */
typedef void (*crs_pub_ready_fn)(void *ctx, crs_pub *pub);
/* Called when fd is ready (revents as from poll(2)). The fd stays
 * registered; remove it with crs_loop_remove_fd(). */
typedef void (*crs_fd_ready_fn)(void *ctx, int fd, short revents);

/* Returns 0 or -ENOMEM. */
int crs_loop_create(crs_loop **out);
/* Frees the loop; registered handles stay open and are the caller's. */
void crs_loop_close(crs_loop *loop);
/* "io_uring", "poll" or "futex". */
const char *crs_loop_engine(const crs_loop *loop);

/* Deliver sub's messages and its terminal signal to cb (as
 * crs_sub_dispatch does). After the terminal signal, or silently after
 * crs_sub_cancel(), the subscription leaves the loop by itself; close
 * it when convenient. An async subscription is opened by the loop
 * without blocking it. A following one stays registered across its
 * ends (on_gap announces each new publisher) until it stops following:
 * cancel it or remove it from the loop, never close it from its own
 * callbacks. 0, -EEXIST, -ENOMEM */
int crs_loop_add_sub(crs_loop *loop, crs_sub *sub,
		     const struct crs_sub_callbacks *cb, void *ctx);
/* Serve pub's subscribers (admit, drop) from the loop and call on_ready
 * (may be NULL) when demand or room may have appeared; it is called once
 * at registration. 0, -EEXIST, -ENOMEM. */
int crs_loop_add_pub(crs_loop *loop, crs_pub *pub, crs_pub_ready_fn on_ready,
		     void *ctx);
/* Watch an fd of yours (a socket, a timerfd for timers) for events. */
int crs_loop_add_fd(crs_loop *loop, int fd, short events, crs_fd_ready_fn cb,
		    void *ctx);
/* Remove a registration: 0 or -ENOENT. */
int crs_loop_remove_sub(crs_loop *loop, crs_sub *sub);
int crs_loop_remove_pub(crs_loop *loop, crs_pub *pub);
int crs_loop_remove_fd(crs_loop *loop, int fd);

/* Dispatch what is ready; if nothing is, sleep until something is or
 * timeout_ms passes (< 0: no limit, 0: do not sleep). Returns the number
 * of callbacks made (0 on timeout), -EINTR when a signal handler ran
 * while it slept (look at your flags, then run again), or -errno. The
 * fallback engines sleep on every word until something fires when they
 * can; else in slices, looking at everything between two: every 20 ms
 * while they watch fds (no classic syscall sleeps on a futex and an fd
 * together), every 1 ms while more words are armed than one call takes
 * (128 for futex_waitv, one for FUTEX_WAIT), moving on to the next words
 * each slice. There is no limit on the number of registrations. */
int crs_loop_run(crs_loop *loop, int timeout_ms);

/* A file descriptor that polls readable when crs_loop_run(loop, 0) has
 * work, for embedding the loop in epoll, libuv or GLib: wait for it
 * there, then call crs_loop_run(loop, 0). On io_uring it is the ring's
 * fd; on the fallback engines an eventfd that a watcher thread of the
 * loop (started by the first call) signals when something the loop
 * waits for fires. Returns the fd, or -ENOMEM/-EMFILE (or another
 * -errno) when the fallback's eventfd or thread cannot be made.
 * io_uring delivers completions as task work, which may cut the outer
 * wait short with EINTR: treat that as a wakeup, too. It may also turn
 * readable with nothing to do, at the deadline of an earlier wait that
 * ended sooner (io_uring keeps one deadline timer for the waits that end
 * later, rather than one per wait): a run then finds nothing. Between runs the
 * loop stays announced to its peers, also while you call crs_sub_wait or
 * crs_pub_wait* on one of its handles. Free the loop (or remove a
 * handle) before closing a handle registered with it. */
int crs_loop_fd(crs_loop *loop);

#ifdef __cplusplus
}
#endif
#endif /* CRS_CRS_H */
