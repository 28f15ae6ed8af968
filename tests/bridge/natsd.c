/*
 * natsd.c - a private nats-server for the bridge tests (see natsd.h).
 */
#include "natsd.h"

#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/prctl.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

const char *natsd_binary(void)
{
	static const char *const where[] = { "/usr/sbin/nats-server",
					     "/usr/bin/nats-server",
					     "/usr/local/bin/nats-server" };
	for (size_t i = 0; i < sizeof(where) / sizeof(where[0]); i++)
		if (access(where[i], X_OK) == 0)
			return where[i];
	return NULL;
}

static void sleep_ms(int ms)
{
	struct timespec t = { ms / 1000, (long)(ms % 1000) * 1000000 };
	nanosleep(&t, NULL);
}

pid_t natsd_spawn(char *const argv[], const char *out, const char *err)
{
	pid_t parent = getpid();
	pid_t pid = fork();
	if (pid != 0)
		return pid;
	prctl(PR_SET_PDEATHSIG, SIGKILL);
	if (getppid() != parent)
		_exit(127);
	int in = open("/dev/null", O_RDONLY);
	int o = open(out ? out : "/dev/null", O_WRONLY | O_CREAT | O_TRUNC, 0600);
	int e = open(err ? err : "/dev/null", O_WRONLY | O_CREAT | O_TRUNC, 0600);
	if (in < 0 || o < 0 || e < 0 || dup2(in, 0) < 0 || dup2(o, 1) < 0 ||
	    dup2(e, 2) < 0)
		_exit(127);
	closefrom(3);
	signal(SIGPIPE, SIG_DFL);
	execv(argv[0], argv);
	_exit(127);
}

/* The port the server wrote to DIR/ports/<name>_<pid>.ports, or 0. */
static int read_port(const struct natsd *d)
{
	char path[320];
	snprintf(path, sizeof(path), "%s/ports", d->dir);
	DIR *dir = opendir(path);
	if (!dir)
		return 0;
	int port = 0;
	char suffix[32];
	snprintf(suffix, sizeof(suffix), "_%d.ports", (int)d->pid);
	struct dirent *de;
	while (!port && (de = readdir(dir))) {
		size_t n = strlen(de->d_name), s = strlen(suffix);
		if (n < s || strcmp(de->d_name + n - s, suffix))
			continue;
		char file[600], buf[512] = { 0 };
		snprintf(file, sizeof(file), "%s/%s", path, de->d_name);
		FILE *f = fopen(file, "r");
		if (!f)
			continue;
		size_t got = fread(buf, 1, sizeof(buf) - 1, f);
		fclose(f);
		buf[got] = '\0';
		const char *p = strstr(buf, "nats://127.0.0.1:");
		if (p)
			port = atoi(p + strlen("nats://127.0.0.1:"));
	}
	closedir(dir);
	return port;
}

int natsd_start(struct natsd *d, int port)
{
	const char *bin = natsd_binary();
	if (!bin)
		return -1;
	if (!d->dir[0]) {
		const char *tmp = getenv("TMPDIR");
		snprintf(d->dir, sizeof(d->dir), "%s/crs-natsd-XXXXXX",
			 tmp ? tmp : "/tmp");
		if (!mkdtemp(d->dir)) {
			perror("natsd: mkdtemp");
			d->dir[0] = '\0';
			return -1;
		}
	}
	char store[300], ports[300], portarg[16], log[300];
	snprintf(store, sizeof(store), "%s/store", d->dir);
	snprintf(ports, sizeof(ports), "%s/ports", d->dir);
	snprintf(log, sizeof(log), "%s/server.log", d->dir);
	snprintf(portarg, sizeof(portarg), "%d", port ? port : -1);
	mkdir(ports, 0700);
	char *argv[] = { (char *)bin, "-js", "-a", "127.0.0.1", "-p", portarg,
			 "--ports_file_dir", ports, "-sd", store, "-l", log,
			 NULL };
	d->pid = natsd_spawn(argv, NULL, NULL);
	if (d->pid < 0)
		return -1;
	for (int i = 0; i < 1000; i++) { /* 10 s */
		d->port = read_port(d);
		if (d->port) {
			snprintf(d->url, sizeof(d->url), "nats://127.0.0.1:%d",
				 d->port);
			return 0;
		}
		if (waitpid(d->pid, NULL, WNOHANG) == d->pid) {
			fprintf(stderr, "natsd: nats-server exited (%s)\n", log);
			d->pid = 0;
			return -1;
		}
		sleep_ms(10);
	}
	fprintf(stderr, "natsd: nats-server told no port\n");
	natsd_stop(d, SIGKILL);
	return -1;
}

void natsd_stop(struct natsd *d, int sig)
{
	if (d->pid <= 0)
		return;
	kill(d->pid, sig);
	for (int i = 0; i < 1000; i++) {
		if (waitpid(d->pid, NULL, WNOHANG) == d->pid)
			break;
		if (i == 500)
			kill(d->pid, SIGKILL);
		sleep_ms(10);
	}
	d->pid = 0;
	/* A restart writes a new ports file; the old one must not answer. */
	char cmd[400];
	snprintf(cmd, sizeof(cmd), "%s/ports", d->dir);
	DIR *dir = opendir(cmd);
	if (dir) {
		struct dirent *de;
		while ((de = readdir(dir))) {
			char f[700];
			if (de->d_name[0] == '.')
				continue;
			snprintf(f, sizeof(f), "%s/%s", cmd, de->d_name);
			unlink(f);
		}
		closedir(dir);
	}
}

void natsd_cleanup(struct natsd *d)
{
	natsd_stop(d, SIGTERM);
	if (!d->dir[0] || strncmp(d->dir, "/", 1))
		return;
	char *argv[] = { "/bin/rm", "-rf", d->dir, NULL };
	pid_t pid = natsd_spawn(argv, NULL, NULL);
	if (pid > 0)
		waitpid(pid, NULL, 0);
	d->dir[0] = '\0';
}
