/*
 * iotune: write cache, read-ahead policy, direct I/O and throughput
 * counters for Samba shares.
 *
 * This file is the only one that sees Samba: a thin adapter that binds
 * iotune's core (modules/ *.c, include/iotune/) to the SMB_VFS_NEXT_*
 * calls.  Options are read once per tree connect and kept as handle
 * data; per-file state lives in an fsp extension.
 *
 * Copyright (C) iotune authors 2026
 *
 * This program is free software; you can redistribute it and/or modify
 * it under the terms of the GNU General Public License as published by
 * the Free Software Foundation; either version 3 of the License, or
 * (at your option) any later version.
 *
 * This program is distributed in the hope that it will be useful,
 * but WITHOUT ANY WARRANTY; without even the implied warranty of
 * MERCHANTABILITY or FITNESS FOR A PARTICULAR PURPOSE.  See the
 * GNU General Public License for more details.
 *
 * You should have received a copy of the GNU General Public License
 * along with this program.  If not, see <http://www.gnu.org/licenses/>.
 */

#include "includes.h"
#include "smbd/smbd.h"
#include "lib/util/tevent_unix.h"
#include "lib/util/tevent_ntstatus.h"

#include "iotune/config.h"

#undef DBGC_CLASS
#define DBGC_CLASS DBGC_VFS

#define IOTUNE_MODULE_NAME "iotune"

struct iotune_share {
	struct iotune_config config;
};

/*
 * Per open file.  smbd 4.17 reopens an existing file from a path-only
 * handle and calls close_fn on the same fsp for the old fd, so the state
 * remembers the fd it was created for and only a close of that fd ends
 * it.
 */
struct iotune_file {
	int fd;
};

static const char *iotune_lookup_option(void *private_data, const char *name)
{
	int snum = *(int *)private_data;

	return lp_parm_const_string(snum, IOTUNE_MODULE_NAME, name, NULL);
}

static int iotune_connect(struct vfs_handle_struct *handle,
			  const char *service,
			  const char *user)
{
	struct iotune_share *share = NULL;
	int snum = SNUM(handle->conn);
	char errbuf[512];
	char desc[512];
	int ret;

	share = talloc_zero(handle->conn, struct iotune_share);
	if (share == NULL) {
		DBG_ERR("talloc_zero() failed\n");
		errno = ENOMEM;
		return -1;
	}

	ret = iotune_config_load(&share->config, iotune_lookup_option, &snum,
				 errbuf, sizeof(errbuf));
	if (ret != 0) {
		DBG_ERR("share '%s': %s; refusing the tree connect\n",
			service, errbuf);
		TALLOC_FREE(share);
		errno = EINVAL;
		return -1;
	}

	ret = SMB_VFS_NEXT_CONNECT(handle, service, user);
	if (ret < 0) {
		TALLOC_FREE(share);
		return ret;
	}

	SMB_VFS_HANDLE_SET_DATA(handle, share, NULL, struct iotune_share,
				return -1);

	iotune_config_describe(&share->config, desc, sizeof(desc));
	DBG_NOTICE("share '%s' connected: %s\n", service, desc);
	return 0;
}

static void iotune_disconnect(struct vfs_handle_struct *handle)
{
	DBG_DEBUG("share '%s' disconnected\n",
		  lp_const_servicename(SNUM(handle->conn)));
	SMB_VFS_NEXT_DISCONNECT(handle);
}

static int iotune_openat(struct vfs_handle_struct *handle,
			 const struct files_struct *dirfsp,
			 const struct smb_filename *smb_fname,
			 struct files_struct *fsp,
			 const struct vfs_open_how *how)
{
	struct iotune_file *file = NULL;
	int fd;

	fd = SMB_VFS_NEXT_OPENAT(handle, dirfsp, smb_fname, fsp, how);
	if (fd == -1 || fsp->fsp_flags.is_pathref || fsp->fsp_flags.is_directory) {
		return fd;
	}

	file = VFS_FETCH_FSP_EXTENSION(handle, fsp);
	if (file == NULL) {
		file = VFS_ADD_FSP_EXTENSION(handle, fsp, struct iotune_file,
					     NULL);
	}
	if (file == NULL) {
		int saved_errno = ENOMEM;

		SMB_VFS_NEXT_CLOSE(handle, fsp);
		errno = saved_errno;
		return -1;
	}
	file->fd = fd;
	return fd;
}

static int iotune_close(struct vfs_handle_struct *handle,
			struct files_struct *fsp)
{
	struct iotune_file *file = VFS_FETCH_FSP_EXTENSION(handle, fsp);

	if (file != NULL && file->fd == fsp_get_pathref_fd(fsp)) {
		VFS_REMOVE_FSP_EXTENSION(handle, fsp);
	}
	return SMB_VFS_NEXT_CLOSE(handle, fsp);
}

