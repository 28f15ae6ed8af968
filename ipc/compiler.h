/*
 * compiler.h - attributes the library's internal headers share.
 */
#ifndef CRS_IPC_COMPILER_H
#define CRS_IPC_COMPILER_H

/* On an internal call that can fail (it returns -errno): a caller that
 * drops the result is warned, and with -Werror does not build. Where
 * ignoring a failure is right, the caller keeps the result in a variable
 * and says in a comment why nothing more is done (gcc does not accept a
 * cast of the call itself to void). */
#define CRS_MUST_USE __attribute__((warn_unused_result))

#endif
