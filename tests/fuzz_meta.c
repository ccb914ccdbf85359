// SPDX-License-Identifier: MIT
/*
 * Description: structure-aware fuzz run of the metadata a mount reads, built with
 * AddressSanitizer and UndefinedBehaviorSanitizer: superblocks (primary and copy), both
 * halves of both log copies, their snapshots, batches and records. Each input is one of the
 * built-in filesystem images (made with the fmt_*_encode functions and meta_snapshot) whose
 * fields are set to boundary values and to values of other fields (counts, lengths, offsets,
 * inode numbers, extents, names, sequence numbers, record types, geometry), whose records
 * are spliced, duplicated and reordered, and whose checksums are then all computed again
 * with the format's own encoders, so that the input gets past the checksums to the checks
 * behind them. Every input goes through the mount sequence of fs_mount: members_open,
 * journal_open (replay through fmt_rec_decode and meta_apply), the root check, meta_cleanup,
 * the extent check (alloc_mark_used), a compaction and journal_open again. A crash, a
 * sanitizer report or a broken invariant fails the run:
 *   - an accepted superblock keeps its regions inside the member and apart from each
 *     other, and accepted log members agree on the log geometry;
 *   - a replayed state is well formed (extents sorted, block aligned, not wrapping, on their
 *     stripe unit's member; directory slots and names in step; xattr byte counts; next_ino
 *     beyond every inode number);
 *   - after meta_cleanup no directory entry names a missing inode;
 *   - meta_snapshot of the state replays to the same state, in memory and through a
 *     compaction written to the log and replayed by journal_open.
 * Before the mutated inputs come the built-in images as they are (each must mount) and the
 * regression inputs: inputs that once broke an invariant, each of which must now stop at a
 * given check. It ends with counters of how far the inputs got and which check stopped them.
 *
 * Usage: fuzz_meta [-kv] [-n N] [-s SEED] [-i INDEX [-d DIR]]
 *   -n N      number of inputs (default 3000)
 *   -s SEED   seed of the run; input INDEX is the same in every run with the same seed
 *   -i INDEX  run input INDEX only, to look at a finding again
 *   -d DIR    with -i: also write the member images as DIR/member-K.img (dmafs-fsck reads them)
 *   -k        report broken invariants and go on; exit 1 at the end
 *   -v        describe each input and what journal_open made of it
 * The member images are memfds, opened by members_open through /proc/self/fd (O_DIRECT on
 * tmpfs needs Linux 6.6; before it the superblocks are read with member_read_sb instead and
 * the member set checks are not run, which the run says). tests/fuzz_meta.sh runs it.
 *
 * The counters of the calls that replay makes come from wrappers that the link puts around
 * fmt_sb_decode, fmt_loghdr_decode, fmt_txhdr_decode, fmt_rec_decode and meta_apply
 * (ld --wrap, tests/robust.am), so they count what the real code reached, with no hook in fs/.
 *
 * This file holds the counters and those wrappers, and the driver (main); the image model
 * is in fuzz_meta-model.c, the mutations in fuzz_meta-mutate.c, one input's run and its
 * invariants in fuzz_meta-run.c, the seeds and regression inputs in fuzz_meta-seeds.c.
 * fuzz_meta.h declares what they share.
 */
#include <errno.h>
#include <fcntl.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <unistd.h>

#include "format/format.h"
#include "store/journal.h"
#include "io/member.h"
#include "store/meta.h"
#include "util/util.h"

#include "fuzz_meta.h"

/* ---------------------------------------------------------------- counters and findings */

static int keep_going;
static unsigned long findings;
static unsigned long long cur_seed, cur_index;
const char *cur_what; /* a seed or regression input rather than a mutated one */

void bug(const char *fmt, ...)
{
	va_list ap;

	fprintf(stderr, "fuzz_meta: broken invariant: ");
	va_start(ap, fmt);
	vfprintf(stderr, fmt, ap);
	va_end(ap);
	if (cur_what)
		fprintf(stderr, "\nfuzz_meta: %s\n", cur_what);
	else
		fprintf(stderr, "\nfuzz_meta: input %llu of seed %llu; again with: fuzz_meta -s %llu -i %llu\n",
			cur_index, cur_seed, cur_seed, cur_index);
	if (!keep_going)
		abort();
	findings++;
}

