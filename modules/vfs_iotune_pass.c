/*
 * iotune: reads and writes that need nothing from iotune but their counts
 * pass through without a tevent request of iotune's own.
 *
 * Each layer of smbd's VFS that implements pwrite_send costs a tevent
 * request: smb_vfs_call_pwrite_send() wraps the send of the layer it
 * finds in a request of its own that stores the layer's recv function.
 * A module that answers a pass-through write with a request of its own
 * around SMB_VFS_NEXT_PWRITE_SEND() costs two more (its own and the
 * wrapper of the next layer): about 5,000 instructions per write, a
 * fifth of what a 64 KiB write costs smbd on a page-cache share.
 *
 * Here a pass-through request is sent to the next layer that implements
 * it directly (what smb_vfs_call_pwrite_send() does without its wrapper),
 * with smbd's memory context, as if iotune were not there.  smbd's
 * wrapper of our layer calls our recv function with the next layer's
 * request; what that needs (the next layer's recv function, the file to
 * tell, when the request started) waits in a table indexed by the
 * request's address (include/iotune/passtab.h has its rules).  No
 * allocation per request: a talloc context for each cost some 300
 * instructions, a third of what iotune added to a 64 KiB write.  A
 * request whose slot another one holds (rare: 256 slots, a handful of
 * requests in flight) gets such a context as its parent instead, which
 * holds the same record.  Only smbd's main thread sends and receives:
 * one table per process.
 *
 * The recv functions look the request up in the table once
 * (iotune_pass_slot()) and hand the slot on; a request not in the table
 * is iotune's own when its state has iotune's type name, and otherwise
 * one with a context of its own.  iotune's own requests clear their
 * address from the table when they are made (iotune_pass_forget()): a
 * request freed without being received leaves its key behind.
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

#include "vfs_iotune.h"
#include "iotune/passtab.h"

#undef DBGC_CLASS
#define DBGC_CLASS DBGC_VFS

typedef ssize_t (*iotune_aio_recv_fn)(struct tevent_req *req,
				      struct vfs_aio_state *vfs_aio_state);

/* What the recv function of a pass-through request needs */
struct iotune_pass {
	iotune_aio_recv_fn recv_fn;	/* the next layer's */
	struct iotune_share *share;
	struct iotune_file *uncached;	/* a write it counts, or NULL */
	struct files_struct *fsp;
	void *data;			/* a read's buffer */
	size_t n;
	uint64_t off;
	uint64_t started_us;
};

/* Keys: the next layer's requests; records by slot */
static struct iotune_passtab iotune_pass_tab;
static struct iotune_pass iotune_pass_recs[IOTUNE_PASSTAB_SLOTS];

/* The slot of this request's record, or -1: not in the table */
int iotune_pass_slot(const struct tevent_req *req)
{
	return iotune_passtab_find(&iotune_pass_tab, req);
}

/* A request of iotune's own now has this address: not in the table */
void iotune_pass_forget(const struct tevent_req *req)
{
	iotune_passtab_forget(&iotune_pass_tab, req);
}

/* Where the record of subreq, sent with mem_ctx as its parent, goes */
static struct iotune_pass *iotune_pass_keep(TALLOC_CTX *mem_ctx,
					    struct tevent_req *subreq)
{
	int i = iotune_passtab_claim(&iotune_pass_tab, subreq);
	struct iotune_pass *own = NULL;

	if (i >= 0) {
		return &iotune_pass_recs[i];
	}
	/*
	 * The slot holds another request: a context of its own.  Without
	 * one the request could not be received, nor taken back: freeing
	 * it would not stop a read or write that a worker thread may
	 * already be doing with the client's buffer.
	 */
	own = talloc(mem_ctx, struct iotune_pass);
	if (own == NULL) {
		smb_panic("iotune: no memory for a request in flight");
	}
	(void)talloc_steal(own, subreq);
	return own;
}

