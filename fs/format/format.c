// SPDX-License-Identifier: MIT
/* format.c - encode and decode the dmafs v4 (and v3, v2) on-disk structures (see man/dmafs.5). */
#include "format/format.h"

#include <errno.h>
#include <stdio.h>
#include <string.h>
#include <xxhash.h>
#ifdef DMAFS_XXH_DISPATCH
/* XXH3 entry points that pick SSE2, AVX2 or AVX-512 at run time (configure.ac) */
#include <xxh_x86dispatch.h>
#endif

uint64_t fmt_hash(const void *p, size_t len) { return XXH3_64bits(p, len); }

uint64_t fmt_csum(const void *block, uint32_t member, uint64_t moff)
{
	return XXH3_64bits_withSeed(block, DMAFS_BLOCK, moff ^ ((uint64_t)member << 56));
}

uint64_t fmt_log_half_for(uint64_t min_size)
{
	uint64_t h = min_size / 64;

	h = MAX(h, 4ull << 20);
	h = MIN(h, FMT_LOG_HALF_MAX_AUTO);
	return ALIGN_DOWN(h, 1ull << 20);
}

int fmt_sb_geometry(struct fmt_sb *sb, uint64_t member_size, uint64_t log_half)
{
	member_size = ALIGN_DOWN(member_size, DMAFS_BLOCK);
	sb->member_size = member_size;
	sb->block_size = DMAFS_BLOCK;
	if (fmt_has_log(sb->member_index)) {
		sb->log_offset = FMT_LOG_OFFSET;
		sb->log_half = log_half;
		sb->data_offset = FMT_LOG_OFFSET + 2 * log_half;
	} else {
		sb->log_offset = 0;
		sb->log_half = log_half;
		sb->data_offset = FMT_LOG_OFFSET;
	}
	if (member_size < FMT_MIN_MEMBER)
		return -ENOSPC;
	/* the last MiB holds the superblock copy; before it, the checksum region */
	uint64_t end = ALIGN_DOWN(member_size - (1u << 20), DMAFS_BLOCK), blocks;

	if (end <= sb->data_offset + (8u << 20))
		return -ENOSPC;
	blocks = (end - sb->data_offset) / (DMAFS_BLOCK + 8);
	while (blocks * DMAFS_BLOCK + fmt_csum_bytes(blocks * DMAFS_BLOCK) > end - sb->data_offset)
		blocks--;
	sb->data_end = sb->data_offset + blocks * DMAFS_BLOCK;
	sb->csum_offset = sb->data_end;
	if (sb->data_end <= sb->data_offset + (8u << 20))
		return -ENOSPC;
	return 0;
}

int fmt_label_check(const char *label, char *why, size_t len)
{
	size_t n = strlen(label);

	if (n > FMT_LABEL_MAX) {
		snprintf(why, len, "it is %zu bytes long; a label holds at most %d", n, FMT_LABEL_MAX);
		return -EINVAL;
	}
	for (const unsigned char *c = (const unsigned char *)label; *c; c++) {
		if (*c < 0x20 || *c == 0x7f) {
			snprintf(why, len, "it holds the control character \\x%02x", *c);
			return -EINVAL;
		}
		if (strchr("/\\\",", *c)) {
			snprintf(why, len, "it holds '%c', which a label cannot (labels name paths, fstab's LABEL= and member lists)",
				 *c);
			return -EINVAL;
		}
	}
	if (n && (label[0] == ' ' || label[n - 1] == ' ')) {
		snprintf(why, len, "it begins or ends with a space");
		return -EINVAL;
	}
	return 0;
}

