/*
 * iotune_fault: a test-only VFS module stacked below iotune that makes
 * the disk fail on demand.  Loaded only by iotune's integration tests
 * (never installed by ./waf install).
 *
 *   vfs objects = iotune iotune_fault
 *   iotune_fault:control = /path/to/control
 *
 * The control file is read at every write and fallocate; one rule per
 * line, none means no faults:
 *
 *   pwrite ERRNO [after BYTES]   writes fail with ERRNO (ENOSPC, EIO),
 *                                after BYTES more bytes were written (a
 *                                write that crosses the limit is short)
 *   pwrite skip                  writes succeed at once, writing
 *                                nothing (bench/write_matrix.py: the
 *                                fastest smbd answers a write)
 *   fallocate ERRNO              fallocate fails with ERRNO
 *   fallocate skip               fallocate succeeds at once, reserving
 *                                nothing (bench/write_matrix.py: what the
 *                                write cache reaches when its
 *                                reservations cost nothing)
 *   canary                       writes one byte past a heap buffer, once
 *                                per rule read: the sanitize stage's
 *                                proof that a report fails it
 *
 * The "after" budget starts anew whenever the control file changes.
 *
 * Copyright (C) iotune authors 2026
 * SPDX-License-Identifier: GPL-3.0-or-later
 */

#include "includes.h"
#include "smbd/smbd.h"
#include "lib/util/tevent_unix.h"

#undef DBGC_CLASS
#define DBGC_CLASS DBGC_VFS

struct fault_rules {
	int pwrite_errno;
	bool pwrite_skip;
	bool pwrite_after;
	uint64_t pwrite_budget;
	int fallocate_errno;
	bool fallocate_skip;
	struct timespec seen_mtime;
	ino_t seen_ino;
};

static int fault_errno(const char *name)
{
	if (strcmp(name, "ENOSPC") == 0) {
		return ENOSPC;
	}
	if (strcmp(name, "EIO") == 0) {
		return EIO;
	}
	if (strcmp(name, "EDQUOT") == 0) {
		return EDQUOT;
	}
	if (strcmp(name, "EOPNOTSUPP") == 0) {
		return EOPNOTSUPP;
	}
	return EIO;
}

/* A deliberate heap overflow, for the sanitize stage to find */
static void fault_canary(void)
{
	volatile size_t past = 8;
	char *p = malloc(8);

	if (p != NULL) {
		p[past] = 1;
		DBG_ERR("iotune_fault: canary written past its buffer\n");
		free(p);
	}
}

static void fault_parse(struct fault_rules *r, char *text)
{
	char *save = NULL;
	char *line = NULL;

	r->pwrite_errno = 0;
	r->pwrite_skip = false;
	r->pwrite_after = false;
	r->fallocate_errno = 0;
	r->fallocate_skip = false;
	for (line = strtok_r(text, "\n", &save); line != NULL;
	     line = strtok_r(NULL, "\n", &save)) {
		char what[32] = "";
		char err[32] = "";
		unsigned long long after = 0;
		int n = sscanf(line, "%31s %31s after %llu", what, err,
			       &after);

		if (n >= 2 && strcmp(what, "pwrite") == 0 &&
		    strcmp(err, "skip") == 0) {
			r->pwrite_skip = true;
		} else if (n >= 2 && strcmp(what, "pwrite") == 0) {
			r->pwrite_errno = fault_errno(err);
			r->pwrite_after = n == 3;
			r->pwrite_budget = after;
		} else if (n >= 2 && strcmp(what, "fallocate") == 0 &&
			   strcmp(err, "skip") == 0) {
			r->fallocate_skip = true;
		} else if (n >= 2 && strcmp(what, "fallocate") == 0) {
			r->fallocate_errno = fault_errno(err);
		} else if (n >= 1 && strcmp(what, "canary") == 0) {
			fault_canary();
		}
	}
}

/* The rules now in force (read again when the control file changed) */
static struct fault_rules *fault_rules(struct vfs_handle_struct *handle)
{
	struct fault_rules *r = NULL;
	const char *path = lp_parm_const_string(SNUM(handle->conn),
						"iotune_fault", "control",
						NULL);
	char buf[512];
	struct stat st;
	ssize_t n;
	int fd;

	SMB_VFS_HANDLE_GET_DATA(handle, r, struct fault_rules, return NULL);
	if (path == NULL || stat(path, &st) != 0) {
		*r = (struct fault_rules) { 0 };
		return r;
	}
	if (st.st_ino == r->seen_ino &&
	    st.st_mtim.tv_sec == r->seen_mtime.tv_sec &&
	    st.st_mtim.tv_nsec == r->seen_mtime.tv_nsec) {
		return r;
	}
	r->seen_ino = st.st_ino;
	r->seen_mtime = st.st_mtim;
	fd = open(path, O_RDONLY);
	n = fd == -1 ? -1 : read(fd, buf, sizeof(buf) - 1);
	if (fd != -1) {
		close(fd);
	}
	buf[n > 0 ? n : 0] = '\0';
	fault_parse(r, buf);
	return r;
}

