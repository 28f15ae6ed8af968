/*
 * errmsg.h - the thread-local text behind crs_errmsg(): what a failing
 * public call found, in words (which directory, whose pid, the
 * publisher's reason), beyond what its code says.
 */
#ifndef CRS_ERRMSG_H
#define CRS_ERRMSG_H

/* Record code (negative or not) and a message for this thread; returns
 * code unchanged, so a failing path can `return errmsg_set(err, ...)`. */
int errmsg_set(int code, const char *fmt, ...)
	__attribute__((format(printf, 2, 3)));
/* Record only the code, if this thread has nothing more specific for
 * this call; the text is crs_strerror(code). Returns code. A public
 * call's exit uses it: errmsg_begin() at its start marks where "this
 * call" begins. */
int errmsg_code(int code);
void errmsg_begin(void);

#endif
