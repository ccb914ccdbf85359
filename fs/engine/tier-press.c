// SPDX-License-Identifier: MIT
/* tier-press.c - the warm tier's memory-pressure watcher (see tier-press.h). */
#include "engine/tier-press.h"

#include <errno.h>
#include <fcntl.h>
#include <poll.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/eventfd.h>
#include <unistd.h>

#include "util/util.h"

struct tier_press {
	struct tier *t;
	pthread_t thread;
	int stop_fd;   /* eventfd: readable when the thread is to end */
	int psi_fd;    /* /proc/pressure/memory holding our trigger, or -1 */
	int short_mem; /* memory was short at the last look; the thread's own */
};

/* MemAvailable of /proc/meminfo in *@out (bytes). Returns 0 or -errno. */
static int mem_available(uint64_t *out)
{
	FILE *f = fopen("/proc/meminfo", "re");
	char line[128];
	int ret = -ENODATA;

	if (!f)
		return -errno;
	while (fgets(line, sizeof(line), f)) {
		unsigned long long kb;

		if (sscanf(line, "MemAvailable: %llu kB", &kb) == 1) {
			*out = (uint64_t)kb << 10;
			ret = 0;
			break;
		}
	}
	fclose(f);
	return ret;
}

/*
 * A pressure stall trigger (Documentation/accounting/psi.rst): POLLPRI once some task has
 * waited for memory 100 ms within a second, which wakes the thread ahead of its period.
 * -1 where the kernel has no PSI (CONFIG_PSI off, psi=0) or refuses the trigger: the
 * period alone then.
 */
static int psi_open(void)
{
	static const char trig[] = "some 100000 1000000";
	int fd = open("/proc/pressure/memory", O_RDWR | O_NONBLOCK | O_CLOEXEC);

	if (fd < 0)
		return -1;
	if (write(fd, trig, sizeof(trig)) < 0) { /* with its NUL, as psi.rst writes it */
		close(fd);
		return -1;
	}
	return fd;
}

static unsigned long long mib(uint64_t b) { return (unsigned long long)(b >> 20); }

/* Compare the available memory with the line once, and act. The thread's (or start's). */
static void look(struct tier_press *p)
{
	struct tier *t = p->t;
	uint64_t avail = 0, min = tier_min_free(t), margin = MAX(TIER_SEG, min / 16), got;
	struct tier_stats st;
	int was_short = p->short_mem;

	if (mem_available(&avail))
		return; /* no /proc: nothing to go by */
	if (avail < min) {
		if (!was_short) {
			tier_set_short(t, 1); /* first: no fill starts while this gives back */
			p->short_mem = 1;
		}
		got = tier_shrink(t, min - avail);
		if (got || !was_short) {
			tier_stats(t, &st);
			log_info("warm tier: memory is short (MemAvailable %llu MiB, tier_min_free %llu MiB): gave back %llu MiB, holds %llu MiB, and takes no new chunks until MemAvailable is above %llu MiB",
				 mib(avail), mib(min), mib(got), mib(st.held), mib(min + margin));
		}
	} else if (was_short && avail >= min + margin) {
		tier_set_short(t, 0);
		p->short_mem = 0;
		tier_stats(t, &st);
		log_info("warm tier: MemAvailable %llu MiB is above tier_min_free (%llu MiB) again: taking new chunks, up to %llu MiB",
			 mib(avail), mib(min), mib(st.size));
	}
	got = tier_release_idle(t);
	if (got)
		log_debug("warm tier: %llu MiB of segments left empty for %d ms given back", mib(got),
			  TIER_PRESS_MS);
}

static void *watch(void *arg)
{
	struct tier_press *p = arg;

	for (;;) {
		struct pollfd fds[2] = { { .fd = p->stop_fd, .events = POLLIN },
					 { .fd = p->psi_fd, .events = POLLPRI } };

		if (poll(fds, p->psi_fd >= 0 ? 2 : 1, TIER_PRESS_MS) < 0 && errno != EINTR)
			usleep(TIER_PRESS_MS * 1000); /* cannot happen with valid descriptors */
		if (fds[0].revents)
			break;
		if (p->psi_fd >= 0 && (fds[1].revents & (POLLERR | POLLNVAL))) {
			log_debug("warm tier: the memory stall trigger went away; looking every %d ms only",
				  TIER_PRESS_MS);
			close(p->psi_fd);
			p->psi_fd = -1;
		}
		look(p);
	}
	return NULL;
}

int tier_press_start(struct tier_press **out, struct tier *t)
{
	struct tier_press *p;
	int ret;

	*out = NULL;
	if (!t)
		return 0;
	p = calloc(1, sizeof(*p));
	if (!p)
		return -ENOMEM;
	p->t = t;
	p->stop_fd = eventfd(0, EFD_CLOEXEC);
	if (p->stop_fd < 0) {
		ret = -errno;
		free(p);
		return ret;
	}
	p->psi_fd = psi_open();
	log_debug("warm tier: looking at MemAvailable every %d ms%s; tier_min_free %llu MiB",
		  TIER_PRESS_MS, p->psi_fd >= 0 ? " and at memory stalls (PSI)" : "",
		  mib(tier_min_free(t)));
	look(p);
	ret = -pthread_create(&p->thread, NULL, watch, p);
	if (ret) {
		if (p->psi_fd >= 0)
			close(p->psi_fd);
		close(p->stop_fd);
		free(p);
		return ret;
	}
	*out = p;
	return 0;
}

void tier_press_stop(struct tier_press *p)
{
	uint64_t one = 1;

	if (!p)
		return;
	if (write(p->stop_fd, &one, sizeof(one)) != sizeof(one))
		log_err("warm tier: cannot stop the memory watcher: %s", strerror(errno));
	else
		pthread_join(p->thread, NULL);
	if (p->psi_fd >= 0)
		close(p->psi_fd);
	close(p->stop_fd);
	free(p);
}
