/*
 * fuzz_handshake.c - libFuzzer harness for the handshake decoder: any
 * bytes a peer sends must be refused cleanly or decoded into a message
 * whose strings are terminated and whose fields are in range.
 */
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "src/handshake.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
	union hs_msg m;
	int type = hs_decode(data, size, &m);
	switch (type) {
	case HS_HELLO:
		if (!memchr(m.hello.name, 0, sizeof(m.hello.name)) ||
		    (m.hello.role != HS_ROLE_SUBSCRIBER &&
		     m.hello.role != HS_ROLE_INSPECTOR))
			abort();
		break;
	case HS_REJECT:
		if (!memchr(m.reject.reason, 0, sizeof(m.reject.reason)) ||
		    m.reject.code <= 0)
			abort();
		break;
	case HS_WELCOME:
		break;
	default:
		if (type != -CRS_EPROTO && type != -CRS_EVERSION)
			abort();
	}
	return 0;
}
