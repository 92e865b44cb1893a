/*
 * iotune: reads and writes as the client sees them.  Each request is
 * counted (ops, bytes, latency), read-ahead hears of reads, and the data
 * goes through the write cache (vfs_iotune_wcache.c) and to disk,
 * directly (vfs_iotune_dio.c) or through the modules below.  SMB2 FLUSH
 * and write-through writes (fsync) wait for the cache first.
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

#include "vfs_iotune.h"

#undef DBGC_CLASS
#define DBGC_CLASS DBGC_VFS

/* Writes: absorbed by the cache, or sent to disk past it. */

struct iotune_pwrite_state {
	struct tevent_context *ev;
	struct vfs_handle_struct *handle;
	struct files_struct *fsp;
	struct iotune_share *share;
	const void *data;
	size_t n;
	off_t offset;
	uint64_t started_us;
	bool dio;
	struct iotune_cache *cache;	/* the cache op is in, or NULL */
	struct iotune_file *uncached;	/* counts this write: no cache */
	struct iotune_wc_op op;
	struct iotune_aio_result result;
};

static void iotune_pwrite_finish(struct tevent_req *req,
				 ssize_t ret,
				 int err)
{
	struct iotune_pwrite_state *state = tevent_req_data(
		req, struct iotune_pwrite_state);

	state->cache = NULL;
	state->result.ret = ret;
	state->result.vfs_aio_state = (struct vfs_aio_state) {
		.error = ret < 0 ? err : 0,
	};
	iotune_count_io(state->share, true, ret, state->started_us);
	tevent_req_done(req);
}

/*
 * Freed while its copy into the cache is in flight (smbd's shutdown):
 * refuse, like vfs_default does for a job of its pool, and free it when
 * the copy is done (iotune_pwrite_complete).
 */
static int iotune_pwrite_state_destructor(struct iotune_pwrite_state *state)
{
	if (state->cache == NULL) {
		return 0;
	}
	if (!iotune_cache_cancel(state->cache, &state->op)) {
		state->op.private_data = NULL;
		return -1;
	}
	state->cache = NULL;
	return 0;
}

static void iotune_pwrite_disk_done(struct tevent_req *subreq);

static bool iotune_pwrite_to_disk(struct tevent_req *req)
{
	struct iotune_pwrite_state *state = tevent_req_data(
		req, struct iotune_pwrite_state);
	struct iotune_file *file = iotune_file_of(state->handle, state->fsp);
	struct tevent_req *subreq = NULL;

	state->dio = state->offset >= 0 &&
		     iotune_dio_wanted(state->share, file, true, state->n);
	subreq = iotune_disk_send(state, state->ev, state->handle, file,
				  state->fsp, state->dio, true, state->data,
				  state->n, (uint64_t)state->offset);
	if (subreq == NULL) {
		return false;
	}
	tevent_req_set_callback(subreq, iotune_pwrite_disk_done, req);
	return true;
}

static void iotune_pwrite_disk_done(struct tevent_req *subreq)
{
	struct tevent_req *req = tevent_req_callback_data(
		subreq, struct tevent_req);
	struct iotune_pwrite_state *state = tevent_req_data(
		req, struct iotune_pwrite_state);
	struct vfs_aio_state aio_state = { 0 };
	ssize_t ret;

	ret = iotune_disk_recv(subreq, state->dio, true, &aio_state);
	TALLOC_FREE(subreq);
	if (state->cache != NULL) {
		iotune_cache_write_landed(state->cache, &state->op, ret,
					  aio_state.error);
	} else if (state->uncached != NULL) {
		state->uncached->uncached_writes--;
		state->uncached = NULL;
		/* a cache another handle made meanwhile learns the size */
		iotune_cache_note_disk_write(state->fsp,
					     (uint64_t)state->offset, ret);
	}
	iotune_pwrite_finish(req, ret, aio_state.error);
}

