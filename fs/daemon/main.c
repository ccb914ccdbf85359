// SPDX-License-Identifier: MIT
/* main.c - the dmafs daemon's steps: options, members, mount, services, the FUSE loop, the end. */
#include "daemon/daemon.h"

#include <errno.h>
#include <malloc.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/resource.h>
#include <unistd.h>

#include "daemon/remount.h"
#include "engine/tier-press.h"
#include "io/scan.h"
#include "place/p2p.h"
#include "place/pipeline.h"
#include "place/placeq.h"

/*
 * The placement limits from the options, checked. Every client process with
 * registrations holds one pidfd in the daemon, so reg_max must fit the descriptor limit,
 * raised to its hard limit here, with room kept for everything else the daemon opens
 * (members, rings, the FUSE device). Returns 0 or -1 (message printed).
 */
#define FD_RESERVE 512

static int limits(struct daemon *d)
{
	const struct options *o = &d->o;
	struct place_limits *l = &d->lim;
	uint64_t ram = (uint64_t)sysconf(_SC_PHYS_PAGES) * (uint64_t)sysconf(_SC_PAGESIZE);
	struct rlimit rl;

	*l = (struct place_limits){ .regs = o->reg_max ? o->reg_max : 8192,
				    .regs_user = o->reg_max_user ? o->reg_max_user : 4096,
				    .bytes = 2 * ram, .bytes_user = ram };
	if ((o->reg_bytes && (util_parse_size(o->reg_bytes, &l->bytes) || !l->bytes)) ||
	    (o->reg_bytes_user && (util_parse_size(o->reg_bytes_user, &l->bytes_user) ||
				   !l->bytes_user))) {
		fprintf(stderr, "dmafs: reg_bytes and reg_bytes_user take a size above 0 (such as 512M, 64G)\n");
		return -1;
	}
	if (l->regs > 1u << 20 || l->regs_user > l->regs) {
		fprintf(stderr, "dmafs: reg_max must be 1..1048576 and reg_max_user at most reg_max\n");
		return -1;
	}
	if (getrlimit(RLIMIT_NOFILE, &rl) == 0 && rl.rlim_cur < rl.rlim_max) {
		rl.rlim_cur = rl.rlim_max;
		setrlimit(RLIMIT_NOFILE, &rl);
	}
	if (getrlimit(RLIMIT_NOFILE, &rl) == 0 && rl.rlim_cur != RLIM_INFINITY &&
	    rl.rlim_cur < (rlim_t)l->regs + FD_RESERVE) {
		unsigned fit = rl.rlim_cur > 2 * FD_RESERVE ? (unsigned)(rl.rlim_cur - FD_RESERVE) : FD_RESERVE;

		/* a number asked for and not given is a warning; the default, a note */
		if (o->reg_max)
			fprintf(stderr, "dmafs: reg_max=%u does not fit the descriptor limit (ulimit -n %llu, %d kept for the filesystem); using reg_max=%u\n",
				l->regs, (unsigned long long)rl.rlim_cur, FD_RESERVE, fit);
		else
			daemon_note(d, "the default reg_max=%u does not fit the descriptor limit (ulimit -n %llu, %d kept for the filesystem); using reg_max=%u",
			     l->regs, (unsigned long long)rl.rlim_cur, FD_RESERVE, fit);
		l->regs = fit;
		l->regs_user = MIN(l->regs_user, fit);
	}
	return 0;
}


/* Open and verify the members, mount the engine, and set the daemon object up from the
 * options. Returns 0 or -1 (said on stderr). */