static ssize_t iotune_pread(struct vfs_handle_struct *handle,
			    struct files_struct *fsp,
			    void *data,
			    size_t n,
			    off_t offset)
{
	return SMB_VFS_NEXT_PREAD(handle, fsp, data, n, offset);
}

struct iotune_pread_state {
	ssize_t ret;
	struct vfs_aio_state vfs_aio_state;
};

static void iotune_pread_done(struct tevent_req *subreq);

static struct tevent_req *iotune_pread_send(struct vfs_handle_struct *handle,
					    TALLOC_CTX *mem_ctx,
					    struct tevent_context *ev,
					    struct files_struct *fsp,
					    void *data,
					    size_t n,
					    off_t offset)
{
	struct tevent_req *req = NULL;
	struct tevent_req *subreq = NULL;
	struct iotune_pread_state *state = NULL;

	req = tevent_req_create(mem_ctx, &state, struct iotune_pread_state);
	if (req == NULL) {
		return NULL;
	}

	subreq = SMB_VFS_NEXT_PREAD_SEND(state, ev, handle, fsp, data, n,
					 offset);
	if (tevent_req_nomem(subreq, req)) {
		return tevent_req_post(req, ev);
	}
	tevent_req_set_callback(subreq, iotune_pread_done, req);
	return req;
}

static void iotune_pread_done(struct tevent_req *subreq)
{
	struct tevent_req *req = tevent_req_callback_data(
		subreq, struct tevent_req);
	struct iotune_pread_state *state = tevent_req_data(
		req, struct iotune_pread_state);

	state->ret = SMB_VFS_PREAD_RECV(subreq, &state->vfs_aio_state);
	TALLOC_FREE(subreq);
	tevent_req_done(req);
}

static ssize_t iotune_pread_recv(struct tevent_req *req,
				 struct vfs_aio_state *vfs_aio_state)
{
	struct iotune_pread_state *state = tevent_req_data(
		req, struct iotune_pread_state);
	ssize_t ret = state->ret;

	if (tevent_req_is_unix_error(req, &vfs_aio_state->error)) {
		tevent_req_received(req);
		return -1;
	}
	*vfs_aio_state = state->vfs_aio_state;
	tevent_req_received(req);
	return ret;
}

static ssize_t iotune_pwrite(struct vfs_handle_struct *handle,
			     struct files_struct *fsp,
			     const void *data,
			     size_t n,
			     off_t offset)
{
	return SMB_VFS_NEXT_PWRITE(handle, fsp, data, n, offset);
}

struct iotune_pwrite_state {
	ssize_t ret;
	struct vfs_aio_state vfs_aio_state;
};

static void iotune_pwrite_done(struct tevent_req *subreq);

static struct tevent_req *iotune_pwrite_send(struct vfs_handle_struct *handle,
					     TALLOC_CTX *mem_ctx,
					     struct tevent_context *ev,
					     struct files_struct *fsp,
					     const void *data,
					     size_t n,
					     off_t offset)
{
	struct tevent_req *req = NULL;
	struct tevent_req *subreq = NULL;
	struct iotune_pwrite_state *state = NULL;

	req = tevent_req_create(mem_ctx, &state, struct iotune_pwrite_state);
	if (req == NULL) {
		return NULL;
	}

	subreq = SMB_VFS_NEXT_PWRITE_SEND(state, ev, handle, fsp, data, n,
					  offset);
	if (tevent_req_nomem(subreq, req)) {
		return tevent_req_post(req, ev);
	}
	tevent_req_set_callback(subreq, iotune_pwrite_done, req);
	return req;
}

static void iotune_pwrite_done(struct tevent_req *subreq)
{
	struct tevent_req *req = tevent_req_callback_data(
		subreq, struct tevent_req);
	struct iotune_pwrite_state *state = tevent_req_data(
		req, struct iotune_pwrite_state);

	state->ret = SMB_VFS_PWRITE_RECV(subreq, &state->vfs_aio_state);
	TALLOC_FREE(subreq);
	tevent_req_done(req);
}

static ssize_t iotune_pwrite_recv(struct tevent_req *req,
				  struct vfs_aio_state *vfs_aio_state)
{
	struct iotune_pwrite_state *state = tevent_req_data(
		req, struct iotune_pwrite_state);
	ssize_t ret = state->ret;

	if (tevent_req_is_unix_error(req, &vfs_aio_state->error)) {
		tevent_req_received(req);
		return -1;
	}
	*vfs_aio_state = state->vfs_aio_state;
	tevent_req_received(req);
	return ret;
}

struct iotune_fsync_state {
	int ret;
	struct vfs_aio_state vfs_aio_state;
};

