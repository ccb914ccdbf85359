// SPDX-License-Identifier: MIT
/*
 * fhandle.c - name_to_handle_at(2) and open_by_handle_at(2) for tests/fhandle.sh.
 * Description: helper: encodes file handles to a file and opens files by them.
 *
 *   fhandle encode OUT PATH...   append the handle of each PATH to OUT
 *   fhandle open MNT IN          open every handle in IN (relative to mount MNT) and print
 *                                one line each: "ok INODE" (with the inode number fstat
 *                                gives, and for a directory its parent's, "ok INODE PARENT")
 *                                or the errno name
 *
 * Exit status: 0, or 1 when a call other than open_by_handle_at fails.
 */
#define _GNU_SOURCE
#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

struct rec {
	struct file_handle fh;
	unsigned char bytes[MAX_HANDLE_SZ];
};

static const char *ename(int e)
{
	switch (e) {
	case ESTALE: return "ESTALE";
	case ENOENT: return "ENOENT";
	case EOPNOTSUPP: return "EOPNOTSUPP";
	case EPERM: return "EPERM";
	case EINVAL: return "EINVAL";
	default: return strerror(e);
	}
}

static int encode(const char *out, int n, char **paths)
{
	FILE *f = fopen(out, "ab");

	if (!f) {
		perror(out);
		return 1;
	}
	for (int i = 0; i < n; i++) {
		struct rec r;
		int mnt;

		memset(&r, 0, sizeof(r));
		r.fh.handle_bytes = MAX_HANDLE_SZ;
		if (name_to_handle_at(AT_FDCWD, paths[i], &r.fh, &mnt, 0)) {
			fprintf(stderr, "name_to_handle_at %s: %s\n", paths[i], strerror(errno));
			return 1;
		}
		if (fwrite(&r, sizeof(r), 1, f) != 1) {
			perror(out);
			return 1;
		}
	}
	return fclose(f) ? 1 : 0;
}

static int open_all(const char *mnt, const char *in)
{
	int mfd = open(mnt, O_RDONLY | O_DIRECTORY);
	FILE *f = fopen(in, "rb");
	struct rec r;

	if (mfd < 0 || !f) {
		perror(mfd < 0 ? mnt : in);
		return 1;
	}
	while (fread(&r, sizeof(r), 1, f) == 1) {
		struct stat st, pst;
		int fd = open_by_handle_at(mfd, &r.fh, O_RDONLY);

		if (fd < 0) {
			printf("%s\n", ename(errno));
			continue;
		}
		if (fstat(fd, &st)) {
			perror("fstat");
			return 1;
		}
		if (S_ISDIR(st.st_mode)) {
			/* a directory's dentry is reconnected to its parent (LOOKUP of "..") */
			if (fstatat(fd, "..", &pst, 0)) {
				printf("ok %llu parent %s\n", (unsigned long long)st.st_ino, ename(errno));
			} else {
				printf("ok %llu parent %llu\n", (unsigned long long)st.st_ino,
				       (unsigned long long)pst.st_ino);
			}
		} else {
			char c;

			/* the data is there too */
			if (read(fd, &c, 1) < 0) {
				printf("read %s\n", ename(errno));
				close(fd);
				continue;
			}
			printf("ok %llu\n", (unsigned long long)st.st_ino);
		}
		close(fd);
	}
	fclose(f);
	close(mfd);
	return 0;
}

int main(int argc, char **argv)
{
	if (argc >= 4 && !strcmp(argv[1], "encode"))
		return encode(argv[2], argc - 3, argv + 3);
	if (argc == 4 && !strcmp(argv[1], "open"))
		return open_all(argv[2], argv[3]);
	fprintf(stderr, "usage: fhandle encode OUT PATH... | fhandle open MNT IN\n");
	return 2;
}
