// SPDX-License-Identifier: MIT
/* hash.c - intrusive chained hash table with power-of-two buckets. */
#include "util/hash.h"

#include <errno.h>
#include <stdlib.h>

static uint64_t hash_u64(uint64_t x)
{
	x ^= x >> 33;
	x *= 0xff51afd7ed558ccdull;
	x ^= x >> 33;
	return x;
}

int htab_init(struct htab *t, size_t nb)
{
	t->nb = nb;
	t->n = 0;
	t->b = calloc(nb, sizeof(*t->b));
	return t->b ? 0 : -ENOMEM;
}

void htab_destroy(struct htab *t)
{
	free(t->b);
	t->b = NULL;
	t->nb = t->n = 0;
}

size_t htab_slot(const struct htab *t, uint64_t key) { return hash_u64(key) & (t->nb - 1); }

static int resize(struct htab *t, size_t nb)
{
	struct hnode **b = calloc(nb, sizeof(*b));

	if (!b)
		return -ENOMEM; /* keep working with longer chains */
	for (size_t i = 0; i < t->nb; i++) {
		struct hnode *n = t->b[i], *next;

		for (; n; n = next) {
			size_t s = hash_u64(n->key) & (nb - 1);

			next = n->next;
			n->next = b[s];
			b[s] = n;
		}
	}
	free(t->b);
	t->b = b;
	t->nb = nb;
	return 0;
}

int htab_reserve(struct htab *t, size_t n)
{
	size_t nb = t->nb;

	while (nb < n && nb < ((size_t)1 << 40))
		nb *= 2;
	return nb > t->nb ? resize(t, nb) : 0;
}

int htab_insert(struct htab *t, struct hnode *n)
{
	size_t s;

	if (t->n >= t->nb)
		resize(t, t->nb * 2);
	s = htab_slot(t, n->key);
	n->next = t->b[s];
	t->b[s] = n;
	t->n++;
	return 0;
}

void htab_remove(struct htab *t, struct hnode *n)
{
	struct hnode **pp = &t->b[htab_slot(t, n->key)];

	for (; *pp; pp = &(*pp)->next) {
		if (*pp == n) {
			*pp = n->next;
			t->n--;
			return;
		}
	}
}

void htab_prefetch(const struct htab *t, uint64_t key, size_t bytes)
{
	struct hnode *const *b = &t->b[htab_slot(t, key)];
	const char *p;

	if (!bytes) {
		__builtin_prefetch(b); /* no load of it: that would wait for it */
		return;
	}
	p = (const char *)*b;
	if (!p)
		return;
	/* every cache line of [p, p + bytes): the node need not start one */
	for (size_t o = 0; o < bytes; o += 64)
		__builtin_prefetch(p + o);
	__builtin_prefetch(p + bytes - 1);
}

struct hnode *htab_first(const struct htab *t, uint64_t key)
{
	struct hnode *n = t->b[htab_slot(t, key)];

	while (n && n->key != key)
		n = n->next;
	return n;
}

struct hnode *htab_next(struct hnode *n, uint64_t key)
{
	for (n = n->next; n && n->key != key; n = n->next)
		;
	return n;
}
