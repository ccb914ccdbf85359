// SPDX-License-Identifier: MIT
/* records.c - the log records of one inode change, shared by the namespace, attribute, xattr and file operations. */
#include "engine/engine.h"

#include <string.h>
#include "engine/internal.h"

/* Log a change of @ino's attributes. Caller holds meta.lock. */
int rec_attr(struct fs *fs, struct inode *ino)
{
	struct fmt_rec r;

	meta_inode_rec(ino, &r);
	return journal_log(&fs->j, &r);
}

int rec_touch(struct fs *fs, struct inode *ino, int64_t now)
{
	struct fmt_rec r;

	meta_inode_rec(ino, &r);
	r.a.mtime = r.a.ctime = now;
	return journal_log(&fs->j, &r);
}

int rec_link(struct fs *fs, uint64_t dir, uint64_t ino, const char *name)
{
	struct fmt_rec r = { .type = REC_LINK, .dir = dir, .ino = ino,
			     .name = (const uint8_t *)name, .name_len = strlen(name) };

	return journal_log(&fs->j, &r);
}

int rec_unlink(struct fs *fs, uint64_t dir, const char *name)
{
	struct fmt_rec r = { .type = REC_UNLINK, .dir = dir, .name = (const uint8_t *)name,
			     .name_len = strlen(name) };

	return journal_log(&fs->j, &r);
}

struct xattr *rec_xattr(const struct inode *ino, const char *name)
{
	struct xattr *x;

	for (x = ino->xattrs; x && strcmp(x->name, name); x = x->next)
		;
	return x;
}

int rec_xset(struct fs *fs, uint64_t ino, const char *name, const void *val, size_t len)
{
	struct fmt_rec r = { .type = REC_XSET, .ino = ino, .name = (const uint8_t *)name,
			     .name_len = strlen(name), .val = val, .val_len = len };

	return journal_log(&fs->j, &r);
}

int rec_xdel(struct fs *fs, uint64_t ino, const char *name)
{
	struct fmt_rec r = { .type = REC_XDEL, .ino = ino, .name = (const uint8_t *)name,
			     .name_len = strlen(name) };

	return journal_log(&fs->j, &r);
}

/* Free an inode nobody can reach or use any more. Caller holds meta.lock. */
void rec_maybe_drop(struct fs *fs, struct inode *ino)
{
	struct fmt_rec r = { .type = REC_IDEL };

	if (ino->a.nlink || ino->nlookup || ino->nopen || ino->ino == FMT_ROOT_INO || fs->ro)
		return;
	tier_forget(fs->tier, ino); /* no placement can run: nobody has it open */
	r.ino = ino->ino;
	journal_log(&fs->j, &r);
}

/* @ino (0 if gone), after waiting for what write-behind holds of it. */
struct inode *fs_wait_written(struct fs *fs, uint64_t ino, int take_err, int *err)
{
	struct inode *i;

	pthread_mutex_lock(&fs->meta.lock);
	i = meta_iget(&fs->meta, ino);
	pthread_mutex_unlock(&fs->meta.lock);
	*err = i ? wback_wait(fs, i, take_err) : 0;
	return i;
}
