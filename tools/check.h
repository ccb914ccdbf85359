/* SPDX-License-Identifier: MIT */
/*
 * check.h - what dmafs-check's files share: the report's output (check-out.c), the
 * machine's checks (check-sys.c), a mount's (check-mount.c) and the list of filesystems
 * on the block devices (check-list.c), which dmafs-check.c's main() and report() call.
 */
#ifndef DMAFS_CHECK_H
#define DMAFS_CHECK_H

/*
 * check-out.c. Output: every fact is a (section, key, value) triple printed as text or as
 * JSON. Sections open and close explicitly; lists of objects are sections whose keys repeat.
 */
extern int json; /* --json: print one JSON document */
/* A JSON string of @s. */
void jstr(const char *s);
/* Indent a text line, or a JSON member, to the depth of the open sections. */
void indent(void);
/* Before a JSON member: the comma after the last one, a new line, the indent. */
void jsep(void);
/* Open an object (@key NULL inside an array) or, with @array, an array. */
void open_(const char *key, const char *title, int array);
void close_(int array);
/* One value: a string (quoted in JSON), or raw JSON when @raw (numbers, true/false). */
void kv(const char *key, const char *label, int raw, const char *fmt, ...)
	__attribute__((format(printf, 4, 5)));
/* A yes/no fact: true/false in JSON, yes/no in text. */
void kv_bool(const char *key, const char *label, int v);

/* check-sys.c: the machine (GPUs, direct storage, io_uring). */
void check_gpus(void);
void check_cufile(int have_gpu);
void check_nvfs(void);
void check_p2pdma(void);
void check_hipfile(void);
void check_uring(void);

/*
 * check-mount.c: the mount of @arg: 1 when a target's path is @require or faster, 0 when
 * not, -1 on error.
 */
int check_mount(const char *arg, int require);

/*
 * check-list.c: the dmafs filesystems on the block devices (--list), or the one @name
 * names; returns the exit status.
 */
int list_filesystems(const char *name);

#endif
