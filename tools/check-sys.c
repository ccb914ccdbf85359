// SPDX-License-Identifier: MIT
/*
 * check-sys.c - what dmafs-check reports about the machine: its GPUs, GPUDirect Storage
 * (cuFile), nvidia-fs, P2PDMA, hipFile and io_uring.
 */
#include <dlfcn.h>
#include <fcntl.h>
#include <liburing.h>
#include <stdio.h>
#include <string.h>
#include <sys/utsname.h>
#include <sys/wait.h>
#include <unistd.h>

#include "check.h"
#include "libdmafs-int.h"

/* ---- GPUs ---- */

void check_gpus(void)
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

void check_cufile(int have_gpu)
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

void check_nvfs(void)
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

void check_p2pdma(void)
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

void check_hipfile(void)
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

void check_uring(void)
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
