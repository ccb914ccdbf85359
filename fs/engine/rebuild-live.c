// SPDX-License-Identifier: MIT
/*
 * rebuild-live.c - a mirror's lost member rebuilt while the filesystem stays mounted (read-
 * only, as it is whenever a member is missing or failed: nothing changes under the copy,
 * and every read is served from the other copies meanwhile). The new device comes as a
 * descriptor (the ioctl took it from dmafs-replace); the copy runs on a thread of its own
 * (rebuild.c); when it is done and the device's superblocks are written, the device takes
 * the member's place and serves reads. Writing needs a new mount: the members were opened
 * for what the degraded or failed mount could do.
 */
#include "engine/engine.h"
#include "engine/rebuild.h"

#include <errno.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

struct fs_rebuild {
	pthread_mutex_t lock;
	pthread_t t;
	int running, joined;
	int state;		/* FS_REBUILD_* */
	struct rebuild R;
	struct member nm;	/* the new device until it takes the member's place */
	char msg[512];
	uint64_t t0;
};

static void note(void *arg, const char *msg)
{
	(void)arg;
	log_err("rebuild: %s", msg);
}

/* The device behind @fd is not one of @fs's members already. */
static int not_a_member(struct fs *fs, int fd, char *err, size_t errlen)
{
	struct stat a, b;

	if (fstat(fd, &a))
		return -errno;
	for (unsigned i = 0; i < fs->n; i++) {
		if (fs->members[i].fd < 0 || fstat(fs->members[i].fd, &b))
			continue;
		if (S_ISBLK(a.st_mode) ? S_ISBLK(b.st_mode) && a.st_rdev == b.st_rdev
				       : a.st_dev == b.st_dev && a.st_ino == b.st_ino) {
			snprintf(err, errlen, "the new device is member %u of this filesystem already", i);
			return -EINVAL;
		}
	}
	return 0;
}

/* Member @k: the one asked for, or the one member that serves no reads. */
static int which(struct fs *fs, int member, unsigned *k, char *err, size_t errlen)
{
	unsigned bad = 0;

	for (unsigned i = 0; i < fs->n; i++)
		if (!fs_member_ok(fs, i)) {
			bad++;
			if (member < 0)
				*k = i;
		}
	if (member >= 0) {
		if ((unsigned)member >= fs->n || fs_member_ok(fs, (unsigned)member)) {
			snprintf(err, errlen, "member %d is not missing or failed: only such a member is rebuilt", member);
			return -EINVAL;
		}
		*k = (unsigned)member;
	} else if (bad != 1) {
		snprintf(err, errlen, bad ? "%u members serve no reads: name the one to rebuild" : "every member serves reads: there is nothing to rebuild", bad);
		return -EINVAL;
	}
	if (!fs_member_ok(fs, (*k + 1) % fs->n) || !fs_member_ok(fs, (*k + fs->n - 1) % fs->n)) {
		snprintf(err, errlen, "member %u's neighbours must both serve reads: its blocks are copies of theirs", *k);
		return -EINVAL;
	}
	return 0;
}

/* The rebuild's thread: the copy, the superblocks, then the device in the member's place. */
static void *rebuild_main(void *arg)
{
	struct fs *fs = arg;
	struct fs_rebuild *rb = fs->rb;
	unsigned k = rb->R.k;
	int ret = rebuild_copy(&rb->R);
	struct member old;

	if (!ret && (ret = member_write_sb(&rb->nm)))
		snprintf(rb->R.err, sizeof(rb->R.err), "writing the superblocks of %s failed: %s",
			 rb->nm.path, strerror(-ret));
	pthread_mutex_lock(&rb->lock);
	if (ret) {
		snprintf(rb->msg, sizeof(rb->msg), "%s", rb->R.err);
		rb->state = FS_REBUILD_FAILED;
		log_err("rebuild of member %u on %s failed: %s; it is no member", k, rb->nm.path, rb->msg);
		member_close(&rb->nm);
	} else {
		double s = (dm_mono_ns() - rb->t0) / 1e9;

		/* readers stay off member k until its state says ok (mirror.c): the device
		 * is in place first */
		old = fs->members[k];
		fs->members[k] = rb->nm;
		rb->nm.fd = -1;
		rb->nm.path = NULL;
		atomic_fetch_and(&fs->j.dead, ~(1ull << k));
		atomic_store(&fs->mstate[k], FS_MEMBER_OK);
		fs->rebuilt = 1;
		member_close(&old);
		snprintf(rb->msg, sizeof(rb->msg), "member %u rebuilt on %s: %.2f GiB in %.2f s%s; unmount and mount again to write",
			 k, fs->members[k].path, rb->R.total / 1073741824.0, s,
			 rb->R.damaged ? " (some blocks had no good copy, logged)" : "");
		rb->state = FS_REBUILD_DONE;
		log_info("%s", rb->msg);
	}
	rebuild_free(&rb->R);
	rb->running = 0;
	pthread_mutex_unlock(&rb->lock);
	return NULL;
}

