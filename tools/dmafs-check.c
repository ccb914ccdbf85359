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
#include <dlfcn.h>
#include <errno.h>
#include <fcntl.h>
#include <getopt.h>
#include <liburing.h>
#include <linux/fs.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/ioctl.h>
#include <sys/stat.h>
#include <sys/sysmacros.h>
#include <sys/utsname.h>
#include <sys/wait.h>
#include <sys/xattr.h>
#include <unistd.h>

#include "json.h"
#include "libdmafs-int.h"
#include "util/mountrec.h"
#include "io/scan.h"
#include "tool.h"
#include "util/util.h"

/*
 * Output: every fact is a (section, key, value) triple printed as text or as JSON.
 * Sections open and close explicitly; lists of objects are sections whose keys repeat.
 */
static int json, first_in_obj = 1, depth;

static void jstr(const char *s) { json_str(s); }

static void indent(void)
{
	for (int i = 0; i < depth; i++)
		fputs("  ", stdout);
}

static void jsep(void)
{
	if (!first_in_obj)
		putchar(',');
	putchar('\n');
	first_in_obj = 0;
	indent();
}

/* Open an object (@key NULL inside an array) or, with @array, an array. */
static void open_(const char *key, const char *title, int array)
{
	if (json) {
		jsep();
		if (key) {
			jstr(key);
			fputs(": ", stdout);
		}
		putchar(array ? '[' : '{');
		first_in_obj = 1;
	} else if (title) {
		indent();
		printf("%s\n", title);
	}
	depth++;
}

static void close_(int array)
{
	depth--;
	if (json) {
		putchar('\n');
		indent();
		putchar(array ? ']' : '}');
		first_in_obj = 0;
	}
}

/* One value: a string (quoted in JSON), or raw JSON when @raw (numbers, true/false). */
static void kv(const char *key, const char *label, int raw, const char *fmt, ...)
	__attribute__((format(printf, 4, 5)));
static void kv(const char *key, const char *label, int raw, const char *fmt, ...)
{
	char v[1024];
	va_list ap;

	va_start(ap, fmt);
	vsnprintf(v, sizeof(v), fmt, ap);
	va_end(ap);
	if (json) {
		jsep();
		jstr(key);
		fputs(": ", stdout);
		if (raw)
			fputs(v, stdout);
		else
			jstr(v);
	} else {
		indent();
		printf("%-22s %s\n", label ? label : key, v);
	}
}

/* A yes/no fact: true/false in JSON, yes/no in text. */
static void kv_bool(const char *key, const char *label, int v)
{
	if (json)
		kv(key, label, 1, "%s", v ? "true" : "false");
	else
		kv(key, label, 0, "%s", v ? "yes" : "no");
}

/* ---- GPUs ---- */

static void check_gpus(void)
{
	static const struct { int target; const char *key, *name; } rt[] = {
		{ DMAFS_TARGET_CUDA, "cuda", "CUDA" },
		{ DMAFS_TARGET_HIP, "hip", "HIP" },
	};

	open_("gpus", "GPUs", 0);
	for (size_t k = 0; k < 2; k++) {
		struct gpu *g;
		char why[256], title[64];
		int n;

		snprintf(title, sizeof(title), "%s:", rt[k].name);
		open_(rt[k].key, title, 0);
		if (gpu_load(rt[k].target, &g, why, sizeof(why))) {
			kv_bool("present", "present", 0);
			kv("why", "why absent", 0, "%s", why);
			close_(0);
			continue;
		}
		n = gpu_count(g);
		kv_bool("present", "present", 1);
		kv("version", "runtime", 0, "%s", gpu_version(g));
		kv("count", "devices", 1, "%d", n);
		open_("devices", NULL, 1);
		for (int d = 0; d < n; d++) {
			char name[256] = "?", bus[64] = "?", u[48] = "?";
			uint8_t id[16];

			gpu_device_name(g, d, name, sizeof(name));
			gpu_pci_bus_id(g, d, bus, sizeof(bus));
			/* CUDA's spelling (nvidia-smi -L) has a GPU- prefix; HIP's has none. */
			if (!gpu_device_uuid(g, d, id))
				snprintf(u, sizeof(u),
					 "%s%02x%02x%02x%02x-%02x%02x-%02x%02x-%02x%02x-%02x%02x%02x%02x%02x%02x",
					 rt[k].target == DMAFS_TARGET_CUDA ? "GPU-" : "", id[0], id[1], id[2], id[3], id[4], id[5], id[6], id[7], id[8],
					 id[9], id[10], id[11], id[12], id[13], id[14], id[15]);
			if (json) {
				open_(NULL, NULL, 0);
				kv("index", NULL, 1, "%d", d);
				kv("name", NULL, 0, "%s", name);
				kv("uuid", NULL, 0, "%s", u);
				kv("pci_bus_id", NULL, 0, "%s", bus);
				close_(0);
			} else {
				indent();
				printf("%d: %s  uuid %s  pci %s\n", d, name, u, bus);
			}
		}
		close_(1);
		close_(0);
	}
	close_(0);
}