/* The record of req, found in slot (-1: in its parent), taken out */
static struct iotune_pass iotune_pass_take(struct tevent_req *req, int slot)
{
	if (slot >= 0) {
		iotune_passtab_release(&iotune_pass_tab, slot);
		return iotune_pass_recs[slot];
	}
	return *talloc_get_type_abort(talloc_parent(req), struct iotune_pass);
}

/*
 * A write the cache does not take and direct I/O does not shape.  file:
 * the handle's state, when the write counts in its uncached_writes (no
 * cache of the file may be made while it is on its way).
 */
struct tevent_req *iotune_pass_pwrite_send(struct vfs_handle_struct *handle,
					   struct iotune_share *share,
					   TALLOC_CTX *mem_ctx,
					   struct tevent_context *ev,
					   struct files_struct *fsp,
					   struct iotune_file *file,
					   const void *data,
					   size_t n,
					   off_t offset)
{
	uint64_t started_us = iotune_now_us();
	struct vfs_handle_struct *next = handle->next;
	struct tevent_req *subreq = NULL;

	while (next->fns->pwrite_send_fn == NULL) {
		next = next->next;
	}
	subreq = next->fns->pwrite_send_fn(next, mem_ctx, ev, fsp, data, n,
					   offset);
	if (subreq == NULL) {
		return NULL;
	}
	*iotune_pass_keep(mem_ctx, subreq) = (struct iotune_pass) {
		.recv_fn = next->fns->pwrite_recv_fn, .share = share,
		.uncached = file, .fsp = fsp, .off = (uint64_t)offset,
		.started_us = started_us,
	};
	if (file != NULL) {
		file->uncached_writes++;
	}
	return subreq;
}

ssize_t iotune_pass_pwrite_recv(struct tevent_req *req,
				int slot,
				struct vfs_aio_state *vfs_aio_state)
{
	struct iotune_pass pass = iotune_pass_take(req, slot);
	ssize_t ret = pass.recv_fn(req, vfs_aio_state);

	if (pass.uncached != NULL) {
		pass.uncached->uncached_writes--;
		/* a cache another handle made meanwhile learns the size */
		iotune_cache_note_disk_write(pass.fsp, pass.off, ret);
	}
	iotune_count_io(pass.share, true, ret, pass.started_us);
	return ret;
}

/* A read the write cache has nothing for and direct I/O does not shape */
struct tevent_req *iotune_pass_pread_send(struct vfs_handle_struct *handle,
					  struct iotune_share *share,
					  TALLOC_CTX *mem_ctx,
					  struct tevent_context *ev,
					  struct files_struct *fsp,
					  void *data,
					  size_t n,
					  off_t offset)
{
	uint64_t started_us = iotune_now_us();
	struct vfs_handle_struct *next = handle->next;
	struct tevent_req *subreq = NULL;

	while (next->fns->pread_send_fn == NULL) {
		next = next->next;
	}
	subreq = next->fns->pread_send_fn(next, mem_ctx, ev, fsp, data, n,
					  offset);
	if (subreq == NULL) {
		return NULL;
	}
	*iotune_pass_keep(mem_ctx, subreq) = (struct iotune_pass) {
		.recv_fn = next->fns->pread_recv_fn, .share = share,
		.fsp = fsp, .data = data, .n = n, .off = (uint64_t)offset,
		.started_us = started_us,
	};
	return subreq;
}

ssize_t iotune_pass_pread_recv(struct tevent_req *req,
			       int slot,
			       struct vfs_aio_state *vfs_aio_state)
{
	struct iotune_pass pass = iotune_pass_take(req, slot);
	struct iotune_cache *cache = NULL;
	ssize_t ret = pass.recv_fn(req, vfs_aio_state);

	/* a write cache made meanwhile: its data is newer than the disk's */
	if (ret >= 0 && (off_t)pass.off >= 0) {
		cache = iotune_cache_of(pass.fsp);
	}
	if (cache != NULL) {
		ret = (ssize_t)iotune_wc_read_overlay(
			iotune_cache_core(cache), NULL, pass.off, pass.data,
			pass.n, (size_t)ret);
	}
	iotune_count_io(pass.share, false, ret, pass.started_us);
	return ret;
}
