// SPDX-License-Identifier: MIT
/*
 * fsx.c - random read/write/truncate/mmap exerciser checked against an in-memory model.
 *
 * Description: a small fsx: random pwrite at random (often unaligned) offsets, reads and
 * mmap reads compared byte for byte with a model of the file, truncates up and down,
 * MAP_SHARED writes, fsync, close/reopen.  Seedable and reproducible; on the first
 * mismatch it prints the offending range and the tail of the operation log and exits 1.
 *
 * usage: fsx [-N ops] [-S seed] [-l maxlen] [-o maxoplen] [-M] [-W] [-F] [-q] [-D dump] FILE
 *   -N  operations (default 3000)        -S  seed (default 1)
 *   -l  maximum file length (default 8 MiB)  -o  maximum bytes per op (default 256 KiB)
 *   -M  no mmap reads    -W  no mmap writes    -F  no fsync
 *   -q  quiet            -D  write the final model to this file (for a later cmp)
 * Exit: 0 all reads matched, 1 mismatch or unexpected error, 2 usage.
 */
#define _GNU_SOURCE
#include <errno.h>
#include <fcntl.h>
#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <unistd.h>

enum op { OP_READ, OP_WRITE, OP_TRUNC, OP_MAPREAD, OP_MAPWRITE, OP_FSYNC, OP_REOPEN, OP_NOPS };
static const char *op_names[] = { "read", "write", "truncate", "mapread", "mapwrite", "fsync", "reopen" };

struct logent {
	long n;
	enum op op;
	uint64_t off, len, size_before;
};

#define LOGN 64
static struct logent oplog[LOGN];
static long opno;

static const char *path;
static int fd = -1;
static unsigned char *model;   /* file contents; bytes at and beyond fsize are always 0 */
static unsigned char *buf;
static uint64_t fsize, maxlen = 8 << 20, maxop = 256 << 10;
static uint64_t rng_state;
static long pagesz;
static int quiet;

/* xorshift64*: reproducible across libcs, unlike rand(). */
static uint64_t rnd(void)
{
	rng_state ^= rng_state >> 12;
	rng_state ^= rng_state << 25;
	rng_state ^= rng_state >> 27;
	return rng_state * 2685821657736338717ULL;
}

static uint64_t rnd_below(uint64_t n)
{
	return n ? rnd() % n : 0;
}

/* Offsets: mostly arbitrary, sometimes block aligned, sometimes near a 64K/1M boundary
 * where stripe units and extents end. */
static uint64_t pick_off(uint64_t lim)
{
	uint64_t o, r = rnd_below(8);

	if (lim == 0)
		return 0;
	o = rnd_below(lim);
	if (r == 0)
		o &= ~4095ULL;
	else if (r == 1) {
		uint64_t unit = rnd_below(2) ? 65536 : 1048576;
		o = o / unit * unit;
		o += rnd_below(2) ? rnd_below(8) : (uint64_t)-rnd_below(8);
		if (o >= lim)
			o = lim - 1;
	}
	return o;
}

static void log_op(enum op op, uint64_t off, uint64_t len)
{
	struct logent *e = &oplog[opno % LOGN];

	e->n = opno;
	e->op = op;
	e->off = off;
	e->len = len;
	e->size_before = fsize;
}

static void dump_log(void)
{
	long i, first = opno >= LOGN ? opno - LOGN + 1 : 0;

	fprintf(stderr, "fsx: last %ld operations (n op offset length size-before):\n", opno - first + 1);
	for (i = first; i <= opno; i++) {
		struct logent *e = &oplog[i % LOGN];
		fprintf(stderr, "  %6ld %-8s 0x%-9" PRIx64 " 0x%-7" PRIx64 " 0x%" PRIx64 "\n", e->n,
			op_names[e->op], e->off, e->len, e->size_before);
	}
}

static void die(const char *what)
{
	fprintf(stderr, "fsx: op %ld: %s: %s\n", opno, what, strerror(errno));
	dump_log();
	exit(1);
}

static void compare(const unsigned char *got, uint64_t off, uint64_t len, const char *how)
{
	uint64_t i, j;

	if (memcmp(got, model + off, len) == 0)
		return;
	for (i = 0; i < len && got[i] == model[off + i]; i++)
		;
	fprintf(stderr, "fsx: op %ld: %s mismatch at file offset 0x%" PRIx64 " (read of 0x%" PRIx64
		" bytes at 0x%" PRIx64 ", size 0x%" PRIx64 ")\n", opno, how, off + i, len, off, fsize);
	fprintf(stderr, "fsx:   expected:");
	for (j = i; j < len && j < i + 16; j++)
		fprintf(stderr, " %02x", model[off + j]);
	fprintf(stderr, "\nfsx:   got:     ");
	for (j = i; j < len && j < i + 16; j++)
		fprintf(stderr, " %02x", got[j]);
	fprintf(stderr, "\n");
	dump_log();
	exit(1);
}

