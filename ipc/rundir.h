/*
 * rundir.h - the private runtime directory and the per-stream lock that
 * tells a live publisher from a dead one. The directory is opened once
 * (O_DIRECTORY | O_NOFOLLOW), checked through that descriptor, and every
 * later file operation works relative to it: nobody can swap the
 * directory between the check and the use.
 */
#ifndef CRS_IPC_RUNDIR_H
#define CRS_IPC_RUNDIR_H

#include <stddef.h>
#include <sys/stat.h>

#include "compiler.h"

#define IPC_RUNDIR_MAX 256

struct ipc_rundir {
	int fd;			   /* O_PATH | O_DIRECTORY | O_NOFOLLOW */
	char path[IPC_RUNDIR_MAX]; /* for messages and crs_runtime_dir() */
	const char *source;	   /* "CRS_DIR", "XDG_RUNTIME_DIR" or NULL */
	/* Why it was refused (when ipc_rundir_open failed): */
	const char *why; /* static text, or NULL for errno only */
	struct stat st;	 /* what was found (valid if have_st) */
	int have_st;
};

/* Resolve ($CRS_DIR, $XDG_RUNTIME_DIR/crs, /tmp/crs-$UID), create it with
 * mode 0700 if missing and create, open it without following a symlink
 * and check that it is a directory that belongs to us or root and that
 * nobody else may write to. Returns 0 (d->fd open) or -errno: -ELOOP (a
 * symlink), -ENOTDIR, -EPERM (unsafe owner or mode), -ENAMETOOLONG;
 * d->why and d->st then say what was found. */
CRS_MUST_USE int ipc_rundir_open(struct ipc_rundir *d, int create);
void ipc_rundir_close(struct ipc_rundir *d);

/* Take the exclusive lock file leaf in dirfd (never through a symlink)
 * and write our pid into it. Returns its fd (keep it open for the life
 * of the owner), -EEXIST if a live process holds it, -errno. */
CRS_MUST_USE int ipc_lock_take(int dirfd, const char *leaf);
/* The pid written by the holder of lock leaf, or 0 if unknown. */
CRS_MUST_USE int ipc_lock_owner(int dirfd, const char *leaf);
/* Take lock leaf only if it exists and nobody holds it: its owner died
 * without removing it. Returns its fd (the caller may now remove what
 * the lock guarded, then closes it), -EEXIST if a live process holds
 * it, -ENOENT if there is none, -errno. */
CRS_MUST_USE int ipc_lock_orphan(int dirfd, const char *leaf);

/* Names of entries in dirfd ending in suffix (suffix removed), sorted.
 * Fills up to max names of at most name_size bytes each; returns the
 * number found or -errno. */
CRS_MUST_USE int ipc_dir_list(int dirfd, const char *suffix, char *names,
			      size_t name_size, int max);
/* The same, every one of them, however many: *names is allocated (the
 * caller frees it; NULL on failure). Returns the count or -errno. */
CRS_MUST_USE int ipc_dir_list_all(int dirfd, const char *suffix,
				  size_t name_size, char **names);

#endif