void fmt_sb_encode(const struct fmt_sb *sb, uint8_t b[FMT_SB_SIZE])
{
	memset(b, 0, FMT_SB_SIZE);
	memcpy(b, FMT_SB_MAGIC, 8);
	put_u32(b + 8, sb->version);
	put_u32(b + 12, sb->flags);
	memcpy(b + 16, sb->fs_uuid, 16);
	put_u32(b + 32, sb->member_index);
	put_u32(b + 36, sb->member_count);
	put_u32(b + 40, sb->stripe_unit);
	put_u32(b + 44, sb->block_size);
	put_u64(b + 48, sb->member_size);
	put_u64(b + 56, sb->log_offset);
	put_u64(b + 64, sb->log_half);
	put_u64(b + 72, sb->data_offset);
	put_u64(b + 80, sb->data_end);
	put_u64(b + 88, sb->mkfs_time);
	memcpy(b + 96, sb->label, strnlen(sb->label, 64));
	for (unsigned i = 0; i < sb->member_count && i < FMT_MAX_MEMBERS; i++)
		memcpy(b + 160 + 16 * i, sb->member_uuid[i], 16);
	put_u64(b + 1184, sb->csum_offset);
	put_u64(b + 1192, sb->mirror_half);
	put_u64(b + 4088, fmt_hash(b, 4088));
}

static int is_pow2(uint64_t v) { return v && !(v & (v - 1)); }

int fmt_sb_decode(const uint8_t b[FMT_SB_SIZE], struct fmt_sb *sb)
{
	if (memcmp(b, FMT_SB_MAGIC, 8))
		return -ENODATA;
	if (get_u64(b + 4088) != fmt_hash(b, 4088))
		return -EBADMSG;
	memset(sb, 0, sizeof(*sb));
	sb->version = get_u32(b + 8);
	if (sb->version < FMT_VERSION_MIN || sb->version > FMT_VERSION_MAX)
		return -EPROTONOSUPPORT;
	sb->flags = get_u32(b + 12);
	memcpy(sb->fs_uuid, b + 16, 16);
	sb->member_index = get_u32(b + 32);
	sb->member_count = get_u32(b + 36);
	sb->stripe_unit = get_u32(b + 40);
	sb->block_size = get_u32(b + 44);
	sb->member_size = get_u64(b + 48);
	sb->log_offset = get_u64(b + 56);
	sb->log_half = get_u64(b + 64);
	sb->data_offset = get_u64(b + 72);
	sb->data_end = get_u64(b + 80);
	sb->mkfs_time = get_u64(b + 88);
	memcpy(sb->label, b + 96, 64);
	sb->label[64] = '\0';
	if (sb->member_count < 1 || sb->member_count > FMT_MAX_MEMBERS ||
	    sb->member_index >= sb->member_count)
		return -EUCLEAN;
	for (unsigned i = 0; i < sb->member_count; i++)
		memcpy(sb->member_uuid[i], b + 160 + 16 * i, 16);
	sb->csum_offset = get_u64(b + 1184);
	if (sb->version >= FMT_VERSION_MIRROR) {
		sb->mirror_half = get_u64(b + 1192);
		if (sb->flags & ~FMT_SB_KNOWN)
			return -EUCLEAN;
	}
	if (sb->block_size != DMAFS_BLOCK || !is_pow2(sb->stripe_unit) ||
	    sb->stripe_unit < (64u << 10) || sb->stripe_unit > (64u << 20))
		return -EUCLEAN;
	if (sb->member_size < FMT_MIN_MEMBER || sb->member_size % DMAFS_BLOCK ||
	    sb->data_offset % DMAFS_BLOCK || sb->data_offset < FMT_SB_SIZE ||
	    sb->data_end % DMAFS_BLOCK || sb->data_offset >= sb->data_end ||
	    sb->data_end > sb->member_size - FMT_SB_SIZE)
		return -EUCLEAN;
	if (sb->log_half % DMAFS_BLOCK || sb->log_half < (1u << 20))
		return -EUCLEAN;
	/* member_size - FMT_SB_SIZE bounds csum_offset, so the subtraction below cannot wrap */
	if (sb->csum_offset % DMAFS_BLOCK || sb->csum_offset < sb->data_end ||
	    sb->csum_offset > sb->member_size - FMT_SB_SIZE ||
	    fmt_csum_bytes(sb->data_end - sb->data_offset) > sb->member_size - FMT_SB_SIZE - sb->csum_offset)
		return -EUCLEAN;
	/* log_offset + 2 * log_half could wrap; compare against the room before data_offset */
	if (fmt_has_log(sb->member_index) &&
	    (sb->log_offset != FMT_LOG_OFFSET || sb->data_offset < sb->log_offset ||
	     sb->log_half > (sb->data_offset - sb->log_offset) / 2))
		return -EUCLEAN;
	/* a mirror needs a second member, and both halves inside the data region */
	if (fmt_is_mirror(sb) &&
	    (sb->version < FMT_VERSION_MIRROR || sb->member_count < 2 || !sb->mirror_half ||
	     sb->mirror_half % DMAFS_BLOCK || sb->mirror_half > (sb->data_end - sb->data_offset) / 2))
		return -EUCLEAN;
	return 0;
}

