/*
 * iotune: write cache, read-ahead policy, direct I/O and throughput
 * counters for Samba shares.
 *
 * This file holds the VFS ops table, connect and disconnect (options are
 * read once per tree connect and kept as handle data), the per-process
 * and per-file state, opens and closes, and the hooks that only dispatch
 * (size and time changes, stats, durable handles).  Each concern has its
 * own file; vfs_iotune.h has the map, docs/design.md the design.
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
#include "smbd/globals.h"
#include "lib/util/tevent_unix.h"

#include "vfs_iotune.h"

#undef DBGC_CLASS
#define DBGC_CLASS DBGC_VFS

struct iotune_process *iotune_proc;

uint64_t iotune_now_ms(void)
{
	return iotune_now_us() / 1000;
}

/* One read or write as the client sees it: ops, bytes, latency */
void iotune_count_io(struct iotune_share *share,
		     bool is_write,
		     ssize_t ret,
		     uint64_t started_us)
{
	struct iotune_stats *s = &share->stats;
	uint64_t us = 0;
	uint64_t bytes = ret > 0 ? (uint64_t)ret : 0;

	if (!iotune_counting(share)) {
		return;
	}
	us = iotune_now_us() - started_us;
	if (is_write) {
		s->write_ops++;
		s->write_bytes += bytes;
		iotune_latency_add(&s->write_latency, us);
	} else {
		s->read_ops++;
		s->read_bytes += bytes;
		iotune_latency_add(&s->read_latency, us);
	}
}

ssize_t iotune_aio_recv(struct tevent_req *req,
			const struct iotune_aio_result *result,
			struct vfs_aio_state *vfs_aio_state)
{
	ssize_t ret = result->ret;
	struct vfs_aio_state state = result->vfs_aio_state;

	if (tevent_req_is_unix_error(req, &vfs_aio_state->error)) {
		tevent_req_received(req);
		return -1;
	}
	*vfs_aio_state = state;
	tevent_req_received(req);
	return ret;
}

static const char *iotune_lookup_option(void *private_data, const char *name)
{
	int snum = *(int *)private_data;

	return lp_parm_const_string(snum, IOTUNE_MODULE_NAME, name, NULL);
}

/*
 * Limits that hold per smbd process come from [global]; a share's value
 * may lower them for its own files, never raise them.
 */
static void iotune_process_limits(struct iotune_process *p)
{
	struct iotune_config global;
	char errbuf[512];
	int snum = -1;

	if (iotune_config_load(&global, iotune_lookup_option, &snum, errbuf,
			       sizeof(errbuf)) != 0) {
		DBG_ERR("[global]: %s; using the defaults for the limits of "
			"each smbd process\n", errbuf);
		iotune_config_load(&global, NULL, NULL, NULL, 0);
	}
	p->max_caches = global.write_cache_max_files;
	p->ra_budget_global = global.readahead_budget;
	p->ra_budget.limit = global.readahead_budget;
}

static struct iotune_process *iotune_process_get(
	struct smbd_server_connection *sconn)
{
	struct iotune_process *p = iotune_proc;

	if (p != NULL) {
		p->connections++;
		return p;
	}
	p = talloc_zero(NULL, struct iotune_process);
	if (p == NULL) {
		return NULL;
	}
	p->ev = sconn->ev_ctx;
	p->psi_fd = -2;
	p->counting = true;
	p->connections = 1;
	iotune_process_limits(p);
	if (iotune_smbd_process_init(p, sconn) != 0 ||
	    iotune_publisher_init(p) != 0) {
		TALLOC_FREE(p);
		return NULL;
	}
	iotune_proc = p;
	return p;
}

static void iotune_process_put(struct iotune_process *p)
{
	if (--p->connections > 0) {
		return;
	}
	SMB_ASSERT(p->caches == NULL);
	iotune_wc_pool_free(&p->wc_pool);
	iotune_ra_process_fini(p);
	iotune_smbd_process_fini(p);
	if (iotune_proc == p) {
		iotune_proc = NULL;
	}
	TALLOC_FREE(p);
}

static int iotune_share_destructor(struct iotune_share *share)
{
	iotune_caches_of_share_end(share);
	iotune_share_retire(share);
	DLIST_REMOVE(share->proc->shares, share);
	iotune_process_put(share->proc);
	return 0;
}

/*
 * Whether the write cache can keep its promises on this share: smbd
 * answers SMB2 FLUSH without asking the modules under "strict sync = no"
 * (a flushed write would still be only in memory), and without
 * multichannel one client's connections live in several processes that
 * share a lease without breaking it.
 */