/* The write cache sends a write to disk (after older data it overlaps) */
void iotune_pwrite_dispatch(struct iotune_wc_op *op)
{
	struct tevent_req *req = op->private_data;
	struct iotune_pwrite_state *state = tevent_req_data(
		req, struct iotune_pwrite_state);

	if (!iotune_pwrite_to_disk(req)) {
		iotune_cache_disk_done(state->cache, op, -1, ENOMEM);
		iotune_pwrite_finish(req, -1, ENOMEM);
	}
}

/* The write cache is done with a write: absorbed, or failed */
void iotune_pwrite_complete(struct iotune_wc_op *op)
{
	struct iotune_pwrite_state *orphan = NULL;

	if (op->private_data == NULL) {
		/* its request was freed while the copy was in flight */
		orphan = talloc_get_type_abort(
			(char *)op - offsetof(struct iotune_pwrite_state, op),
			struct iotune_pwrite_state);
		talloc_set_destructor(orphan, NULL);
		TALLOC_FREE(orphan);
		return;
	}
	iotune_pwrite_finish(op->private_data, op->ret, op->err);
}

/* The cache ends while the write's disk write is in flight */
void iotune_pwrite_detach(struct iotune_wc_op *op)
{
	struct tevent_req *req = op->private_data;
	struct iotune_pwrite_state *state = tevent_req_data(
		req, struct iotune_pwrite_state);

	state->cache = NULL;
}

/* A write direct I/O shapes, with no cache */
static void iotune_pwrite_direct(struct tevent_req *req,
				 struct iotune_file *file)
{
	struct iotune_pwrite_state *state = tevent_req_data(
		req, struct iotune_pwrite_state);

	if (!iotune_pwrite_to_disk(req)) {
		iotune_pwrite_finish(req, -1, ENOMEM);
		return;
	}
	state->uncached = file;
	file->uncached_writes++;
}

/* A write the file's cache takes, keeps or sends on to disk */
static void iotune_pwrite_to_cache(struct tevent_req *req, bool may_cache)
{
	struct iotune_pwrite_state *state = tevent_req_data(
		req, struct iotune_pwrite_state);

	state->op = (struct iotune_wc_op) {
		.kind = IOTUNE_WC_OP_WRITE, .may_cache = may_cache,
		.busy = iotune_smbd_handle_busy(state->fsp),
		.off = (uint64_t)state->offset, .data = state->data,
		.n = state->n, .private_data = req,
	};
	state->op.client_waiting = !state->op.busy &&
		(state->share->wc_reserve_async ||
		 iotune_cache_reserve_slow(state->share)) &&
		iotune_smbd_client_waiting(state->fsp);
	talloc_set_destructor(state, iotune_pwrite_state_destructor);
	if (iotune_cache_submit(state->cache, &state->op)) {
		iotune_pwrite_finish(req, state->op.ret, state->op.err);
	}
}

struct tevent_req *iotune_pwrite_send(struct vfs_handle_struct *handle,
				      TALLOC_CTX *mem_ctx,
				      struct tevent_context *ev,
				      struct files_struct *fsp,
				      const void *data,
				      size_t n,
				      off_t offset)
{
	struct tevent_req *req = NULL;
	struct iotune_pwrite_state *state = NULL;
	struct iotune_share *share = iotune_share_of(handle);
	struct iotune_file *file = NULL;
	struct iotune_cache *cache = NULL;
	bool may_cache = false;

	/* a negative offset is for the disk to refuse: no cache */
	if (offset >= 0) {
		file = iotune_file_of(handle, fsp);
	}
	if (file != NULL) {
		cache = iotune_cache_for_write(share, file, fsp,
					       (uint64_t)offset, n,
					       &may_cache);
	}
	if (cache == NULL) {
		iotune_wc_count_uncached(iotune_counting(share) ?
					 &share->stats.wc : NULL);
	}
	if (cache == NULL &&
	    !(file != NULL && iotune_dio_wanted(share, file, true, n))) {
		return iotune_pass_pwrite_send(handle, share, mem_ctx, ev, fsp,
					       file, data, n, offset);
	}
	req = tevent_req_create(mem_ctx, &state, struct iotune_pwrite_state);
	if (req == NULL) {
		return NULL;
	}
	iotune_pass_forget(req);
	*state = (struct iotune_pwrite_state) {
		.ev = ev, .handle = handle, .fsp = fsp, .share = share,
		.data = data, .n = n, .offset = offset,
		.started_us = iotune_now_us(), .cache = cache,
	};
	if (cache == NULL) {
		iotune_pwrite_direct(req, file);
	} else {
		iotune_pwrite_to_cache(req, may_cache);
	}
	if (!tevent_req_is_in_progress(req)) {
		return tevent_req_post(req, ev);
	}
	return req;
}

