// SPDX-License-Identifier: MIT
/* acl.c - POSIX ACL xattr values: validation, mode agreement, inheritance; caller checks. */
#include "engine/acl.h"

#include <errno.h>
#include <inttypes.h>
#include <limits.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "util/util.h"

#define ACL_READ 4
#define ACL_WRITE 2
#define ACL_EXECUTE 1
#define ACL_PERMS (ACL_READ | ACL_WRITE | ACL_EXECUTE)

static inline uint8_t *entry(void *val, size_t k)
{
	return (uint8_t *)val + ACL_HDR_BYTES + k * ACL_ENTRY_BYTES;
}

static inline const uint8_t *centry(const void *val, size_t k)
{
	return (const uint8_t *)val + ACL_HDR_BYTES + k * ACL_ENTRY_BYTES;
}

static inline size_t count(size_t len) { return (len - ACL_HDR_BYTES) / ACL_ENTRY_BYTES; }

int acl_check(const void *val, size_t len)
{
	/* the canonical order, as a state: owner, users, owning group, groups, mask, other */
	enum { S_USER_OBJ, S_USER, S_GROUP, S_OTHER, S_DONE } state = S_USER_OBJ;
	int64_t last_id = -1;
	int named = 0;
	size_t n;

	if (!val || len < ACL_HDR_BYTES + ACL_ENTRY_BYTES ||
	    (len - ACL_HDR_BYTES) % ACL_ENTRY_BYTES)
		return -EINVAL;
	if (get_u32(val) != ACL_XATTR_VERSION)
		return -EINVAL;
	n = count(len);
	if (n > ACL_MAX_ENTRIES)
		return -E2BIG;
	for (size_t k = 0; k < n; k++) {
		const uint8_t *e = centry(val, k);
		uint16_t tag = get_u16(e), perm = get_u16(e + 2);
		uint32_t id = get_u32(e + 4);

		if (perm & ~ACL_PERMS)
			return -EINVAL;
		switch (tag) {
		case ACL_TAG_USER_OBJ:
			if (state != S_USER_OBJ)
				return -EINVAL;
			state = S_USER;
			break;
		case ACL_TAG_USER:
		case ACL_TAG_GROUP:
			if (state != (tag == ACL_TAG_USER ? S_USER : S_GROUP))
				return -EINVAL;
			/* (uid_t)-1 is no one; ids strictly increase, so none repeats */
			if (id == UINT32_MAX || (int64_t)id <= last_id)
				return -EINVAL;
			last_id = id;
			named = 1;
			break;
		case ACL_TAG_GROUP_OBJ:
			if (state != S_USER)
				return -EINVAL;
			state = S_GROUP;
			last_id = -1;
			break;
		case ACL_TAG_MASK:
			if (state != S_GROUP)
				return -EINVAL;
			state = S_OTHER;
			break;
		case ACL_TAG_OTHER:
			if (state != S_OTHER && (state != S_GROUP || named))
				return -EINVAL;
			state = S_DONE;
			break;
		default:
			return -EINVAL;
		}
	}
	return state == S_DONE ? (int)n : -EINVAL;
}

int acl_mode(const void *val, size_t len, uint32_t *perm)
{
	uint32_t u = 0, g = 0, m = 0, o = 0;
	int mask = 0;
	size_t n = count(len);

	for (size_t k = 0; k < n; k++) {
		const uint8_t *e = centry(val, k);
		uint32_t p = get_u16(e + 2) & ACL_PERMS;

		switch (get_u16(e)) {
		case ACL_TAG_USER_OBJ:
			u = p;
			break;
		case ACL_TAG_GROUP_OBJ:
			g = p;
			break;
		case ACL_TAG_MASK:
			m = p;
			mask = 1;
			break;
		case ACL_TAG_OTHER:
			o = p;
			break;
		}
	}
	*perm = u << 6 | (mask ? m : g) << 3 | o;
	/* owner, owning group and other only: exactly what the mode says */
	return n == 3;
}

/* The group class entry: the mask if there is one, else the owning group. */
static uint8_t *group_class(void *val, size_t len)
{
	uint8_t *g = NULL;

	for (size_t k = 0; k < count(len); k++) {
		uint8_t *e = entry(val, k);

		if (get_u16(e) == ACL_TAG_MASK)
			return e;
		if (get_u16(e) == ACL_TAG_GROUP_OBJ)
			g = e;
	}
	return g;
}

