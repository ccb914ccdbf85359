// SPDX-License-Identifier: MIT
/*
 * dmafs-load.c - place files into host or GPU memory through libdmafs, report the rate
 * and the path each file took, and optionally verify every byte against a POSIX read.
 *
 * All files go into one buffer, each at a 4 KiB-aligned offset (aligned offsets let the
 * daemon read straight into the buffer). Files on different mounts get one session and
 * one registration per mount, over slices of the same allocation. Safetensors models
 * (--model, or PATHs that are *.safetensors files) go through load-model.c instead.
 * Every file is opened once, when it is collected, and placed, verified or prefetched
 * through that descriptor: a file removed or renamed during the load is still loaded.
 * --prefetch places nothing: it reads the files (or a model's files) into the warm tier
 * of their mount (dmafs_prefetch), for placements to come.
 *
 * This file is the command line: options, their checks, and the choice of mode. The modes
 * are load-files.c (files), load-model.c (models) and load-prefetch.c (--prefetch); what
 * they share is load-common.c.
 */
#include <errno.h>
#include <getopt.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/resource.h>
#include <sys/stat.h>

#include "dmafs.h"
#include "load-files.h"
#include "load-model.h"
#include "tool.h"

static void usage(FILE *f)
{
	fprintf(f,
		"usage: dmafs-load [--target host|cuda:N|hip:N] [--verify] [--json] [--threads N] [-q] PATH...\n"
		"       dmafs-load --model [--target T | --gpus N,N,...] [--list] [--verify] ... MODEL...\n"
		"       dmafs-load --prefetch [--model] [--json] [-q] PATH...\n"
		"\n"
		"Place files (directories: every regular file below them) into one buffer of\n"
		"host or GPU memory through libdmafs, and report the rate and the path used.\n"
		"  -t, --target T   host (shared host memory, default), cuda:N or hip:N\n"
		"  -m, --model      each PATH is a safetensors model: a file, a directory of\n"
		"                   shards or with an index, an index .json, an HF cache snapshot\n"
		"                   (implied when every PATH is a *.safetensors file)\n"
		"  -g, --gpus LIST  models: shard i goes to GPU LIST[i %% n], one buffer per GPU\n"
		"  -l, --list       models: print every tensor and where it was placed\n"
		"  -p, --prefetch   place nothing: read the files into their mount's warm tier\n"
		"                   (mount option tier=), so that later placements copy from it\n"
		"  -V, --verify     compare every placed byte (models: every tensor) with a POSIX read\n"
		"  -j, --json       print one JSON document instead of text\n"
		"  -T, --threads N  files placed at once (default: one per file, up to 8)\n"
		"  -q, --quiet      print only the total line (and notices and errors)\n"
		"  -h, --help       this text\n"
		"Exit status: 0 success, 1 error, 2 verify mismatch. See dmafs-load(1).\n");
}

static int parse_target(struct load_opt *o, const char *s)
{
	const char *num = NULL;
	char *end;
	long d = 0;

	if (!strcmp(s, "host")) {
		o->target = DMAFS_TARGET_HOST;
		return 0;
	}
	if (!strncmp(s, "cuda", 4)) {
		o->target = DMAFS_TARGET_CUDA;
		num = s + 4;
	} else if (!strncmp(s, "hip", 3)) {
		o->target = DMAFS_TARGET_HIP;
		num = s + 3;
	} else {
		return -1;
	}
	if (*num == ':') {
		errno = 0;
		d = strtol(num + 1, &end, 10);
		if (errno || end == num + 1 || *end || d < 0 || d > 1023)
			return -1;
	} else if (*num) {
		return -1;
	}
	o->device = (int)d;
	return 0;
}

/* --gpus 0,1,...: device ordinals, each once. */
static int parse_gpus(struct load_opt *o, const char *s)
{
	const char *p = s;
	char *end;

	o->ngpus = 0;
	do {
		long d;

		errno = 0;
		d = strtol(p, &end, 10);
		if (errno || end == p || d < 0 || d > 1023 || (*end && *end != ','))
			return -1;
		for (int i = 0; i < o->ngpus; i++)
			if (o->gpus[i] == d)
				return -1;
		if (o->ngpus == LOAD_MAX_GPUS)
			return -1;
		o->gpus[o->ngpus++] = (int)d;
		p = end + 1;
	} while (*end == ',');
	return 0;
}

/* Every file stays open for the whole load: the soft descriptor limit goes up to the hard one. */
static void raise_nofile(void)
{
	struct rlimit r;

	if (!getrlimit(RLIMIT_NOFILE, &r) && r.rlim_cur < r.rlim_max) {
		r.rlim_cur = r.rlim_max;
		setrlimit(RLIMIT_NOFILE, &r);
	}
}

