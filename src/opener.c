/*
 * opener.c - opening a subscription without blocking (see opener.h).
 */
#include "opener.h"

#include <errno.h>
#include <poll.h>
#include <string.h>
#include <sys/inotify.h>
#include <sys/timerfd.h>
#include <unistd.h>

#include "handshake.h"
#include "ipc/clock.h"
#include "ipc/memfd.h"
#include "ipc/sock.h"

#define RETRY_FIRST_NS 10000000LL /* 10 ms */
#define RETRY_MAX_NS 1000000000LL /* 1 s */

void opener_start(struct opener *op, const char *name, int wait_ms,
		  int handshake_ms, int persist)
{
	memset(op, 0, sizeof(*op));
	strlcpy(op->name, name, sizeof(op->name));
	op->handshake_ms = handshake_ms;
	op->persist = persist;
	op->wait_deadline = persist ? INT64_MAX : ipc_deadline(wait_ms);
	op->retry_at = 1; /* the first attempt is due at once */
	op->backoff_ns = RETRY_FIRST_NS;
	op->watch_fd = op->timer_fd = -1;
	op->at.sock = op->at.data_fd = op->at.ctl_fd = -1;
}

void opener_stop(struct opener *op)
{
	if (op->handshaking)
		attach_close(&op->at);
	op->handshaking = 0;
	ipc_close(op->watch_fd);
	ipc_close(op->timer_fd);
	op->watch_fd = op->timer_fd = -1;
}

/* Read everything pending on a nonblocking fd; 1 if there was some. */
static int drain(int fd)
{
	uint64_t buf[512]; /* aligned for struct inotify_event */
	int any = 0;
	while (fd >= 0 && read(fd, buf, sizeof(buf)) > 0)
		any = 1;
	return any;
}

/* Watch the directory the stream's socket appears in: a publisher's
 * bind creates a file there. Best effort (the events are only a hint
 * to try again): without a watch the backoff timer retries. */
static void watch_dir(struct opener *op)
{
	if (op->watch_fd >= 0 || !op->dir[0])
		return;
	int fd = inotify_init1(IN_NONBLOCK | IN_CLOEXEC);
	if (fd < 0)
		return;
	if (inotify_add_watch(fd, op->dir,
			      IN_CREATE | IN_MOVED_TO | IN_ATTRIB) < 0) {
		close(fd);
		return;
	}
	op->watch_fd = fd;
}

/* An attempt failed with err: give up (returns err) or wait for the
 * directory to change or the backoff to pass (returns 0). */
static int not_yet(struct opener *op, int err, int64_t now)
{
	if (err == -EAGAIN) { /* backlog full: until the handshake deadline */
		if (!op->persist && now >= op->hs_deadline)
			return -ETIMEDOUT;
	} else if (!op->persist && ((err != -ENOENT && err != -ECONNREFUSED) ||
				    now >= op->wait_deadline)) {
		return err;
	}
	watch_dir(op);
	/* A missing file's creation is an event; a file that refuses (a
	 * dead publisher's, or one between bind and listen) or any other
	 * failure gives none when it starts to work: retry on a timer. */
	if (err == -ENOENT && op->watch_fd >= 0) {
		op->retry_at = 0;
		return 0;
	}
	op->retry_at = now + op->backoff_ns;
	op->backoff_ns = op->backoff_ns * 2 < RETRY_MAX_NS ? op->backoff_ns * 2
							   : RETRY_MAX_NS;
	return 0;
}

static int handshake_step(struct opener *op, struct attach *out, int64_t now)
{
	int p = ipc_fd_poll(op->at.sock, POLLIN, 0);
	if (p == 0 && now < op->hs_deadline)
		return 0;
	int err;
	if (p > 0) {
		err = attach_welcome(&op->at, op->name, HS_ROLE_SUBSCRIBER, 0);
	} else {
		attach_close(&op->at);
		err = p < 0 ? p : -ETIMEDOUT;
	}
	op->handshaking = 0;
	op->found = 0; /* a next attempt has its own handshake time */
	if (!err) {
		*out = op->at;
		memset(&op->at, 0, sizeof(op->at));
		op->at.sock = op->at.data_fd = op->at.ctl_fd = -1;
		return 1;
	}
	return not_yet(op, err, now);
}

int opener_step(struct opener *op, struct attach *out)
{
	int64_t now = ipc_now_ns();
	drain(op->timer_fd);
	if (op->handshaking)
		return handshake_step(op, out, now);
	if (drain(op->watch_fd))
		op->backoff_ns = RETRY_FIRST_NS; /* something appeared */
	else if (op->retry_at == 0 || now < op->retry_at)
		return op->persist || now < op->wait_deadline ? 0 : -ENOENT;
	for (;;) {
		int had_watch = op->watch_fd >= 0;
		int sock = attach_connect(op->name, op->dir, sizeof(op->dir));
		/* The handshake's time counts from the first attempt that
		 * found the socket, as in attach_open. */
		if ((sock >= 0 || sock == -EAGAIN) && !op->found) {
			op->found = 1;
			op->hs_deadline = ipc_deadline(op->handshake_ms);
		}
		if (sock >= 0) {
			sock = attach_hello(&op->at, sock, HS_ROLE_SUBSCRIBER,
					    op->name);
			if (!sock) {
				op->handshaking = 1;
				return handshake_step(op, out, now);
			}
		}
		int r = not_yet(op, sock, now);
		/* A watch set up just now may have missed the socket's
		 * creation: look once more. */
		if (r < 0 || had_watch || op->watch_fd < 0)
			return r;
	}
}

/* Arm key to poll fd, forgetting what it held first: fd numbers are
 * reused, and a wait kept on a closed socket would never fire. */
static int arm_fd(struct ipc_waitset *ws, uint64_t key, int fd)
{
	ipc_waitset_forget(ws, key);
	return fd < 0 ? 0 : ipc_waitset_poll(ws, key, fd, POLLIN);
}

int opener_arm(struct opener *op, struct ipc_waitset *ws, uint64_t base)
{
	int err = arm_fd(ws, base,
			 op->handshaking ? op->at.sock : op->watch_fd);
	int64_t when = op->handshaking ? op->hs_deadline
		       : op->persist   ? INT64_MAX
				       : op->wait_deadline;
	if (!op->handshaking && op->retry_at && op->retry_at < when)
		when = op->retry_at;
	if (when == INT64_MAX) {
		arm_fd(ws, base + 1, -1);
		return err;
	}
	if (op->timer_fd < 0)
		op->timer_fd = timerfd_create(CLOCK_MONOTONIC,
					      TFD_NONBLOCK | TFD_CLOEXEC);
	if (op->timer_fd < 0)
		return -errno;
	struct itimerspec it = { .it_value = { when / 1000000000,
					       when % 1000000000 } };
	if (timerfd_settime(op->timer_fd, TFD_TIMER_ABSTIME, &it, NULL) < 0)
		return -errno;
	int e2 = arm_fd(ws, base + 1, op->timer_fd);
	return err ? err : e2;
}