struct counts st;

/* Which members_open rejection, by the check that made it. */
static const char *const open_why[8] = {
	"no superblock (magic)", "superblock checksum", "format version", "superblock fields",
	"member set (uuid, index, count, geometry, size)", "another filesystem", "member order",
	"read error (member shorter than its superblock) or other"
};
static const char *const jopen_why[9] = {
	"no valid log header", "snapshot length", "snapshot checksum", "snapshot record",
	"batch record", "no older generation", "read error", "out of memory", "other"
};
static const char *const tname[NTYPES] = {
	"type 0", "INODE", "SYMLINK", "EXTENT", "TRUNC", "IDEL", "LINK", "UNLINK", "XSET", "XDEL",
	"PUNCH", "unknown"
};

/* Counting is on only while members_open and the first journal_open of an input run. */
int counting, replay_seen;

unsigned tix(unsigned t) { return t < NTYPES - 1 ? t : NTYPES - 1; }

int err_ix(int ret, int n, const int *codes)
{
	for (int i = 0; i < n; i++)
		if (ret == codes[i])
			return i;
	return n;
}

int __real_fmt_sb_decode(const uint8_t buf[FMT_SB_SIZE], struct fmt_sb *sb);
int __wrap_fmt_sb_decode(const uint8_t buf[FMT_SB_SIZE], struct fmt_sb *sb);
int __wrap_fmt_sb_decode(const uint8_t buf[FMT_SB_SIZE], struct fmt_sb *sb)
{
	static const int codes[] = { 0, -ENODATA, -EBADMSG, -EPROTONOSUPPORT };
	int ret = __real_fmt_sb_decode(buf, sb);

	if (counting)
		st.sb[err_ix(ret, 4, codes)]++;
	if (ret && ret != -ENODATA && ret != -EBADMSG && ret != -EPROTONOSUPPORT && ret != -EUCLEAN)
		bug("fmt_sb_decode returned %d", ret);
	return ret;
}

int __real_fmt_loghdr_decode(const uint8_t buf[DMAFS_BLOCK], struct fmt_loghdr *h);
int __wrap_fmt_loghdr_decode(const uint8_t buf[DMAFS_BLOCK], struct fmt_loghdr *h);
int __wrap_fmt_loghdr_decode(const uint8_t buf[DMAFS_BLOCK], struct fmt_loghdr *h)
{
	static const int codes[] = { 0, -ENODATA };
	int ret = __real_fmt_loghdr_decode(buf, h);

	if (counting)
		st.lh[err_ix(ret, 2, codes)]++;
	if (ret && ret != -ENODATA && ret != -EBADMSG)
		bug("fmt_loghdr_decode returned %d", ret);
	return ret;
}

int __real_fmt_txhdr_decode(const uint8_t buf[FMT_TX_HDR], struct fmt_txhdr *h);
int __wrap_fmt_txhdr_decode(const uint8_t buf[FMT_TX_HDR], struct fmt_txhdr *h);
int __wrap_fmt_txhdr_decode(const uint8_t buf[FMT_TX_HDR], struct fmt_txhdr *h)
{
	static const int codes[] = { 0, -ENODATA };
	int ret = __real_fmt_txhdr_decode(buf, h);

	if (counting)
		st.tx[err_ix(ret, 2, codes)]++;
	if (ret && ret != -ENODATA && ret != -EBADMSG)
		bug("fmt_txhdr_decode returned %d", ret);
	return ret;
}

int __real_fmt_rec_decode(const uint8_t *buf, size_t len, size_t *pos, struct fmt_rec *r);
int __wrap_fmt_rec_decode(const uint8_t *buf, size_t len, size_t *pos, struct fmt_rec *r);
int __wrap_fmt_rec_decode(const uint8_t *buf, size_t len, size_t *pos, struct fmt_rec *r)
{
	size_t at = *pos;
	unsigned t = at + 2 <= len ? tix(get_u16(buf + at)) : NTYPES - 1;
	int ret = __real_fmt_rec_decode(buf, len, pos, r);

	if (ret > 0 && (*pos <= at || *pos > len || (r->name_len && (r->name < buf ||
	    r->name + r->name_len > buf + len)) || (r->val_len && (r->val < buf ||
	    r->val + r->val_len > buf + len))))
		bug("fmt_rec_decode of type %u at %zu: position %zu or name/value outside the buffer of %zu",
		    t, at, *pos, len);
	if (ret < 0 && ret != -EBADMSG)
		bug("fmt_rec_decode returned %d", ret);
	if (ret > 0 && *pos - at - 6 > UINT32_MAX)
		bug("fmt_rec_decode consumed more than a body can hold");
	if (!counting)
		return ret;
	replay_seen = 1;
	if (at == 0)
		st.buffers++;
	if (ret > 0)
		st.dec_ok[t]++;
	else if (ret < 0)
		st.dec_bad[t]++;
	return ret;
}

