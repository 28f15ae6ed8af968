/*
 * rundir.c - runtime directory and owner locks. The lock is an flock on a
 * file beside the socket: the kernel drops it when its owner dies, so a
 * publisher that finds the lock free knows the previous owner is gone.
 * The holder writes its pid into the file, so a clash can name it.
 */
#include "rundir.h"

#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/file.h>
#include <sys/stat.h>
#include <unistd.h>

static int rundir_path(struct ipc_rundir *d)
{
	const char *env = getenv("CRS_DIR");
	const char *xdg = getenv("XDG_RUNTIME_DIR");
	int n;
	if (env && *env) {
		d->source = "CRS_DIR";
		n = snprintf(d->path, sizeof(d->path), "%s", env);
	} else if (xdg && *xdg) {
		d->source = "XDG_RUNTIME_DIR";
		n = snprintf(d->path, sizeof(d->path), "%s/crs", xdg);
	} else {
		n = snprintf(d->path, sizeof(d->path), "/tmp/crs-%u",
			     (unsigned)getuid());
	}
	if (n < 0 || (size_t)n >= sizeof(d->path)) {
		d->why = "its path is longer than 255 bytes";
		return -ENAMETOOLONG;
	}
	return 0;
}

/* Say why open(O_NOFOLLOW | O_DIRECTORY) failed, from what is there. */
static int refused(struct ipc_rundir *d, int err)
{
	if (lstat(d->path, &d->st) == 0) {
		d->have_st = 1;
		if (S_ISLNK(d->st.st_mode)) {
			d->why = "it is a symbolic link (whoever owns the link "
				 "could re-point it)";
			return -ELOOP;
		}
		if (!S_ISDIR(d->st.st_mode)) {
			d->why = "it is not a directory";
			return -ENOTDIR;
		}
	}
	return err;
}

int ipc_rundir_open(struct ipc_rundir *d, int create)
{
	memset(d, 0, sizeof(*d));
	d->fd = -1;
	int err = rundir_path(d);
	if (err)
		return err;
	if (create && mkdir(d->path, 0700) < 0 && errno != EEXIST) {
		err = -errno;
		d->why = "it cannot be created";
		return err;
	}
	int fd = open(d->path, O_PATH | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC);
	if (fd < 0)
		return refused(d, -errno);
	/* From here on only the descriptor counts: the path may change. */
	if (fstat(fd, &d->st) < 0) {
		err = -errno;
		close(fd);
		return err;
	}
	d->have_st = 1;
	/* Anyone else who can write here could swap our sockets. */
	if (d->st.st_uid != getuid() && d->st.st_uid != 0)
		d->why = "it belongs to another user";
	else if (d->st.st_mode & 0022)
		d->why = "others may write to it";
	if (d->why) {
		close(fd);
		return -EPERM;
	}
	d->fd = fd;
	return 0;
}

void ipc_rundir_close(struct ipc_rundir *d)
{
	if (d->fd >= 0)
		close(d->fd);
	d->fd = -1;
}

static void write_pid(int fd)
{
	char buf[24];
	int n = snprintf(buf, sizeof(buf), "%d\n", (int)getpid());
	if (ftruncate(fd, 0) == 0 && pwrite(fd, buf, (size_t)n, 0) == n)
		return; /* best effort: the pid only improves a message */
}

/* Lock the file leaf in dirfd (opened with flags, never through a
 * symlink). Returns its fd, -EEXIST if a live process holds it, -EAGAIN
 * if it was unlinked or replaced between our open and our lock (then
 * our lock guards nothing), or -errno. */
static int lock_file(int dirfd, const char *leaf, int flags)
{
	int fd = openat(dirfd, leaf,
			flags | O_NOFOLLOW | O_NONBLOCK | O_CLOEXEC, 0600);
	if (fd < 0)
		return -errno;
	struct stat held, now;
	if (fstat(fd, &held) < 0 || !S_ISREG(held.st_mode)) {
		close(fd);
		return -EPERM; /* a fifo or device planted here */
	}
	if (flock(fd, LOCK_EX | LOCK_NB) < 0) {
		int err = errno == EWOULDBLOCK ? -EEXIST : -errno;
		close(fd);
		return err;
	}
	if (fstatat(dirfd, leaf, &now, AT_SYMLINK_NOFOLLOW) == 0 &&
	    held.st_ino == now.st_ino && held.st_dev == now.st_dev)
		return fd;
	close(fd);
	return -EAGAIN;
}

int ipc_lock_take(int dirfd, const char *leaf)
{
	int fd;
	while ((fd = lock_file(dirfd, leaf, O_RDWR | O_CREAT)) == -EAGAIN)
		;
	if (fd >= 0)
		write_pid(fd);
	return fd;
}

int ipc_lock_orphan(int dirfd, const char *leaf)
{
	int fd = lock_file(dirfd, leaf, O_RDONLY);
	return fd == -EAGAIN ? -ENOENT : fd;
}

int ipc_lock_owner(int dirfd, const char *leaf)
{
	int fd = openat(dirfd, leaf,
			O_RDONLY | O_NOFOLLOW | O_NONBLOCK | O_CLOEXEC);
	if (fd < 0)
		return 0;
	char buf[16];
	ssize_t n = pread(fd, buf, sizeof(buf) - 1, 0);
	close(fd);
	if (n <= 0)
		return 0;
	buf[n] = 0;
	char *end;
	long pid = strtol(buf, &end, 10);
	return pid > 0 && pid < (1L << 22) && *end == '\n' ? (int)pid : 0;
}

static int name_cmp(const void *a, const void *b, void *size)
{
	(void)size;
	return strcmp(a, b);
}

int ipc_dir_list(int dirfd, const char *suffix, char *names, size_t name_size,
		 int max)
{
	/* A descriptor of our own: readdir moves its offset. */
	int fd = openat(dirfd, ".", O_RDONLY | O_DIRECTORY | O_CLOEXEC);
	if (fd < 0)
		return -errno;
	DIR *d = fdopendir(fd);
	if (!d) {
		int err = -errno;
		close(fd);
		return err;
	}
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
		qsort_r(names, (size_t)(n < max ? n : max), name_size, name_cmp,
			NULL);
	return n;
}

int ipc_dir_list_all(int dirfd, const char *suffix, size_t name_size,
		     char **names)
{
	int cap = 256, n;
	for (;;) {
		*names = malloc((size_t)cap * name_size);
		if (!*names)
			return -ENOMEM;
		n = ipc_dir_list(dirfd, suffix, *names, name_size, cap);
		if (n >= 0 && n <= cap)
			return n;
		free(*names);
		*names = NULL;
		if (n < 0)
			return n;
		cap = n + 64; /* and room for some that appear meanwhile */
	}
}