/* ---- direct storage ---- */

/* cufile.h's CUfileError_t, declared here: the header is not needed to ask for versions. */
typedef struct {
	int err;
	int cu_err;
} cufile_err;

static void check_cufile(int have_gpu)
{
	void *h = dlopen("libcufile.so.0", RTLD_NOW | RTLD_LOCAL);
	cufile_err (*get_version)(int *);
	cufile_err (*drv_open)(void);
	cufile_err (*drv_close)(void);

	open_("cufile", "cuFile (GPUDirect Storage):", 0);
	if (!h) {
		kv_bool("present", "libcufile.so.0 found", 0);
		kv("why", "why absent", 0, "%s", dlerror());
		close_(0);
		return;
	}
	kv_bool("present", "libcufile.so.0 found", 1);
	*(void **)&get_version = dlsym(h, "cuFileGetVersion");
	if (get_version) {
		int v = 0;
		cufile_err e = get_version(&v);

		if (e.err == 0)
			kv("version", "version", 0, "%d.%d", v / 1000, v % 1000 / 10);
		else
			kv("version", "version", 0, "unknown (cuFileGetVersion error %d)", e.err);
	} else {
		kv("version", "version", 0, "unknown (no cuFileGetVersion: cuFile older than CUDA 12.x)");
	}
	/* Opening the driver needs a CUDA device; without one it only fails slowly. */
	*(void **)&drv_open = dlsym(h, "cuFileDriverOpen");
	*(void **)&drv_close = dlsym(h, "cuFileDriverClose_v2");
	if (!drv_close)
		*(void **)&drv_close = dlsym(h, "cuFileDriverClose");
	if (!have_gpu) {
		kv("driver_open", "cuFileDriverOpen", 0, "not tried (no CUDA device)");
	} else if (drv_open) {
		cufile_err e = drv_open();

		if (e.err == 0) {
			kv("driver_open", "cuFileDriverOpen", 0, "ok");
			if (drv_close)
				drv_close();
		} else {
			kv("driver_open", "cuFileDriverOpen", 0, "failed: cuFile error %d, CUDA error %d",
			   e.err, e.cu_err);
		}
	}
	close_(0);
	dlclose(h);
}

static void check_nvfs(void)
{
	FILE *f = fopen("/proc/driver/nvidia-fs/version", "re");
	char line[256], all[512] = "";

	if (!f) {
		kv("nvidia_fs", "nvidia-fs", 0, "not loaded");
		return;
	}
	while (fgets(line, sizeof(line), f)) {
		line[strcspn(line, "\n")] = '\0';
		if (*all && strlen(all) + 2 < sizeof(all))
			strcat(all, "; ");
		strncat(all, line, sizeof(all) - strlen(all) - 1);
	}
	fclose(f);
	kv("nvidia_fs", "nvidia-fs", 0, "loaded: %s", all);
}

/* Look for CONFIG_PCI_P2PDMA in a kernel config stream. */
static const char *p2p_scan(FILE *f)
{
	char line[512];

	while (fgets(line, sizeof(line), f)) {
		if (!strncmp(line, "CONFIG_PCI_P2PDMA=y", 19))
			return "enabled (CONFIG_PCI_P2PDMA=y)";
		if (!strncmp(line, "# CONFIG_PCI_P2PDMA is not set", 30))
			return "disabled (CONFIG_PCI_P2PDMA is not set)";
	}
	return "disabled (CONFIG_PCI_P2PDMA absent from the kernel config)";
}

