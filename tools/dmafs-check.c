// SPDX-License-Identifier: MIT
/*
 * dmafs-check.c - what this machine offers for placements and why, in the spirit of
 * `gdscheck -p`: GPUs, GPUDirect Storage / hipFile, nvidia-fs, P2PDMA, io_uring, and for
 * a dmafs mount its members, what its daemon noted at mount and the path each target would
 * take. With --list, in the spirit of `btrfs filesystem show`: the dmafs filesystems on the
 * machine's block devices and their members (fs/io/scan.c finds them, as for a mount by label).
 *
 * Nothing here changes the system: libraries are dlopen'ed and only asked for versions
 * (cuFile: cuFileGetVersion, cuFileDriverOpen/Close), files under /proc and /sys read.
 */
#include <errno.h>
#include <getopt.h>
#include <stdio.h>
#include <string.h>
#include <unistd.h>

#include "check.h"
#include "libdmafs-int.h"
#include "tool.h"

static void usage(FILE *f)
{
	fprintf(f,
		"usage: dmafs-check [--json] [--require p2p|staged|host] [MOUNT|FILE]\n"
		"       dmafs-check --list [--json] [LABEL=LABEL|UUID=UUID]\n"
		"\n"
		"Report what this machine offers for dmafs placements: GPUs, GPUDirect Storage,\n"
		"nvidia-fs, P2PDMA, hipFile, io_uring, and for a dmafs MOUNT (or a FILE on it)\n"
		"its members, what its daemon noted at mount, and which path a placement into\n"
		"each target takes, and why.\n"
		"  -l, --list       list the dmafs filesystems on this machine's block devices\n"
		"                   (or the one named) with their members, missing ones named\n"
		"  -r, --require P  exit 0 only if path P (or a faster one) is available for some\n"
		"                   target on MOUNT, 1 otherwise\n"
		"  -j, --json       print one JSON document\n"
		"  -h, --help       this text\n"
		"Exit status: 0 ok, 1 required path missing (--list: a member missing, or no\n"
		"filesystem by that name), 2 error. See dmafs-check(1).\n");
}

/*
 * The whole report: GPUs, direct storage, io_uring, and @mount (may be NULL) with the
 * paths it offers. The exit status: with @require, whether the mount offers that path.
 */
static int report(const char *mount, int require)
{
	struct gpu *g;
	char why[256];
	int ok = -2, have_cuda_dev;

	if (json)
		putchar('{');
	else
		printf("dmafs-check %s (libdmafs %d.%d.%d)\n", PACKAGE_VERSION,
		       dmafs_version() / 10000, dmafs_version() / 100 % 100, dmafs_version() % 100);
	if (json)
		kv("version", NULL, 0, "%s", PACKAGE_VERSION);
	check_gpus();
	have_cuda_dev = gpu_load(DMAFS_TARGET_CUDA, &g, why, sizeof(why)) == 0;
	open_("direct", "Direct storage", 0);
	check_cufile(have_cuda_dev);
	check_nvfs();
	check_p2pdma();
	check_hipfile();
	close_(0);
	check_uring();
	if (mount)
		ok = check_mount(mount, require ? require : 99);
	if (require && ok >= 0) {
		if (json)
			kv("require_met", NULL, 1, "%s", ok ? "true" : "false");
		else
			printf("require %s: %s\n", dmafs_path_name(require), ok ? "met" : "NOT met");
	}
	if (json)
		printf("\n}\n");
	if (ok == -1)
		return CHECK_EXIT_ERR;
	if (require)
		return ok ? CHECK_EXIT_OK : CHECK_EXIT_MISSING;
	return CHECK_EXIT_OK;
}

int main(int argc, char **argv)
{
	static const struct option lopts[] = {
		{ "require", required_argument, NULL, 'r' },
		{ "json", no_argument, NULL, 'j' },
		{ "list", no_argument, NULL, 'l' },
		{ "help", no_argument, NULL, 'h' },
		{ NULL, 0, NULL, 0 },
	};
	const char *mount = NULL;
	int c, require = 0, list = 0;

	tool_init("dmafs-check");
	while ((c = getopt_long(argc, argv, "r:jlh", lopts, NULL)) != -1) {
		switch (c) {
		case 'r':
			if (!strcmp(optarg, "p2p"))
				require = DMAFS_PATH_P2P;
			else if (!strcmp(optarg, "staged"))
				require = DMAFS_PATH_STAGED;
			else if (!strcmp(optarg, "host"))
				require = DMAFS_PATH_HOST;
			else {
				tool_err("--require %s: expected p2p, staged or host", optarg);
				return CHECK_EXIT_ERR;
			}
			break;
		case 'j':
			json = 1;
			break;
		case 'l':
			list = 1;
			break;
		case 'h':
			usage(stdout);
			return CHECK_EXIT_OK;
		default:
			usage(stderr);
			return CHECK_EXIT_ERR;
		}
	}
	if (optind < argc)
		mount = argv[optind++];
	if (optind < argc) {
		usage(stderr);
		return CHECK_EXIT_ERR;
	}
	if (list) {
		if (require) {
			tool_err("--require checks a mount; --list takes none");
			return CHECK_EXIT_ERR;
		}
		return list_filesystems(mount);
	}
	if (require && !mount) {
		tool_err("--require needs a MOUNT or FILE to check");
		return CHECK_EXIT_ERR;
	}
	if (mount && access(mount, F_OK)) {
		tool_err("%s: %s", mount, strerror(errno));
		return CHECK_EXIT_ERR;
	}
	return report(mount, require);
}
