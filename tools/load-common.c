// SPDX-License-Identifier: MIT
/*
 * load-common.c - what dmafs-load's modes share: the target's name, the progress bar,
 * the notices on the path a placement took, and opening a session for a file (see
 * load-common.h).
 */
#include <errno.h>
#include <pthread.h>
#include <stdio.h>
#include <time.h>
#include <unistd.h>

#include "common.h"
#include "load-common.h"
#include "tool.h"

const char *load_target_name(int target, int device, char *buf, size_t len)
{
	if (target == DMAFS_TARGET_HOST)
		snprintf(buf, len, "host");
	else
		snprintf(buf, len, "%s:%d", target == DMAFS_TARGET_CUDA ? "cuda" : "hip", device);
	return buf;
}

/* ---- progress ---- */

static struct {
	pthread_mutex_t lock;
	pthread_cond_t cond;
	int stop, on;
	uint64_t total, t0;
	struct dmafs_buf *const *bufs;
	size_t nbufs;
	pthread_t tid;
} prog = { .lock = PTHREAD_MUTEX_INITIALIZER, .cond = PTHREAD_COND_INITIALIZER };

static void progress_draw(int final)
{
	uint64_t done = 0, el = dm_mono_ns() - prog.t0;

	for (size_t i = 0; i < prog.nbufs; i++)
		done += dmafs_buf_placed(prog.bufs[i]);
	tool_progress(NULL, done, prog.total, el / 1e9, final);
}

static void *progress_main(void *arg)
{
	struct timespec ts;

	pthread_mutex_lock(&prog.lock);
	while (!prog.stop) {
		clock_gettime(CLOCK_REALTIME, &ts);
		ts.tv_nsec += 200000000;
		if (ts.tv_nsec >= 1000000000) {
			ts.tv_sec++;
			ts.tv_nsec -= 1000000000;
		}
		pthread_cond_timedwait(&prog.cond, &prog.lock, &ts);
		if (!prog.stop)
			progress_draw(0);
	}
	pthread_mutex_unlock(&prog.lock);
	progress_draw(1);
	return NULL;
}

void load_progress_start(struct dmafs_buf *const *bufs, size_t n, uint64_t total, int show)
{
	prog.bufs = bufs;
	prog.nbufs = n;
	prog.total = total;
	prog.t0 = dm_mono_ns();
	prog.stop = 0;
	prog.on = show && isatty(STDERR_FILENO) &&
		  !pthread_create(&prog.tid, NULL, progress_main, NULL);
}

void load_progress_stop(void)
{
	if (!prog.on)
		return;
	pthread_mutex_lock(&prog.lock);
	prog.stop = 1;
	pthread_cond_signal(&prog.cond);
	pthread_mutex_unlock(&prog.lock);
	pthread_join(prog.tid, NULL);
	prog.on = 0;
}

/* ---- notices and output ---- */

int load_slower(int a, int b)
{
	/* dmafs.h's order: p2p-compat, appended to the values later, after p2p */
	int ra = a == DMAFS_PATH_P2P_COMPAT ? 3 : 2 * a, rb = b == DMAFS_PATH_P2P_COMPAT ? 3 : 2 * b;

	if (a == DMAFS_PATH_NONE)
		return b;
	if (b == DMAFS_PATH_NONE)
		return a;
	return ra > rb ? a : b;
}

int load_notice(const struct dmafs_caps *caps, int target, const char *tname, int used,
		char *buf, size_t len)
{
	const struct dmafs_target_caps *t = target == DMAFS_TARGET_HOST   ? &caps->host
					    : target == DMAFS_TARGET_CUDA ? &caps->cuda
									  : &caps->hip;

	if (used == DMAFS_PATH_NONE)
		return 0;
	if (used == DMAFS_PATH_POSIX)
		snprintf(buf, len, "path posix: %s", t->why);
	else if (t->path != DMAFS_PATH_NONE && used != t->path && load_slower(used, t->path) == used)
		snprintf(buf, len, "path %s used although the mount offers %s for %s", dmafs_path_name(used),
			 dmafs_path_name(t->path), tname);
	else if (target != DMAFS_TARGET_HOST && used != DMAFS_PATH_P2P)
		snprintf(buf, len, "path %s, not p2p: %s", dmafs_path_name(used), t->why);
	else
		return 0;
	return 1;
}

double load_gbps(uint64_t bytes, uint64_t ns) { return ns ? (double)bytes / (double)ns : 0.0; }

int load_session_open(const char *path, int fd, struct dmafs_session **s)
{
	char link[64];
	int ret = dmafs_session_open(path, s);

	/* removed since it was opened: the descriptor still leads to the file and its mount */
	if (ret == -ENOENT && fd >= 0) {
		snprintf(link, sizeof(link), "/proc/self/fd/%d", fd);
		ret = dmafs_session_open(link, s);
	}
	return ret;
}
