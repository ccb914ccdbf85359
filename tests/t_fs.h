/* SPDX-License-Identifier: MIT */
/* t_fs.h - unit-test helpers: image files formatted by the real mkfs.dmafs, engine mounts
 * without FUSE, and simulated crashes (members closed without the final commit). */
#ifndef T_FS_H
#define T_FS_H

#include <errno.h>
#include <fcntl.h>
#include <fuse_lowlevel.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "engine/engine.h"
#include "t_unit.h"

static char t_dir[256];
static char t_list[4096];

static void t_rmdir(void)
{
	char cmd[512];

	snprintf(cmd, sizeof(cmd), "rm -rf '%s'", t_dir);
	if (t_dir[0] && system(cmd)) { /* best effort */ }
}

/* Can files in @dir be opened with O_DIRECT and written through it? Says why not in @why. */
static int t_direct_ok(const char *dir, char *why, size_t whylen)
{
	char path[512];
	void *blk = NULL;
	int fd, ok = 0;

	snprintf(path, sizeof(path), "%s/.dmafs-unit-direct.XXXXXX", dir);
	fd = mkstemp(path);
	if (fd < 0) {
		snprintf(why, whylen, "%s: cannot create a file: %s", dir, strerror(errno));
		return 0;
	}
	close(fd);
	fd = open(path, O_RDWR | O_DIRECT);
	if (fd < 0) {
		snprintf(why, whylen, "%s: open with O_DIRECT: %s", dir, strerror(errno));
	} else if (posix_memalign(&blk, 4096, 4096) == 0) {
		memset(blk, 0, 4096);
		ok = pwrite(fd, blk, 4096, 0) == 4096;
		if (!ok)
			snprintf(why, whylen, "%s: write with O_DIRECT: %s", dir, strerror(errno));
		free(blk);
	}
	if (fd >= 0)
		close(fd);
	unlink(path);
	return ok;
}

/* The directory for the images: $DMAFS_TEST_DIR when set, else the first of /dev/shm
 * (fast), /var/tmp and /tmp whose files take O_DIRECT, as the members' I/O needs (tmpfs
 * has it only since Linux 6.6). Exits 77, saying why for each, when none does. */
static const char *t_image_dir(void)
{
	static const char *dirs[] = { "/dev/shm", "/var/tmp", "/tmp" };
	const char *env = getenv("DMAFS_TEST_DIR");
	char why[3][600] = { "", "", "" };

	if (env && *env)
		return env;
	for (int i = 0; i < 3; i++) {
		if (t_direct_ok(dirs[i], why[i], sizeof(why[i]))) {
			if (i)
				fprintf(stderr, "images in %s, not %s (%s)\n", dirs[i], dirs[0], why[0]);
			return dirs[i];
		}
	}
	printf("SKIP: no directory for the member images takes O_DIRECT: %s; %s; %s "
	       "(set DMAFS_TEST_DIR to one that does)\n", why[0], why[1], why[2]);
	exit(77);
}

/* Make @n images of @mb MiB with mkfs.dmafs (extra args in @mkfs_args) in t_image_dir(). */
static void t_images(int n, int mb, const char *mkfs_args)
{
	const char *b = getenv("top_builddir");
	const char *base = t_image_dir();
	char cmd[8192];
	size_t len = 0;

	snprintf(t_dir, sizeof(t_dir), "%s/dmafs-unit.XXXXXX", base);
	if (!mkdtemp(t_dir)) {
		perror("mkdtemp");
		exit(1);
	}
	atexit(t_rmdir);
	t_list[0] = '\0';
	for (int i = 0; i < n; i++)
		len += snprintf(t_list + len, sizeof(t_list) - len, "%s%s/m%d.img", i ? "," : "", t_dir, i);
	len = snprintf(cmd, sizeof(cmd), "'%s/tools/mkfs.dmafs' -q --size %dM %s", b ? b : ".", mb,
		       mkfs_args ? mkfs_args : "");
	for (int i = 0; i < n; i++)
		len += snprintf(cmd + len, sizeof(cmd) - len, " '%s/m%d.img'", t_dir, i);
	if (system(cmd)) {
		fprintf(stderr, "mkfs failed: %s\n", cmd);
		exit(1);
	}
}

