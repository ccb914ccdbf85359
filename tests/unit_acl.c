// SPDX-License-Identifier: MIT
/* Description: POSIX ACL xattr values: validation of hostile input (no out-of-bounds reads, EINVAL), mode agreement, inheritance and chmod, in the engine too (setxattr, create, chmod, remount). */
#include <linux/fs.h>

#include "t_fs.h"

#include <sys/xattr.h>

#include "engine/acl.h"

#define UND 0xffffffffu

struct e {
	uint16_t tag, perm;
	uint32_t id;
};

/* Encode @n entries into @buf (room for ACL_MAX_BYTES + more); returns the length. */
static size_t enc(uint8_t *buf, const struct e *es, size_t n)
{
	put_u32(buf, ACL_XATTR_VERSION);
	for (size_t k = 0; k < n; k++) {
		put_u16(buf + 4 + 8 * k, es[k].tag);
		put_u16(buf + 6 + 8 * k, es[k].perm);
		put_u32(buf + 8 + 8 * k, es[k].id);
	}
	return 4 + 8 * n;
}

#define ENC(buf, ...) enc(buf, (const struct e[]){ __VA_ARGS__ }, \
			  sizeof((const struct e[]){ __VA_ARGS__ }) / sizeof(struct e))
#define UO(p) { ACL_TAG_USER_OBJ, p, UND }
#define U(id, p) { ACL_TAG_USER, p, id }
#define GO(p) { ACL_TAG_GROUP_OBJ, p, UND }
#define G(id, p) { ACL_TAG_GROUP, p, id }
#define M(p) { ACL_TAG_MASK, p, UND }
#define O(p) { ACL_TAG_OTHER, p, UND }

static uint16_t perm_of(const uint8_t *buf, size_t len, uint16_t tag)
{
	for (size_t k = 0; 4 + 8 * k < len; k++)
		if (get_u16(buf + 4 + 8 * k) == tag)
			return get_u16(buf + 6 + 8 * k);
	return 0xffff;
}

