/*
 * strerror.c - crs_strerror(): one explanation for every code we return.
 */
#include <errno.h>
#include <string.h>

#include "crs/crs.h"

const char *crs_strerror(int code)
{
	if (code < 0)
		code = -code;
	switch (code) {
	case 0:
		return "success";
	case CRS_ENODEMAND:
		return "no demand: subscribers have not requested more";
	case CRS_ENOROOM:
		return "no room: the ring is full of unconsumed messages";
	case CRS_EEND:
		return "the stream has ended for this subscriber";
	case CRS_EPROTO:
		return "protocol violation by the peer";
	case CRS_EVERSION:
		return "the peer speaks another crs protocol version";
	case CRS_EGAP:
		return "a new publisher took the stream's name: messages may "
		       "be missing before its first";
	case EMFILE:
		return "too many open files: out of file descriptors "
		       "(RLIMIT_NOFILE; crs_errmsg() says whose)";
	case EDQUOT:
		return "slot quota exceeded (max_per_process or max_per_uid)";
	case EUSERS:
		return "the stream has no free subscriber slot";
	default:
		return strerror(code);
	}
}