static int mount_members(struct daemon *d)
{
	const struct options *o = &d->o;
	struct fs *fs = &d->srv.fs;
	char err[1024];
	int ret;

	if (o->degraded)
		d->o.ro = 1; /* whatever else was said: see mirror.c */
	d->nms = members_open(o->members, (o->ro ? MEMBER_RDONLY : 0) | (o->degraded ? MEMBER_DEGRADED : 0),
			      &d->ms, err, sizeof(err));
	if (d->nms < 0) {
		fprintf(stderr, "dmafs: %s\n", err);
		return -1;
	}
	for (int i = 0; i < d->nms; i++)
		if (d->ms[i].sb_from_copy)
			log_warn("member %d (%s): primary superblock damaged; using the copy at the end of the member%s",
				 i, d->ms[i].path, o->ro ? "" : " (primary rewritten)");
	ret = fs_mount(fs, d->ms, d->nms, o->ro, err, sizeof(err));
	if (ret) {
		fprintf(stderr, "dmafs: %s\n", err[0] ? err : strerror(-ret));
		members_close(d->ms, d->nms);
		d->ms = NULL;
		return -1;
	}
	for (int i = 0; i < d->nms && !o->ro; i++)
		if (d->ms[i].sb_from_copy && member_write_sb(&d->ms[i]))
			log_warn("member %d (%s): could not rewrite the primary superblock", i, d->ms[i].path);
	d->srv.opts = (struct dmafs_opts){
		.attr_timeout = o->attr_timeout,
		.entry_timeout = o->entry_timeout,
		/* direct writes invalidate other descriptors' cached pages only since Linux
		 * 6.6: before, write-only opens keep the page cache, or readers could see stale
		 * data */
		.wronly_direct = !o->wronly_cache && !o->writeback && daemon_kernel_at_least(6, 6),
		.open_fill = (uint64_t)o->open_fill_kb << 10,
		.nolistxattr = o->nolistxattr,
	};
	fs->set = o->fs;
	if (o->tier_bytes && (ret = tier_init(&fs->tier, o->tier_bytes, o->tier_min_free_bytes, -1,
							!o->tier_pin || !strcmp(o->tier_pin, "all")))) {
		fprintf(stderr, "dmafs: cannot set up the warm tier of %llu MiB: %s\n",
			(unsigned long long)(o->tier_bytes >> 20), strerror(-ret));
		return -1;
	}
	if (fs->tier) {
		uint64_t ram = (uint64_t)sysconf(_SC_PHYS_PAGES) * (uint64_t)sysconf(_SC_PAGESIZE);

		log_debug("warm tier: %llu MiB in chunks of %u KiB, segments of %llu MiB; it leaves %llu MiB available",
			  (unsigned long long)(o->tier_bytes >> 20), TIER_CHUNK >> 10,
			  (unsigned long long)(TIER_SEG >> 20), (unsigned long long)(o->tier_min_free_bytes >> 20));
		if (o->tier_min_free_bytes >= ram)
			daemon_note(d, "tier_min_free=%s is not below the RAM (%llu MiB): the warm tier holds nothing",
				    o->tier_min_free, (unsigned long long)(ram >> 20));
	}
	d->member_list = daemon_members_abs(d->ms, d->nms, 1);
	return d->member_list ? 0 : -1;
}

/*
 * libfuse's arguments. The mount's source in /proc/mounts, unless fsname= was given: the
 * member list, or for a filesystem named by label or UUID the name as given, in the
 * dmafs:LABEL= spelling that fstab uses: mount -a finds its fstab line mounted only when
 * the two agree, and umount dmafs:LABEL=... finds the mount. The members are in the mount
 * record. Returns 0 or -1.
 */
static int session_args(struct daemon *d, struct fuse_args *args)
{
	const struct options *o = &d->o;
	const char *name_value;
	size_t name_len;
	int named;

	fuse_opt_add_arg(args, "-osubtype=dmafs,default_permissions");
	named = scan_source_kind(o->members, &name_value, &name_len) > 0;
	if (named)
		log_debug("%s: members %s", o->members, d->member_list);
	if (!daemon_fsname_given(args)) {
		char *plain = named ? NULL : daemon_members_abs(d->ms, d->nms, 0);
		char *esc = daemon_escape_commas(named ? o->members : plain ? plain : "dmafs");
		char *opt = NULL;

		free(plain);
		if (!esc || asprintf(&opt, "-ofsname=%s%s",
				     named && strncmp(o->members, "dmafs:", 6) ? "dmafs:" : "", esc) < 0) {
			free(esc);
			return -1;
		}
		fuse_opt_add_arg(args, opt);
		free(opt);
		free(esc);
	}
	/*
	 * A kernel filesystem mounted by root is suid,dev unless told otherwise; libfuse makes
	 * every mount nosuid,nodev, and mount(8) passes neither suid nor dev (its defaults): a
	 * root mount from fstab could never be suid,dev. They come first, so a nosuid or nodev
	 * given wins. A user mount (user, users, owner, group, user=NAME) keeps nosuid,nodev, as
	 * does every mount by another user (fusermount3 forces them).
	 */
	if (geteuid() == 0 && !o->user_mount && !o->user)
		fuse_opt_insert_arg(args, 1, "-osuid,dev");
	if (o->debug)
		fuse_opt_add_arg(args, "-d");
	return 0;
}