static void test_check(void)
{
	static uint8_t b[ACL_MAX_BYTES + 64];
	unsigned long long seed = 0x5eed;
	size_t len;

	T_EQ(acl_check(b, ENC(b, UO(6), GO(4), O(4))), 3);
	T_EQ(acl_check(b, ENC(b, UO(7), U(5, 7), U(9, 1), GO(5), G(3, 2), M(7), O(0))), 7);
	T_EQ(acl_check(b, ENC(b, UO(6), GO(4), M(4), O(4))), 4); /* mask without named entries */
	/* malformed */
	T_EQ(acl_check(NULL, 0), -EINVAL);
	T_EQ(acl_check(b, 0), -EINVAL);
	T_EQ(acl_check(b, 3), -EINVAL);
	T_EQ(acl_check(b, 4), -EINVAL); /* header only */
	len = ENC(b, UO(6), GO(4), O(4));
	T_EQ(acl_check(b, len - 1), -EINVAL);
	T_EQ(acl_check(b, len + 1), -EINVAL);
	put_u32(b, 1);
	T_EQ(acl_check(b, len), -EINVAL); /* version */
	T_EQ(acl_check(b, ENC(b, UO(8), GO(4), O(4))), -EINVAL);	 /* perm bits */
	T_EQ(acl_check(b, ENC(b, UO(6), GO(4), O(0x104))), -EINVAL); /* perm bits */
	T_EQ(acl_check(b, ENC(b, UO(6), GO(4), { 0x40, 0, UND })), -EINVAL); /* unknown tag */
	T_EQ(acl_check(b, ENC(b, GO(4), UO(6), O(4))), -EINVAL);		 /* order */
	T_EQ(acl_check(b, ENC(b, UO(6), UO(6), GO(4), O(4))), -EINVAL);	 /* two owners */
	T_EQ(acl_check(b, ENC(b, UO(6), GO(4))), -EINVAL);			 /* no other */
	T_EQ(acl_check(b, ENC(b, UO(6), O(4))), -EINVAL);			 /* no group */
	T_EQ(acl_check(b, ENC(b, UO(6), GO(4), O(4), O(4))), -EINVAL);	 /* after other */
	T_EQ(acl_check(b, ENC(b, UO(6), U(5, 4), GO(4), O(4))), -EINVAL);	 /* no mask */
	T_EQ(acl_check(b, ENC(b, UO(6), U(5, 4), U(5, 4), GO(4), M(4), O(4))), -EINVAL); /* dup */
	T_EQ(acl_check(b, ENC(b, UO(6), U(9, 4), U(5, 4), GO(4), M(4), O(4))), -EINVAL); /* order */
	T_EQ(acl_check(b, ENC(b, UO(6), U(UND, 4), GO(4), M(4), O(4))), -EINVAL); /* id -1 */
	T_EQ(acl_check(b, ENC(b, UO(6), GO(4), G(3, 4), G(2, 4), M(4), O(4))), -EINVAL);
	T_EQ(acl_check(b, ENC(b, UO(6), GO(4), M(4), M(4), O(4))), -EINVAL);
	/* too many entries: E2BIG, however well-formed */
	put_u32(b, ACL_XATTR_VERSION);
	T_EQ(acl_check(b, ACL_MAX_BYTES + 8), -E2BIG);
	/* random garbage of every small length, from a buffer exactly that long */
	for (int round = 0; round < 200000; round++) {
		size_t n = t_rand(&seed) % 80;
		uint8_t *p = malloc(n ? n : 1);
		int ret;

		for (size_t k = 0; k < n; k++)
			p[k] = t_rand(&seed);
		if (n >= 4 && round % 2)
			put_u32(p, ACL_XATTR_VERSION);
		for (size_t k = 4; round % 4 == 1 && k + 8 <= n; k += 8) {
			/* plausible tags and perms, so the walk goes deeper */
			static const uint16_t tags[] = { 1, 2, 4, 8, 16, 32 };

			put_u16(p + k, tags[t_rand(&seed) % 6]);
			put_u16(p + k + 2, t_rand(&seed) % 8);
		}
		ret = acl_check(p, n);
		T_CHECK(ret == -EINVAL || (ret > 0 && (size_t)ret == (n - 4) / 8),
			"acl_check of %zu random bytes: %d", n, ret);
		free(p);
	}
}

static void test_mode(void)
{
	uint8_t b[256];
	uint32_t perm, mode;
	size_t len;

	len = ENC(b, UO(6), GO(4), O(1));
	T_EQ(acl_mode(b, len, &perm), 1);
	T_EQ(perm, 0641);
	len = ENC(b, UO(7), U(5, 7), GO(5), M(3), O(0));
	T_EQ(acl_mode(b, len, &perm), 0);
	T_EQ(perm, 0730); /* the mask is the group class */
	/* a new file (0666) under default ACL u::rwx,u:5:rwx,g::r-x,m::rwx,o::r-x */
	len = ENC(b, UO(7), U(5, 7), GO(5), M(7), O(5));
	mode = S_IFREG | 0666;
	T_EQ(acl_create(b, len, &mode), 1);
	T_EQ(mode, S_IFREG | 0664);
	T_EQ(perm_of(b, len, ACL_TAG_USER_OBJ), 6);
	T_EQ(perm_of(b, len, ACL_TAG_USER), 7); /* named entries stay; the mask limits them */
	T_EQ(perm_of(b, len, ACL_TAG_GROUP_OBJ), 5);
	T_EQ(perm_of(b, len, ACL_TAG_MASK), 6);
	T_EQ(perm_of(b, len, ACL_TAG_OTHER), 4);
	/* a minimal default ACL: the result is plain mode bits */
	len = ENC(b, UO(7), GO(5), O(0));
	mode = S_IFDIR | 02777;
	T_EQ(acl_create(b, len, &mode), 0);
	T_EQ(mode, S_IFDIR | 02750);
	/* chmod sets owner, mask (not the owning group) and other */
	len = ENC(b, UO(7), U(5, 7), GO(5), M(7), O(5));
	acl_chmod(b, len, 0640);
	T_EQ(perm_of(b, len, ACL_TAG_USER_OBJ), 6);
	T_EQ(perm_of(b, len, ACL_TAG_GROUP_OBJ), 5);
	T_EQ(perm_of(b, len, ACL_TAG_MASK), 4);
	T_EQ(perm_of(b, len, ACL_TAG_OTHER), 0);
	len = ENC(b, UO(7), GO(5), O(5));
	acl_chmod(b, len, 0610);
	T_EQ(perm_of(b, len, ACL_TAG_GROUP_OBJ), 1);
}