/* The pieces of both log areas of both copies; each list empty or adding up to ext_len. */
static int decode_areas(const uint8_t b[DMAFS_BLOCK], struct fmt_loghdr *h)
{
	const uint8_t *p = b + 88;

	memset(h->area, 0, sizeof(h->area));
	h->ext_len = h->version >= FMT_VERSION_GROW ? get_u64(b + 72) : 0;
	if (!h->ext_len)
		return 0;
	if (h->ext_len % DMAFS_BLOCK || h->ext_len < 2 * DMAFS_BLOCK)
		return -EBADMSG;
	for (int a = 0; a < 2; a++)
		for (int c = 0; c < 2; c++) {
			struct fmt_area *m = &h->area[a][c];
			uint64_t sum = 0;

			m->n = b[80 + 2 * a + c];
			if (m->n > FMT_LOG_PIECES)
				return -EBADMSG;
			for (uint32_t i = 0; i < m->n; i++, p += 16) {
				m->off[i] = get_u64(p);
				m->len[i] = get_u64(p + 8);
				if (!m->len[i] || m->off[i] % DMAFS_BLOCK || m->len[i] % DMAFS_BLOCK ||
				    m->off[i] + m->len[i] < m->off[i] || m->len[i] > h->ext_len - sum)
					return -EBADMSG;
				sum += m->len[i];
			}
			if (m->n && sum != h->ext_len)
				return -EBADMSG;
		}
	/* copy 0 has both areas; copy 1 both or none */
	if (!h->area[0][0].n || !h->area[1][0].n || !h->area[0][1].n != !h->area[1][1].n)
		return -EBADMSG;
	/* no two pieces on one member overlap */
	for (int c = 0; c < 2; c++)
		for (int a = 0; a < 2; a++)
			for (uint32_t i = 0; i < h->area[a][c].n; i++)
				for (int a2 = a; a2 < 2; a2++)
					for (uint32_t k = a2 == a ? i + 1 : 0; k < h->area[a2][c].n; k++) {
						uint64_t x = h->area[a][c].off[i], xl = h->area[a][c].len[i];
						uint64_t y = h->area[a2][c].off[k], yl = h->area[a2][c].len[k];

						if (x < y + yl && y < x + xl)
							return -EBADMSG;
					}
	return 0;
}

void fmt_loghdr_encode(const struct fmt_loghdr *h, uint8_t b[DMAFS_BLOCK])
{
	memset(b, 0, DMAFS_BLOCK);
	memcpy(b, FMT_LOG_MAGIC, 8);
	put_u32(b + 8, h->version ? h->version : FMT_VERSION);
	memcpy(b + 16, h->fs_uuid, 16);
	put_u64(b + 32, h->gen);
	put_u64(b + 40, h->first_seq);
	put_u64(b + 48, h->next_ino);
	put_u64(b + 56, h->snap_len);
	put_u64(b + 64, h->snap_xxh3);
	if (h->ext_len) { /* version 4 only: the caller sets the version */
		uint8_t *p = b + 88;

		put_u64(b + 72, h->ext_len);
		for (int a = 0; a < 2; a++)
			for (int c = 0; c < 2; c++) {
				const struct fmt_area *m = &h->area[a][c];

				b[80 + 2 * a + c] = (uint8_t)m->n;
				for (uint32_t i = 0; i < m->n && i < FMT_LOG_PIECES; i++, p += 16) {
					put_u64(p, m->off[i]);
					put_u64(p + 8, m->len[i]);
				}
			}
	}
	put_u64(b + 4088, fmt_hash(b, 4088));
}