/* /proc/config.gz is gzip: read it through gzip -dc rather than link zlib for one line. */
static const char *p2p_config_gz(void)
{
	static const char *res;
	int p[2];
	pid_t pid;
	FILE *f;
	int st;

	if (access("/proc/config.gz", R_OK) || pipe(p))
		return NULL;
	pid = fork();
	if (pid < 0) {
		close(p[0]);
		close(p[1]);
		return NULL;
	}
	if (pid == 0) {
		int devnull = open("/dev/null", O_WRONLY);

		dup2(p[1], 1);
		if (devnull >= 0)
			dup2(devnull, 2);
		close(p[0]);
		close(p[1]);
		execlp("gzip", "gzip", "-dc", "/proc/config.gz", (char *)NULL);
		_exit(127);
	}
	close(p[1]);
	f = fdopen(p[0], "r");
	res = f ? p2p_scan(f) : NULL;
	if (f)
		fclose(f); /* gzip may get SIGPIPE: fine */
	else
		close(p[0]);
	waitpid(pid, &st, 0);
	if (WIFEXITED(st) && WEXITSTATUS(st) == 127)
		return NULL;
	return res;
}

static void check_p2pdma(void)
{
	struct utsname u;
	char path[300];
	const char *r = NULL, *src = NULL;
	FILE *f;

	uname(&u);
	snprintf(path, sizeof(path), "/boot/config-%s", u.release);
	f = fopen(path, "re");
	if (f) {
		r = p2p_scan(f);
		fclose(f);
		src = path;
	} else if ((r = p2p_config_gz())) {
		src = "/proc/config.gz";
	}
	if (r)
		kv("p2pdma", "P2PDMA", 0, "%s, from %s", r, src);
	else
		kv("p2pdma", "P2PDMA", 0, "unknown (no %s and no readable /proc/config.gz)", path);
}

static void check_hipfile(void)
{
	void *h = dlopen("libhipfile.so", RTLD_NOW | RTLD_LOCAL);

	if (!h) {
		kv("hipfile", "hipFile", 0, "not found (libhipfile.so, ROCm >= 7.2)");
		return;
	}
	kv("hipfile", "hipFile", 0, "found (libhipfile.so)");
	dlclose(h);
}

/* ---- io_uring ---- */

static void check_uring(void)
{
	static const struct { int op; const char *name; } ops[] = {
		{ IORING_OP_READ, "READ" },
		{ IORING_OP_WRITE, "WRITE" },
		{ IORING_OP_READ_FIXED, "READ_FIXED" },
		{ IORING_OP_WRITE_FIXED, "WRITE_FIXED" },
	};
	struct io_uring_probe *p;
	struct utsname u;
	char sup[256] = "";

	uname(&u);
	open_("io_uring", "io_uring", 0);
	kv("kernel", "kernel", 0, "%s", u.release);
	p = io_uring_get_probe();
	if (!p) {
		FILE *f = fopen("/proc/sys/kernel/io_uring_disabled", "re");
		int dis = 0;

		if (f) {
			if (fscanf(f, "%d", &dis) != 1)
				dis = 0;
			fclose(f);
		}
		kv_bool("available", "available", 0);
		kv("why", "why", 0, "io_uring_get_probe failed%s",
		   dis ? " (kernel.io_uring_disabled is set)" : " (kernel too old, or blocked by seccomp)");
		close_(0);
		return;
	}
	kv_bool("available", "available", 1);
	for (size_t i = 0; i < sizeof(ops) / sizeof(ops[0]); i++) {
		int ok = io_uring_opcode_supported(p, ops[i].op);

		if (json) {
			char key[32];

			snprintf(key, sizeof(key), "op_%s", ops[i].name);
			kv(key, NULL, 1, "%s", ok ? "true" : "false");
		}
		snprintf(sup + strlen(sup), sizeof(sup) - strlen(sup), "%s%s %s",
			 *sup ? ", " : "", ops[i].name, ok ? "yes" : "NO");
	}
	if (!json)
		kv("opcodes", "opcodes", 0, "%s", sup);
	io_uring_free_probe(p);
	close_(0);
}

/* ---- a mount ---- */

