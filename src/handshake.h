/*
 * handshake.h - the messages on a stream's unix socket (version 1).
 *
 *   subscriber -> publisher   HELLO   (role)
 *   publisher  -> subscriber  WELCOME + fds [data memfd, control memfd]
 *                          or REJECT  (code, reason)
 *
 * After that the socket carries nothing: it stays open as the liveness
 * channel, and a hangup means the peer is gone. Anything a peer sends
 * is decoded by crs_hs_decode(), which checks magic, version, type and
 * the exact length of each type before a field is used.
 */
#ifndef CRS_HANDSHAKE_H
#define CRS_HANDSHAKE_H

#include <stddef.h>
#include <stdint.h>

#include "crs/crs.h"
#include "ipc/compiler.h"

#define CRS_HS_MAGIC 0x48535243u /* "CRSH" */
#define CRS_HS_VERSION 1
#define CRS_HS_REASON_MAX 128

enum crs_hs_type { CRS_HS_HELLO = 1, CRS_HS_WELCOME = 2, CRS_HS_REJECT = 3 };
enum crs_hs_role { CRS_ROLE_SUBSCRIBER = 1, CRS_ROLE_INSPECTOR = 2 };

/* Wire structs: fixed-width fields, no implicit padding; the sizes and
 * offsets below are the protocol, checked here so that no edit changes
 * them unnoticed. */
struct crs_hs_head {
	uint32_t magic;
	uint16_t version;
	uint16_t type;
};
_Static_assert(sizeof(struct crs_hs_head) == 8, "hs head size");

struct crs_hs_hello {
	struct crs_hs_head head;
	uint32_t role;
	uint32_t flags;
	char name[CRS_NAME_MAX + 8];
};
_Static_assert(offsetof(struct crs_hs_hello, role) == 8, "hello role");
_Static_assert(offsetof(struct crs_hs_hello, name) == 16, "hello name");
_Static_assert(sizeof(struct crs_hs_hello) == 88, "hello size");

struct crs_hs_welcome {
	struct crs_hs_head head;
	uint32_t slot;
	uint32_t layout_version;
	uint64_t data_size;
	uint64_t ctl_size;
	uint64_t start_pos;
	uint64_t start_seq;
};
_Static_assert(offsetof(struct crs_hs_welcome, slot) == 8, "welcome slot");
_Static_assert(offsetof(struct crs_hs_welcome, data_size) == 16,
	       "welcome data_size");
_Static_assert(offsetof(struct crs_hs_welcome, start_seq) == 40,
	       "welcome start_seq");
_Static_assert(sizeof(struct crs_hs_welcome) == 48, "welcome size");

struct crs_hs_reject {
	struct crs_hs_head head;
	int32_t code;
	char reason[CRS_HS_REASON_MAX + 4];
};
_Static_assert(offsetof(struct crs_hs_reject, code) == 8, "reject code");
_Static_assert(offsetof(struct crs_hs_reject, reason) == 12, "reject reason");
_Static_assert(sizeof(struct crs_hs_reject) == 144, "reject size");

union crs_hs_msg {
	struct crs_hs_head head;
	struct crs_hs_hello hello;
	struct crs_hs_welcome welcome;
	struct crs_hs_reject reject;
};
_Static_assert(sizeof(union crs_hs_msg) == 144, "largest message");

void crs_hs_hello_init(struct crs_hs_hello *m, uint32_t role,
		       const char *name);
void crs_hs_reject_init(struct crs_hs_reject *m, int code,
			const char *reason);
void crs_hs_welcome_init(struct crs_hs_welcome *m);

/* Validate len bytes received into out. Returns the type or
 * -CRS_EVERSION (another protocol version) or -CRS_EPROTO (garbage). */
CRS_MUST_USE int crs_hs_decode(const void *buf, size_t len,
			       union crs_hs_msg *out);

#endif