static void check_size(void)
{
	struct stat st;

	if (fstat(fd, &st) < 0)
		die("fstat");
	if ((uint64_t)st.st_size != fsize) {
		fprintf(stderr, "fsx: op %ld: st_size 0x%" PRIx64 ", model 0x%" PRIx64 "\n", opno,
			(uint64_t)st.st_size, fsize);
		dump_log();
		exit(1);
	}
}

static void do_read(uint64_t off, uint64_t len)
{
	uint64_t done = 0;

	while (done < len) {
		ssize_t n = pread(fd, buf + done, len - done, off + done);
		if (n < 0)
			die("pread");
		if (n == 0)
			break;
		done += n;
	}
	if (done != len) {
		fprintf(stderr, "fsx: op %ld: short read 0x%" PRIx64 " of 0x%" PRIx64 " at 0x%" PRIx64 "\n",
			opno, done, len, off);
		dump_log();
		exit(1);
	}
	compare(buf, off, len, "read");
}

static void do_write(uint64_t off, uint64_t len)
{
	uint64_t i, done = 0;

	for (i = 0; i < len; i++)
		buf[i] = (unsigned char)(rnd() >> 56) | 1; /* never 0, so stale zeros show */
	while (done < len) {
		ssize_t n = pwrite(fd, buf + done, len - done, off + done);
		if (n <= 0)
			die("pwrite");
		done += n;
	}
	memcpy(model + off, buf, len);
	if (off + len > fsize)
		fsize = off + len;
}

static void do_trunc(uint64_t size)
{
	if (ftruncate(fd, size) < 0)
		die("ftruncate");
	if (size < fsize)
		memset(model + size, 0, fsize - size);
	fsize = size;
}

static void do_mapread(uint64_t off, uint64_t len)
{
	uint64_t pg = off & ~(uint64_t)(pagesz - 1);
	unsigned char *p;

	p = mmap(NULL, len + (off - pg), PROT_READ, MAP_SHARED, fd, pg);
	if (p == MAP_FAILED)
		die("mmap read");
	compare(p + (off - pg), off, len, "mapread");
	if (munmap(p, len + (off - pg)) < 0)
		die("munmap");
}

static void do_mapwrite(uint64_t off, uint64_t len)
{
	uint64_t i, pg = off & ~(uint64_t)(pagesz - 1);
	unsigned char *p;

	if (off + len > fsize)
		do_trunc(off + len); /* mappings cannot extend a file */
	p = mmap(NULL, len + (off - pg), PROT_READ | PROT_WRITE, MAP_SHARED, fd, pg);
	if (p == MAP_FAILED)
		die("mmap write");
	for (i = 0; i < len; i++)
		model[off + i] = (unsigned char)(rnd() >> 56) | 1;
	memcpy(p + (off - pg), model + off, len);
	if (msync(p, len + (off - pg), MS_SYNC) < 0)
		die("msync");
	if (munmap(p, len + (off - pg)) < 0)
		die("munmap");
}

static void do_reopen(void)
{
	if (close(fd) < 0)
		die("close");
	fd = open(path, O_RDWR);
	if (fd < 0)
		die("reopen");
}