int fs_rebuild_start(struct fs *fs, int fd, int member, unsigned *k, char *err, size_t errlen)
{
	struct fs_rebuild *rb;
	char path[4096], link[64];
	ssize_t n;
	uint8_t *z;
	int ret;

	*err = '\0';
	if (!fs->mirror) {
		snprintf(err, errlen, "this filesystem keeps one copy of its data (data profile single): a member's data exists nowhere else");
		return -EINVAL;
	}
	if (!fs->rb) {
		rb = calloc(1, sizeof(*rb));
		if (!rb)
			return -ENOMEM;
		pthread_mutex_init(&rb->lock, NULL);
		rb->joined = 1;
		fs->rb = rb;
	}
	rb = fs->rb;
	pthread_mutex_lock(&rb->lock);
	if (rb->running) {
		snprintf(err, errlen, "a rebuild of member %u is running", rb->R.k);
		ret = -EBUSY;
		goto out;
	}
	if (!rb->joined) {
		pthread_join(rb->t, NULL);
		rb->joined = 1;
	}
	rb->nm = (struct member){ .fd = -1, .hold_fd = -1 };
	ret = which(fs, member, k, err, errlen);
	if (!ret)
		ret = not_a_member(fs, fd, err, errlen);
	if (ret) {
		close(fd);
		goto out;
	}
	snprintf(link, sizeof(link), "/proc/self/fd/%d", fd);
	n = readlink(link, path, sizeof(path) - 1);
	path[n > 0 ? n : 0] = '\0';
	ret = member_adopt(&rb->nm, fd, n > 0 ? path : "(the new device)", err, errlen);
	if (!ret)
		ret = rebuild_new_sb(fs->members, fs->n, *k, &rb->nm, err, errlen);
	if (ret) {
		if (rb->nm.fd < 0)
			close(fd);
		member_close(&rb->nm); /* closes @fd once adopted */
		goto out;
	}
	/* no superblock until the copy is done: a crash leaves no member */
	z = util_aligned_alloc(FMT_SB_SIZE);
	ret = z ? 0 : -ENOMEM;
	if (z) {
		memset(z, 0, FMT_SB_SIZE);
		if (member_pwrite(&rb->nm, z, FMT_SB_SIZE, 0) ||
		    member_pwrite(&rb->nm, z, FMT_SB_SIZE, fmt_sb_copy_offset(rb->nm.size))) {
			ret = -EIO;
			snprintf(err, errlen, "%s: write failed", rb->nm.path);
		}
		free(z);
	}
	memset(&rb->R, 0, sizeof(rb->R));
	rb->R = (struct rebuild){ .ms = fs->members, .n = fs->n, .k = *k, .dst = &rb->nm,
				  .note = note };
	if (!ret && !fs->j.ro && journal_commit(&fs->j))
		log_warn("rebuild: committing what was logged before the member failed did not work; the rebuilt log copy is made from the other as it is");
	if (!ret) {
		/* read-only: the extent map and the log stay as planned (nothing is logged,
		 * and what was is committed) */
		pthread_mutex_lock(&fs->meta.lock);
		ret = rebuild_plan(&rb->R, &fs->meta, &fs->j);
		pthread_mutex_unlock(&fs->meta.lock);
	}
	if (!ret) {
		rb->t0 = dm_mono_ns();
		rb->state = FS_REBUILD_RUNNING;
		rb->running = 1;
		rb->msg[0] = '\0';
		ret = -pthread_create(&rb->t, NULL, rebuild_main, fs);
		if (ret)
			rb->running = 0;
		else
			rb->joined = 0;
	}
	if (ret) {
		if (!*err)
			snprintf(err, errlen, "%s", strerror(-ret));
		rebuild_free(&rb->R);
		member_close(&rb->nm);
		goto out;
	}
	log_info("rebuild of member %u on %s started: %.2f GiB to copy from members %u and %u; reads go on from the other copies",
		 *k, rb->nm.path, rb->R.total / 1073741824.0, (*k + fs->n - 1) % fs->n, (*k + 1) % fs->n);
out:
	pthread_mutex_unlock(&rb->lock);
	return ret;
}

void fs_rebuild_status(struct fs *fs, struct fs_rebuild_status *st)
{
	struct fs_rebuild *rb = fs->rb;

	memset(st, 0, sizeof(*st));
	if (!rb)
		return;
	pthread_mutex_lock(&rb->lock);
	st->state = rb->state;
	st->member = rb->R.k;
	st->total = rb->R.total;
	st->done = __atomic_load_n(&rb->R.done, __ATOMIC_RELAXED);
	st->damaged = rb->R.damaged;
	snprintf(st->msg, sizeof(st->msg), "%s", rb->msg);
	pthread_mutex_unlock(&rb->lock);
}

void fs_rebuild_stop(struct fs *fs)
{
	struct fs_rebuild *rb = fs->rb;

	if (!rb)
		return;
	__atomic_store_n(&rb->R.stop, 1, __ATOMIC_RELAXED);
	if (!rb->joined) {
		pthread_join(rb->t, NULL);
		rb->joined = 1;
	}
	member_close(&rb->nm);
	pthread_mutex_destroy(&rb->lock);
	free(rb);
	fs->rb = NULL;
}
