// SPDX-License-Identifier: MIT
/* mountrec.c - the daemon's mount record under /run, and /proc/self/mountinfo lookups. */
#include "util/mountrec.h"

#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>

#include "octal.h"

void mountrec_dir(uid_t uid, char *buf, size_t len)
{
	if (uid == 0)
		snprintf(buf, len, "/run/dmafs");
	else
		snprintf(buf, len, "/run/user/%u/dmafs", (unsigned)uid);
}

/* The kernel's escaping in mountinfo: space, tab, newline and backslash as \ooo. */
static void escape(FILE *f, const char *s)
{
	for (; *s; s++) {
		if (*s == ' ' || *s == '\t' || *s == '\n' || *s == '\\')
			fprintf(f, "\\%03o", (unsigned char)*s);
		else
			fputc(*s, f);
	}
}

int mountrec_write(const char *dir, const struct mountrec *r)
{
	char path[PATH_MAX], tmp[PATH_MAX];
	FILE *f;
	int fd, ret = 0;

	if (mkdir(dir, geteuid() == 0 ? 0755 : 0700) < 0 && errno != EEXIST)
		return -errno;
	snprintf(path, sizeof(path), "%s/%d", dir, (int)r->pid);
	snprintf(tmp, sizeof(tmp), "%s/.%d.tmp", dir, (int)r->pid);
	fd = open(tmp, O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0644);
	if (fd < 0)
		return -errno;
	f = fdopen(fd, "w");
	if (!f) {
		ret = -errno;
		close(fd);
		unlink(tmp);
		return ret;
	}
	fprintf(f, "pid=%d\nstart=%llu\ndev=%u:%u\nmountpoint=", (int)r->pid, r->start, r->major,
		r->minor);
	escape(f, r->mountpoint);
	fprintf(f, "\nstate=%s\n", r->state);
	if (r->error[0]) {
		fputs("error=", f);
		for (const char *p = r->error; *p; p++)
			fputc(*p == '\n' ? ' ' : *p, f);
		fputc('\n', f);
	}
	if (r->members[0]) {
		fputs("members=", f);
		escape(f, r->members);
		fputc('\n', f);
	}
	for (const char *p = r->notice; *p; p++) {
		if (p == r->notice || p[-1] == '\n')
			fputs("notice=", f);
		fputc(*p, f);
	}
	if (r->notice[0] && r->notice[strlen(r->notice) - 1] != '\n')
		fputc('\n', f);
	if (fflush(f) != 0)
		ret = -errno;
	if (fclose(f) != 0 && !ret)
		ret = -errno;
	if (!ret && rename(tmp, path) < 0)
		ret = -errno;
	if (ret)
		unlink(tmp);
	return ret;
}

int mountrec_read(const char *path, struct mountrec *r)
{
	char *line = NULL;
	size_t cap = 0;
	int have = 0;
	FILE *f;

	memset(r, 0, sizeof(*r));
	f = fopen(path, "re");
	if (!f)
		return -errno;
	while (getline(&line, &cap, f) > 0) {
		char *v = strchr(line, '='), *nl = strchr(line, '\n');

		if (!v)
			continue;
		*v++ = '\0';
		if (nl)
			*nl = '\0';
		if (!strcmp(line, "pid")) {
			r->pid = (pid_t)atoi(v);
			have |= 1;
		} else if (!strcmp(line, "start")) {
			r->start = strtoull(v, NULL, 10);
			have |= 2;
		} else if (!strcmp(line, "dev")) {
			if (sscanf(v, "%u:%u", &r->major, &r->minor) == 2)
				have |= 4;
		} else if (!strcmp(line, "mountpoint")) {
			unescape_octal(v);
			snprintf(r->mountpoint, sizeof(r->mountpoint), "%s", v);
			have |= 8;
		} else if (!strcmp(line, "state")) {
			snprintf(r->state, sizeof(r->state), "%s", v);
			have |= 16;
		} else if (!strcmp(line, "error")) {
			snprintf(r->error, sizeof(r->error), "%s", v);
		} else if (!strcmp(line, "members")) {
			unescape_octal(v);
			snprintf(r->members, sizeof(r->members), "%s", v);
		} else if (!strcmp(line, "notice")) {
			size_t len = strlen(r->notice);

			snprintf(r->notice + len, sizeof(r->notice) - len, "%s\n", v);
		}
	}
	free(line);
	fclose(f);
	return have == 31 && r->pid > 0 ? 0 : -EINVAL;
}