/*
 * iotune's own request, or one that passed through (vfs_iotune_pass.c):
 * slot is where the pass-through table holds it, or -1
 */
static bool iotune_own_req(struct tevent_req *req, int slot,
			   const char *state_type)
{
	if (slot >= 0) {
		return false;
	}
	return talloc_check_name(_tevent_req_data(req), state_type) != NULL;
}

ssize_t iotune_pwrite_recv(struct tevent_req *req,
			   struct vfs_aio_state *vfs_aio_state)
{
	struct iotune_pwrite_state *state = NULL;
	int slot = iotune_pass_slot(req);

	if (!iotune_own_req(req, slot, "struct iotune_pwrite_state")) {
		return iotune_pass_pwrite_recv(req, slot, vfs_aio_state);
	}
	state = tevent_req_data(req, struct iotune_pwrite_state);
	return iotune_aio_recv(req, &state->result, vfs_aio_state);
}

/* The sync write paths write out the cache first, then go to disk. */
ssize_t iotune_pwrite(struct vfs_handle_struct *handle,
		      struct files_struct *fsp,
		      const void *data,
		      size_t n,
		      off_t offset)
{
	struct iotune_share *share = iotune_share_of(handle);
	struct iotune_file *file = iotune_file_of(handle, fsp);
	uint64_t started = iotune_now_us();
	ssize_t ret;
	int err;

	err = iotune_flush_for(fsp, IOTUNE_FLUSH_SYNC_IO, true);
	if (err != 0) {
		errno = err;
		return -1;
	}
	iotune_wc_count_uncached(iotune_counting(share) ?
				 &share->stats.wc : NULL);
	if (offset >= 0 && iotune_dio_wanted(share, file, true, n)) {
		ret = iotune_dio_sync(share, file, true, data, n,
				      (uint64_t)offset);
	} else {
		ret = SMB_VFS_NEXT_PWRITE(handle, fsp, data, n, offset);
	}
	iotune_count_io(share, true, ret, started);
	iotune_cache_note_disk_write(fsp, (uint64_t)offset, ret);
	return ret;
}

ssize_t iotune_recvfile(struct vfs_handle_struct *handle,
			int fromfd,
			struct files_struct *tofsp,
			off_t offset,
			size_t n)
{
	ssize_t ret;
	int err;

	err = iotune_flush_for(tofsp, IOTUNE_FLUSH_SYNC_IO, true);
	if (err != 0) {
		errno = err;
		return -1;
	}
	ret = SMB_VFS_NEXT_RECVFILE(handle, fromfd, tofsp, offset, n);
	iotune_cache_note_disk_write(tofsp, (uint64_t)offset, ret);
	return ret;
}

/* Reads: from memory when all cached, else disk data overlaid. */