/* Placement, write-behind and the periodic commit. Returns 0 or -1 (logged). */
static int start_services(struct daemon *d)
{
	const struct options *o = &d->o;
	struct fs *fs = &d->srv.fs;
	int ret;

	if ((ret = tier_press_start(&d->press, fs->tier))) {
		log_err("cannot start the warm tier's memory watcher: %s", strerror(-ret));
		return -1;
	}
	if (place_init(&d->srv.place, fs, &d->lim, (uint64_t)o->staging_mb << 20, o->copy_delay_us,
		       !o->gpu_setup || !strcmp(o->gpu_setup, "mount"),
		       !o->p2p || !strcmp(o->p2p, "auto") ? 0 : !strcmp(o->p2p, "force") ? 1 : -1)) {
		log_err("cannot start the placement service");
		return -1;
	}
	if ((ret = placeq_start(&d->srv.placeq, o->place_threads, o->place_queue,
				 o->place_threads_user))) {
		log_err("cannot start the placement threads: %s", strerror(-ret));
		return -1;
	}
	log_debug("placement: %u threads, %u per user; at most %u registrations (%u per user), %llu host bytes (%llu per user)",
		  o->place_threads, o->place_threads_user, d->lim.regs, d->lim.regs_user, (unsigned long long)d->lim.bytes,
		  (unsigned long long)d->lim.bytes_user);
	if (!o->ro && (ret = wback_start(fs, o->fs.writebehind_mb))) {
		log_err("cannot start write-behind: %s", strerror(-ret));
		return -1;
	}
	fs->j.before_commit = wback_before_commit;
	fs->j.before_arg = fs;
	fs->j.before_take = fs_atime_log;
	fs->j.take_arg = fs;
	fs->j.may_take = wback_log_may_take;
	fs->j.may_take_arg = fs;
	if (journal_start(&fs->j, o->fs.commit_interval)) {
		log_err("cannot start the commit thread");
		return -1;
	}
	d->srv.se = d->se;
	fs->attr_changed = ops_attr_changed;
	fs->attr_arg = &d->srv;
	if ((ret = inval_start(&d->srv))) {
		log_err("cannot start the thread that drops names from the kernel's cache: %s",
			strerror(-ret));
		return -1;
	}
	return 0;
}