int fmt_loghdr_decode(const uint8_t b[DMAFS_BLOCK], struct fmt_loghdr *h)
{
	if (memcmp(b, FMT_LOG_MAGIC, 8))
		return -ENODATA;
	h->version = get_u32(b + 8);
	if (get_u64(b + 4088) != fmt_hash(b, 4088) || h->version < FMT_VERSION_MIN ||
	    h->version > FMT_VERSION_MAX)
		return -EBADMSG;
	memcpy(h->fs_uuid, b + 16, 16);
	h->gen = get_u64(b + 32);
	h->first_seq = get_u64(b + 40);
	h->next_ino = get_u64(b + 48);
	h->snap_len = get_u64(b + 56);
	h->snap_xxh3 = get_u64(b + 64);
	return decode_areas(b, h);
}

void fmt_txhdr_encode(const struct fmt_txhdr *h, uint8_t b[FMT_TX_HDR])
{
	memset(b, 0, FMT_TX_HDR);
	memcpy(b, FMT_TX_MAGIC, 8);
	put_u64(b + 8, h->gen);
	put_u64(b + 16, h->seq);
	put_u32(b + 24, h->payload_len);
	put_u64(b + 32, h->payload_xxh3);
	put_u64(b + 40, fmt_hash(b, 40));
}

int fmt_txhdr_decode(const uint8_t b[FMT_TX_HDR], struct fmt_txhdr *h)
{
	if (memcmp(b, FMT_TX_MAGIC, 8))
		return -ENODATA;
	if (get_u64(b + 40) != fmt_hash(b, 40))
		return -EBADMSG;
	h->gen = get_u64(b + 8);
	h->seq = get_u64(b + 16);
	h->payload_len = get_u32(b + 24);
	h->payload_xxh3 = get_u64(b + 32);
	return 0;
}

/* Record layout: u16 type, u32 body length, body. Fixed-size body prefixes per type: */
#define INODE_V2 (8 + 4 * 4 + 8 * 2 + 8 * 3 + 4) /* version 2's INODE body */
#define INODE_V3 (INODE_V2 + 4 + 4)		 /* ... with generation and flags */

static size_t fixed_len(uint16_t type)
{
	switch (type) {
	case REC_INODE: return INODE_V2;
	case REC_SYMLINK: return 8;
	case REC_EXTENT: return 8 + 8 + 4 + 4 + 8;
	case REC_TRUNC: return 16;
	case REC_IDEL: return 8;
	case REC_LINK: return 16;
	case REC_UNLINK: return 8;
	case REC_XSET: return 8 + 2;
	case REC_XDEL: return 8;
	case REC_PUNCH: return 24;
	default: return 0;
	}
}

/* the name's length for the record types that carry one, 0 for the rest; -EINVAL past the limit */
static int name_len(const struct fmt_rec *r, size_t *nl)
{
	*nl = r->name_len;
	switch (r->type) {
	case REC_LINK: case REC_UNLINK:
		if (*nl == 0 || *nl > FMT_NAME_MAX)
			return -EINVAL;
		break;
	case REC_SYMLINK:
		if (*nl == 0 || *nl > FMT_SYMLINK_MAX)
			return -EINVAL;
		break;
	case REC_XSET: case REC_XDEL:
		if (*nl == 0 || *nl > FMT_XATTR_NAME_MAX || r->val_len > FMT_XATTR_VALUE_MAX)
			return -EINVAL;
		break;
	default:
		*nl = 0;
	}
	return 0;
}

