/*
 * natsd.h - a private nats-server with JetStream for the bridge tests
 * and benchmark: on 127.0.0.1, on a free port (-p -1, told back through
 * --ports_file_dir) or a given one, with a temporary store directory, and
 * without any file descriptor of ours above 2 (a server that inherited a
 * lock or a pipe would hold it for its whole life). Also: running tools
 * the same way, with their output in files.
 */
#ifndef CRS_TESTS_NATSD_H
#define CRS_TESTS_NATSD_H

#include <sys/types.h>

struct natsd {
	pid_t pid;
	int port;
	char dir[256]; /* store and ports files; removed by natsd_cleanup */
	char url[64];
};

/* The nats-server binary, or NULL if none is installed. */
const char *natsd_binary(void);

/* Start a server: port 0 picks a free one. The first start makes d->dir;
 * a restart (d->dir set) keeps its store. 0 or -1 (with a message). */
int natsd_start(struct natsd *d, int port);
/* Stop it with sig (SIGTERM, SIGKILL) and reap it. */
void natsd_stop(struct natsd *d, int sig);
/* Stop it if running and remove its directory. */
void natsd_cleanup(struct natsd *d);

/* Fork and exec argv with stdout and stderr to files (NULL: /dev/null),
 * fds above 2 closed, dying with its parent. Returns the pid or -1. */
pid_t natsd_spawn(char *const argv[], const char *out, const char *err);

#endif