int mountrec_proc(pid_t pid, unsigned long long *start, char *comm, size_t commlen)
{
	char path[64], buf[1024], *open_paren, *close_paren, state;
	unsigned long long st = 0;
	ssize_t n;
	int fd;

	snprintf(path, sizeof(path), "/proc/%d/stat", (int)pid);
	fd = open(path, O_RDONLY | O_CLOEXEC);
	if (fd < 0)
		return errno == ENOENT ? 0 : -errno;
	n = read(fd, buf, sizeof(buf) - 1);
	close(fd);
	if (n <= 0)
		return 0; /* gone between open and read */
	buf[n] = '\0';
	/* "pid (comm) S ppid ..." where comm may hold spaces and parentheses */
	open_paren = strchr(buf, '(');
	close_paren = strrchr(buf, ')');
	if (!open_paren || !close_paren || close_paren < open_paren)
		return -EINVAL;
	if (comm && commlen) {
		size_t len = (size_t)(close_paren - open_paren - 1);

		if (len >= commlen)
			len = commlen - 1;
		memcpy(comm, open_paren + 1, len);
		comm[len] = '\0';
	}
	/* fields after comm: 3 state, 4 ppid, ... 22 starttime */
	if (sscanf(close_paren + 2, "%c %*d %*d %*d %*d %*d %*u %*u %*u %*u %*u %*u %*u %*d %*d %*d %*d %*d %*d %llu",
		   &state, &st) != 2)
		return -EINVAL;
	if (start)
		*start = st;
	return state == 'Z' || state == 'X' ? 0 : 1;
}

int mountrec_alive(const struct mountrec *r)
{
	unsigned long long start;
	char comm[64];

	return mountrec_proc(r->pid, &start, comm, sizeof(comm)) == 1 && start == r->start &&
	       !strcmp(comm, "dmafs");
}

/* A live daemon's record for device @major:@minor in @dir; 0 or -ENOENT. */
static int find_live_in(const char *dir, unsigned major, unsigned minor, struct mountrec *out)
{
	DIR *d = opendir(dir);
	struct dirent *e;
	int ret = -ENOENT;

	if (!d)
		return -ENOENT;
	while (ret && (e = readdir(d))) {
		char path[PATH_MAX];

		if (e->d_name[0] < '1' || e->d_name[0] > '9')
			continue;
		snprintf(path, sizeof(path), "%s/%s", dir, e->d_name);
		if (mountrec_read(path, out) == 0 && out->major == major && out->minor == minor &&
		    mountrec_alive(out))
			ret = 0;
	}
	closedir(d);
	return ret;
}

int mountrec_find_live(unsigned major, unsigned minor, uid_t uid, struct mountrec *out)
{
	char dir[PATH_MAX];

	mountrec_dir(0, dir, sizeof(dir));
	if (find_live_in(dir, major, minor, out) == 0)
		return 0;
	if (uid == 0)
		return -ENOENT;
	mountrec_dir(uid, dir, sizeof(dir));
	return find_live_in(dir, major, minor, out);
}

void mountrec_prune(const char *dir, unsigned age)
{
	DIR *d = opendir(dir);
	struct dirent *e;
	time_t now = time(NULL);

	if (!d)
		return;
	while ((e = readdir(d))) {
		char path[PATH_MAX];
		struct mountrec r;
		struct stat st;

		if (e->d_name[0] < '1' || e->d_name[0] > '9')
			continue;
		snprintf(path, sizeof(path), "%s/%s", dir, e->d_name);
		if (stat(path, &st) < 0 || now - st.st_mtime < (time_t)age)
			continue;
		if (mountrec_read(path, &r) == 0 && mountrec_alive(&r))
			continue;
		unlink(path);
	}
	closedir(d);
}