static void put_inode(uint8_t *p, const struct fmt_rec *r, size_t fl)
{
	put_u32(p + 8, r->a.mode);
	put_u32(p + 12, r->a.uid);
	put_u32(p + 16, r->a.gid);
	put_u32(p + 20, r->a.nlink);
	put_u64(p + 24, r->a.rdev);
	put_u64(p + 32, r->a.size);
	put_u64(p + 40, (uint64_t)r->a.atime);
	put_u64(p + 48, (uint64_t)r->a.mtime);
	put_u64(p + 56, (uint64_t)r->a.ctime);
	put_u32(p + 64, r->a.start_member);
	if (fl == INODE_V3) {
		put_u32(p + 68, r->a.generation);
		put_u32(p + 72, r->a.flags);
	}
}

/* the fixed part of a record after its inode number, at p */
static void put_fixed(uint8_t *p, const struct fmt_rec *r, size_t fl, size_t nl)
{
	switch (r->type) {
	case REC_INODE:
		put_inode(p, r, fl);
		break;
	case REC_EXTENT:
		put_u64(p + 8, r->off);
		put_u32(p + 16, r->len);
		put_u32(p + 20, r->member);
		put_u64(p + 24, r->moff);
		break;
	case REC_TRUNC:
		put_u64(p + 8, r->off);
		break;
	case REC_PUNCH:
		put_u64(p + 8, r->off);
		put_u64(p + 16, r->plen);
		break;
	case REC_LINK:
		put_u64(p + 8, r->dir);
		break;
	case REC_UNLINK:
		put_u64(p, r->dir); /* UNLINK carries only the directory */
		break;
	case REC_XSET:
		put_u16(p + 8, nl);
		break;
	}
}

int fmt_rec_encode(struct buf *b, const struct fmt_rec *r)
{
	size_t fl = fixed_len(r->type), body, nl;
	uint8_t *p;
	int ret;

	if (!fl)
		return -EINVAL;
	ret = name_len(r, &nl);
	if (ret)
		return ret;
	/* the version 2 form where it says everything: version 2 filesystems keep it */
	if (r->type == REC_INODE && (r->a.generation || r->a.flags))
		fl = INODE_V3;
	body = fl + nl + (r->type == REC_XSET ? r->val_len : 0);
	ret = buf_reserve(b, 6 + body);
	if (ret)
		return ret;
	p = b->p + b->len;
	put_u16(p, r->type);
	put_u32(p + 2, body);
	p += 6;
	put_u64(p, r->ino);
	put_fixed(p, r, fl, nl);
	if (nl)
		memcpy(p + fl, r->name, nl);
	if (r->type == REC_XSET && r->val_len)
		memcpy(p + fl + nl, r->val, r->val_len);
	b->len += 6 + body;
	return 0;
}

/* rest: the bytes past the version 2 inode, the version 3 fields or none */
static int get_inode(const uint8_t *p, size_t rest, struct fmt_rec *r)
{
	r->a.mode = get_u32(p + 8);
	r->a.uid = get_u32(p + 12);
	r->a.gid = get_u32(p + 16);
	r->a.nlink = get_u32(p + 20);
	r->a.rdev = get_u64(p + 24);
	r->a.size = get_u64(p + 32);
	r->a.atime = (int64_t)get_u64(p + 40);
	r->a.mtime = (int64_t)get_u64(p + 48);
	r->a.ctime = (int64_t)get_u64(p + 56);
	r->a.start_member = get_u32(p + 64);
	if (rest == INODE_V3 - INODE_V2) {
		r->a.generation = get_u32(p + 68);
		r->a.flags = get_u32(p + 72);
		if (r->a.flags & ~FMT_IFL_KNOWN)
			return -EBADMSG;
	} else if (rest) {
		return -EBADMSG;
	}
	return 0;
}