/*
 * How much of a write of n bytes may go through: n, less, or -1/errno;
 * *skip: 'pwrite skip', the write is done with nothing written
 */
static ssize_t fault_write_allowance(struct vfs_handle_struct *handle,
				     size_t n, bool *skip)
{
	struct fault_rules *r = fault_rules(handle);

	*skip = r != NULL && r->pwrite_skip;
	if (r == NULL || r->pwrite_errno == 0 || r->pwrite_skip) {
		return (ssize_t)n;
	}
	if (r->pwrite_after && r->pwrite_budget > 0) {
		size_t allow = MIN(n, r->pwrite_budget);

		r->pwrite_budget -= allow;
		return (ssize_t)allow;
	}
	errno = r->pwrite_errno;
	return -1;
}

static int fault_connect(struct vfs_handle_struct *handle,
			 const char *service, const char *user)
{
	struct fault_rules *r = talloc_zero(handle->conn, struct fault_rules);

	if (r == NULL) {
		errno = ENOMEM;
		return -1;
	}
	SMB_VFS_HANDLE_SET_DATA(handle, r, NULL, struct fault_rules,
				return -1);
	return SMB_VFS_NEXT_CONNECT(handle, service, user);
}

static ssize_t fault_pwrite(struct vfs_handle_struct *handle,
			    files_struct *fsp, const void *data, size_t n,
			    off_t offset)
{
	bool skip = false;
	ssize_t allow = fault_write_allowance(handle, n, &skip);

	if (allow <= 0 || skip) {
		return allow;
	}
	return SMB_VFS_NEXT_PWRITE(handle, fsp, data, (size_t)allow, offset);
}

struct fault_pwrite_state {
	ssize_t ret;
	struct vfs_aio_state vfs_aio_state;
};

static void fault_pwrite_done(struct tevent_req *subreq);

static struct tevent_req *fault_pwrite_send(struct vfs_handle_struct *handle,
					    TALLOC_CTX *mem_ctx,
					    struct tevent_context *ev,
					    struct files_struct *fsp,
					    const void *data, size_t n,
					    off_t offset)
{
	struct tevent_req *req = NULL;
	struct tevent_req *subreq = NULL;
	struct fault_pwrite_state *state = NULL;
	bool skip = false;
	ssize_t allow = fault_write_allowance(handle, n, &skip);

	req = tevent_req_create(mem_ctx, &state, struct fault_pwrite_state);
	if (req == NULL) {
		return NULL;
	}
	if (allow <= 0) {
		state->ret = -1;
		state->vfs_aio_state.error = allow == 0 ? ENOSPC : errno;
		tevent_req_done(req);
		return tevent_req_post(req, ev);
	}
	if (skip) {
		state->ret = allow;
		tevent_req_done(req);
		return tevent_req_post(req, ev);
	}
	subreq = SMB_VFS_NEXT_PWRITE_SEND(state, ev, handle, fsp, data,
					  (size_t)allow, offset);
	if (tevent_req_nomem(subreq, req)) {
		return tevent_req_post(req, ev);
	}
	tevent_req_set_callback(subreq, fault_pwrite_done, req);
	return req;
}

static void fault_pwrite_done(struct tevent_req *subreq)
{
	struct tevent_req *req = tevent_req_callback_data(
		subreq, struct tevent_req);
	struct fault_pwrite_state *state = tevent_req_data(
		req, struct fault_pwrite_state);

	state->ret = SMB_VFS_PWRITE_RECV(subreq, &state->vfs_aio_state);
	TALLOC_FREE(subreq);
	tevent_req_done(req);
}

static ssize_t fault_pwrite_recv(struct tevent_req *req,
				 struct vfs_aio_state *vfs_aio_state)
{
	struct fault_pwrite_state *state = tevent_req_data(
		req, struct fault_pwrite_state);

	if (tevent_req_is_unix_error(req, &vfs_aio_state->error)) {
		return -1;
	}
	*vfs_aio_state = state->vfs_aio_state;
	return state->ret;
}

static int fault_fallocate(struct vfs_handle_struct *handle,
			   struct files_struct *fsp, uint32_t mode,
			   off_t offset, off_t len)
{
	struct fault_rules *r = fault_rules(handle);

	if (r != NULL && r->fallocate_errno != 0) {
		errno = r->fallocate_errno;
		return -1;
	}
	if (r != NULL && r->fallocate_skip) {
		return 0;
	}
	return SMB_VFS_NEXT_FALLOCATE(handle, fsp, mode, offset, len);
}

static struct vfs_fn_pointers fault_fns = {
	.connect_fn = fault_connect,
	.pwrite_fn = fault_pwrite,
	.pwrite_send_fn = fault_pwrite_send,
	.pwrite_recv_fn = fault_pwrite_recv,
	.fallocate_fn = fault_fallocate,
};

static_decl_vfs;
_PUBLIC_ NTSTATUS vfs_iotune_fault_init(TALLOC_CTX *ctx)
{
	return smb_register_vfs(SMB_VFS_INTERFACE_VERSION, "iotune_fault",
				&fault_fns);
}