static uint32_t mode_of(struct fs *fs, uint64_t ino)
{
	struct stat st;

	T_EQ(fs_getattr(fs, ino, &st), 0);
	return st.st_mode;
}

/* The data of a write request at offset 0: t_write's pattern of seed 7. */
static int copy_seed7(void *arg, char *dst, size_t size)
{
	t_fill(dst, size, 0, 7);
	return 0;
}

static void test_engine(void)
{
	struct fs fs;
	struct fs_ctx c = { .uid = 0, .gid = 0, .umask = 022, .pid = 0 };
	uint8_t b[256], got[256];
	struct stat st;
	uint64_t f, d, sub, g, s;
	size_t len;

	t_images(2, 128, NULL);
	T_EQ(t_mount(&fs, 0), 0);
	fs.acl = 1;
	f = t_create(&fs, FMT_ROOT_INO, "f");
	T_EQ(fs_mknod(&fs, &c, FMT_ROOT_INO, "d", S_IFDIR | 0777, 0, NULL, &st), 0);
	d = st.st_ino;
	T_EQ(st.st_mode, S_IFDIR | 0755); /* no default ACL: the umask applies */

	/* malformed values are refused before anything is kept */
	T_EQ(fs_setxattr(&fs, &c, f, ACL_XATTR_ACCESS, "\2\0\0\0\1", 5, 0), -EINVAL);
	T_EQ(fs_setxattr(&fs, &c, f, ACL_XATTR_ACCESS, "", 0, 0), -EINVAL);
	len = ENC(b, UO(6), U(5, 4), GO(4), O(4)); /* named entry, no mask */
	T_EQ(fs_setxattr(&fs, &c, f, ACL_XATTR_ACCESS, b, len, 0), -EINVAL);
	T_EQ(fs_setxattr(&fs, &c, d, ACL_XATTR_DEFAULT, b, len, 0), -EINVAL);
	T_EQ(fs_getxattr(&fs, f, ACL_XATTR_ACCESS, got, sizeof(got)), -ENODATA);
	T_EQ(fs_setxattr(&fs, &c, f, "system.other", "x", 1, 0), -EOPNOTSUPP);

	/* an access ACL sets the mode; one the mode can say is not kept */
	len = ENC(b, UO(7), U(5, 6), GO(4), M(6), O(1));
	T_EQ(fs_setxattr(&fs, &c, f, ACL_XATTR_ACCESS, b, len, 0), 0);
	T_EQ(mode_of(&fs, f), S_IFREG | 0761);
	T_EQ(fs_getxattr(&fs, f, ACL_XATTR_ACCESS, got, sizeof(got)), (int)len);
	T_CHECK(!memcmp(got, b, len), "access ACL read back differs");
	len = ENC(b, UO(6), GO(0), O(0));
	T_EQ(fs_setxattr(&fs, &c, f, ACL_XATTR_ACCESS, b, len, 0), 0);
	T_EQ(mode_of(&fs, f), S_IFREG | 0600);
	T_EQ(fs_getxattr(&fs, f, ACL_XATTR_ACCESS, got, sizeof(got)), -ENODATA);

	/* default ACLs: directories only; inherited by files and directories */
	len = ENC(b, UO(7), U(5, 7), GO(5), M(7), O(5));
	T_EQ(fs_setxattr(&fs, &c, f, ACL_XATTR_DEFAULT, b, len, 0), -EACCES);
	T_EQ(fs_setxattr(&fs, &c, d, ACL_XATTR_DEFAULT, b, len, 0), 0);
	T_EQ(fs_mknod(&fs, &c, d, "g", S_IFREG | 0640, 0, NULL, &st), 0);
	g = st.st_ino;
	T_EQ(st.st_mode, S_IFREG | 0640); /* the umask does not apply */
	T_EQ(fs_getxattr(&fs, g, ACL_XATTR_ACCESS, got, sizeof(got)), (int)len);
	T_EQ(perm_of(got, len, ACL_TAG_MASK), 4);
	T_EQ(fs_getxattr(&fs, g, ACL_XATTR_DEFAULT, got, sizeof(got)), -ENODATA);
	T_EQ(fs_mknod(&fs, &c, d, "sub", S_IFDIR | 0777, 0, NULL, &st), 0);
	sub = st.st_ino;
	T_EQ(st.st_mode, S_IFDIR | 0775);
	T_EQ(fs_getxattr(&fs, sub, ACL_XATTR_DEFAULT, got, sizeof(got)), (int)len);
	T_CHECK(!memcmp(got, b, len), "inherited default ACL differs");
	T_EQ(fs_mknod(&fs, &c, d, "s", S_IFLNK | 0777, 0, "g", &st), 0);
	s = st.st_ino;
	T_EQ(st.st_mode, S_IFLNK | 0777);
	T_EQ(fs_getxattr(&fs, s, ACL_XATTR_ACCESS, got, sizeof(got)), -ENODATA);

	/* chmod rewrites the ACL's owner, mask and other */
	memset(&st, 0, sizeof(st));
	st.st_mode = 0604;
	T_EQ(fs_setattr(&fs, NULL, g, &st, FUSE_SET_ATTR_MODE, &st), 0);
	T_EQ(fs_getxattr(&fs, g, ACL_XATTR_ACCESS, got, sizeof(got)), (int)len);
	T_EQ(perm_of(got, len, ACL_TAG_USER_OBJ), 6);
	T_EQ(perm_of(got, len, ACL_TAG_MASK), 0);
	T_EQ(perm_of(got, len, ACL_TAG_OTHER), 4);
	T_EQ(perm_of(got, len, ACL_TAG_USER), 7);

	/* the other namespaces; file capabilities go at a write */
	T_EQ(fs_setxattr(&fs, &c, g, "trusted.t", "tv", 2, 0), 0);
	T_EQ(fs_setxattr(&fs, &c, s, "security.selinux", "l", 1, 0), 0);
	T_EQ(fs_setxattr(&fs, &c, s, "user.u", "x", 1, 0), -EPERM);
	T_EQ(fs_setxattr(&fs, &c, g, "security.capability", "cap", 3, 0), 0);
	T_EQ(fs_write_from(&fs, &c, g, 4096, 0, copy_seed7, NULL), 4096); /* a write request */
	T_EQ(fs_getxattr(&fs, g, "security.capability", got, sizeof(got)), -ENODATA);

	/* all of it after a crash (replayed from the log), then after a clean remount */
	T_EQ(fs_fsync(&fs), 0);
	for (int round = 0; round < 2; round++) {
		if (round == 0)
			t_crash(&fs);
		else
			t_umount(&fs);
		T_EQ(t_mount(&fs, 0), 0);
		fs.acl = 1;
		d = t_lookup(&fs, FMT_ROOT_INO, "d");
		g = t_lookup(&fs, d, "g");
		sub = t_lookup(&fs, d, "sub");
		s = t_lookup(&fs, d, "s");
		T_CHECK(d && g && sub && s, "names lost (round %d)", round);
		T_EQ(mode_of(&fs, g), S_IFREG | 0604);
		T_EQ(fs_getxattr(&fs, g, ACL_XATTR_ACCESS, got, sizeof(got)), (int)len);
		T_EQ(perm_of(got, len, ACL_TAG_MASK), 0);
		T_EQ(fs_getxattr(&fs, sub, ACL_XATTR_DEFAULT, got, sizeof(got)), (int)len);
		T_EQ(fs_getxattr(&fs, g, "trusted.t", got, sizeof(got)), 2);
		T_EQ(fs_getxattr(&fs, g, "security.capability", got, sizeof(got)), -ENODATA);
		T_EQ(fs_getxattr(&fs, s, "security.selinux", got, sizeof(got)), 1);
		T_EQ(t_verify(&fs, g, 0, 4096, 7), 0);
	}
	/* without ACLs negotiated, the ACL names are unknown */
	fs.acl = 0;
	T_EQ(fs_getxattr(&fs, g, ACL_XATTR_ACCESS, got, sizeof(got)), -EOPNOTSUPP);
	T_EQ(fs_setxattr(&fs, &c, g, ACL_XATTR_ACCESS, b, len, 0), -EOPNOTSUPP);
	t_umount(&fs);
}