/* Logical block size of the device holding a regular file, from sysfs. */
static int sysfs_lbs(dev_t dev)
{
	char p[128];
	FILE *f;
	int v = -1;

	snprintf(p, sizeof(p), "/sys/dev/block/%u:%u/queue/logical_block_size", major(dev), minor(dev));
	f = fopen(p, "re");
	if (!f) {
		/* a partition: its queue is the parent's */
		snprintf(p, sizeof(p), "/sys/dev/block/%u:%u/../queue/logical_block_size", major(dev),
			 minor(dev));
		f = fopen(p, "re");
	}
	if (f) {
		if (fscanf(f, "%d", &v) != 1)
			v = -1;
		fclose(f);
	}
	return v;
}

static void member(int i, const char *path)
{
	struct stat st;
	char desc[512];
	int lbs = -1, blk = 0;

	if (stat(path, &st)) {
		snprintf(desc, sizeof(desc), "cannot stat: %s%s", strerror(errno),
			 path[0] != '/' ? " (a relative path is relative to the daemon's working directory)" : "");
	} else if (S_ISBLK(st.st_mode)) {
		int fd = open(path, O_RDONLY | O_CLOEXEC);

		blk = 1;
		if (fd >= 0 && ioctl(fd, BLKSSZGET, &lbs) == 0)
			snprintf(desc, sizeof(desc), "block device, logical block size %d", lbs);
		else
			snprintf(desc, sizeof(desc), "block device, logical block size unknown (%s)",
				 strerror(errno));
		if (fd >= 0)
			close(fd);
	} else if (S_ISREG(st.st_mode)) {
		lbs = sysfs_lbs(st.st_dev);
		if (lbs > 0)
			snprintf(desc, sizeof(desc), "image file, not a block device (its device's logical block size %d)", lbs);
		else
			snprintf(desc, sizeof(desc), "image file, not a block device (on a filesystem without a block device)");
	} else {
		snprintf(desc, sizeof(desc), "neither a block device nor a file");
	}
	if (json) {
		open_(NULL, NULL, 0);
		kv("index", NULL, 1, "%d", i);
		kv("path", NULL, 0, "%s", path);
		kv("block_device", NULL, 1, "%s", blk ? "true" : "false");
		kv("logical_block_size", NULL, 1, "%d", lbs);
		kv("description", NULL, 0, "%s", desc);
		close_(0);
	} else {
		indent();
		printf("%d: %s  %s\n", i, path, desc);
	}
}

static int path_rank(int path)
{
	/* Faster paths have smaller numbers; NONE and POSIX never satisfy --require. cuFile in
	 * compatibility mode is no p2p (no DMA into the GPU) but meets staged. */
	if (path == DMAFS_PATH_P2P_COMPAT)
		return DMAFS_PATH_STAGED;
	return path >= DMAFS_PATH_P2P && path <= DMAFS_PATH_HOST ? path : 99;
}

/*
 * Where @st's mount is and what it is made of. The members come from the daemon's record
 * @rec when there is one (a mount by label shows only the label as its source).
 */
static void mount_source(const char *arg, const struct stat *st, const struct mountrec *rec)
{
	struct mountinfo mi;
	const char *list;
	char **m;
	int n, ret = mountinfo_find(st->st_dev, arg, &mi);

	if (ret) {
		kv("mount", "mount", 0, "not found in /proc/self/mountinfo (%s)", strerror(-ret));
		return;
	}
	list = rec && rec->members[0] ? rec->members : mi.source;
	kv("mountpoint", "mount point", 0, "%s", mi.mnt);
	kv("fstype", "type", 0, "%s", mi.fstype);
	if (!strcmp(mi.fstype, DMAFS_FSTYPE) && strcmp(list, mi.source))
		kv("source", "source", 0, "%s", mi.source);
	if (!strcmp(mi.fstype, DMAFS_FSTYPE) && strncmp(list, "dmafs:", 6) &&
	    (n = mountinfo_members(list, &m)) > 0) {
		open_("members", "members:", 1);
		for (int i = 0; i < n; i++) {
			member(i, m[i]);
			free(m[i]);
		}
		free(m);
		close_(1);
	} else if (!strcmp(list, mi.source)) {
		kv("source", "source", 0, "%s", mi.source);
	}
	mountinfo_free(&mi);
}