static void iotune_share_write_cache(struct iotune_share *share, int snum)
{
	share->wc_on = share->config.write_cache_size > 0 &&
		       !lp_sync_always(snum);
	if (share->wc_on && !lp_strict_sync(snum)) {
		share->wc_on = false;
		DBG_WARNING("share '%s': 'strict sync = no' answers SMB2 FLUSH "
			    "without telling modules; the iotune write cache "
			    "is off on this share\n", share->name);
	}
	share->wc_leases = iotune_smbd_leases_stay_in_process();
	if (share->wc_on && !share->wc_leases) {
		DBG_WARNING("share '%s': without 'server multi channel "
			    "support' a client's connections may share a "
			    "lease across smbd processes; the iotune write "
			    "cache caches under oplocks only\n", share->name);
	}
}

static int iotune_connect_refuse(struct iotune_share *share,
				 const char *service,
				 const char *why)
{
	DBG_ERR("share '%s': %s; refusing the tree connect\n", service, why);
	TALLOC_FREE(share);
	errno = EINVAL;
	return -1;
}

static int iotune_connect(struct vfs_handle_struct *handle,
			  const char *service,
			  const char *user)
{
	struct iotune_share *share = NULL;
	int snum = SNUM(handle->conn);
	const char *bad_module = NULL;
	char errbuf[512];
	char desc[512];
	int ret;

	share = talloc_zero(handle->conn, struct iotune_share);
	if (share == NULL) {
		DBG_ERR("talloc_zero() failed\n");
		errno = ENOMEM;
		return -1;
	}
	if (!iotune_smbd_version_ok(errbuf, sizeof(errbuf)) ||
	    iotune_config_load(&share->config, iotune_lookup_option, &snum,
			       errbuf, sizeof(errbuf)) != 0) {
		return iotune_connect_refuse(share, service, errbuf);
	}
	bad_module = iotune_smbd_incompatible_module(snum);
	if (bad_module != NULL) {
		snprintf(errbuf, sizeof(errbuf), "'vfs objects' lists '%s' "
			 "after iotune; iotune must be below it or it must go",
			 bad_module);
		return iotune_connect_refuse(share, service, errbuf);
	}
	if (share->config.write_cache_batch_reservations &&
	    !iotune_smbd_nothing_below(snum)) {
		return iotune_connect_refuse(share, service, "'iotune:write "
					     "cache batch reservations = yes' "
					     "needs iotune last in 'vfs "
					     "objects' (its reservations "
					     "bypass the modules below it)");
	}
	if (iotune_smbd_listed_twice(snum)) {
		return iotune_connect_refuse(share, service, "'vfs objects' "
					     "lists iotune twice; list it once");
	}
	share->proc = iotune_process_get(handle->conn->sconn);
	if (share->proc == NULL) {
		TALLOC_FREE(share);
		errno = ENOMEM;
		return -1;
	}
	share->name = lp_const_servicename(snum);
	share->conn = handle->conn;
	iotune_share_write_cache(share, snum);
	iotune_wcache_share_init(share, snum);
	iotune_ra_share_init(share);
	share->serial = ++share->proc->next_share_serial;
	DLIST_ADD(share->proc->shares, share);
	talloc_set_destructor(share, iotune_share_destructor);
	iotune_publish_timer_arm(share->proc);

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

/* called when smbd drops the fsp extension */
static void iotune_file_destroy(void *p_data)
{
	struct iotune_file *file = p_data;
	struct iotune_process *p = iotune_process_current();

	iotune_cache_file_gone(file);
	iotune_dio_close(file);
	if (p != NULL) {
		/* prefetched, unread bytes leave the budget */
		iotune_ra_close(&file->ra, &p->ra_budget);
	}
}

static int iotune_openat(struct vfs_handle_struct *handle,
			 const struct files_struct *dirfsp,
			 const struct smb_filename *smb_fname,
			 struct files_struct *fsp,
			 const struct vfs_open_how *how)
{
	struct iotune_share *share = iotune_share_of(handle);
	struct iotune_file *file = NULL;
	int dio = share->config.direct_io;
	int fd;

	fd = SMB_VFS_NEXT_OPENAT(handle, dirfsp, smb_fname, fsp, how);
	if (fd == -1 || (how->flags & O_PATH) ||
	    fsp->fsp_flags.is_directory) {
		return fd;
	}
	file = iotune_file_of(handle, fsp);
	if (file == NULL) {
		file = VFS_ADD_FSP_EXTENSION(handle, fsp, struct iotune_file,
					     iotune_file_destroy);
		if (file == NULL) {
			SMB_VFS_NEXT_CLOSE(handle, fsp);
			errno = ENOMEM;
			return -1;
		}
		*file = (struct iotune_file) {
			.handle = handle, .fsp = fsp, .dio.fd = -1,
		};
	}
	file->fd = fd;
	file->write_through = (how->flags & (O_SYNC | O_DSYNC)) != 0;
	iotune_apply_advice(share, fd, &file->ra,
			    fsp_is_alternate_stream(fsp));
	iotune_dio_close(file);
	if (!fsp_is_alternate_stream(fsp)) {
		iotune_dio_open(share, file, how->flags,
				dio == IOTUNE_DIRECT_READS ||
				dio == IOTUNE_DIRECT_BOTH,
				dio == IOTUNE_DIRECT_WRITES ||
				dio == IOTUNE_DIRECT_BOTH);
	}
	return fd;
}

/* The client's access pattern hints live only in the create options. */
static void iotune_create_hints(struct vfs_handle_struct *handle,
				struct files_struct *fsp,
				uint32_t create_options)
{
	struct iotune_share *share = iotune_share_of(handle);
	struct iotune_file *file = iotune_file_of(handle, fsp);

	if (file == NULL) {
		return;
	}
	if (create_options & FILE_RANDOM_ACCESS) {
		file->ra.hint = IOTUNE_RA_HINT_RANDOM;
	} else if (create_options & FILE_SEQUENTIAL_ONLY) {
		file->ra.hint = IOTUNE_RA_HINT_SEQUENTIAL;
	}
	if (file->ra.hint != IOTUNE_RA_HINT_NONE) {
		iotune_apply_advice(share, file->fd, &file->ra,
				    fsp_is_alternate_stream(fsp));
	}
	if ((create_options & FILE_NO_INTERMEDIATE_BUFFERING) &&
	    share->config.direct_io == IOTUNE_DIRECT_CLIENT &&
	    !fsp_is_alternate_stream(fsp)) {
		iotune_dio_open(share, file,
				fsp->fsp_flags.can_write ? O_RDWR : O_RDONLY,
				true, true);
	}
}

static NTSTATUS iotune_create_file(struct vfs_handle_struct *handle,
				   struct smb_request *req,
				   struct files_struct *dirfsp,
				   struct smb_filename *smb_fname,
				   uint32_t access_mask,
				   uint32_t share_access,
				   uint32_t create_disposition,
				   uint32_t create_options,
				   uint32_t file_attributes,
				   uint32_t oplock_request,
				   const struct smb2_lease *lease,
				   uint64_t allocation_size,
				   uint32_t private_flags,
				   struct security_descriptor *sd,
				   struct ea_list *ea_list,
				   files_struct **result,
				   int *pinfo,
				   const struct smb2_create_blobs *in_blobs,
				   struct smb2_create_blobs *out_blobs)
{
	NTSTATUS status;

	status = SMB_VFS_NEXT_CREATE_FILE(handle, req, dirfsp, smb_fname,
					  access_mask, share_access,
					  create_disposition, create_options,
					  file_attributes, oplock_request,
					  lease, allocation_size, private_flags,
					  sd, ea_list, result, pinfo, in_blobs,
					  out_blobs);
	if (NT_STATUS_IS_OK(status) && *result != NULL) {
		iotune_create_hints(handle, *result, create_options);
	}
	return status;
}

/* The last handle of a cache writes it out; a failure fails the close. */
static int iotune_close(struct vfs_handle_struct *handle,
			struct files_struct *fsp)
{
	struct iotune_file *file = iotune_file_of(handle, fsp);
	int err;
	int ret;

	if (file == NULL || file->fd != fsp_get_pathref_fd(fsp)) {
		return SMB_VFS_NEXT_CLOSE(handle, fsp);
	}
	iotune_ra_on_close(handle, fsp, file);
	err = iotune_cache_close(file);
	/* after the cache: its flushes may use the direct descriptor */
	iotune_dio_close(file);
	VFS_REMOVE_FSP_EXTENSION(handle, fsp);
	ret = SMB_VFS_NEXT_CLOSE(handle, fsp);
	if (ret == 0 && err != 0) {
		errno = err;
		return -1;
	}
	return ret;
}

/* Size changes: the cache is written out first. */
static int iotune_ftruncate(struct vfs_handle_struct *handle,
			    struct files_struct *fsp,
			    off_t offset)
{
	int err = iotune_flush_for(fsp, IOTUNE_FLUSH_SIZE_CHANGE, false);
	int ret;

	if (err != 0) {
		errno = err;
		return -1;
	}
	ret = SMB_VFS_NEXT_FTRUNCATE(handle, fsp, offset);
	if (ret == 0 && offset >= 0) {
		iotune_cache_set_disk_size(fsp, (uint64_t)offset);
	}
	return ret;
}

static int iotune_fallocate(struct vfs_handle_struct *handle,
			    struct files_struct *fsp,
			    uint32_t mode,
			    off_t offset,
			    off_t len)
{
	int err = iotune_flush_for(fsp, IOTUNE_FLUSH_SIZE_CHANGE, false);
	int ret;

	if (err != 0) {
		errno = err;
		return -1;
	}
	ret = SMB_VFS_NEXT_FALLOCATE(handle, fsp, mode, offset, len);
	iotune_cache_allocation_changed(fsp);
	if (ret == 0 && !(mode & VFS_FALLOCATE_FL_KEEP_SIZE) &&
	    offset >= 0 && len > 0) {
		iotune_cache_note_disk_write(fsp, (uint64_t)offset, len);
	}
	return ret;
}

/*
 * Times: smbd sets them (a client's SET_INFO, the write time at close,
 * the sticky write time after every write since 4.23) after the data
 * they cover; cached data landing later would move the modification time
 * past what was set (vfs_iotune_wctimes.c).
 */
static int iotune_fntimes(struct vfs_handle_struct *handle,
			  struct files_struct *fsp,
			  struct smb_file_time *ft)
{
	int err = iotune_cache_times_set(handle, fsp, ft);
	int ret;

	if (err != 0) {
		errno = err;
		return -1;
	}
	ret = SMB_VFS_NEXT_FNTIMES(handle, fsp, ft);
	if (ret == 0) {
		iotune_cache_times_done(handle, fsp, ft);
	}
	return ret;
}

/* Every stat shows the size with the data still cached in this process */
static int iotune_fstat(struct vfs_handle_struct *handle,
			struct files_struct *fsp,
			SMB_STRUCT_STAT *sbuf)
{
	int ret = SMB_VFS_NEXT_FSTAT(handle, fsp, sbuf);

	if (ret == 0 && !fsp_is_alternate_stream(fsp)) {
		iotune_cache_logical_size(handle, sbuf);
	}
	return ret;
}

static int iotune_stat(struct vfs_handle_struct *handle,
		       struct smb_filename *smb_fname)
{
	int ret = SMB_VFS_NEXT_STAT(handle, smb_fname);

	if (ret == 0 && !is_named_stream(smb_fname)) {
		iotune_cache_logical_size(handle, &smb_fname->st);
	}
	return ret;
}

static int iotune_lstat(struct vfs_handle_struct *handle,
			struct smb_filename *smb_fname)
{
	int ret = SMB_VFS_NEXT_LSTAT(handle, smb_fname);

	if (ret == 0 && !is_named_stream(smb_fname)) {
		iotune_cache_logical_size(handle, &smb_fname->st);
	}
	return ret;
}

static int iotune_fstatat(struct vfs_handle_struct *handle,
			  const struct files_struct *dirfsp,
			  const struct smb_filename *smb_fname,
			  SMB_STRUCT_STAT *sbuf,
			  int flags)
{
	int ret = SMB_VFS_NEXT_FSTATAT(handle, dirfsp, smb_fname, sbuf,
				       flags);

	if (ret == 0 && !is_named_stream(smb_fname)) {
		iotune_cache_logical_size(handle, sbuf);
	}
	return ret;
}

/*
 * A durable handle's cookie records the file's stat: the data must be in
 * the file before, or the reconnect sees another file.
 */
static NTSTATUS iotune_durable_disconnect(struct vfs_handle_struct *handle,
					  struct files_struct *fsp,
					  const DATA_BLOB old_cookie,
					  TALLOC_CTX *mem_ctx,
					  DATA_BLOB *new_cookie)
{
	int err = iotune_flush_for(fsp, IOTUNE_FLUSH_DISCONNECT, false);

	if (err != 0) {
		return map_nt_error_from_unix(err);
	}
	return SMB_VFS_NEXT_DURABLE_DISCONNECT(handle, fsp, old_cookie,
					       mem_ctx, new_cookie);
}

static struct vfs_fn_pointers iotune_fns = {
	.connect_fn = iotune_connect,
	.disconnect_fn = iotune_disconnect,
	.openat_fn = iotune_openat,
	.create_file_fn = iotune_create_file,
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
	.fntimes_fn = iotune_fntimes,
	.stat_fn = iotune_stat,
	.lstat_fn = iotune_lstat,
	.fstat_fn = iotune_fstat,
	.fstatat_fn = iotune_fstatat,
	.sendfile_fn = iotune_sendfile,
	.recvfile_fn = iotune_recvfile,
	.offload_read_send_fn = iotune_offload_read_send,
	.offload_read_recv_fn = iotune_offload_read_recv,
	.offload_write_send_fn = iotune_offload_write_send,
	.offload_write_recv_fn = iotune_offload_write_recv,
	.durable_disconnect_fn = iotune_durable_disconnect,
};

static_decl_vfs;
_PUBLIC_ NTSTATUS vfs_iotune_init(TALLOC_CTX *ctx)
{
	return smb_register_vfs(SMB_VFS_INTERFACE_VERSION, IOTUNE_MODULE_NAME,
				&iotune_fns);
}