int mountrec_mounts(int (*fn)(const struct mountrec_mnt *m, void *arg), void *arg)
{
	FILE *f = fopen("/proc/self/mountinfo", "re");
	size_t cap = 0;
	char *line = NULL;
	int ret = 0;

	if (!f)
		return -errno;
	while (!ret && getline(&line, &cap, f) > 0) {
		struct mountrec_mnt m;
		char *save = NULL, *tok, *opts = NULL;
		int field = 0, after_dash = 0;

		memset(&m, 0, sizeof(m));
		m.user_id = -1;
		/*
		 * ID PARENT MAJ:MIN ROOT MOUNTPOINT OPTIONS [OPTIONAL...] - TYPE SOURCE SUPEROPTS
		 */
		for (tok = strtok_r(line, " \n", &save); tok; tok = strtok_r(NULL, " \n", &save)) {
			field++;
			if (after_dash) {
				after_dash++;
				if (after_dash == 2)
					snprintf(m.fstype, sizeof(m.fstype), "%s", tok);
				else if (after_dash == 3) {
					unescape_octal(tok);
					snprintf(m.source, sizeof(m.source), "%s", tok);
				} else if (after_dash == 4) {
					opts = tok;
					snprintf(m.superopts, sizeof(m.superopts), "%s", tok);
				}
				continue;
			}
			if (field == 3)
				sscanf(tok, "%u:%u", &m.major, &m.minor);
			else if (field == 4) {
				unescape_octal(tok);
				snprintf(m.root, sizeof(m.root), "%s", tok);
			} else if (field == 5) {
				unescape_octal(tok);
				snprintf(m.target, sizeof(m.target), "%s", tok);
			} else if (field == 6)
				snprintf(m.mntopts, sizeof(m.mntopts), "%s", tok);
			else if (field > 6 && !strcmp(tok, "-"))
				after_dash = 1;
		}
		if (after_dash < 3)
			continue;
		for (char *o = opts ? strtok_r(opts, ",", &save) : NULL; o; o = strtok_r(NULL, ",", &save))
			if (!strncmp(o, "user_id=", 8))
				m.user_id = atol(o + 8);
		ret = fn(&m, arg);
	}
	free(line);
	fclose(f);
	return ret;
}

struct find_arg {
	const char *target;
	struct mountrec_mnt *out;
	int found;
};

static int find_one(const struct mountrec_mnt *m, void *arg)
{
	struct find_arg *a = arg;

	if (!strcmp(m->target, a->target)) {
		*a->out = *m; /* keep going: the last match is the topmost mount */
		a->found = 1;
	}
	return 0;
}

int mountrec_find_mount(const char *target, struct mountrec_mnt *out)
{
	struct find_arg a = { target, out, 0 };
	int ret = mountrec_mounts(find_one, &a);

	if (ret < 0)
		return ret;
	return a.found ? 0 : -ENOENT;
}

int mountrec_has_opt(const char *opts, const char *word)
{
	size_t n = strlen(word);

	for (const char *p = opts; p && *p;) {
		const char *e = strchr(p, ',');
		size_t len = e ? (size_t)(e - p) : strlen(p);

		if (len == n && !strncmp(p, word, n))
			return 1;
		p = e ? e + 1 : NULL;
	}
	return 0;
}

struct dev_arg {
	unsigned major, minor;
	int ro; /* -ENOENT until found */
};

static int find_dev(const struct mountrec_mnt *m, void *arg)
{
	struct dev_arg *a = arg;

	if (m->major == a->major && m->minor == a->minor)
		a->ro = mountrec_has_opt(m->superopts, "ro");
	return 0;
}

int mountrec_dev_ro(unsigned major, unsigned minor)
{
	struct dev_arg a = { major, minor, -ENOENT };

	mountrec_mounts(find_dev, &a);
	return a.ro;
}