int __real_meta_apply(struct meta *m, const struct fmt_rec *r);
int __wrap_meta_apply(struct meta *m, const struct fmt_rec *r);
int __wrap_meta_apply(struct meta *m, const struct fmt_rec *r)
{
	int ret = __real_meta_apply(m, r);

	if (ret && ret != -EUCLEAN && ret != -ENOMEM)
		bug("meta_apply of type %u returned %d", r->type, ret);
	if (counting)
		(ret ? st.app_bad : st.app_ok)[tix(r->type)]++;
	return ret;
}

/* ---------------------------------------------------------------- driver */

static void dump(const char *dir, unsigned n)
{
	char path[4096];
	uint8_t *b = xrealloc(NULL, 1 << 20);

	for (unsigned i = 0; i < n; i++) {
		ssize_t got;
		off_t off = 0;
		int fd;

		snprintf(path, sizeof(path), "%s/member-%u.img", dir, i);
		fd = open(path, O_WRONLY | O_CREAT | O_TRUNC, 0644);
		if (fd < 0) {
			perror(path);
			exit(2);
		}
		while ((got = pread(mfd[i], b, 1 << 20, off)) > 0) {
			int zero = 1;

			for (ssize_t k = 0; k < got && zero; k++)
				zero = !b[k];
			if (!zero && pwrite(fd, b, got, off) != got) {
				perror(path);
				exit(2);
			}
			off += got;
		}
		if (ftruncate(fd, off) || close(fd)) {
			perror(path);
			exit(2);
		}
		printf("fuzz_meta: wrote %s\n", path);
	}
	free(b);
}

static void report(void)
{
	unsigned long dec = 0, decbad = 0, app = 0, appbad = 0;

	printf("fuzz_meta: %lu inputs (%lu with a checksum broken on purpose)\n", st.inputs,
	       st.sabotaged);
	printf("  members_open: accepted %lu; rejected by", st.open_ok);
	for (int i = 0; i < 8; i++)
		printf("%s %s %lu", i ? "," : "", open_why[i], st.open_err[i]);
	/* superblocks missing, unreadable or failing their checksum stop an input before the rest */
	st.sb_gate = st.inputs - st.open_err[0] - st.open_err[1] - st.open_err[7];
	printf("\n  superblocks past their checksums: %lu; past every checksum (superblocks, a log header, the snapshot) and into replay: %lu\n",
	       st.sb_gate, st.gate);
	printf("  journal_open: accepted %lu (a damaged copy passed over %lu, older generation %lu); rejected by",
	       st.jopen_ok, st.copy_damaged, st.older);
	for (int i = 0; i < 9; i++)
		printf("%s %s %lu", i ? "," : "", jopen_why[i], st.jopen_err[i]);
	printf("\n  mount checks: no root directory %lu, extents outside the data region or shared %lu, mountable %lu\n",
	       st.no_root, st.bad_extent, st.mountable);
	printf("  meta_cleanup repaired %lu; compacted %lu (log full %lu, generation at its limit %lu), compaction replayed to the same state %lu\n",
	       st.cleaned, st.compacted, st.compact_nospc, st.compact_gen, st.reopened);
	printf("  fmt_sb_decode: accepted %lu, no magic %lu, checksum %lu, version %lu, fields %lu\n",
	       st.sb[0], st.sb[1], st.sb[2], st.sb[3], st.sb[4]);
	printf("  fmt_loghdr_decode: accepted %lu, no magic %lu, checksum or version %lu\n",
	       st.lh[0], st.lh[1], st.lh[2]);
	printf("  fmt_txhdr_decode: accepted %lu, no magic %lu, checksum %lu; record buffers replayed (snapshots and batch payloads) %lu\n",
	       st.tx[0], st.tx[1], st.tx[2], st.buffers);
	printf("  records in replay: decoded / malformed (fmt_rec_decode), applied / rejected (meta_apply):\n");
	for (int t = 0; t < NTYPES; t++) {
		dec += st.dec_ok[t];
		decbad += st.dec_bad[t];
		app += st.app_ok[t];
		appbad += st.app_bad[t];
		if (st.dec_ok[t] || st.dec_bad[t] || st.app_ok[t] || st.app_bad[t])
			printf("    %-8s %8lu / %-6lu %8lu / %lu\n", tname[t], st.dec_ok[t],
			       st.dec_bad[t], st.app_ok[t], st.app_bad[t]);
	}
	printf("    %-8s %8lu / %-6lu %8lu / %lu\n", "all", dec, decbad, app, appbad);
}