ssize_t iotune_pread(struct vfs_handle_struct *handle,
		     struct files_struct *fsp,
		     void *data,
		     size_t n,
		     off_t offset)
{
	struct iotune_share *share = iotune_share_of(handle);
	struct iotune_file *file = iotune_file_of(handle, fsp);
	struct iotune_cache *cache = iotune_cache_of(fsp);
	struct iotune_wcache *wc = NULL;
	uint64_t started = iotune_now_us();
	size_t got;
	ssize_t ret;

	iotune_ra_on_read(handle, fsp, offset, n);
	if (cache != NULL && offset >= 0) {
		wc = iotune_cache_core(cache);
	}
	if (wc != NULL &&
	    iotune_wc_read_cached(wc, (uint64_t)offset, data, n, &got)) {
		ret = (ssize_t)got;
	} else if (offset >= 0 && iotune_dio_wanted(share, file, false, n)) {
		ret = iotune_dio_sync(share, file, false, data, n,
				      (uint64_t)offset);
	} else {
		ret = SMB_VFS_NEXT_PREAD(handle, fsp, data, n, offset);
	}
	if (ret >= 0 && wc != NULL) {
		ret = (ssize_t)iotune_wc_read_overlay(wc, NULL,
						      (uint64_t)offset, data,
						      n, (size_t)ret);
	}
	iotune_count_io(share, false, ret, started);
	return ret;
}

struct iotune_pread_state {
	bool dio;
	struct iotune_share *share;
	uint64_t started_us;
	struct files_struct *fsp;
	void *data;
	size_t n;
	off_t offset;
	struct iotune_wc_snapshot *snap;
	struct iotune_aio_result result;
};

static int iotune_pread_state_destructor(struct iotune_pread_state *state)
{
	iotune_wc_snapshot_free(state->snap);
	state->snap = NULL;
	return 0;
}

static void iotune_pread_done(struct tevent_req *subreq);

/*
 * From memory when the cache holds all of it; else a disk read, with a
 * snapshot of the dirty data it overlaps (a flush may complete first).
 */
static bool iotune_pread_from_cache(struct tevent_req *req,
				    struct iotune_wcache *wc)
{
	struct iotune_pread_state *state = tevent_req_data(
		req, struct iotune_pread_state);
	size_t got;
	int err;

	if (iotune_wc_read_cached(wc, (uint64_t)state->offset, state->data,
				  state->n, &got)) {
		state->result.ret = (ssize_t)got;
		iotune_count_io(state->share, false, state->result.ret,
				state->started_us);
		tevent_req_done(req);
		return true;
	}
	err = iotune_wc_snapshot_take(wc, (uint64_t)state->offset, state->n,
				      &state->snap);
	if (err != 0) {
		tevent_req_error(req, err);
		return true;
	}
	return false;
}

struct tevent_req *iotune_pread_send(struct vfs_handle_struct *handle,
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
	struct iotune_cache *cache = iotune_cache_of(fsp);
	struct iotune_share *share = iotune_share_of(handle);
	struct iotune_file *file = iotune_file_of(handle, fsp);
	bool dio = offset >= 0 && iotune_dio_wanted(share, file, false, n);

	iotune_ra_on_read(handle, fsp, offset, n);
	if ((cache == NULL || offset < 0) && !dio) {
		return iotune_pass_pread_send(handle, share, mem_ctx, ev, fsp,
					      data, n, offset);
	}
	req = tevent_req_create(mem_ctx, &state, struct iotune_pread_state);
	if (req == NULL) {
		return NULL;
	}
	iotune_pass_forget(req);
	*state = (struct iotune_pread_state) {
		.share = share, .started_us = iotune_now_us(), .dio = dio,
		.fsp = fsp, .data = data, .n = n, .offset = offset,
	};
	talloc_set_destructor(state, iotune_pread_state_destructor);
	if (cache != NULL && offset >= 0 &&
	    iotune_pread_from_cache(req, iotune_cache_core(cache))) {
		return tevent_req_post(req, ev);
	}
	subreq = iotune_disk_send(state, ev, handle, file, fsp, state->dio,
				  false, data, n, (uint64_t)offset);
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
	struct iotune_cache *cache = NULL;
	ssize_t ret;

	ret = iotune_disk_recv(subreq, state->dio, false,
			       &state->result.vfs_aio_state);
	TALLOC_FREE(subreq);
	if (ret >= 0 && state->offset >= 0) {
		cache = iotune_cache_of(state->fsp);
		if (cache != NULL || state->snap != NULL) {
			ret = (ssize_t)iotune_wc_read_overlay(
				cache != NULL ? iotune_cache_core(cache) : NULL,
				state->snap, (uint64_t)state->offset,
				state->data, state->n, (size_t)ret);
		}
	}
	state->result.ret = ret;
	iotune_count_io(state->share, false, ret, state->started_us);
	tevent_req_done(req);
}