int acl_create(void *val, size_t len, uint32_t *mode)
{
	uint8_t *gc = group_class(val, len);
	uint32_t perm = 0;

	for (size_t k = 0; k < count(len); k++) {
		uint8_t *e = entry(val, k);
		uint16_t tag = get_u16(e), p = get_u16(e + 2);

		if (tag == ACL_TAG_USER_OBJ)
			put_u16(e + 2, p & (*mode >> 6 & 7));
		else if (tag == ACL_TAG_OTHER)
			put_u16(e + 2, p & (*mode & 7));
		else if (e == gc)
			put_u16(e + 2, p & (*mode >> 3 & 7));
	}
	acl_mode(val, len, &perm);
	*mode = (*mode & ~0777u) | perm;
	return count(len) != 3;
}

void acl_chmod(void *val, size_t len, uint32_t mode)
{
	uint8_t *gc = group_class(val, len);

	for (size_t k = 0; k < count(len); k++) {
		uint8_t *e = entry(val, k);
		uint16_t tag = get_u16(e);

		if (tag == ACL_TAG_USER_OBJ)
			put_u16(e + 2, mode >> 6 & 7);
		else if (tag == ACL_TAG_OTHER)
			put_u16(e + 2, mode & 7);
		else if (e == gc)
			put_u16(e + 2, mode >> 3 & 7);
	}
}

/* ---- the requesting process, from /proc ---- */

/* Open /proc/PID/status of a process in the daemon's own user namespace, or NULL. */
static FILE *status_open(pid_t pid)
{
	char path[64], ns[64], self[64];
	ssize_t a, b;

	if (pid <= 0)
		return NULL;
	snprintf(path, sizeof(path), "/proc/%d/ns/user", (int)pid);
	a = readlink(path, ns, sizeof(ns) - 1);
	b = readlink("/proc/self/ns/user", self, sizeof(self) - 1);
	if (a <= 0 || a != b || memcmp(ns, self, a))
		return NULL; /* gone, or capabilities that mean nothing here */
	snprintf(path, sizeof(path), "/proc/%d/status", (int)pid);
	return fopen(path, "re");
}

int acl_pid_capable(pid_t pid, int cap)
{
	FILE *f = status_open(pid);
	char line[256];
	int ret = 0;

	if (!f)
		return 0;
	while (fgets(line, sizeof(line), f)) {
		uint64_t eff;

		if (sscanf(line, "CapEff: %" SCNx64, &eff) == 1) {
			ret = cap < 64 && (eff >> cap & 1);
			break;
		}
	}
	fclose(f);
	return ret;
}

int acl_pid_same_creds(pid_t pid, uint32_t fsuid, uint32_t fsgid)
{
	FILE *f = status_open(pid);
	char line[256];
	int uid_ok = -1, gid_ok = -1;

	if (!f)
		return -1;
	/* "Uid:" and "Gid:" list the real, effective, saved and filesystem ids */
	while (fgets(line, sizeof(line), f) && (uid_ok < 0 || gid_ok < 0)) {
		unsigned long r, e, s, fs;

		if (sscanf(line, "Uid: %lu %lu %lu %lu", &r, &e, &s, &fs) == 4)
			uid_ok = fs == fsuid;
		else if (sscanf(line, "Gid: %lu %lu %lu %lu", &r, &e, &s, &fs) == 4)
			gid_ok = fs == fsgid;
	}
	fclose(f);
	if (uid_ok < 0 || gid_ok < 0)
		return -1;
	return uid_ok && gid_ok;
}

int acl_pid_in_group(pid_t pid, uint32_t fsgid, uint32_t gid)
{
	FILE *f;
	char *line = NULL;
	size_t cap = 0;
	int ret = 0;

	if (fsgid == gid)
		return 1;
	f = status_open(pid);
	if (!f)
		return 0;
	while (getline(&line, &cap, f) > 0) {
		char *p, *end;

		if (strncmp(line, "Groups:", 7))
			continue;
		for (p = line + 7;; p = end) {
			unsigned long g = strtoul(p, &end, 10);

			if (end == p)
				break;
			if (g == gid) {
				ret = 1;
				break;
			}
		}
		break;
	}
	free(line);
	fclose(f);
	return ret;
}
