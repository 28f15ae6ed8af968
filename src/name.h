/*
 * name.h - stream names and the runtime files derived from them.
 */
#ifndef CRS_NAME_H
#define CRS_NAME_H

#include <stddef.h>

#include "crs/crs.h"
#include "ipc/compiler.h"
#include "ipc/rundir.h"

struct name_paths {
	struct ipc_rundir dir; /* open: every file below goes through it */
	char sock[CRS_NAME_MAX + 8]; /* "<name>.sock" in dir */
	char lock[CRS_NAME_MAX + 8]; /* "<name>.lock" in dir */
};

/* A shared stream NAME (crs_pub_opts.shared) has one member stream per
 * publisher, named NAME~<8 lowercase hex digits> (no plain name holds a
 * '~', so none clashes), and a marker file NAME~ that says NAME is
 * shared. */
#define CRS_MEMBER_SUFFIX 9 /* "~" and the 8 digits */
/* The length of the base name if name is a member name, else 0. */
size_t name_member(const char *name);

/* ipc_rundir_open, recording for crs_errmsg() why it failed. */
CRS_MUST_USE int name_rundir_open(struct ipc_rundir *d, int create);

/* Validate name, open the runtime directory (creating it if create) and
 * derive the file names. 0 (close with name_paths_close), -EINVAL (bad
 * name), -EPERM/-ELOOP/-ENOTDIR (unsafe directory), -errno; on failure
 * crs_errmsg() says which directory and why. */
CRS_MUST_USE int name_paths_for(const char *name, int create,
				struct name_paths *out);
void name_paths_close(struct name_paths *p);

#endif