/* The daemon's pid and the notes it made at mount (@rec's notices, cut into lines). */
static void daemon_notes(struct mountrec *rec)
{
	kv("daemon_pid", "daemon", 1, "%d", (int)rec->pid);
	open_("notices", "notices (not failures; the daemon's log has them too):", 1);
	for (char *line = rec->notice, *nl; *line; line = nl + 1) {
		nl = strchr(line, '\n');
		if (!nl)
			break; /* a note cut short by the record's size */
		*nl = '\0';
		if (json) {
			jsep();
			jstr(line);
		} else {
			indent();
			printf("%s\n", line);
		}
	}
	if (!json && !rec->notice[0]) {
		indent();
		printf("none\n");
	}
	close_(1);
}

/* The path a placement into each target takes, and why. 1 if one is @require or faster. */
static int placement_paths(const struct dmafs_caps *c, int require)
{
	const struct { const char *key; const struct dmafs_target_caps *t; } tg[] = {
		{ "host", &c->host }, { "cuda", &c->cuda }, { "hip", &c->hip },
	};
	int ok = 0;

	open_("placement", "placement (path a placement into each target takes, and why):", 0);
	for (size_t i = 0; i < 3; i++) {
		const struct dmafs_target_caps *t = tg[i].t;

		if (path_rank(t->path) <= require)
			ok = 1;
		if (json) {
			open_(tg[i].key, NULL, 0);
			kv("path", NULL, 0, "%s", dmafs_path_name(t->path));
			kv("devices", NULL, 1, "%d", t->devices);
			kv("why", NULL, 0, "%s", t->why);
			close_(0);
		} else {
			indent();
			printf("%-5s %-7s %s\n", tg[i].key, dmafs_path_name(t->path), t->why);
		}
	}
	close_(0);
	return ok;
}

/* The warm tier the daemon reports (DMAFS_IOC_INFO, which dmafs_session_caps just asked). */
static void warm_tier(const struct dmafs_ioc_info *i)
{
	if (!json && !i->tier_size) {
		kv("tier", "warm tier", 0, "off (mount option tier=)");
		return;
	}
	open_("tier", "warm tier (file data the daemon keeps in memory for placements):", 0);
	kv("size", "size", 1, "%llu", (unsigned long long)i->tier_size);
	kv("held", "bytes held", 1, "%llu", (unsigned long long)i->tier_held);
	kv("hits", "hits", 1, "%llu", (unsigned long long)i->tier_hits);
	kv("misses", "misses", 1, "%llu", (unsigned long long)i->tier_misses);
	kv("served", "bytes served", 1, "%llu", (unsigned long long)i->tier_served);
	kv("filled", "bytes filled", 1, "%llu", (unsigned long long)i->tier_filled);
	kv("evicted", "chunks evicted", 1, "%llu", (unsigned long long)i->tier_evicted);
	kv("cap", "bytes it may hold now", 1, "%llu", (unsigned long long)i->tier_cap);
	kv("resident", "bytes in segments", 1, "%llu", (unsigned long long)i->tier_resident);
	kv("pinned", "bytes pinned for GPUs", 1, "%llu", (unsigned long long)i->tier_pinned);
	kv("shrunk", "bytes given back", 1, "%llu", (unsigned long long)i->tier_shrunk);
	kv("min_free", "memory left free", 1, "%llu", (unsigned long long)i->tier_min_free);
	kv("fill", "filled (tier_fill=)", 0, "%s", i->tier_fill ? "idle" : "now");
	if (i->tier_fill) {
		kv("fill_waiting", "ranges waiting", 1, "%u", i->tier_waiting);
		kv("filled_idle", "bytes filled later", 1, "%llu",
		   (unsigned long long)i->tier_filled_idle);
		kv("fill_dropped", "ranges given up", 1, "%llu", (unsigned long long)i->tier_dropped);
	}
	close_(0);
}

/*
 * The filesystem's UUID and label, and each member's size, used and free bytes, from the
 * daemon's user.dmafs.members (dmafs(8)); @paths[0..@npaths) name the members where known.
 * A daemon older than that attribute: nothing is shown.
 */