/* XOR one byte at @off of member image @i (not while the engine has it open). */
static void t_flip(int i, uint64_t off)
{
	char path[512];
	FILE *f;
	int c;

	snprintf(path, sizeof(path), "%s/m%d.img", t_dir, i);
	f = fopen(path, "r+b");
	if (!f) {
		perror(path);
		exit(1);
	}
	fseek(f, off, SEEK_SET);
	c = fgetc(f);
	fseek(f, off, SEEK_SET);
	fputc(c ^ 0x5a, f);
	fclose(f);
}

static struct member *t_ms;
static int t_n;

/* Mount the engine on the images; returns fs_mount's result. */
static int t_mount(struct fs *fs, int ro)
{
	char err[1024] = "";
	int ret;

	t_n = members_open(t_list, ro, &t_ms, err, sizeof(err));
	if (t_n < 0) {
		if (t_n == -EINVAL && strstr(err, "O_DIRECT")) {
			printf("SKIP: %s\n", err);
			exit(77);
		}
		fprintf(stderr, "members_open: %s\n", err);
		return t_n;
	}
	ret = fs_mount(fs, t_ms, t_n, ro, err, sizeof(err));
	if (ret)
		fprintf(stderr, "fs_mount: %s (%d)\n", err, ret);
	return ret;
}

/* Clean unmount: final commit, then close. */
static void t_umount(struct fs *fs)
{
	fs_unmount(fs);
	members_close(t_ms, t_n);
}

/* Crash: close the members without committing; the in-memory state is dropped. */
static void t_crash(struct fs *fs)
{
	members_close(t_ms, t_n);
	t_ms = NULL;
	(void)fs; /* memory deliberately leaked: a crashed daemon frees nothing */
}

static const struct fs_ctx t_root = { .uid = 0, .gid = 0 };

static uint64_t t_create(struct fs *fs, uint64_t parent, const char *name)
{
	struct stat st;
	int ret = fs_mknod(fs, &t_root, parent, name, S_IFREG | 0644, 0, NULL, &st);

	T_CHECK(ret == 0, "create %s: %d", name, ret);
	return ret ? 0 : st.st_ino;
}

static uint64_t t_lookup(struct fs *fs, uint64_t parent, const char *name)
{
	struct stat st;
	int cache_name;

	return fs_lookup(fs, parent, name, &st, &cache_name) ? 0 : st.st_ino;
}

/* Byte pattern that depends on the file offset and a seed. */
static void t_fill(char *p, size_t len, uint64_t off, unsigned seed)
{
	for (size_t i = 0; i < len; i++)
		p[i] = (char)(((off + i) * 2654435761u >> 13) ^ seed);
}

/* Read [off, off+len) and compare with the pattern. Returns 0 when equal. */
static int t_verify(struct fs *fs, uint64_t ino, uint64_t off, size_t len, unsigned seed)
{
	char *want = malloc(1 << 20);
	int bad = 0;

	while (len && !bad) {
		size_t n = len > (1 << 20) ? (1 << 20) : len;
		const char *got;
		ssize_t r = fs_read(fs, ino, off, n, &got);

		if (r != (ssize_t)n) {
			fprintf(stderr, "short read at %llu: %zd\n", (unsigned long long)off, r);
			bad = 1;
			break;
		}
		t_fill(want, n, off, seed);
		if (memcmp(want, got, n)) {
			fprintf(stderr, "data mismatch in [%llu, %llu)\n", (unsigned long long)off,
				(unsigned long long)(off + n));
			bad = 1;
		}
		off += n;
		len -= n;
	}
	free(want);
	return bad;
}

static int t_write(struct fs *fs, uint64_t ino, uint64_t off, size_t len, unsigned seed)
{
	char *p = malloc(1 << 20);
	int ret = 0;

	while (len) {
		size_t n = len > (1 << 20) ? (1 << 20) : len;
		ssize_t w;

		t_fill(p, n, off, seed);
		w = fs_write(fs, ino, p, n, off);
		if (w != (ssize_t)n) {
			ret = w < 0 ? (int)w : -EIO;
			break;
		}
		off += n;
		len -= n;
	}
	free(p);
	return ret;
}

#endif