/* extents, truncations, punches and inode deletions: fixed size, no name */
static int get_span(const uint8_t *p, size_t rest, struct fmt_rec *r)
{
	switch (r->type) {
	case REC_EXTENT:
		r->off = get_u64(p + 8);
		r->len = get_u32(p + 16);
		r->member = get_u32(p + 20);
		r->moff = get_u64(p + 24);
		if (rest || !r->len || r->len % DMAFS_BLOCK || r->off % DMAFS_BLOCK ||
		    r->moff % DMAFS_BLOCK || r->member >= FMT_MAX_MEMBERS ||
		    r->off + r->len < r->off)
			return -EBADMSG;
		break;
	case REC_TRUNC:
		r->off = get_u64(p + 8);
		if (rest)
			return -EBADMSG;
		break;
	case REC_PUNCH:
		r->off = get_u64(p + 8);
		r->plen = get_u64(p + 16);
		if (rest || !r->plen || r->off % DMAFS_BLOCK || r->plen % DMAFS_BLOCK ||
		    r->off + r->plen < r->off)
			return -EBADMSG;
		break;
	case REC_IDEL:
		if (rest)
			return -EBADMSG;
		break;
	}
	return 0;
}

/* links, unlinks, symlinks and extended attributes: the name (and value) follow the fixed part */
static int get_named(const uint8_t *p, size_t fl, size_t rest, struct fmt_rec *r)
{
	switch (r->type) {
	case REC_LINK: case REC_UNLINK:
		if (r->type == REC_LINK)
			r->dir = get_u64(p + 8);
		else {
			r->dir = r->ino;
			r->ino = 0;
		}
		if (rest == 0 || rest > FMT_NAME_MAX || memchr(p + fl, '/', rest) ||
		    memchr(p + fl, 0, rest))
			return -EBADMSG;
		r->name = p + fl;
		r->name_len = rest;
		break;
	case REC_SYMLINK:
		if (rest == 0 || rest > FMT_SYMLINK_MAX || memchr(p + fl, 0, rest))
			return -EBADMSG;
		r->name = p + fl;
		r->name_len = rest;
		break;
	case REC_XSET: {
		size_t nl = get_u16(p + 8);
		if (nl == 0 || nl > FMT_XATTR_NAME_MAX || nl > rest ||
		    rest - nl > FMT_XATTR_VALUE_MAX || memchr(p + fl, 0, nl))
			return -EBADMSG;
		r->name = p + fl;
		r->name_len = nl;
		r->val = p + fl + nl;
		r->val_len = rest - nl;
		break;
	}
	case REC_XDEL:
		if (rest == 0 || rest > FMT_XATTR_NAME_MAX || memchr(p + fl, 0, rest))
			return -EBADMSG;
		r->name = p + fl;
		r->name_len = rest;
		break;
	}
	return 0;
}

int fmt_rec_decode(const uint8_t *buf, size_t len, size_t *pos, struct fmt_rec *r)
{
	size_t fl, body, rest;
	const uint8_t *p;
	int ret;

	if (*pos == len)
		return 0;
	if (len - *pos < 6)
		return -EBADMSG;
	p = buf + *pos;
	memset(r, 0, sizeof(*r));
	r->type = get_u16(p);
	body = get_u32(p + 2);
	fl = fixed_len(r->type);
	if (!fl || body < fl || body > len - *pos - 6)
		return -EBADMSG;
	p += 6;
	rest = body - fl;
	r->ino = get_u64(p);
	switch (r->type) {
	case REC_INODE:
		ret = get_inode(p, rest, r);
		break;
	case REC_EXTENT: case REC_TRUNC: case REC_PUNCH: case REC_IDEL:
		ret = get_span(p, rest, r);
		break;
	default: /* fixed_len() knows no other types */
		ret = get_named(p, fl, rest, r);
	}
	if (ret)
		return ret;
	*pos += 6 + body;
	return 1;
}