static void fs_space(const char *arg, char **paths, int npaths)
{
	struct { unsigned long long size, data, free; char uuid[40]; } m[FMT_MAX_MEMBERS];
	char v[8192], uuid[40] = "", *label = NULL, *line, *save = NULL, s1[32], s2[32], s3[32];
	unsigned long long tdata = 0, tfree = 0;
	ssize_t len = getxattr(arg, "user.dmafs.members", v, sizeof(v) - 1);
	unsigned n = 0, k;

	if (len <= 0)
		return;
	v[len] = '\0';
	for (line = strtok_r(v, "\n", &save); line; line = strtok_r(NULL, "\n", &save)) {
		if (!strncmp(line, "uuid=", 5))
			snprintf(uuid, sizeof(uuid), "%s", line + 5);
		else if (!strncmp(line, "label=", 6))
			label = line + 6;
		else if (n < FMT_MAX_MEMBERS &&
			 sscanf(line, "member=%u uuid=%39s size=%llu data=%llu free=%llu", &k, m[n].uuid,
				&m[n].size, &m[n].data, &m[n].free) == 5 && k == n)
			n++;
	}
	kv("uuid", "filesystem UUID", 0, "%s", uuid);
	kv("label", "label", 0, "%s", label && (*label || json) ? label : "(none)");
	open_("space", "space (each member's data region: size, used, free):", 1);
	for (k = 0; k < n; k++) {
		const char *path = (int)k < npaths ? paths[k] : "?";

		tdata += m[k].data;
		tfree += m[k].free;
		if (json) {
			open_(NULL, NULL, 0);
			kv("index", NULL, 1, "%u", k);
			kv("path", NULL, 0, "%s", path);
			kv("member_uuid", NULL, 0, "%s", m[k].uuid);
			kv("member_size", NULL, 1, "%llu", m[k].size);
			kv("size", NULL, 1, "%llu", m[k].data);
			kv("used", NULL, 1, "%llu", m[k].data - m[k].free);
			kv("free", NULL, 1, "%llu", m[k].free);
			close_(0);
		} else {
			indent();
			printf("%u: %s  size %s  used %s  free %s  (member UUID %s)\n", k, path,
			       util_fmt_size(m[k].data, s1, sizeof(s1)),
			       util_fmt_size(m[k].data - m[k].free, s2, sizeof(s2)),
			       util_fmt_size(m[k].free, s3, sizeof(s3)), m[k].uuid);
		}
	}
	if (!json && n > 1) {
		indent();
		printf("all: size %s  used %s  free %s\n", util_fmt_size(tdata, s1, sizeof(s1)),
		       util_fmt_size(tdata - tfree, s2, sizeof(s2)), util_fmt_size(tfree, s3, sizeof(s3)));
	}
	close_(1);
}

/* The member paths of @arg's mount (the daemon's record @rec, else mountinfo); a count or 0. */
static int member_paths(const char *arg, const struct stat *st, const struct mountrec *rec, char ***out)
{
	struct mountinfo mi;
	int n = 0;

	*out = NULL;
	if (rec && rec->members[0]) {
		n = mountinfo_members(rec->members, out);
		return n > 0 ? n : 0;
	}
	if (mountinfo_find(st->st_dev, arg, &mi))
		return 0;
	if (strncmp(mi.source, "dmafs:", 6))
		n = mountinfo_members(mi.source, out);
	mountinfo_free(&mi);
	return n > 0 ? n : 0;
}

/* The mount of @arg: 1 when a target's path is @require or faster, 0 when not, -1 on error. */
static int check_mount(const char *arg, int require)
{
	struct dmafs_session *s;
	struct dmafs_caps c;
	static struct mountrec rec;
	struct stat st;
	int ret, ok, have_rec;

	if (stat(arg, &st)) {
		tool_err("%s: %s", arg, strerror(errno));
		return -1;
	}
	open_("mount", "Mount", 0);
	kv("path", "path", 0, "%s", arg);
	have_rec = mountrec_find_live(major(st.st_dev), minor(st.st_dev), getuid(), &rec) == 0;
	mount_source(arg, &st, have_rec ? &rec : NULL);
	if (have_rec)
		daemon_notes(&rec);
	ret = dmafs_session_open(arg, &s);
	if (ret) {
		tool_err("%s: cannot open a session: %s", arg, dmafs_strerror(ret));
		close_(0);
		return -1;
	}
	ret = dmafs_session_caps(s, &c);
	if (ret) {
		tool_err("%s: the daemon does not answer: %s", arg, dmafs_strerror(ret));
		dmafs_session_close(s);
		close_(0);
		return -1;
	}
	kv_bool("on_dmafs", "on dmafs", c.on_dmafs);
	if (c.on_dmafs) {
		char **paths;
		int np = member_paths(arg, &st, have_rec ? &rec : NULL, &paths);

		kv("proto_version", "protocol", 1, "%d", c.proto_version);
		kv("members_count", "member count", 1, "%u", c.members);
		kv("stripe_unit", "stripe unit", 1, "%u", c.stripe_unit);
		fs_space(arg, paths, np);
		for (int i = 0; i < np; i++)
			free(paths[i]);
		free(paths);
		kv("staging_bytes", "staging per GPU", 1, "%llu", (unsigned long long)c.staging_bytes);
		warm_tier(&s->info);
	}
	ok = placement_paths(&c, require);
	close_(0);
	dmafs_session_close(s);
	return ok;
}

