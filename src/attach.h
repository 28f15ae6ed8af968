/*
 * attach.h - the receiving side of the handshake, shared by subscribers
 * and inspectors: find the stream by name, say HELLO, take the WELCOME and
 * its memfds, check their seals, sizes and layout header, and map them.
 */
#ifndef CRS_ATTACH_H
#define CRS_ATTACH_H

#include <stdint.h>

#include "handshake.h"
#include "ipc/compiler.h"
#include "layout.h"

struct attach {
	int sock; /* liveness channel (subscribers keep it) */
	int data_fd;
	int ctl_fd; /* -1 for inspectors */
	uint64_t data_size;
	const struct crs_data_header *hdr; /* read-only mapping */
	struct crs_seg_header seg;	   /* checked copy of hdr->seg: use
					      this, the mapping may change */
	struct crs_ctl *ctl;		   /* NULL for inspectors */
	struct hs_welcome welcome;
};

/* Attach to stream `name` in `role`. wait_ms: how long to wait for the
 * stream to appear (0: fail at once with -ENOENT; -1: forever);
 * handshake_ms: how long the publisher may take to accept and answer,
 * counted from the first attempt that finds its socket (-1: forever).
 * No step blocks past these: connect is non-blocking, a full backlog is
 * retried. On failure nothing is left open and crs_errmsg() says what
 * went wrong. Returns 0 or -errno / -CRS_E*: -ENOENT no such stream,
 * -ECONNREFUSED a stale one (publisher died), -ETIMEDOUT, the code of a
 * REJECT, -EMFILE (no descriptors left for the memfds). */
CRS_MUST_USE int attach_open(const char *name, uint32_t role, int wait_ms,
			     int handshake_ms, struct attach *a);
void attach_close(struct attach *a);

/* The same in steps, for an open that must not block (opener.c). One
 * connection attempt to the stream's socket: a connected non-blocking
 * fd, -EAGAIN (backlog full), -ENOENT, -ECONNREFUSED (a dead
 * publisher's leftovers, which a new publisher may replace), -ESTALE (a
 * dead member's leftovers, which none will; crs_inspect_open reports it
 * as -ECONNREFUSED) or -errno; the runtime directory's path goes to dir
 * if not NULL. Then the peer check and HELLO on it (a takes
 * sock, also on failure), and once sock is readable the WELCOME (or a
 * REJECT; deadline: CLOCK_MONOTONIC ns, past: look once) and the
 * mappings. On failure nothing is left open; crs_errmsg() says why. */
CRS_MUST_USE int attach_connect(const char *name, char *dir, size_t dir_size);
CRS_MUST_USE int attach_hello(struct attach *a, int sock, uint32_t role,
			      const char *name);
CRS_MUST_USE int attach_welcome(struct attach *a, const char *name,
				uint32_t role, int64_t deadline);

#endif
