/*
 * iotune: server-side copy (FSCTL_SRV_COPYCHUNK).  The source's and the
 * destination's caches are written out, in order with the writes before
 * the copy, before smbd copies through the modules below.
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
#include "lib/util/tevent_ntstatus.h"

#include "vfs_iotune.h"

#undef DBGC_CLASS
#define DBGC_CLASS DBGC_VFS

struct iotune_offload_read_state {
	struct tevent_context *ev;
	struct vfs_handle_struct *handle;
	struct files_struct *fsp;
	uint32_t fsctl;
	uint32_t ttl;
	off_t offset;
	size_t to_copy;
	uint32_t flags;
	uint64_t xferlen;
	DATA_BLOB token;
};

static void iotune_offload_read_done(struct tevent_req *subreq);

static void iotune_offload_read_next(struct tevent_req *req, int err)
{
	struct iotune_offload_read_state *state = tevent_req_data(
		req, struct iotune_offload_read_state);
	struct tevent_req *subreq = NULL;

	if (err != 0) {
		tevent_req_nterror(req, map_nt_error_from_unix(err));
		return;
	}
	subreq = SMB_VFS_NEXT_OFFLOAD_READ_SEND(state, state->ev,
						state->handle, state->fsp,
						state->fsctl, state->ttl,
						state->offset, state->to_copy);
	if (tevent_req_nomem(subreq, req)) {
		return;
	}
	tevent_req_set_callback(subreq, iotune_offload_read_done, req);
}

struct tevent_req *iotune_offload_read_send(
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
	struct iotune_offload_read_state *state = NULL;

	req = tevent_req_create(mem_ctx, &state,
				struct iotune_offload_read_state);
	if (req == NULL) {
		return NULL;
	}
	*state = (struct iotune_offload_read_state) {
		.ev = ev, .handle = handle, .fsp = fsp, .fsctl = fsctl,
		.ttl = ttl, .offset = offset, .to_copy = to_copy,
	};

	return iotune_after_flush(req, ev, fsp, IOTUNE_FLUSH_OFFLOAD,
				  iotune_offload_read_next);
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

NTSTATUS iotune_offload_read_recv(struct tevent_req *req,
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
	struct tevent_context *ev;
	struct vfs_handle_struct *handle;
	uint32_t fsctl;
	DATA_BLOB *token;
	off_t transfer_offset;
	struct files_struct *dest_fsp;
	off_t dest_off;
	off_t num;
	off_t copied;
};

static void iotune_offload_write_done(struct tevent_req *subreq);

static void iotune_offload_write_next(struct tevent_req *req, int err)
{
	struct iotune_offload_write_state *state = tevent_req_data(
		req, struct iotune_offload_write_state);
	struct tevent_req *subreq = NULL;

	if (err != 0) {
		tevent_req_nterror(req, map_nt_error_from_unix(err));
		return;
	}
	subreq = SMB_VFS_NEXT_OFFLOAD_WRITE_SEND(state->handle, state,
						 state->ev, state->fsctl,
						 state->token,
						 state->transfer_offset,
						 state->dest_fsp,
						 state->dest_off, state->num);
	if (tevent_req_nomem(subreq, req)) {
		return;
	}
	tevent_req_set_callback(subreq, iotune_offload_write_done, req);
}

struct tevent_req *iotune_offload_write_send(
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
	struct iotune_offload_write_state *state = NULL;

	req = tevent_req_create(mem_ctx, &state,
				struct iotune_offload_write_state);
	if (req == NULL) {
		return NULL;
	}
	*state = (struct iotune_offload_write_state) {
		.ev = ev, .handle = handle, .fsctl = fsctl, .token = token,
		.transfer_offset = transfer_offset, .dest_fsp = dest_fsp,
		.dest_off = dest_off, .num = num,
	};

	return iotune_after_flush(req, ev, dest_fsp, IOTUNE_FLUSH_OFFLOAD,
				  iotune_offload_write_next);
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

NTSTATUS iotune_offload_write_recv(struct vfs_handle_struct *handle,
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
