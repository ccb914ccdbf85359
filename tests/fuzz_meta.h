/* SPDX-License-Identifier: MIT */
/*
 * fuzz_meta.h - what fuzz_meta's files share: the image model (its types here, its
 * functions and the random values in fuzz_meta-model.c), the mutations (fuzz_meta-mutate.c),
 * one input's run (fuzz_meta-run.c), the seeds and regression inputs (fuzz_meta-seeds.c),
 * and the counters and findings of fuzz_meta.c, which also holds main().
 */
#ifndef FUZZ_META_H
#define FUZZ_META_H

#include <stddef.h>
#include <stdint.h>

#include "format/format.h"

#define MAXM 4		  /* members given to a fuzzed mount */
#define MAXREC 1024	  /* records in one list (snapshot or batch payload) */
#define MAXBATCH 96	  /* batches in one half */
#define NTYPES 12	  /* record types 0..10, and 11 for any other */

/* ---------------------------------------------------------------- the image model */

/* One record as the log holds it: type, body, and how far body_len lies about the body. */
struct frec {
	uint16_t type;
	int64_t ldelta;
	size_t blen;
	uint8_t *body;
};

struct rlist {
	struct frec *r;
	size_t n, cap;
};

struct batch {
	uint64_t gen, seq;
	int64_t pdelta; /* payload_len minus the real payload length */
	int bad;	/* 1: payload checksum broken on purpose, 2: header checksum */
	struct rlist recs;
};

struct half {
	int present;
	int bad;     /* 1: snapshot checksum broken on purpose, 2: header checksum */
	int baduuid; /* header names another filesystem */
	uint64_t gen, first_seq, next_ino;
	int64_t sdelta; /* snap_len minus the real snapshot length */
	struct rlist snap;
	struct batch *b;
	size_t nb;
};

enum { SB_OK, SB_ABSENT, SB_BADSUM };

struct img {
	unsigned n;    /* members given to members_open */
	uint64_t half; /* log half the logs are laid out with */
	uint64_t fsize[MAXM];
	struct fmt_sb sb[MAXM][2]; /* primary, copy */
	int sbstate[MAXM][2];
	struct half log[2][2]; /* copy (member 0, member 1), half (A, B) */
};

/* ---------------------------------------------------------------- fuzz_meta.c */

/* Counters of how far the inputs got and which check stopped them. */
struct counts {
	unsigned long inputs, sabotaged, open_ok, sb_gate, gate, jopen_ok, copy_damaged, older;
	unsigned long no_root, bad_extent, mountable, cleaned, compacted, compact_nospc, reopened;
	unsigned long compact_gen;
	unsigned long open_err[8], jopen_err[9];
	unsigned long sb[5], lh[3], tx[3], buffers;
	unsigned long dec_ok[NTYPES], dec_bad[NTYPES], app_ok[NTYPES], app_bad[NTYPES];
};
extern struct counts st;
extern const char *cur_what; /* a seed or regression input rather than a mutated one */
/* Counting is on only while members_open and the first journal_open of an input run. */
extern int counting, replay_seen;

/* A broken invariant: say which input, then abort (or count it, with -k). */
void bug(const char *fmt, ...);
/* The counter index of record type @t (NTYPES - 1: any unknown type). */
unsigned tix(unsigned t);
/* The index of @ret in @codes, or @n when it is none of them. */
int err_ix(int ret, int n, const int *codes);

/* ---------------------------------------------------------------- fuzz_meta-model.c */

void rl_free(struct rlist *l);
void *xrealloc(void *p, size_t n);
/* Insert a copy of @r (which may be in @l) at @at (clamped). Lists stop at MAXREC. */
void rl_insert(struct rlist *l, size_t at, const struct frec *r);
void rl_remove(struct rlist *l, size_t at);
void rl_clone(struct rlist *d, const struct rlist *s);
/* Split encoded records (as fmt_rec_encode wrote them) into a list. */
void rl_from(struct rlist *l, const uint8_t *p, size_t len);
size_t rl_bytes(const struct rlist *l);
/* Encode the list at @dst, writing no more than @room bytes; returns the full length. */
size_t rl_encode(const struct rlist *l, uint8_t *dst, size_t room);
void half_free(struct half *h);
void half_clone(struct half *d, const struct half *s);
void img_free(struct img *im);
void img_clone(struct img *d, const struct img *s);

/* Random values: the state of rnd(), which mix() of the run's seed and an input's index sets. */
extern uint64_t rs;
uint64_t rnd(void);
uint64_t mix(uint64_t a, uint64_t b);
/* An interesting value for a field of @bytes bytes that holds @cur. */
uint64_t pick(uint64_t cur, unsigned bytes);
void put_n(uint8_t *p, unsigned bytes, uint64_t v);
uint64_t get_n(const uint8_t *p, unsigned bytes);

/* Record knowledge. */
struct field {
	uint8_t off, bytes;
};

/* The numeric fields of a record body, by type; fields[t][0] is the inode number. */
extern const struct field fields[NTYPES][12];
/* Fixed body bytes of each type (format.c's table; names and values follow). */
size_t fixed_of(uint16_t t);
int has_name(uint16_t t);
size_t nfields(uint16_t t);
/* The values of @im's own fields, for pick() to make two fields agree. */
void pool_img(const struct img *im);

/* ---------------------------------------------------------------- fuzz_meta-mutate.c */

/* Images a mutation may take records from (the seeds). */
extern const struct img *donors;
extern size_t ndonors;
void renumber(struct half *h);
/* Apply one mutation. Most go to log copy 0 and are copied to copy 1 (the mirrors agree). */
void mutate(struct img *im);

/* ---------------------------------------------------------------- fuzz_meta-run.c */

extern int mfd[MAXM];		/* the member images (memfds) */
extern int use_members_open;	/* 0: before Linux 6.6, superblocks read with member_read_sb */
extern uint8_t fs_uuid[16];
extern int verbose;		/* -v */
/* Write the members of @im into the memfds: everything zero but what the image holds. */
void write_images(const struct img *im);

/* The stages of the mount, where an input stops. */
enum { AT_MEMBERS, AT_JOURNAL, AT_MOUNT_CHECKS, AT_COMPACTION, AT_MOUNTED };

/* The mount sequence of fs_mount on the member images, with the invariants. Returns the
 * AT_* stage that stopped it. */
int run_one(const struct img *im, int ro, int older);

/* ---------------------------------------------------------------- fuzz_meta-seeds.c */

/* The built-in images, made by make_seeds(). */
extern struct img seeds[8];
extern size_t nseeds;
void make_seeds(void);
/* Run the regression inputs; 1 when one stopped at another stage than expected. */
int run_regressions(void);

#endif