/* PATHs that are all safetensors files are models: show their tensors. */
static int all_safetensors(char **paths, int n)
{
	struct stat st;

	for (int i = 0; i < n; i++) {
		size_t l = strlen(paths[i]);

		if (l < 12 || strcmp(paths[i] + l - 12, ".safetensors") || stat(paths[i], &st) ||
		    !S_ISREG(st.st_mode))
			return 0;
	}
	return 1;
}

/* Options that go together, and what they imply. 0, or -1 with the reason printed. */
static int check_opts(struct load_opt *o)
{
	if (o->prefetch) {
		const char *opt = o->target_set ? "--target" : o->ngpus ? "--gpus" : o->list ? "--list" :
				  o->verify ? "--verify" : o->threads ? "--threads" : NULL;

		if (opt) {
			tool_err("%s does not go with --prefetch, which places nothing: it reads the files into their mount's warm tier",
				 opt);
			return -1;
		}
		return 0;
	}
	if (o->ngpus) {
		if (!o->model) {
			tool_err("--gpus places safetensors models shard by shard: add --model");
			return -1;
		}
		if (o->target_set && o->target == DMAFS_TARGET_HOST) {
			tool_err("--gpus with --target host: give --target cuda or hip (or leave it out for cuda)");
			return -1;
		}
		if (!o->target_set)
			o->target = DMAFS_TARGET_CUDA;
	}
	if (o->list && !o->model) {
		tool_err("--list shows the tensors of models: add --model");
		return -1;
	}
	return 0;
}

int main(int argc, char **argv)
{
	static const struct option lopts[] = {
		{ "target", required_argument, NULL, 't' },
		{ "model", no_argument, NULL, 'm' },
		{ "gpus", required_argument, NULL, 'g' },
		{ "list", no_argument, NULL, 'l' },
		{ "prefetch", no_argument, NULL, 'p' },
		{ "verify", no_argument, NULL, 'V' },
		{ "json", no_argument, NULL, 'j' },
		{ "threads", required_argument, NULL, 'T' },
		{ "quiet", no_argument, NULL, 'q' },
		{ "help", no_argument, NULL, 'h' },
		{ NULL, 0, NULL, 0 },
	};
	struct load_opt opt = { .target = DMAFS_TARGET_HOST };
	struct job j = { .opt = &opt };
	int c;

	tool_init("dmafs-load");
	while ((c = getopt_long(argc, argv, "t:mg:lpVjT:qh", lopts, NULL)) != -1) {
		switch (c) {
		case 't':
			if (parse_target(&opt, optarg)) {
				tool_err("--target %s: expected host, cuda:N or hip:N", optarg);
				return LOAD_EXIT_ERR;
			}
			opt.target_set = 1;
			break;
		case 'm':
			opt.model = 1;
			break;
		case 'g':
			if (parse_gpus(&opt, optarg)) {
				tool_err("--gpus %s: expected distinct device numbers 0-1023 separated by commas (at most %d)",
					 optarg, LOAD_MAX_GPUS);
				return LOAD_EXIT_ERR;
			}
			break;
		case 'l':
			opt.list = 1;
			break;
		case 'p':
			opt.prefetch = 1;
			break;
		case 'V':
			opt.verify = 1;
			break;
		case 'j':
			opt.json = 1;
			break;
		case 'T': {
			char *end;
			unsigned long v = strtoul(optarg, &end, 10);

			if (end == optarg || *end || v < 1 || v > 256) {
				tool_err("--threads %s: expected a number from 1 to 256", optarg);
				return LOAD_EXIT_ERR;
			}
			opt.threads = (unsigned)v;
			break;
		}
		case 'q':
			opt.quiet = 1;
			break;
		case 'h':
			usage(stdout);
			return LOAD_EXIT_OK;
		default:
			usage(stderr);
			return LOAD_EXIT_ERR;
		}
	}
	if (optind >= argc) {
		usage(stderr);
		return LOAD_EXIT_ERR;
	}
	if (!opt.model && !opt.prefetch)
		opt.model = all_safetensors(argv + optind, argc - optind);
	if (check_opts(&opt))
		return LOAD_EXIT_ERR;
	raise_nofile();
	if (opt.prefetch)
		return prefetch_files(&j, argv + optind, argc - optind);
	if (opt.model)
		return load_models(&opt, argv + optind, argc - optind);
	load_target_name(opt.target, opt.device, j.tname, sizeof(j.tname));
	return load_files(&j, argv + optind, argc - optind);
}
