/*
 * name.c - stream names: [A-Za-z0-9._-]{1,64}, not starting with '.', so
 * that a name can never climb out of the runtime directory or hide, nor
 * with '-', so that a name on a command line never reads as an option.
 */
#include "name.h"

#include <errno.h>
#include <stdio.h>
#include <string.h>

#include "ipc/rundir.h"
#include "crs/crs.h"

int crs_name_check(const char *name)
{
	if (!name || !*name || name[0] == '.' || name[0] == '-')
		return -EINVAL;
	size_t n = 0;
	for (const char *p = name; *p; p++, n++) {
		char c = *p;
		int ok = (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') ||
			 (c >= '0' && c <= '9') || c == '.' || c == '_' ||
			 c == '-';
		if (!ok || n >= CRS_NAME_MAX)
			return -EINVAL;
	}
	return 0;
}

int crs_runtime_dir(char *buf, size_t size)
{
	return ipc_rundir(buf, size, 0);
}

int crs_paths_for(const char *name, int create, struct crs_paths *out)
{
	int err = crs_name_check(name);
	if (err)
		return err;
	err = ipc_rundir(out->dir, sizeof(out->dir), create);
	if (err < 0)
		return err;
	snprintf(out->sock, sizeof(out->sock), "%s/%s.sock", out->dir, name);
	snprintf(out->lock, sizeof(out->lock), "%s/%s.lock", out->dir, name);
	return 0;
}