ssize_t iotune_pread_recv(struct tevent_req *req,
			  struct vfs_aio_state *vfs_aio_state)
{
	struct iotune_pread_state *state = NULL;
	int slot = iotune_pass_slot(req);

	if (!iotune_own_req(req, slot, "struct iotune_pread_state")) {
		return iotune_pass_pread_recv(req, slot, vfs_aio_state);
	}
	state = tevent_req_data(req, struct iotune_pread_state);
	return iotune_aio_recv(req, &state->result, vfs_aio_state);
}

ssize_t iotune_sendfile(struct vfs_handle_struct *handle,
			int tofd,
			struct files_struct *fromfsp,
			const DATA_BLOB *hdr,
			off_t offset,
			size_t n)
{
	int err = iotune_flush_for(fromfsp, IOTUNE_FLUSH_SENDFILE,
				   false);

	if (err != 0) {
		errno = err;
		return -1;
	}
	iotune_ra_on_read(handle, fromfsp, offset, n);
	return SMB_VFS_NEXT_SENDFILE(handle, tofd, fromfsp, hdr, offset, n);
}

/* SMB2 FLUSH and write-through: the cache first, then the real fsync. */

struct iotune_fsync_state {
	struct tevent_context *ev;
	struct vfs_handle_struct *handle;
	struct files_struct *fsp;
	struct iotune_aio_result result;
};

static void iotune_fsync_done(struct tevent_req *subreq);

static void iotune_fsync_next(struct tevent_req *req, int err)
{
	struct iotune_fsync_state *state = tevent_req_data(
		req, struct iotune_fsync_state);
	struct tevent_req *subreq = NULL;

	if (err != 0) {
		tevent_req_error(req, err);
		return;
	}
	subreq = SMB_VFS_NEXT_FSYNC_SEND(state, state->ev, state->handle,
					 state->fsp);
	if (tevent_req_nomem(subreq, req)) {
		return;
	}
	tevent_req_set_callback(subreq, iotune_fsync_done, req);
}

struct tevent_req *iotune_fsync_send(struct vfs_handle_struct *handle,
				     TALLOC_CTX *mem_ctx,
				     struct tevent_context *ev,
				     struct files_struct *fsp)
{
	struct tevent_req *req = NULL;
	struct iotune_fsync_state *state = NULL;
	struct iotune_share *share = iotune_share_of(handle);

	req = tevent_req_create(mem_ctx, &state, struct iotune_fsync_state);
	if (req == NULL) {
		return NULL;
	}
	*state = (struct iotune_fsync_state) {
		.ev = ev, .handle = handle, .fsp = fsp,
	};
	if (iotune_counting(share)) {
		share->stats.fsync_ops++;
	}
	return iotune_after_flush(req, ev, fsp, IOTUNE_FLUSH_FSYNC,
				  iotune_fsync_next);
}

static void iotune_fsync_done(struct tevent_req *subreq)
{
	struct tevent_req *req = tevent_req_callback_data(
		subreq, struct tevent_req);
	struct iotune_fsync_state *state = tevent_req_data(
		req, struct iotune_fsync_state);

	state->result.ret = SMB_VFS_FSYNC_RECV(subreq,
					       &state->result.vfs_aio_state);
	TALLOC_FREE(subreq);
	tevent_req_done(req);
}

int iotune_fsync_recv(struct tevent_req *req,
		      struct vfs_aio_state *vfs_aio_state)
{
	struct iotune_fsync_state *state = tevent_req_data(
		req, struct iotune_fsync_state);

	return iotune_aio_recv(req, &state->result, vfs_aio_state);
}
