/*
 * errmsg.c - crs_errmsg(): one message per thread, written by the call
 * that failed last. A call marks its start with errmsg_begin(); detail
 * recorded after that (errmsg_set) survives its exit, and without any,
 * the exit records the code's generic text (errmsg_code).
 */
#include "errmsg.h"

#include <stdarg.h>
#include <stdio.h>

#include "crs/crs.h"

static _Thread_local struct {
	char text[512];
	int fresh; /* text was written by the current call */
} tls_err = { "no error", 0 };

int errmsg_set(int code, const char *fmt, ...)
{
	va_list ap;
	va_start(ap, fmt);
	vsnprintf(tls_err.text, sizeof(tls_err.text), fmt, ap);
	va_end(ap);
	tls_err.fresh = 1;
	return code;
}

int errmsg_code(int code)
{
	if (code < 0 && !tls_err.fresh)
		errmsg_set(code, "%s", crs_strerror(code));
	return code;
}

void errmsg_begin(void)
{
	tls_err.fresh = 0;
}

const char *crs_errmsg(void)
{
	return tls_err.text;
}
