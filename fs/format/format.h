/* SPDX-License-Identifier: MIT */
/*
 * format.h - the dmafs on-disk format v4: superblock, log half header, batch header,
 * metadata records and data block checksums. Encoders and decoders only; nothing here
 * does I/O. Documented for users in man/dmafs.5; keep the two in step.
 *
 * Version 3 differs from version 2 only in that INODE records may carry an inode's
 * generation number and flags; version 2 filesystems are read as they are, and a
 * read-write mount makes them version 3 (fs_mount).
 *
 * Version 4 differs from version 3 only in that a log header may place its generation's
 * snapshot and batches in a log area of the data region (struct fmt_loghdr, ext_*): the
 * log grows with the metadata instead of ending at the log half that mkfs made. A
 * version 3 filesystem stays one until its log first needs to grow (journal.c).
 *
 * Version 5 is version 4 with a data profile: FMT_SB_MIRROR in the superblock's flags
 * keeps two copies of every data block (mirror_half, fmt_mirror_*). mkfs.dmafs makes
 * version 5 only for the mirror profile; single-copy filesystems stay version 4.
 */
#ifndef DMAFS_FORMAT_H
#define DMAFS_FORMAT_H

#include <stddef.h>
#include <stdint.h>

#include "util/util.h"

#define FMT_VERSION 4	   /* what mkfs.dmafs makes for the single profile */
#define FMT_VERSION_MAX 5  /* the newest version read */
#define FMT_VERSION_GEN 3  /* INODE records with generation and flags */
#define FMT_VERSION_GROW 4 /* log headers may point at log areas in the data region */
#define FMT_VERSION_MIRROR 5 /* the data profile in the superblock (FMT_SB_MIRROR) */
#define FMT_VERSION_MIN 2 /* the oldest version read */
#define FMT_MAX_MEMBERS 64
#define FMT_SB_SIZE 4096
#define FMT_SB_MAGIC "DMAFSSB1"
#define FMT_LOG_MAGIC "DMAFSLG1"
#define FMT_TX_MAGIC "DMAFSTX1"
#define FMT_TX_HDR 64
#define FMT_LOG_OFFSET (1u << 20)
#define FMT_MIN_MEMBER (64ull << 20)
#define FMT_NAME_MAX 255
#define FMT_SYMLINK_MAX 4095
#define FMT_XATTR_NAME_MAX 255
#define FMT_XATTR_VALUE_MAX 65536
#define FMT_ROOT_INO 1
#define FMT_LOG_PIECES 32 /* pieces of one log area on one member (version 4) */

struct fmt_sb {
	uint32_t version;
	uint32_t flags;
	uint8_t fs_uuid[16];
	uint32_t member_index;
	uint32_t member_count;
	uint32_t stripe_unit;
	uint32_t block_size;
	uint64_t member_size;
	uint64_t log_offset; /* 0 when this member carries no log */
	uint64_t log_half;
	uint64_t data_offset;
	uint64_t data_end;
	uint64_t csum_offset; /* checksum region: 8 bytes per data block */
	uint64_t mkfs_time;
	char label[65];
	uint8_t member_uuid[FMT_MAX_MEMBERS][16];
	/* version 5, FMT_SB_MIRROR: bytes of each member's data region that hold the files'
	 * first copies ([data_offset, data_offset + mirror_half)); the next mirror_half bytes
	 * hold the second copies of the previous member's (fmt_mirror_of) */
	uint64_t mirror_half;
};

/* Superblock flags (version 5); other bits are refused */
#define FMT_SB_MIRROR 1u /* the mirror data profile: two copies of every data block */
#define FMT_SB_KNOWN FMT_SB_MIRROR

static inline int fmt_is_mirror(const struct fmt_sb *sb) { return sb->flags & FMT_SB_MIRROR; }
/* The end of the part of a member's data region that files are allocated from. */
static inline uint64_t fmt_alloc_end(const struct fmt_sb *sb)
{
	return fmt_is_mirror(sb) ? sb->data_offset + sb->mirror_half : sb->data_end;
}
/*
 * The mirror layout ("far" copies): the first copy of a block lives where the extent map
 * says, at member offset @moff of member @m, inside [data_offset, data_offset + H) (H =
 * mirror_half); its second copy on the next member, (m + 1) mod n, at the same distance
 * into that member's [data_offset + H, data_offset + 2H). A large file's first copies are
 * striped over every member as in the single profile, and so are its second copies.
 * @doff[i] is member i's data_offset. fmt_mirror_of maps a first copy to its second;
 * fmt_mirror_other maps either copy to the other one.
 */