/*
 * chattr +i: only a caller with CAP_LINUX_IMMUTABLE sets it (a caller /proc does not show
 * has none), unknown flags are refused, the flag refuses changes and survives a crash.
 */
static void test_iflags(void)
{
	struct fs fs;
	struct fs_ctx none = { .uid = 0, .gid = 0, .pid = 0 };
	struct fs_ctx me = { .uid = 0, .gid = 0, .pid = getpid() };
	struct stat st = { .st_mode = 0600 };
	uint32_t fl = 0;
	uint64_t f;

	t_rmdir(); /* test_engine's images */
	t_images(2, 128, NULL);
	T_EQ(t_mount(&fs, 0), 0);
	f = t_create(&fs, FMT_ROOT_INO, "f");
	T_EQ(fs_setflags(&fs, &none, f, FS_IMMUTABLE_FL), -EPERM);
	T_EQ(fs_setflags(&fs, &me, f, FS_IMMUTABLE_FL | FS_NOATIME_FL), -EOPNOTSUPP);
	if (!acl_pid_capable(getpid(), ACL_CAP_LINUX_IMMUTABLE)) {
		printf("unit_acl: no CAP_LINUX_IMMUTABLE: the rest of test_iflags is not run\n");
		t_umount(&fs);
		return;
	}
	T_EQ(fs_setflags(&fs, &me, f, FS_IMMUTABLE_FL), 0);
	T_EQ(fs_fsync(&fs), 0);
	t_crash(&fs);
	T_EQ(t_mount(&fs, 0), 0);
	f = t_lookup(&fs, FMT_ROOT_INO, "f");
	T_EQ(fs_getflags(&fs, f, &fl), 0);
	T_EQ(fl, FS_IMMUTABLE_FL);
	T_EQ(fs_open(&fs, f, O_WRONLY), -EPERM);
	T_EQ(fs_setattr(&fs, &me, f, &st, FUSE_SET_ATTR_MODE, &st), -EPERM);
	T_EQ(fs_setxattr(&fs, &me, f, "user.x", "1", 1, 0), -EPERM);
	T_EQ(fs_fallocate(&fs, &me, f, 0, 0, 4096), -EPERM);
	T_EQ(fs_unlink(&fs, FMT_ROOT_INO, "f", 0), -EPERM);
	T_EQ(fs_setflags(&fs, &none, f, 0), -EPERM);
	T_EQ(fs_setflags(&fs, &me, f, 0), 0);
	T_EQ(fs_unlink(&fs, FMT_ROOT_INO, "f", 0), 0);
	t_umount(&fs);
}

int main(void)
{
	test_check();
	test_mode();
	test_engine();
	test_iflags();
	return t_done("unit_acl");
}
