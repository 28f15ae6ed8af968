/*
 * name.c - stream names: [A-Za-z0-9._-]{1,64}, not starting with '.', so
 * that a name can never climb out of the runtime directory or hide, nor
 * with '-', so that a name on a command line never reads as an option;
 * and the runtime directory, with a message that says why it was refused.
 */
#include "name.h"

#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "crs/crs.h"
#include "errmsg.h"

static int name_check(const char *name)
{
	if (!name || !*name)
		return errmsg_set(-EINVAL, "stream name is empty");
	if (name[0] == '.' || name[0] == '-')
		return errmsg_set(-EINVAL,
				  "stream name '%.64s' starts with '%c'", name,
				  name[0]);
	size_t n = 0;
	size_t member = name_member(name); /* the "~<id>" of a member */
	if (member && strlen(name) > CRS_NAME_MAX)
		return errmsg_set(-EINVAL,
				  "stream name is longer than %d bytes",
				  CRS_NAME_MAX);
	for (const char *p = name; *p; p++, n++) {
		char c = *p;
		if (member && n >= member)
			break; /* checked by name_member() */
		int ok = (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') ||
			 (c >= '0' && c <= '9') || c == '.' || c == '_' ||
			 c == '-';
		if (n >= CRS_NAME_MAX)
			return errmsg_set(-EINVAL,
					  "stream name is longer than %d "
					  "bytes",
					  CRS_NAME_MAX);
		if (!ok)
			return errmsg_set(
				-EINVAL,
				"stream name '%.64s' has a character "
				"outside [A-Za-z0-9._-] at offset %zu",
				name, n);
	}
	return 0;
}

size_t name_member(const char *name)
{
	size_t n = strlen(name);
	if (n <= CRS_MEMBER_SUFFIX || name[n - CRS_MEMBER_SUFFIX] != '~')
		return 0;
	for (size_t i = n - CRS_MEMBER_SUFFIX + 1; i < n; i++)
		if (!((name[i] >= '0' && name[i] <= '9') ||
		      (name[i] >= 'a' && name[i] <= 'f')))
			return 0;
	return n - CRS_MEMBER_SUFFIX;
}

int crs_name_check(const char *name)
{
	errmsg_begin();
	return name_check(name);
}

/* Record why the runtime directory d could not be used. */
static int dir_error(const struct ipc_rundir *d, int err)
{
	char from[300] = "";
	if (d->source && !strcmp(d->source, "CRS_DIR"))
		snprintf(from, sizeof(from), " (from CRS_DIR)");
	else if (d->source)
		snprintf(from, sizeof(from), " (from XDG_RUNTIME_DIR=%s)",
			 getenv("XDG_RUNTIME_DIR"));
	if (d->why && d->have_st && S_ISLNK(d->st.st_mode))
		return errmsg_set(
			err,
			"runtime directory %s%s is refused: %s "
			"(the link belongs to uid %u; you are uid %u)",
			d->path, from, d->why, (unsigned)d->st.st_uid,
			(unsigned)getuid());
	if (d->why && d->have_st)
		return errmsg_set(err,
				  "runtime directory %s%s is refused: %s "
				  "(mode %04o, owner uid %u; you are uid %u)",
				  d->path, from, d->why,
				  (unsigned)(d->st.st_mode & 07777),
				  (unsigned)d->st.st_uid, (unsigned)getuid());
	if (d->why)
		return errmsg_set(err, "runtime directory %s%s: %s: %s",
				  d->path, from, d->why, crs_strerror(err));
	if (err == -ENOENT)
		return errmsg_set(err,
				  "runtime directory %s%s does not exist: "
				  "no publisher has created a stream there",
				  d->path, from);
	return errmsg_set(err, "runtime directory %s%s: %s", d->path, from,
			  crs_strerror(err));
}

int name_rundir_open(struct ipc_rundir *d, int create)
{
	int err = ipc_rundir_open(d, create);
	return err ? dir_error(d, err) : 0;
}

int crs_runtime_dir(char *buf, size_t size)
{
	errmsg_begin();
	struct ipc_rundir d;
	int err = name_rundir_open(&d, 0);
	if (err)
		return err;
	ipc_rundir_close(&d);
	size_t n = strlen(d.path);
	if (n >= size)
		return errmsg_set(-ENAMETOOLONG,
				  "runtime directory %s does not fit a buffer "
				  "of %zu bytes",
				  d.path, size);
	memcpy(buf, d.path, n + 1);
	return (int)n;
}

int name_paths_for(const char *name, int create, struct name_paths *out)
{
	memset(out, 0, sizeof(*out));
	out->dir.fd = -1;
	int err = name_check(name);
	if (err)
		return err;
	err = name_rundir_open(&out->dir, create);
	if (err)
		return err;
	snprintf(out->sock, sizeof(out->sock), "%s.sock", name);
	snprintf(out->lock, sizeof(out->lock), "%s.lock", name);
	return 0;
}

void name_paths_close(struct name_paths *p)
{
	ipc_rundir_close(&p->dir);
}