/* ---- dmafs filesystems on the block devices (--list) ---- */

/* A label as text: control characters escaped (a label is any 64 bytes). */
static const char *label_text(const char *label, char *buf, size_t len)
{
	size_t k = 0;

	for (const unsigned char *c = (const unsigned char *)label; *c && k + 5 < len; c++)
		k += (size_t)snprintf(buf + k, len - k, (*c < 0x20 || *c == 0x7f) ? "\\x%02x" : "%c", *c);
	buf[k] = '\0';
	return buf;
}

static void list_fs(const struct scan_fs *fs)
{
	const struct fmt_sb *sb = fs->sb;
	char u[40], lab[300], size[32];

	util_uuid_str(sb->fs_uuid, u);
	label_text(sb->label, lab, sizeof(lab));
	if (json) {
		open_(NULL, NULL, 0);
		kv("label", NULL, 0, "%s", lab);
		kv("uuid", NULL, 0, "%s", u);
		kv("member_count", NULL, 1, "%u", sb->member_count);
		kv("members_found", NULL, 1, "%d", fs->found);
		kv_bool("complete", NULL, (unsigned)fs->found == sb->member_count && fs->dup < 0);
		open_("members", NULL, 1);
	} else {
		printf("Label: %s%s%s  UUID: %s\n", *lab ? "'" : "", *lab ? lab : "none", *lab ? "'" : "", u);
		printf("\tmembers: %u", sb->member_count);
		if ((unsigned)fs->found < sb->member_count)
			printf(", %u MISSING", sb->member_count - (unsigned)fs->found);
		printf("\n");
	}
	for (unsigned i = 0; i < sb->member_count; i++) {
		const struct scan_dev *d = fs->member[i];
		char mu[40];

		util_uuid_str(sb->member_uuid[i], mu);
		if (json) {
			open_(NULL, NULL, 0);
			kv("index", NULL, 1, "%u", i);
			if (d) {
				kv("path", NULL, 0, "%s", d->path);
				kv("size", NULL, 1, "%llu", (unsigned long long)d->size);
			} else {
				kv("path", NULL, 1, "null");
			}
			kv_bool("missing", NULL, !d);
			kv("member_uuid", NULL, 0, "%s", mu);
			if (d)
				kv_bool("superblock_from_copy", NULL, d->from_copy);
			close_(0);
		} else if (d) {
			printf("\tmember %2u  %-20s %10s%s\n", i, d->path,
			       util_fmt_size(d->size, size, sizeof(size)),
			       d->from_copy ? "  (primary superblock damaged: read from its copy)" : "");
		} else {
			printf("\tmember %2u  MISSING (member UUID %s)\n", i, mu);
		}
	}
	if (json)
		close_(1);
	if (fs->dup >= 0) {
		if (json) {
			open_("duplicate", NULL, 0);
			kv("index", NULL, 1, "%d", fs->dup);
			kv("path", NULL, 0, "%s", fs->member[fs->dup]->path);
			kv("other_path", NULL, 0, "%s", fs->dup_dev->path);
			close_(0);
		} else {
			printf("\tmember %d is on two devices, %s and %s: name the members by path to mount\n",
			       fs->dup, fs->member[fs->dup]->path, fs->dup_dev->path);
		}
	}
	if (json)
		close_(0);
}

/*
 * The superblocks this dmafs cannot use (another format version, damaged in both copies),
 * after @shown filesystems; only in the full list (@all). Returns how many.
 */
