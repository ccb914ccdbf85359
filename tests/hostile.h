/* SPDX-License-Identifier: MIT */
/*
 * hostile.h - what hostile's files share: the calls and checks of hostile.c that every
 * attack uses, and the subcommands of hostile-refuse.c, hostile-many.c and hostile-root.c
 * that main() runs.
 */
#ifndef HOSTILE_H
#define HOSTILE_H

#include <stdint.h>

#define T_UNIT_SHARED /* t_failures: one count for all of hostile's files (hostile.c) */
#include "t_unit.h"

#define PROMPT_MS 2000 /* the longest a refusal may take */
#define MIB (1ull << 20)

/* hostile.c: the calls and checks. */
extern int ioc; /* descriptor of IOCFILE */
uint64_t now_ms(void);
/* "0" or the errno's name ("EINVAL"); the number when glibc has no name for it. */
const char *ename(int neg);
/* The errno named @name ("EINVAL"), or 0 for "0"; exits on an unknown name. */
int errno_of(const char *name);
void die(const char *what);
int open_ioc(const char *path);
/* REGISTER a host buffer: 0 (and *id) or -errno. */
int reg_host(int on, int fd, uint64_t offset, uint64_t size, uint64_t *id);
int unreg(int on, uint64_t id);
/* PLACE one extent: 0 (and *bytes) or -errno. The request is big; one per thread. */
int place1(int on, uint64_t id, uint64_t foff, uint64_t len, uint64_t boff, uint64_t *bytes);
/* Write a pattern over [0, size) of @fd so that every page of it exists. */
void touch_fd(int fd, uint64_t size);
/* A memfd of @size bytes; every page written when @touch, else a hole. */
int memfd_new(uint64_t size, int touch);
/* One checked call: print what it answered and how long it took (see hostile.c). */
void expect(const char *what, int got, int want, int want2, uint64_t ms);
/* REGISTER @fd [offset, +size) and expect @want (an errno, 0: success, then unregistered). */
void try_reg(const char *what, int fd, uint64_t offset, uint64_t size, int want, int want2);
/* The bytes of IOCFILE [off, +len) through read(2), to compare placements with. */
char *file_bytes(uint64_t off, uint64_t len);
/* A registration that must work, and placements into it that must give the file's bytes. */
void control(const char *what, int fd, uint64_t size);

/* hostile-refuse.c: one buffer at a time. */
int cmd_refuse(char **av);
int cmd_sparse(char **av);
int cmd_shrink(char **av);
int cmd_shrinkrace(char **av);

/* hostile-many.c: numbers and races. */
int cmd_selfreg(char **av);
int cmd_flood(char **av);
int cmd_fill(char **av);
int cmd_refill(char **av);
int cmd_deputy(char **av);
int cmd_race(char **av);
int cmd_churn(char **av);
int cmd_queue(char **av);

/* hostile-root.c: root's side. */
int cmd_warm(char **av);
int cmd_sample(char **av);
int cmd_status(char **av);
int cmd_watch(int ac, char **av);
int cmd_probe(char **av);

#endif
