/*
 * merge.h - merged subscriptions: one crs_sub over the member streams of a
 * shared stream (crs_pub_opts.shared), one member subscription per
 * publisher, discovered in the runtime directory as they join. sub.c
 * hands every call on a subscription with sub->merge set to these.
 */
#ifndef CRS_MERGE_H
#define CRS_MERGE_H

#include <stddef.h>

#include "crs/crs.h"
#include "ipc/waitset.h"

struct crs_merge;

/* 1 if crs_sub_open(name) should merge: name is not a member name and
 * is marked shared (or o->shared). */
int merge_wanted(const char *name, const struct crs_sub_opts *o);
/* Make sub (fresh from crs_sub_open: demand set) a merged subscription
 * of name. 0 or -errno. */
int merge_open(crs_sub *sub, const char *name, const struct crs_sub_opts *o);
int merge_take(crs_sub *sub, struct crs_msg *msgs, size_t max,
	       size_t max_bytes);
void merge_release(crs_sub *sub);
int merge_request(crs_sub *sub, uint64_t n);
void merge_cancel(crs_sub *sub);
int merge_wait(crs_sub *sub, int timeout_ms);
int merge_dispatch(crs_sub *sub, const struct crs_sub_callbacks *cb,
		   void *ctx, size_t max);
/* sub.h's hooks for crs_loop (and crs_sub_wait). A loop gets one key
 * for the whole merge: the fd of a waitset of its own, armed on every
 * member. */
int merge_has_work(crs_sub *sub);
int merge_announce(crs_sub *sub, struct ipc_waitset *ws, uint64_t base);
void merge_withdraw(crs_sub *sub);
/* Close the members and free the merge (sub itself stays). */
void merge_close(crs_sub *sub);

#endif