/* Mount, serve until unmounted, and take everything down again. Returns the exit status. */
static int serve(struct daemon *d, struct fuse_args *args)
{
	const struct options *o = &d->o;
	struct fuse_loop_config *cfg;
	int ret = 1, err;

	d->se = fuse_session_new(args, &daemon_ops, sizeof(daemon_ops), &d->srv);
	if (!d->se) { /* libfuse said which option above, not what to do */
		fprintf(stderr, "dmafs: an option is neither dmafs's nor FUSE's (named above): dmafs --help lists the common ones, dmafs(8) all\n");
		return 1;
	}
	if (fuse_set_signal_handlers(d->se))
		goto out_session;
	if (fuse_session_mount(d->se, o->mountpoint)) {
		fprintf(stderr, "dmafs: cannot mount on %s (see the message above)\n", o->mountpoint);
		goto out_signals;
	}
	daemon_publish(d);
	/* the kernel mount's atime flags say what the daemon does (mount -o remount passes
	 * them back); the path walk stops at the mount's root, so this asks the daemon nothing */
	if ((o->fs.atime != FS_ATIME_RELATIME || o->fs.nodiratime) &&
	    (err = remount_set_atime(o->mountpoint, o->fs.atime, o->fs.nodiratime)))
		daemon_note(d, "%s: the kernel mount's flags do not show the atime options (mount_setattr: %s); the daemon applies them all the same",
			    o->mountpoint, strerror(-err));
	if (!start_services(d)) {
		cfg = fuse_loop_cfg_create();
		log_debug("serving FUSE requests with %u worker threads", o->threads);
		fuse_loop_cfg_set_max_threads(cfg, o->threads);
		fuse_loop_cfg_set_idle_threads(cfg, o->threads);
		ret = fuse_session_loop_mt(d->se, cfg) ? 1 : 0;
		fuse_loop_cfg_destroy(cfg);
	}
	placeq_stop(d->srv.placeq); /* before the session goes: the queued requests are answered */
	inval_stop(&d->srv);
	fuse_session_unmount(d->se);
out_signals:
	fuse_remove_signal_handlers(d->se);
out_session:
	fuse_session_destroy(d->se);
	return ret;
}

int main(int argc, char *argv[])
{
	struct fuse_args args = FUSE_ARGS_INIT(argc, argv);
	struct daemon *d;
	int ret = 1;

	if (options_refuse_control(argc, argv))
		return 1;
	/*
	 * Fixed malloc thresholds: glibc raises them as large blocks are freed (the mount's
	 * snapshot, 160 MB at a million files), after which the compaction that the commit
	 * thread makes after the mount kept its arena's 16 MB (200,000 files) for good.
	 * Blocks of 32 MiB and more are mapped alone; an arena's free top past 8 MiB goes back.
	 */
	mallopt(M_MMAP_THRESHOLD, 32 << 20);
	mallopt(M_TRIM_THRESHOLD, 8 << 20);
	if (argc > 1 && !strcmp(argv[1], "--remount"))
		return remount_main(argc - 1, argv + 1);
	d = calloc(1, sizeof(*d));
	if (!d || options_parse(&d->o, &args))
		return 1;
	d->notify_fd = -1;
	if (d->o.help || d->o.version || !d->o.members || !d->o.mountpoint) {
		if (d->o.version)
			printf("dmafs %s (on-disk format %d)\n", PACKAGE_VERSION, FMT_VERSION_MAX);
		else
			options_usage(d->o.help ? stdout : stderr);
		return d->o.help || d->o.version ? 0 : 1;
	}
	/*
	 * A mount that works prints nothing: info messages (notes, the engine's) wait for the
	 * log until the daemon has detached, or reach stderr if the mount fails. -f keeps
	 * stderr as the log, -o verbose wants them on the terminal.
	 */
	if (!d->o.foreground && !d->o.verbose) {
		util_log_hold_info(1);
		atexit(daemon_release_held);
	}
	if (options_check(&d->o) || limits(d))
		return 1;
	if (d->o.debug || d->o.verbose)
		util_log_set_level(LOG_LVL_DEBUG);
	if (!d->o.foreground && daemon_detach(d)) {
		fprintf(stderr, "dmafs: cannot start the daemon: %s\n", strerror(errno));
		return 1;
	}
	if (mount_members(d))
		return 1;
	if (!session_args(d, &args))
		ret = serve(d, &args);
	place_shutdown(d->srv.place);
	tier_press_stop(d->press);
	d->press = NULL;
	if (fs_unmount(&d->srv.fs))
		ret = 1;
	tier_destroy(d->srv.fs.tier); /* no request is served any more */
	d->srv.fs.tier = NULL;
	members_close(d->ms, d->nms);
	daemon_unpublish(d, d->srv.fs.finish_ret, d->srv.fs.finish_err);
	fuse_opt_free_args(&args);
	free(d->member_list);
	/* d stays: the detached readahead thread may still read it while the process ends */
	return ret;
}
