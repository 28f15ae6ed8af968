/*
 * name.h - stream names and the paths derived from them.
 */
#ifndef CRS_NAME_H
#define CRS_NAME_H

#include <stddef.h>

#include "crs/crs.h"

#define CRS_PATH_MAX 256

struct crs_paths {
	char dir[CRS_PATH_MAX];
	char sock[CRS_PATH_MAX + CRS_NAME_MAX + 8];
	char lock[CRS_PATH_MAX + CRS_NAME_MAX + 8];
};

/* Validate name and derive the runtime paths (creating the directory if
 * create). 0, -EINVAL (bad name), -EPERM (unsafe directory), -errno. */
int crs_paths_for(const char *name, int create, struct crs_paths *out);

#endif
