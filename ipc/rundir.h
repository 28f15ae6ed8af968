/*
 * rundir.h - the private runtime directory and the per-stream lock that
 * tells a live publisher from a dead one.
 */
#ifndef CRS_IPC_RUNDIR_H
#define CRS_IPC_RUNDIR_H

#include <stddef.h>

/* Resolve ($CRS_DIR, $XDG_RUNTIME_DIR/crs, /tmp/crs-$UID), create it with
 * mode 0700 if missing and check that it belongs to us or root and that
 * nobody else may write to it.
 * Returns the length written to buf or -errno (-EPERM if unsafe). */
int ipc_rundir(char *buf, size_t size, int create);

/* Take the exclusive lock file at path. Returns its fd (keep it open for
 * the life of the owner), -EEXIST if a live process holds it, -errno. */
int ipc_lock_take(const char *path);

/* Names of entries in dir ending in suffix (suffix removed), sorted.
 * Fills up to max names of at most name_size bytes each; returns the
 * number found or -errno. */
int ipc_dir_list(const char *dir, const char *suffix, char *names,
		 size_t name_size, int max);

#endif
