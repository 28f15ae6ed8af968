/*
 * handshake.h - the messages on a stream's unix socket (version 1).
 *
 *   subscriber -> publisher   HELLO   (role)
 *   publisher  -> subscriber  WELCOME + fds [data memfd, control memfd]
 *                          or REJECT  (code, reason)
 *
 * After that the socket carries nothing: it stays open as the liveness
 * channel, and a hangup means the peer is gone. Anything a peer sends
 * is decoded by hs_decode(), which checks magic, version, type and
 * the exact length of each type before a field is used.
 */
#ifndef CRS_HANDSHAKE_H
#define CRS_HANDSHAKE_H

#include <stddef.h>
#include <stdint.h>

#include "crs/crs.h"
#include "ipc/compiler.h"

#define HS_MAGIC 0x48535243u /* "CRSH" */
#define HS_VERSION 1
#define HS_REASON_MAX 128

enum hs_type { HS_HELLO = 1, HS_WELCOME = 2, HS_REJECT = 3 };
enum hs_role { HS_ROLE_SUBSCRIBER = 1, HS_ROLE_INSPECTOR = 2 };

/* Wire structs: fixed-width fields, no implicit padding; the sizes and
 * offsets below are the protocol, checked here so that no edit changes
 * them unnoticed. */
struct hs_head {
	uint32_t magic;
	uint16_t version;
	uint16_t type;
};
_Static_assert(sizeof(struct hs_head) == 8, "hs head size");

struct hs_hello {
	struct hs_head head;
	uint32_t role;
	uint32_t flags;
	char name[CRS_NAME_MAX + 8];
};
_Static_assert(offsetof(struct hs_hello, role) == 8, "hello role");
_Static_assert(offsetof(struct hs_hello, name) == 16, "hello name");
_Static_assert(sizeof(struct hs_hello) == 88, "hello size");

struct hs_welcome {
	struct hs_head head;
	uint32_t slot;
	uint32_t layout_version;
	uint64_t data_size;
	uint64_t ctl_size;
	uint64_t start_pos;
	uint64_t start_seq;
};
_Static_assert(offsetof(struct hs_welcome, slot) == 8, "welcome slot");
_Static_assert(offsetof(struct hs_welcome, data_size) == 16,
	       "welcome data_size");
_Static_assert(offsetof(struct hs_welcome, start_seq) == 40,
	       "welcome start_seq");
_Static_assert(sizeof(struct hs_welcome) == 48, "welcome size");

struct hs_reject {
	struct hs_head head;
	int32_t code;
	char reason[HS_REASON_MAX + 4];
};
_Static_assert(offsetof(struct hs_reject, code) == 8, "reject code");
_Static_assert(offsetof(struct hs_reject, reason) == 12, "reject reason");
_Static_assert(sizeof(struct hs_reject) == 144, "reject size");

union hs_msg {
	struct hs_head head;
	struct hs_hello hello;
	struct hs_welcome welcome;
	struct hs_reject reject;
};
_Static_assert(sizeof(union hs_msg) == 144, "largest message");

void hs_hello_init(struct hs_hello *m, uint32_t role, const char *name);
void hs_reject_init(struct hs_reject *m, int code, const char *reason);
void hs_welcome_init(struct hs_welcome *m);

/* Validate len bytes received into out. Returns the type or
 * -CRS_EVERSION (another protocol version) or -CRS_EPROTO (garbage). */
CRS_MUST_USE int hs_decode(const void *buf, size_t len, union hs_msg *out);

#endif