int main(int argc, char **argv)
{
	long nops = 3000, seed = 1;
	int c, no_mapread = 0, no_mapwrite = 0, no_fsync = 0;
	const char *dump = NULL;
	long counts[OP_NOPS] = { 0 };

	while ((c = getopt(argc, argv, "N:S:l:o:MWFqD:")) != -1) {
		switch (c) {
		case 'N': nops = atol(optarg); break;
		case 'S': seed = atol(optarg); break;
		case 'l': maxlen = strtoull(optarg, NULL, 0); break;
		case 'o': maxop = strtoull(optarg, NULL, 0); break;
		case 'M': no_mapread = 1; break;
		case 'W': no_mapwrite = 1; break;
		case 'F': no_fsync = 1; break;
		case 'q': quiet = 1; break;
		case 'D': dump = optarg; break;
		default:
			fprintf(stderr, "usage: fsx [-N ops] [-S seed] [-l maxlen] [-o maxoplen] [-M] [-W] [-F] [-q] [-D dump] FILE\n");
			return 2;
		}
	}
	if (optind != argc - 1 || maxlen == 0 || maxop == 0) {
		fprintf(stderr, "usage: fsx [-N ops] [-S seed] [-l maxlen] [-o maxoplen] [-M] [-W] [-F] [-q] [-D dump] FILE\n");
		return 2;
	}
	path = argv[optind];
	rng_state = 0x9E3779B97F4A7C15ULL ^ ((uint64_t)seed * 0x100000001B3ULL);
	if (rng_state == 0)
		rng_state = 1;
	pagesz = sysconf(_SC_PAGESIZE);
	model = calloc(1, maxlen + maxop + pagesz);
	buf = malloc(maxlen + maxop + pagesz);
	if (!model || !buf) {
		fprintf(stderr, "fsx: out of memory\n");
		return 1;
	}
	fd = open(path, O_RDWR | O_CREAT | O_TRUNC, 0644);
	if (fd < 0) {
		fprintf(stderr, "fsx: %s: %s\n", path, strerror(errno));
		return 1;
	}
	if (!quiet)
		printf("fsx: %s: %ld ops, seed %ld, maxlen %" PRIu64 ", maxop %" PRIu64 "%s%s%s\n", path, nops,
		       seed, maxlen, maxop, no_mapread ? ", no mapread" : "", no_mapwrite ? ", no mapwrite" : "",
		       no_fsync ? ", no fsync" : "");

	for (opno = 0; opno < nops; opno++) {
		uint64_t r = rnd_below(100), off, len;
		enum op op;

		if (r < 25) op = OP_READ;
		else if (r < 55) op = OP_WRITE;
		else if (r < 65) op = OP_TRUNC;
		else if (r < 80) op = OP_MAPREAD;
		else if (r < 90) op = OP_MAPWRITE;
		else if (r < 96) op = OP_FSYNC;
		else op = OP_REOPEN;
		if ((op == OP_MAPREAD && no_mapread) || (op == OP_MAPWRITE && no_mapwrite))
			op = OP_READ;
		if (op == OP_FSYNC && no_fsync)
			op = OP_WRITE;
		if ((op == OP_READ || op == OP_MAPREAD) && fsize == 0)
			op = OP_WRITE;

		switch (op) {
		case OP_READ:
		case OP_MAPREAD:
			off = pick_off(fsize);
			len = 1 + rnd_below(maxop);
			if (off + len > fsize)
				len = fsize - off;
			log_op(op, off, len);
			if (op == OP_READ)
				do_read(off, len);
			else
				do_mapread(off, len);
			break;
		case OP_WRITE:
		case OP_MAPWRITE:
			off = pick_off(maxlen);
			len = 1 + rnd_below(maxop);
			if (off + len > maxlen)
				len = maxlen - off;
			log_op(op, off, len);
			if (op == OP_WRITE)
				do_write(off, len);
			else
				do_mapwrite(off, len);
			break;
		case OP_TRUNC:
			off = rnd_below(2) ? pick_off(maxlen + 1) : pick_off(fsize + 1);
			log_op(op, off, 0);
			do_trunc(off);
			break;
		case OP_FSYNC:
			log_op(op, 0, 0);
			if (fsync(fd) < 0)
				die("fsync");
			break;
		case OP_REOPEN:
			log_op(op, 0, 0);
			do_reopen();
			break;
		default:
			abort();
		}
		counts[op]++;
		check_size();
		/* Every 100 ops, and at the end, read back the whole file (not logged: a mismatch
		 * there is reported as found by the whole-file read after op opno). */
		if (opno % 100 == 99 && fsize)
			do_read(0, fsize);
	}
	opno = nops - 1;
	if (fsize)
		do_read(0, fsize);
	/* Beyond EOF there is nothing. */
	if (pread(fd, buf, 16, fsize) != 0) {
		fprintf(stderr, "fsx: read beyond EOF 0x%" PRIx64 " returned data\n", fsize);
		dump_log();
		return 1;
	}
	if (close(fd) < 0)
		die("close");
	if (dump) {
		FILE *f = fopen(dump, "wb");
		if (!f || fwrite(model, 1, fsize, f) != fsize || fclose(f) != 0) {
			fprintf(stderr, "fsx: cannot write %s\n", dump);
			return 1;
		}
	}
	if (!quiet) {
		int i;
		printf("fsx: %ld ops ok, final size %" PRIu64 " (", nops, fsize);
		for (i = 0; i < OP_NOPS; i++)
			printf("%s%s %ld", i ? ", " : "", op_names[i], counts[i]);
		printf(")\n");
	}
	return 0;
}