int main(int argc, char **argv)
{
	unsigned long long n = 3000, seed = 1, only = ~0ull;
	const char *dir = NULL;
	struct member *ms;
	char err[1024];
	int opt, ret;

	while ((opt = getopt(argc, argv, "kvn:s:i:d:")) != -1) {
		switch (opt) {
		case 'k': keep_going = 1; break;
		case 'v': verbose = 1; break;
		case 'n': n = strtoull(optarg, NULL, 0); break;
		case 's': seed = strtoull(optarg, NULL, 0); break;
		case 'i': only = strtoull(optarg, NULL, 0); break;
		case 'd': dir = optarg; break;
		default:
			fprintf(stderr, "usage: %s [-kv] [-n N] [-s SEED] [-i INDEX [-d DIR]]\n", argv[0]);
			return 2;
		}
	}
	util_log_set_level(-1); /* replay's warnings about damaged copies are expected here */
	for (int i = 0; i < MAXM; i++) {
		mfd[i] = memfd_create("dmafs-fuzz-member", MFD_CLOEXEC);
		if (mfd[i] < 0) {
			perror("fuzz_meta: SKIP: memfd_create");
			return 77;
		}
	}
	make_seeds();
	cur_seed = seed;
	/* members_open needs O_DIRECT on the memfds; then every seed must mount as it is. */
	{
		char list[64];

		write_images(&seeds[0]);
		snprintf(list, sizeof(list), "/proc/self/fd/%d", mfd[0]);
		ret = members_open(list, 1, &ms, err, sizeof(err));
		if (ret == -EINVAL && strstr(err, "O_DIRECT")) {
			use_members_open = 0;
			printf("fuzz_meta: note: no O_DIRECT on memfds (%s): superblocks are read with member_read_sb and the member set checks of members_open are not run\n",
			       err);
		} else if (ret < 0) {
			fprintf(stderr, "fuzz_meta: the first seed does not open: %s\n", err);
			return 1;
		} else {
			members_close(ms, ret);
		}
	}
	for (size_t i = 0; i < nseeds; i++) {
		cur_what = "a built-in seed as it is";
		if (run_one(&seeds[i], 0, 0) != AT_MOUNTED || st.reopened != st.mountable) {
			fprintf(stderr, "fuzz_meta: seed %zu does not mount and compact cleanly\n", i);
			return 1;
		}
	}
	if (run_regressions() && !keep_going)
		return 1;
	cur_what = NULL;
	for (unsigned long long it = only == ~0ull ? 0 : only; it < (only == ~0ull ? n : only + 1); it++) {
		struct img im;
		unsigned k;

		cur_index = it;
		rs = mix(seed, it);
		img_clone(&im, &seeds[rnd() % nseeds]);
		pool_img(&im);
		k = rnd() % 32 == 0 ? 0 : 1 + rnd() % 3 + (rnd() % 4 == 0 ? rnd() % 8 : 0);
		while (k--)
			mutate(&im);
		/* mostly read-write mounts (cleanup and compaction), some read-only, some with the
		 * fallback to the older generation of dmafs-fsck --repair */
		k = rnd() % 10;
		run_one(&im, k == 0 || k == 1, k == 2);
		if (dir)
			dump(dir, im.n);
		img_free(&im);
	}
	report();
	if (findings) {
		printf("fuzz_meta: %lu broken invariants\n", findings);
		return 1;
	}
	printf("fuzz_meta: no crash, no broken invariant\n");
	return 0;
}