static int list_unusable(const struct scan_result *r, int shown, int all)
{
	int unusable = 0;

	if (json)
		open_("unusable", NULL, 1);
	for (int i = 0; all && i < r->n; i++) {
		const struct scan_dev *d = &r->dev[i];
		char why[128];

		if (!d->err)
			continue;
		if (d->err == -EPROTONOSUPPORT)
			snprintf(why, sizeof(why), "dmafs on-disk format version %u; this dmafs reads version %d",
				 d->version, FMT_VERSION);
		else
			snprintf(why, sizeof(why), "%s in both copies",
				 d->err == -EBADMSG ? "superblock checksum mismatch" : "superblock fields inconsistent");
		if (json) {
			open_(NULL, NULL, 0);
			kv("path", NULL, 0, "%s", d->path);
			kv("why", NULL, 0, "%s", why);
			close_(0);
		} else {
			printf("%s%s  %s\n", unusable ? "" : shown ? "\nNot usable:\n" : "Not usable:\n", d->path, why);
		}
		unusable++;
	}
	if (json)
		close_(1);
	return unusable;
}

/*
 * List the dmafs filesystems on the block devices, or the ones @name (LABEL=, UUID=)
 * names. Returns CHECK_EXIT_OK when every one listed has all its members,
 * CHECK_EXIT_MISSING when one lacks a member or has one twice, or when @name matches
 * none, CHECK_EXIT_ERR on an error.
 */
static int list_filesystems(const char *name)
{
	struct scan_result r;
	struct scan_fs *fs = NULL;
	int nfs, ret, shown = 0, bad = 0, unusable = 0;
	const char *v;
	size_t vlen;

	if (name && scan_source_kind(name, &v, &vlen) <= 0) {
		tool_err("%s: not a filesystem name: LABEL=NAME, UUID=UUID, dmafs:LABEL=NAME or dmafs:UUID=UUID",
			name);
		return CHECK_EXIT_ERR;
	}
	ret = scan_block_devices(&r);
	if (ret) {
		tool_err("cannot list the block devices in /sys/class/block: %s (is sysfs mounted?)",
			strerror(-ret));
		return CHECK_EXIT_ERR;
	}
	nfs = scan_filesystems(&r, &fs);
	if (nfs < 0) {
		tool_err("%s", strerror(-nfs));
		scan_result_free(&r);
		return CHECK_EXIT_ERR;
	}
	if (json) {
		putchar('{');
		kv("version", NULL, 0, "%s", PACKAGE_VERSION);
		open_("filesystems", NULL, 1);
	}
	for (int i = 0; i < nfs; i++) {
		if (name && !scan_matches(fs[i].sb, name))
			continue;
		if (shown++ && !json)
			putchar('\n');
		list_fs(&fs[i]);
		if ((unsigned)fs[i].found < fs[i].sb->member_count || fs[i].dup >= 0)
			bad = 1;
	}
	if (json)
		close_(1);
	unusable = list_unusable(&r, shown, !name);
	if (json) {
		kv("devices_read", NULL, 1, "%d", r.candidates - r.denied - r.failed);
		kv("devices_denied", NULL, 1, "%d", r.denied);
		kv("devices_failed", NULL, 1, "%d", r.failed);
		printf("\n}\n");
	} else if (!shown && !unusable) {
		printf("no dmafs filesystem%s%s on this machine's block devices\n", name ? " with " : "",
		       name ? name : "");
	}
	/* a list that may be short says so where scripts parsing the output do not look */
	if (r.denied)
		tool_err("%d block device%s could not be opened (%s%s: permission denied%s): the list may be incomplete",
			r.denied, r.denied == 1 ? "" : "s", r.denied_path, r.denied > 1 ? " and others" : "",
			geteuid() ? "; run as root" : "");
	if (r.failed)
		tool_err("%d block device%s could not be read (%s%s): the list may be incomplete",
			r.failed, r.failed == 1 ? "" : "s", r.failed_path, r.failed > 1 ? " and others" : "");
	if (!shown && !json && unusable == 0)
		tool_err("image files are not scanned: attach them with losetup -f --show IMAGE");
	free(fs);
	scan_result_free(&r);
	if (name && !shown)
		return CHECK_EXIT_MISSING;
	return bad ? CHECK_EXIT_MISSING : CHECK_EXIT_OK;
}

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
