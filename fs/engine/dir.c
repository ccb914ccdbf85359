// SPDX-License-Identifier: MIT
/* dir.c - directory listing: opendir, readdir and its cookies, releasedir. */
#include "engine/engine.h"

#include <errno.h>
#include <stdlib.h>
#include <string.h>
#include "engine/internal.h"

int fs_opendir(struct fs *fs, uint64_t ino, uint64_t *limit)
{
	struct inode *i;
	int ret = 0;

	pthread_mutex_lock(&fs->meta.lock);
	i = meta_iget(&fs->meta, ino);
	if (!i)
		ret = -ENOENT;
	else if (!i->dir)
		ret = -ENOTDIR;
	else {
		i->nopen++; /* readdir offsets do not need the slots to stay put (meta.h) */
		*limit = i->dir->next_cookie;
	}
	pthread_mutex_unlock(&fs->meta.lock);
	return ret;
}

void fs_releasedir(struct fs *fs, uint64_t ino)
{
	struct inode *i;

	pthread_mutex_lock(&fs->meta.lock);
	i = meta_iget(&fs->meta, ino);
	if (i && i->dir && i->nopen) {
		i->nopen--;
		rec_maybe_drop(fs, i);
	}
	pthread_mutex_unlock(&fs->meta.lock);
}

int fs_readdir(struct fs *fs, uint64_t ino, uint64_t off, uint64_t *limit, int plus,
	       int (*fill)(void *arg, const char *name, const struct stat *st, uint64_t gen,
			   int cache_name, uint64_t next),
	       void *arg)
{
	struct inode *i;
	struct stat st;
	int ret = 0;

	pthread_mutex_lock(&fs->meta.lock);
	i = meta_iget(&fs->meta, ino);
	if (!i || !i->dir) {
		ret = i ? -ENOTDIR : -ENOENT;
		goto out;
	}
	/* offsets: "." -> 1, ".." -> 2, an entry -> its cookie + 3 (meta.h) */
	if (off == 0)
		*limit = i->dir->next_cookie;
	memset(&st, 0, sizeof(st));
	if (off < 1) {
		st.st_ino = ino;
		st.st_mode = S_IFDIR;
		if (fill(arg, ".", &st, 0, 0, 1))
			goto out;
		off = 1;
	}
	if (off < 2) {
		st.st_ino = i->dir->parent ? i->dir->parent : FMT_ROOT_INO;
		st.st_mode = S_IFDIR;
		if (fill(arg, "..", &st, 0, 0, 2))
			goto out;
		off = 2;
	}
	/* after the entry whose offset is off: the first cookie past off - 3 */
	for (size_t s = meta_dir_seek(i->dir, off - 2); s < i->dir->nslots; s++) {
		struct dentry *de = i->dir->slots[s];
		struct inode *c;

		if (i->dir->cookies[s] >= *limit)
			break;
		if (!de)
			continue;
		c = meta_iget(&fs->meta, de->ino);
		if (plus && c) {
			/* as a lookup: all attributes, and the kernel holds a reference */
			fs_stat(fs, c, &st);
			if (fill(arg, de->name, &st, c->a.generation, fs_name_cacheable(c),
				 i->dir->cookies[s] + 3))
				break;
			c->nlookup++;
			continue;
		}
		memset(&st, 0, sizeof(st));
		st.st_ino = de->ino;
		st.st_mode = c ? c->a.mode & S_IFMT : 0;
		if (fill(arg, de->name, &st, 0, 0, i->dir->cookies[s] + 3))
			break;
	}
out:
	pthread_mutex_unlock(&fs->meta.lock);
	return ret;
}
