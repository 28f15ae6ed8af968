/*
 * handshake.c - encoding and validation of handshake messages.
 */
#include "handshake.h"

#include <string.h>

static void head_init(struct hs_head *h, uint16_t type)
{
	h->magic = HS_MAGIC;
	h->version = HS_VERSION;
	h->type = type;
}

void hs_hello_init(struct hs_hello *m, uint32_t role, const char *name)
{
	memset(m, 0, sizeof(*m));
	head_init(&m->head, HS_HELLO);
	m->role = role;
	strlcpy(m->name, name, sizeof(m->name));
}

void hs_reject_init(struct hs_reject *m, int code, const char *reason)
{
	memset(m, 0, sizeof(*m));
	head_init(&m->head, HS_REJECT);
	m->code = code;
	strlcpy(m->reason, reason, HS_REASON_MAX + 1);
}

void hs_welcome_init(struct hs_welcome *m)
{
	memset(m, 0, sizeof(*m));
	head_init(&m->head, HS_WELCOME);
}

static int terminated(const char *s, size_t cap)
{
	return memchr(s, 0, cap) != NULL;
}

int hs_decode(const void *buf, size_t len, union hs_msg *out)
{
	struct hs_head head;
	if (len < sizeof(head))
		return -CRS_EPROTO;
	memcpy(&head, buf, sizeof(head));
	if (head.magic != HS_MAGIC)
		return -CRS_EPROTO;
	if (head.version != HS_VERSION)
		return -CRS_EVERSION;
	size_t want;
	switch (head.type) {
	case HS_HELLO:
		want = sizeof(out->hello);
		break;
	case HS_WELCOME:
		want = sizeof(out->welcome);
		break;
	case HS_REJECT:
		want = sizeof(out->reject);
		break;
	default:
		return -CRS_EPROTO;
	}
	if (len != want)
		return -CRS_EPROTO;
	memset(out, 0, sizeof(*out));
	memcpy(out, buf, len);
	switch (head.type) {
	case HS_HELLO:
		if (!terminated(out->hello.name, sizeof(out->hello.name)) ||
		    (out->hello.role != HS_ROLE_SUBSCRIBER &&
		     out->hello.role != HS_ROLE_INSPECTOR))
			return -CRS_EPROTO;
		break;
	case HS_REJECT:
		if (!terminated(out->reject.reason,
				sizeof(out->reject.reason)) ||
		    out->reject.code <= 0)
			return -CRS_EPROTO;
		break;
	default:
		break;
	}
	return head.type;
}
