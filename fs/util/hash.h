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
/* Ask the CPU to bring in what a lookup of @key reads: with @node 0 its bucket, with
 * @node 1 (once the bucket is in) the bucket's first node. No effect on the table. */
void htab_prefetch(const struct htab *t, uint64_t key, int node);
/* First node with @key; continue with htab_next. */
struct hnode *htab_first(const struct htab *t, uint64_t key);
struct hnode *htab_next(struct hnode *n, uint64_t key);

#endif