static inline void fmt_mirror_of(const uint64_t *doff, unsigned n, uint64_t half, unsigned m,
				 uint64_t moff, unsigned *m2, uint64_t *moff2)
{
	*m2 = (m + 1) % n;
	*moff2 = doff[*m2] + half + (moff - doff[m]);
}
static inline void fmt_mirror_other(const uint64_t *doff, unsigned n, uint64_t half, unsigned m,
				    uint64_t moff, unsigned *m2, uint64_t *moff2)
{
	if (moff < doff[m] + half) {
		fmt_mirror_of(doff, n, half, m, moff, m2, moff2);
	} else {
		*m2 = (m + n - 1) % n;
		*moff2 = doff[*m2] + (moff - doff[m] - half);
	}
}

/*
 * Fill the geometry fields of @sb for a member of @member_size bytes. log_half is the
 * filesystem-wide half size (the same on both log members). Returns 0, or -ENOSPC when
 * the member is too small for its regions.
 */
int fmt_sb_geometry(struct fmt_sb *sb, uint64_t member_size, uint64_t log_half);
/*
 * Log half size for a filesystem whose log members have @min_size bytes: 1/64 of it,
 * 4 MiB to FMT_LOG_HALF_MAX_AUTO (a half holds about 6 million files at
 * FMT_LOG_BYTES_PER_FILE each). mkfs.dmafs --log-size chooses another, up to a quarter of @min_size.
 */
#define FMT_LOG_HALF_MAX_AUTO (1ull << 30)
/* Log bytes per file of one extent, to estimate room before there are files to measure */
#define FMT_LOG_BYTES_PER_FILE 170
uint64_t fmt_log_half_for(uint64_t min_size);
/* Does member @index carry a copy of the metadata log? (members 0 and 1) */
static inline int fmt_has_log(uint32_t index) { return index < 2; }
/* Offset of the superblock copy on a member of @member_size bytes. */
static inline uint64_t fmt_sb_copy_offset(uint64_t member_size)
{
	return ALIGN_DOWN(member_size, DMAFS_BLOCK) - FMT_SB_SIZE;
}

/* Bytes of checksum region for @data_len bytes of data region (whole blocks). */
static inline uint64_t fmt_csum_bytes(uint64_t data_len)
{
	return ALIGN_UP(data_len / DMAFS_BLOCK * 8, DMAFS_BLOCK);
}
/* Byte position on the member of the checksum of the data block at member offset @moff. */
static inline uint64_t fmt_csum_pos(const struct fmt_sb *sb, uint64_t moff)
{
	return sb->csum_offset + (moff - sb->data_offset) / DMAFS_BLOCK * 8;
}
/*
 * Checksum of the 4096-byte data block at member offset @moff of member @member: xxh3 seeded
 * with the block's address, so a block read from or written to the wrong place fails too.
 */
uint64_t fmt_csum(const void *block, uint32_t member, uint64_t moff);

/*
 * Is @label one mkfs.dmafs and dmafs-label may write? Up to 64 bytes (FMT_LABEL_MAX; ""
 * is no label), no control characters, none of / \ " , (a label names
 * /dev/disk/by-label-like paths, fstab's LABEL= and member lists), no space at either
 * end. Returns 0, or -EINVAL with the reason in @why. Superblocks written before this
 * rule may hold any 64 bytes: readers show them escaped.
 */
#define FMT_LABEL_MAX 64
int fmt_label_check(const char *label, char *why, size_t len);

void fmt_sb_encode(const struct fmt_sb *sb, uint8_t buf[FMT_SB_SIZE]);
/*
 * Decode and validate a superblock. Returns 0; -ENODATA when the magic is absent (no dmafs
 * here); -EBADMSG on a checksum mismatch; -EPROTONOSUPPORT for another format version;
 * -EUCLEAN when fields are inconsistent.
 */
int fmt_sb_decode(const uint8_t buf[FMT_SB_SIZE], struct fmt_sb *sb);

