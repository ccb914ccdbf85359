/* SPDX-License-Identifier: MIT */
/*
 * hash.h - intrusive chained hash tables for inodes (by number) and directory entries (by
 * name). Written here because none of the project's libraries provides one with delete;
 * glibc's hsearch cannot remove entries.
 */
#ifndef DMAFS_HASH_H
#define DMAFS_HASH_H

#include <stddef.h>
#include <stdint.h>

struct hnode {
	struct hnode *next;
	uint64_t key; /* inode number, or the name's hash */
};

struct htab {
	struct hnode **b;
	size_t nb, n;
};

int htab_init(struct htab *t, size_t nb);
void htab_destroy(struct htab *t);
/* Insert (duplicates allowed: names with equal hashes). Grows at load 1. Returns 0/-ENOMEM. */
int htab_insert(struct htab *t, struct hnode *n);
void htab_remove(struct htab *t, struct hnode *n);
/* Grow the table to hold @n entries without growing again (a replay that knows its size
 * rehashes once, not twenty times). Best effort: 0 or -ENOMEM, the table still usable. */
int htab_reserve(struct htab *t, size_t n);
/* Ask the CPU to bring in what a lookup of @key reads: with @bytes 0 its bucket, else
 * (once the bucket is in) the first @bytes of the bucket's first node, where the caller's
 * structure around the node keeps what it will touch. No effect on the table. */
void htab_prefetch(const struct htab *t, uint64_t key, size_t bytes);
/* The bucket @key falls in: keys taken in this order meet the table in address order. */
size_t htab_slot(const struct htab *t, uint64_t key);
/* First node with @key; continue with htab_next. */
struct hnode *htab_first(const struct htab *t, uint64_t key);
struct hnode *htab_next(struct hnode *n, uint64_t key);

#endif
