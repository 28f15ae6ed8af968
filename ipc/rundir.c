/*
 * rundir.c - runtime directory and owner locks. The lock is an flock on a
 * file beside the socket: the kernel drops it when its owner dies, so a
 * publisher that finds the lock free knows the previous owner is gone.
 */
#include "rundir.h"

#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <dirent.h>
#include <string.h>
#include <sys/file.h>
#include <sys/stat.h>
#include <unistd.h>

int ipc_rundir(char *buf, size_t size, int create)
{
	const char *env = getenv("CRS_DIR");
	const char *xdg = getenv("XDG_RUNTIME_DIR");
	int n;
	if (env && *env)
		n = snprintf(buf, size, "%s", env);
	else if (xdg && *xdg)
		n = snprintf(buf, size, "%s/crs", xdg);
	else
		n = snprintf(buf, size, "/tmp/crs-%u", (unsigned)getuid());
	if (n < 0 || (size_t)n >= size)
		return -ENAMETOOLONG;
	if (create && mkdir(buf, 0700) < 0 && errno != EEXIST)
		return -errno;
	struct stat st;
	if (stat(buf, &st) < 0)
		return -errno;
	if (!S_ISDIR(st.st_mode))
		return -ENOTDIR;
	/* Anyone else who can write here could swap our sockets. */
	if ((st.st_uid != getuid() && st.st_uid != 0) || (st.st_mode & 0022))
		return -EPERM;
	return n;
}

int ipc_lock_take(const char *path)
{
	for (;;) {
		int fd = open(path, O_RDWR | O_CREAT | O_CLOEXEC, 0600);
		if (fd < 0)
			return -errno;
		if (flock(fd, LOCK_EX | LOCK_NB) < 0) {
			int err = errno == EWOULDBLOCK ? -EEXIST : -errno;
			close(fd);
			return err;
		}
		/* The previous owner may have unlinked the file between our
		 * open and our lock; then our lock guards nothing: retry. */
		struct stat held, now;
		if (fstat(fd, &held) == 0 && stat(path, &now) == 0 &&
		    held.st_ino == now.st_ino && held.st_dev == now.st_dev)
			return fd;
		close(fd);
	}
}

static int name_cmp(const void *a, const void *b, void *size)
{
	(void)size;
	return strcmp(a, b);
}

int ipc_dir_list(const char *dir, const char *suffix, char *names,
		 size_t name_size, int max)
{
	DIR *d = opendir(dir);
	if (!d)
		return -errno;
	size_t slen = strlen(suffix);
	int n = 0;
	struct dirent *e;
	while ((e = readdir(d))) {
		size_t len = strlen(e->d_name);
		if (len <= slen || strcmp(e->d_name + len - slen, suffix) ||
		    len - slen >= name_size)
			continue;
		if (n < max) {
			memcpy(names + (size_t)n * name_size, e->d_name,
			       len - slen);
			names[(size_t)n * name_size + len - slen] = 0;
		}
		n++;
	}
	closedir(d);
	if (names && n > 0 && max > 0)
		qsort_r(names, (size_t)(n < max ? n : max), name_size,
			name_cmp, NULL);
	return n;
}