struct fmt_loghdr {
	uint32_t version; /* the filesystem's (superblock) version; 0 in encode: FMT_VERSION */
	uint8_t fs_uuid[16];
	uint64_t gen;
	uint64_t first_seq;
	uint64_t next_ino;
	uint64_t snap_len;
	uint64_t snap_xxh3;
	/*
	 * Version 4: with ext_len != 0 this generation's snapshot and batches are not in the
	 * log half after this header but in log area [half] of the data region, ext_len
	 * bytes laid out as a log half is (first block unused), made of the pieces
	 * area[half][copy] on the member of log copy `copy` (0: member 0, 1: member 1; none
	 * for copy 1 of a one-member filesystem), in order. Both areas are named so that the
	 * space of both is known to be taken.
	 */
	uint64_t ext_len;
	struct fmt_area {
		uint32_t n;
		uint64_t off[FMT_LOG_PIECES], len[FMT_LOG_PIECES];
	} area[2][2];
};
void fmt_loghdr_encode(const struct fmt_loghdr *h, uint8_t buf[DMAFS_BLOCK]);
/* Returns 0, -ENODATA (no header), -EBADMSG (checksum, a version not read, or log areas
 * whose pieces are not whole blocks, overlap, wrap or do not add up to ext_len). */
int fmt_loghdr_decode(const uint8_t buf[DMAFS_BLOCK], struct fmt_loghdr *h);

struct fmt_txhdr {
	uint64_t gen;
	uint64_t seq;
	uint32_t payload_len;
	uint64_t payload_xxh3;
};
void fmt_txhdr_encode(const struct fmt_txhdr *h, uint8_t buf[FMT_TX_HDR]);
/* Returns 0, -ENODATA (no batch), -EBADMSG (header checksum). */
int fmt_txhdr_decode(const uint8_t buf[FMT_TX_HDR], struct fmt_txhdr *h);
/* Bytes a batch with @payload_len bytes occupies in the log (header + payload, padded). */
static inline uint64_t fmt_tx_size(uint64_t payload_len)
{
	return ALIGN_UP(FMT_TX_HDR + payload_len, DMAFS_BLOCK);
}

enum fmt_rec_type {
	REC_INODE = 1,
	REC_SYMLINK = 2,
	REC_EXTENT = 3,
	REC_TRUNC = 4,
	REC_IDEL = 5,
	REC_LINK = 6,
	REC_UNLINK = 7,
	REC_XSET = 8,
	REC_XDEL = 9,
	REC_PUNCH = 10,
};

/*
 * Inode attributes as logged; times are nanoseconds since the epoch. generation and flags
 * are version 3: an INODE record carries them when either is not 0 (and a version 2
 * record reads as both 0).
 */
struct fmt_attr {
	uint32_t mode, uid, gid, nlink;
	uint64_t rdev, size;
	int64_t atime, mtime, ctime;
	uint32_t start_member;
	uint32_t generation; /* with the inode number, names the inode for its whole life */
	uint32_t flags;	     /* FMT_IFL_*; other bits are refused */
};

/* Inode flags (fmt_attr.flags), chattr(1)'s i and a */
#define FMT_IFL_IMMUTABLE 1u /* no change at all, no new name, no removal */
#define FMT_IFL_APPEND 2u    /* data only appended; no removal; a directory: names only added */
#define FMT_IFL_KNOWN (FMT_IFL_IMMUTABLE | FMT_IFL_APPEND) /* the flags this version defines */

/*
 * One decoded record. Which fields mean something depends on type; name/val point into
 * the decoded buffer and are not NUL terminated.
 */
struct fmt_rec {
	uint16_t type;
	uint64_t ino;	   /* every type; LINK/UNLINK: the entry's inode (LINK) */
	uint64_t dir;	   /* LINK, UNLINK */
	struct fmt_attr a; /* INODE */
	uint64_t off;	   /* EXTENT, PUNCH: file offset; TRUNC: new size */
	uint64_t plen;	   /* PUNCH: bytes unmapped from off */
	uint32_t len;	   /* EXTENT */
	uint32_t member;   /* EXTENT */
	uint64_t moff;	   /* EXTENT: member byte offset */
	const uint8_t *name; /* LINK, UNLINK, XSET, XDEL, SYMLINK (target) */
	size_t name_len;
	const uint8_t *val; /* XSET */
	size_t val_len;
};

/* Append the encoding of @r to @b. Returns 0, -ENOMEM or -EINVAL (oversized name/value). */
int fmt_rec_encode(struct buf *b, const struct fmt_rec *r);
/*
 * Decode the record at *pos of buf[0..len). Returns 1 and advances *pos, 0 at the end,
 * -EBADMSG for a malformed record (unknown type, length out of bounds, bad name).
 */
int fmt_rec_decode(const uint8_t *buf, size_t len, size_t *pos, struct fmt_rec *r);
/* Bytes of the record starting at @p (its first 6 bytes: type and body length), whether
 * or not it would decode. */
static inline size_t fmt_rec_len(const uint8_t *p) { return 6 + (size_t)get_u32(p + 2); }

uint64_t fmt_hash(const void *p, size_t len);

#endif
