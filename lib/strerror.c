// SPDX-License-Identifier: MIT
/*
 * strerror.c - dmafs_strerror, dmafs_path_name, dmafs_version: the words for numbers.
 *
 * dmafs gives some errnos a meaning of its own (-EXDEV: the file is on another mount
 * than the session); those get a sentence that says what to do. The rest fall back to
 * the C library's text.
 */
#include <errno.h>
#include <string.h>

#include "libdmafs-int.h"

int dmafs_version(void)
{
	return DMAFS_VERSION_NUM;
}

const char *dmafs_path_name(int path)
{
	switch (path) {
	case DMAFS_PATH_P2P:
		return "p2p";
	case DMAFS_PATH_P2P_COMPAT:
		return "p2p-compat";
	case DMAFS_PATH_STAGED:
		return "staged";
	case DMAFS_PATH_HOST:
		return "host";
	case DMAFS_PATH_POSIX:
		return "posix";
	default:
		return "none";
	}
}

const char *dmafs_strerror(int err)
{
	static __thread char buf[128];

	if (err < 0)
		err = -err;
	switch (err) {
	case 0:
		return "success";
	case EPERM:
		return "buffer registered by another process (registrations belong to the process that made them)";
	case ENOENT:
		return "no such file or directory (the file does not exist)";
	case EIDRM:
		return "unknown buffer id: the dmafs daemon has no such registration (unregistered already, or the filesystem was remounted since)";
	case EBADF:
		return "file descriptor not open for reading";
	case EXDEV:
		return "file is on another mount than the session (open a session on the file's mount)";
	case ERANGE:
		return "extent runs past the end of the buffer, or the extents together exceed it (file does not fit at that offset)";
	case EIO:
		return "I/O error: a member read failed or data failed its checksum (the dmafs daemon logs the member and offset)";
	case ENODEV:
		return "no GPU runtime or device in this process, or the GPU copy failed (run dmafs-check; DMAFS_DEBUG=1 shows the runtime's message)";
	case ENXIO:
		return "the dmafs daemon cannot open the GPU allocation (other GPU, no GPU runtime in the daemon, or not cudaMalloc/hipMalloc memory)";
	case EDQUOT:
		return "the dmafs daemon's per-user registration limit is reached (mount options reg_max_user, reg_bytes_user; unregister buffers you no longer use)";
	case ENOSPC:
		return "no space left, or the mount's registration limit is reached (mount options reg_max, reg_bytes)";
	case EFAULT:
		return "the buffer's memory is not there: a hole in the shared memory at registration, or it was truncated during the placement";
	case EBUSY:
		return "a placement into the buffer is still running";
	case ENOTCONN:
		return "the dmafs daemon is not answering (transport endpoint not connected: it exited or crashed)";
	case ENODATA:
		return "no dmafs layout: not a regular file on a dmafs mount";
	case EBADMSG:
		return "malformed dmafs layout from the daemon (library and daemon versions differ?)";
	case EAGAIN:
		return "try again: many requests of this user are waiting in the dmafs daemon, or the layout kept changing while it was read (file being written)";
	case EINVAL:
		return "invalid argument (NULL handle, size 0, bad extent, or not a regular file)";
	case EISDIR:
		return "is a directory (placements take regular files)";
	case ESTALE:
		return "a model file changed since dmafs_model_open (open the model again)";
	case EOPNOTSUPP:
		return "operation not supported (a prefetch needs a dmafs mount with the warm tier: mount option tier=SIZE)";
	case ENOTTY:
		return "not a file on a dmafs mount, or its dmafs daemon is older than this call";
	case ENOMEM:
		return "out of memory";
	default:
		/* GNU strerror_r: returns a string, which may or may not be buf. */
		return strerror_r(err, buf, sizeof(buf));
	}
}
