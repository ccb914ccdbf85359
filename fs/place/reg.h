/* SPDX-License-Identifier: MIT */
/*
 * reg.h - what place.c and reg.c share: the service object of a mount and the buffers
 * registered with it. Nothing outside fs/place/ includes it.
 */
#ifndef DMAFS_PLACE_REG_H
#define DMAFS_PLACE_REG_H

#include <pthread.h>
#include <stddef.h>
#include <stdint.h>

#include "place/clientfd.h"
#include "place/place.h"
#include "place/share.h"

struct client;
struct gpu;
struct p2p;
struct stages;
struct user;

/* A buffer a client registered. */
struct reg {
	struct reg *next;
	uint64_t id;
	struct client *cl;
	struct user *u;
	int target;
	int dev;		/* GPU ordinal in the daemon */
	struct gpu *gpu;
	char *base;		/* where buffer byte 0 is: host mapping or device pointer */
	uint64_t size;
	uint64_t charged;	/* host bytes counted against the limits */
	void *map;		/* host: mmap address; GPU: IPC mapping base */
	size_t map_len;
	size_t guard;		/* host: PROT_NONE bytes after the mapping (map_host) */
	uint64_t map_off;	/* host: object offset of the mapping */
	int hugetlb;		/* host: a hugetlbfs object */
	int p2p;		/* registered with cuFile */
	unsigned refs;		/* placements running; protected by regs_lock */
	int dead;		/* unregistered or owner gone; freed when refs drops to 0 */
};

/* The placement service of one mount: what place_init() makes and every call is given. */
struct place {
	struct fs *fs;
	struct place_limits lim;
	struct stages *stages;
	struct p2p *p2p;
	struct clientfd_mounts shm; /* where client memfds live */
	uint64_t copy_delay_ns;
	struct fillq *fillq;	/* tier_fill=idle: the fills left for later; NULL otherwise */
	struct share share;	/* placements and prefetches running, per user */
	uint64_t hkey[2];	/* the key of batch handles' MACs, random per mount (batch.c) */
	/* Lock order: regs_lock is a leaf; nothing else is taken while it is held. */
	pthread_mutex_t regs_lock;
	struct reg *regs;	/* protected by regs_lock */
	struct client *clients;	/* protected by regs_lock */
	struct user *users;	/* protected by regs_lock; entries live until shutdown */
	unsigned nregs;		/* protected by regs_lock */
	uint64_t nbytes;	/* protected by regs_lock */
	pthread_t reaper;
	int reaper_running;
	/* The unmount wakes the reaper instead of waiting out its sleep. */
	pthread_mutex_t reaper_lock;
	pthread_cond_t reaper_wake;
	int reaper_stop; /* protected by reaper_lock */
};

/* Set up the table's locks, before anything else uses @pl. */
void reg_init(struct place *pl);
/* Start the reaper of dead clients' registrations. Returns 0 or -EAGAIN. */
int reg_reaper_start(struct place *pl);
/* Stop the reaper and release every registration not in use. */
void reg_shutdown(struct place *pl);
/* The caller's live registration @id, referenced. Returns 0, -ENOENT or -EPERM (another
 * process's). @see reg_put */
int reg_get(struct place *pl, const struct place_caller *c, uint64_t id, struct reg **out);
/* Drop a reference from reg_get(); the last one frees an unregistered buffer. */
void reg_put(struct place *pl, struct reg *r);
/* Before placing @p into host registration @r: is memory still behind every page it
 * writes? Returns 0 or -EFAULT. */
int reg_host_intact(const struct reg *r, const struct dmafs_ioc_place *p);

#endif