static void iotune_fsync_done(struct tevent_req *subreq);

static struct tevent_req *iotune_fsync_send(struct vfs_handle_struct *handle,
					    TALLOC_CTX *mem_ctx,
					    struct tevent_context *ev,
					    struct files_struct *fsp)
{
	struct tevent_req *req = NULL;
	struct tevent_req *subreq = NULL;
	struct iotune_fsync_state *state = NULL;

	req = tevent_req_create(mem_ctx, &state, struct iotune_fsync_state);
	if (req == NULL) {
		return NULL;
	}

	subreq = SMB_VFS_NEXT_FSYNC_SEND(state, ev, handle, fsp);
	if (tevent_req_nomem(subreq, req)) {
		return tevent_req_post(req, ev);
	}
	tevent_req_set_callback(subreq, iotune_fsync_done, req);
	return req;
}

static void iotune_fsync_done(struct tevent_req *subreq)
{
	struct tevent_req *req = tevent_req_callback_data(
		subreq, struct tevent_req);
	struct iotune_fsync_state *state = tevent_req_data(
		req, struct iotune_fsync_state);

	state->ret = SMB_VFS_FSYNC_RECV(subreq, &state->vfs_aio_state);
	TALLOC_FREE(subreq);
	tevent_req_done(req);
}

static int iotune_fsync_recv(struct tevent_req *req,
			     struct vfs_aio_state *vfs_aio_state)
{
	struct iotune_fsync_state *state = tevent_req_data(
		req, struct iotune_fsync_state);
	int ret = state->ret;

	if (tevent_req_is_unix_error(req, &vfs_aio_state->error)) {
		tevent_req_received(req);
		return -1;
	}
	*vfs_aio_state = state->vfs_aio_state;
	tevent_req_received(req);
	return ret;
}

static int iotune_ftruncate(struct vfs_handle_struct *handle,
			    struct files_struct *fsp,
			    off_t offset)
{
	return SMB_VFS_NEXT_FTRUNCATE(handle, fsp, offset);
}

static int iotune_fallocate(struct vfs_handle_struct *handle,
			    struct files_struct *fsp,
			    uint32_t mode,
			    off_t offset,
			    off_t len)
{
	return SMB_VFS_NEXT_FALLOCATE(handle, fsp, mode, offset, len);
}

static int iotune_fstat(struct vfs_handle_struct *handle,
			struct files_struct *fsp,
			SMB_STRUCT_STAT *sbuf)
{
	return SMB_VFS_NEXT_FSTAT(handle, fsp, sbuf);
}

static ssize_t iotune_sendfile(struct vfs_handle_struct *handle,
			       int tofd,
			       struct files_struct *fromfsp,
			       const DATA_BLOB *hdr,
			       off_t offset,
			       size_t n)
{
	return SMB_VFS_NEXT_SENDFILE(handle, tofd, fromfsp, hdr, offset, n);
}

static ssize_t iotune_recvfile(struct vfs_handle_struct *handle,
			       int fromfd,
			       struct files_struct *tofsp,
			       off_t offset,
			       size_t n)
{
	return SMB_VFS_NEXT_RECVFILE(handle, fromfd, tofsp, offset, n);
}

struct iotune_offload_read_state {
	struct vfs_handle_struct *handle;
	uint32_t flags;
	uint64_t xferlen;
	DATA_BLOB token;
};

static void iotune_offload_read_done(struct tevent_req *subreq);

static struct tevent_req *iotune_offload_read_send(
	TALLOC_CTX *mem_ctx,
	struct tevent_context *ev,
	struct vfs_handle_struct *handle,
	struct files_struct *fsp,
	uint32_t fsctl,
	uint32_t ttl,
	off_t offset,
	size_t to_copy)
{
	struct tevent_req *req = NULL;
	struct tevent_req *subreq = NULL;
	struct iotune_offload_read_state *state = NULL;

	req = tevent_req_create(mem_ctx, &state,
				struct iotune_offload_read_state);
	if (req == NULL) {
		return NULL;
	}
	*state = (struct iotune_offload_read_state) {
		.handle = handle,
	};

	subreq = SMB_VFS_NEXT_OFFLOAD_READ_SEND(state, ev, handle, fsp,
						fsctl, ttl, offset, to_copy);
	if (tevent_req_nomem(subreq, req)) {
		return tevent_req_post(req, ev);
	}
	tevent_req_set_callback(subreq, iotune_offload_read_done, req);
	return req;
}

static void iotune_offload_read_done(struct tevent_req *subreq)
{
	struct tevent_req *req = tevent_req_callback_data(
		subreq, struct tevent_req);
	struct iotune_offload_read_state *state = tevent_req_data(
		req, struct iotune_offload_read_state);
	NTSTATUS status;

	status = SMB_VFS_NEXT_OFFLOAD_READ_RECV(subreq,
						state->handle,
						state,
						&state->flags,
						&state->xferlen,
						&state->token);
	TALLOC_FREE(subreq);
	if (tevent_req_nterror(req, status)) {
		return;
	}
	tevent_req_done(req);
}

static NTSTATUS iotune_offload_read_recv(struct tevent_req *req,
					 struct vfs_handle_struct *handle,
					 TALLOC_CTX *mem_ctx,
					 uint32_t *flags,
					 uint64_t *xferlen,
					 DATA_BLOB *token)
{
	struct iotune_offload_read_state *state = tevent_req_data(
		req, struct iotune_offload_read_state);
	NTSTATUS status;

	if (tevent_req_is_nterror(req, &status)) {
		tevent_req_received(req);
		return status;
	}

	*flags = state->flags;
	*xferlen = state->xferlen;
	token->length = state->token.length;
	token->data = talloc_move(mem_ctx, &state->token.data);

	tevent_req_received(req);
	return NT_STATUS_OK;
}

struct iotune_offload_write_state {
	struct vfs_handle_struct *handle;
	off_t copied;
};

static void iotune_offload_write_done(struct tevent_req *subreq);

static struct tevent_req *iotune_offload_write_send(
	struct vfs_handle_struct *handle,
	TALLOC_CTX *mem_ctx,
	struct tevent_context *ev,
	uint32_t fsctl,
	DATA_BLOB *token,
	off_t transfer_offset,
	struct files_struct *dest_fsp,
	off_t dest_off,
	off_t num)
{
	struct tevent_req *req = NULL;
	struct tevent_req *subreq = NULL;
	struct iotune_offload_write_state *state = NULL;

	req = tevent_req_create(mem_ctx, &state,
				struct iotune_offload_write_state);
	if (req == NULL) {
		return NULL;
	}
	state->handle = handle;

	subreq = SMB_VFS_NEXT_OFFLOAD_WRITE_SEND(handle, state, ev, fsctl,
						 token, transfer_offset,
						 dest_fsp, dest_off, num);
	if (tevent_req_nomem(subreq, req)) {
		return tevent_req_post(req, ev);
	}
	tevent_req_set_callback(subreq, iotune_offload_write_done, req);
	return req;
}

static void iotune_offload_write_done(struct tevent_req *subreq)
{
	struct tevent_req *req = tevent_req_callback_data(
		subreq, struct tevent_req);
	struct iotune_offload_write_state *state = tevent_req_data(
		req, struct iotune_offload_write_state);
	NTSTATUS status;

	status = SMB_VFS_NEXT_OFFLOAD_WRITE_RECV(state->handle, subreq,
						 &state->copied);
	TALLOC_FREE(subreq);
	if (tevent_req_nterror(req, status)) {
		return;
	}
	tevent_req_done(req);
}

static NTSTATUS iotune_offload_write_recv(struct vfs_handle_struct *handle,
					  struct tevent_req *req,
					  off_t *copied)
{
	struct iotune_offload_write_state *state = tevent_req_data(
		req, struct iotune_offload_write_state);
	NTSTATUS status;

	*copied = state->copied;
	if (tevent_req_is_nterror(req, &status)) {
		tevent_req_received(req);
		return status;
	}
	tevent_req_received(req);
	return NT_STATUS_OK;
}

static struct vfs_fn_pointers iotune_fns = {
	.connect_fn = iotune_connect,
	.disconnect_fn = iotune_disconnect,
	.openat_fn = iotune_openat,
	.close_fn = iotune_close,
	.pread_fn = iotune_pread,
	.pread_send_fn = iotune_pread_send,
	.pread_recv_fn = iotune_pread_recv,
	.pwrite_fn = iotune_pwrite,
	.pwrite_send_fn = iotune_pwrite_send,
	.pwrite_recv_fn = iotune_pwrite_recv,
	.fsync_send_fn = iotune_fsync_send,
	.fsync_recv_fn = iotune_fsync_recv,
	.ftruncate_fn = iotune_ftruncate,
	.fallocate_fn = iotune_fallocate,
	.fstat_fn = iotune_fstat,
	.sendfile_fn = iotune_sendfile,
	.recvfile_fn = iotune_recvfile,
	.offload_read_send_fn = iotune_offload_read_send,
	.offload_read_recv_fn = iotune_offload_read_recv,
	.offload_write_send_fn = iotune_offload_write_send,
	.offload_write_recv_fn = iotune_offload_write_recv,
};

static_decl_vfs;
NTSTATUS vfs_iotune_init(TALLOC_CTX *ctx)
{
	return smb_register_vfs(SMB_VFS_INTERFACE_VERSION, IOTUNE_MODULE_NAME,
				&iotune_fns);
}
