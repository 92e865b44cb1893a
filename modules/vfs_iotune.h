/*
 * iotune: what the Samba-side files of the module share (only they
 * include Samba headers).  docs/design.md has a map of the files:
 *
 *   vfs_iotune.c         the ops table, connect/disconnect, opens, closes
 *                        and the hooks that only dispatch
 *   vfs_iotune_io.c      reads and writes as the client sees them
 *   vfs_iotune_pass.c    reads and writes that pass through: no
 *                        tevent request of iotune's own
 *   vfs_iotune_wcache.c  the write cache: caches, the core's actions,
 *                        flushes, barriers, sizes
 *   vfs_iotune_dio.c     direct I/O: O_DIRECT descriptors, pool jobs
 *   vfs_iotune_ra.c      read-ahead and fadvise
 *   vfs_iotune_stats.c   counters: the stats tdb, profile levels
 *   vfs_iotune_smbd.c    everything that leans on smbd internals
 *                        rather than the VFS contract
 *
 * Copyright (C) iotune authors 2026
 * SPDX-License-Identifier: GPL-3.0-or-later
 */

#ifndef IOTUNE_VFS_IOTUNE_H
#define IOTUNE_VFS_IOTUNE_H

#include "iotune/config.h"
#include "iotune/dio.h"
#include "iotune/readahead.h"
#include "iotune/stats.h"
#include "iotune/wcache.h"

#define IOTUNE_MODULE_NAME "iotune"

struct iotune_process;
struct iotune_cache;
struct iotune_smbd;
struct iotune_publisher;
struct iotune_memcg_kind;

/* One tree connect of a share with iotune */
struct iotune_share {
	struct iotune_share *prev, *next;	/* in proc->shares */
	struct iotune_config config;
	const char *name;
	struct connection_struct *conn;
	struct iotune_process *proc;
	unsigned serial;
	bool wc_on;			/* the write cache may be used */
	bool wc_leases;			/* ... under leases too */
	uint64_t wc_bypass;		/* writes this large go to disk */
	unsigned wc_flushes;		/* windows in flight per cache */
	bool wc_reserve_async;		/* reservations in batches, in the
					 * thread pool (vfs_iotune_reserve.c) */
	bool wc_writeback;		/* windows written to the page cache
					 * start their write-back */
	struct iotune_ra_config ra_config;
	bool ra_active;			/* prefetch or drop-behind to do */
	bool dio_unsupported;		/* the file system refused O_DIRECT */
	bool reserve_warned;
	uint64_t reserve_cost_us;	/* a reservation, without waits; 0:
					 * not known yet */
	uint64_t reserve_batch_min_us;	/* the fastest of this batch */
	unsigned reserve_batch;		/* its samples so far */
	struct iotune_stats stats;
	struct iotune_stats published;
};

/* Per smbd process: shared by all tree connects with iotune */
struct iotune_process {
	struct tevent_context *ev;
	unsigned connections;
	bool counting;		/* smbcontrol ... profile off stops it */
	struct iotune_share *shares;
	unsigned next_share_serial;
	struct iotune_cache *caches;
	unsigned num_caches;
	unsigned sync;		/* synchronous flushes running */
	uint64_t max_caches;	/* [global] write cache max files */
	struct iotune_ra_budget ra_budget;
	uint64_t ra_budget_global;	/* [global] readahead budget */
	struct iotune_wc_pool wc_pool;	/* window buffers caches left */
	int psi_fd;		/* memory pressure; -1: none, -2: not open */
	unsigned psi_failures;	/* reads of it that failed in a row */
	char *memcg;		/* the cgroup with smbd's memory limit */
	const struct iotune_memcg_kind *memcg_kind;	/* v2 or v1 */
	struct iotune_smbd *smbd;
	struct iotune_publisher *publisher;
};

/* The direct I/O state of an open file */
struct iotune_dio_file {
	int fd;				/* O_DIRECT twin of the fd, or -1 */
	bool reads;
	bool writes;
	struct iotune_dio_align align;
};

/*
 * Per open file.  smbd 4.17 reopens an existing file from a path-only
 * handle and calls close_fn on the same fsp for the old fd, so the state
 * remembers the fd it was created for and only a close of that fd ends
 * it.
 */
struct iotune_file {
	struct iotune_file *prev, *next;	/* in cache->files */
	struct vfs_handle_struct *handle;
	struct files_struct *fsp;
	struct iotune_cache *cache;
	int fd;
	bool write_through;
	unsigned uncached_writes;	/* on their way to disk, no cache */
	struct iotune_ra_file ra;
	struct iotune_dio_file dio;
};

/*
 * The helpers every read and write calls are inline: a call into
 * another file of the module costs more than what most of them do, and
 * pass-through requests are to cost no more than without iotune.
 */

/* This smbd process's state (vfs_iotune.c), or NULL before a connect */
extern struct iotune_process *iotune_proc;

static inline struct iotune_process *iotune_process_current(void)
{
	return iotune_proc;
}

static inline uint64_t iotune_now_us(void)
{
	struct timespec ts;

	clock_gettime(CLOCK_MONOTONIC, &ts);
	return (uint64_t)ts.tv_sec * 1000000 + (uint64_t)ts.tv_nsec / 1000;
}

uint64_t iotune_now_ms(void);

/* The share's state, set at connect (SMB_VFS_HANDLE_SET_DATA) */
static inline struct iotune_share *iotune_share_of(
	struct vfs_handle_struct *handle)
{
	if (handle->data == NULL) {
		smb_panic("iotune: a handle without its share's state");
	}
	return (struct iotune_share *)handle->data;
}

static inline struct iotune_file *iotune_file_of(
	struct vfs_handle_struct *handle,
	struct files_struct *fsp)
{
	return VFS_FETCH_FSP_EXTENSION(handle, fsp);
}

static inline bool iotune_counting(const struct iotune_share *share)
{
	return share->config.stats && share->proc->counting;
}

void iotune_count_io(struct iotune_share *share,
		     bool is_write,
		     ssize_t ret,
		     uint64_t started_us);

/* The result every async I/O request of ours carries */
struct iotune_aio_result {
	ssize_t ret;
	struct vfs_aio_state vfs_aio_state;
};

ssize_t iotune_aio_recv(struct tevent_req *req,
			const struct iotune_aio_result *result,
			struct vfs_aio_state *vfs_aio_state);

/* vfs_iotune_pass.c */
int iotune_pass_slot(const struct tevent_req *req);
void iotune_pass_forget(const struct tevent_req *req);
struct tevent_req *iotune_pass_pwrite_send(struct vfs_handle_struct *handle,
					   struct iotune_share *share,
					   TALLOC_CTX *mem_ctx,
					   struct tevent_context *ev,
					   struct files_struct *fsp,
					   struct iotune_file *file,
					   const void *data,
					   size_t n,
					   off_t offset);
ssize_t iotune_pass_pwrite_recv(struct tevent_req *req,
				int slot,
				struct vfs_aio_state *vfs_aio_state);
struct tevent_req *iotune_pass_pread_send(struct vfs_handle_struct *handle,
					  struct iotune_share *share,
					  TALLOC_CTX *mem_ctx,
					  struct tevent_context *ev,
					  struct files_struct *fsp,
					  void *data,
					  size_t n,
					  off_t offset);
ssize_t iotune_pass_pread_recv(struct tevent_req *req,
			       int slot,
			       struct vfs_aio_state *vfs_aio_state);

/* vfs_iotune_wcache.c */
void iotune_wcache_share_init(struct iotune_share *share, int snum);
struct iotune_cache *iotune_cache_lookup(struct files_struct *fsp);

/* The cache holding data of this handle's file, if any */
static inline struct iotune_cache *iotune_cache_of(struct files_struct *fsp)
{
	const struct iotune_process *p = iotune_process_current();

	/* most processes hold no cache: no call for them */
	if (p == NULL || p->caches == NULL) {
		return NULL;
	}
	return iotune_cache_lookup(fsp);
}
struct iotune_cache *iotune_cache_for_write(struct iotune_share *share,
					    struct iotune_file *file,
					    struct files_struct *fsp,
					    uint64_t off,
					    size_t n,
					    bool *may_cache);
struct iotune_wcache *iotune_cache_core(struct iotune_cache *cache);
bool iotune_cache_reserve_slow(const struct iotune_share *share);
bool iotune_cache_idle(const struct iotune_cache *cache);
bool iotune_cache_submit(struct iotune_cache *cache,
			 struct iotune_wc_op *op);
bool iotune_cache_cancel(struct iotune_cache *cache,
			 struct iotune_wc_op *op);
void iotune_cache_disk_done(struct iotune_cache *cache,
			    struct iotune_wc_op *op,
			    ssize_t ret,
			    int err);
void iotune_cache_write_landed(struct iotune_cache *cache,
			       struct iotune_wc_op *op,
			       ssize_t ret,
			       int err);
int iotune_flush_for(struct files_struct *fsp,
		     enum iotune_flush_reason reason,
		     bool report);
void iotune_cache_note_disk_write(struct files_struct *fsp,
				  uint64_t off,
				  ssize_t written);
void iotune_cache_set_disk_size(struct files_struct *fsp, uint64_t size);
void iotune_cache_allocation_changed(struct files_struct *fsp);
int iotune_cache_close(struct iotune_file *file);
void iotune_cache_file_gone(struct iotune_file *file);
void iotune_caches_of_share_end(struct iotune_share *share);
void iotune_caches_check(struct iotune_process *p, bool files_changed);
void iotune_caches_counting(struct iotune_process *p);
void iotune_cache_logical_size(struct vfs_handle_struct *handle,
			       SMB_STRUCT_STAT *st);

/* vfs_iotune_wctimes.c: file times of cached files */
int iotune_cache_times_set(struct vfs_handle_struct *handle,
			   struct files_struct *fsp,
			   const struct smb_file_time *ft);
void iotune_cache_times_done(struct vfs_handle_struct *handle,
			     struct files_struct *fsp,
			     const struct smb_file_time *ft);
struct tevent_req *iotune_after_flush(
	struct tevent_req *req,
	struct tevent_context *ev,
	struct files_struct *fsp,
	enum iotune_flush_reason reason,
	void (*next)(struct tevent_req *req, int err));

/* vfs_iotune_io.c: the data path hooks */
ssize_t iotune_pread(struct vfs_handle_struct *handle,
		     struct files_struct *fsp,
		     void *data,
		     size_t n,
		     off_t offset);
struct tevent_req *iotune_pread_send(struct vfs_handle_struct *handle,
				     TALLOC_CTX *mem_ctx,
				     struct tevent_context *ev,
				     struct files_struct *fsp,
				     void *data,
				     size_t n,
				     off_t offset);
ssize_t iotune_pread_recv(struct tevent_req *req,
			  struct vfs_aio_state *vfs_aio_state);
ssize_t iotune_pwrite(struct vfs_handle_struct *handle,
		      struct files_struct *fsp,
		      const void *data,
		      size_t n,
		      off_t offset);
struct tevent_req *iotune_pwrite_send(struct vfs_handle_struct *handle,
				      TALLOC_CTX *mem_ctx,
				      struct tevent_context *ev,
				      struct files_struct *fsp,
				      const void *data,
				      size_t n,
				      off_t offset);
ssize_t iotune_pwrite_recv(struct tevent_req *req,
			   struct vfs_aio_state *vfs_aio_state);
struct tevent_req *iotune_fsync_send(struct vfs_handle_struct *handle,
				     TALLOC_CTX *mem_ctx,
				     struct tevent_context *ev,
				     struct files_struct *fsp);
int iotune_fsync_recv(struct tevent_req *req,
		      struct vfs_aio_state *vfs_aio_state);
ssize_t iotune_sendfile(struct vfs_handle_struct *handle,
			int tofd,
			struct files_struct *fromfsp,
			const DATA_BLOB *hdr,
			off_t offset,
			size_t n);
ssize_t iotune_recvfile(struct vfs_handle_struct *handle,
			int fromfd,
			struct files_struct *tofsp,
			off_t offset,
			size_t n);

/* ... and how the write cache hands a write back to its request */
void iotune_pwrite_dispatch(struct iotune_wc_op *op);
void iotune_pwrite_complete(struct iotune_wc_op *op);
void iotune_pwrite_detach(struct iotune_wc_op *op);

/* vfs_iotune_offload.c: server-side copy */
struct tevent_req *iotune_offload_read_send(TALLOC_CTX *mem_ctx,
					    struct tevent_context *ev,
					    struct vfs_handle_struct *handle,
					    struct files_struct *fsp,
					    uint32_t fsctl,
					    uint32_t ttl,
					    off_t offset,
					    size_t to_copy);
NTSTATUS iotune_offload_read_recv(struct tevent_req *req,
				  struct vfs_handle_struct *handle,
				  TALLOC_CTX *mem_ctx,
				  uint32_t *flags,
				  uint64_t *xferlen,
				  DATA_BLOB *token);
struct tevent_req *iotune_offload_write_send(struct vfs_handle_struct *handle,
					     TALLOC_CTX *mem_ctx,
					     struct tevent_context *ev,
					     uint32_t fsctl,
					     DATA_BLOB *token,
					     off_t transfer_offset,
					     struct files_struct *dest_fsp,
					     off_t dest_off,
					     off_t num);
NTSTATUS iotune_offload_write_recv(struct vfs_handle_struct *handle,
				   struct tevent_req *req,
				   off_t *copied);

/* vfs_iotune_dio.c */
bool iotune_dio_wanted(const struct iotune_share *share,
		       const struct iotune_file *file,
		       bool is_write,
		       size_t n);
ssize_t iotune_dio_sync(struct iotune_share *share,
			struct iotune_file *file,
			bool is_write,
			const void *buf,
			size_t n,
			uint64_t off);
struct tevent_req *iotune_disk_send(TALLOC_CTX *mem_ctx,
				    struct tevent_context *ev,
				    struct vfs_handle_struct *handle,
				    struct iotune_file *file,
				    struct files_struct *fsp,
				    bool dio,
				    bool is_write,
				    const void *buf,
				    size_t n,
				    uint64_t off);
ssize_t iotune_disk_recv(struct tevent_req *subreq,
			 bool dio,
			 bool is_write,
			 struct vfs_aio_state *vfs_aio_state);
void iotune_dio_open(struct iotune_share *share,
		     struct iotune_file *file,
		     int flags,
		     bool reads,
		     bool writes);
void iotune_dio_close(struct iotune_file *file);

/* vfs_iotune_ra.c */
enum iotune_fd_job_kind {
	IOTUNE_FD_PREFETCH,	/* readahead(2), else POSIX_FADV_WILLNEED */
	IOTUNE_FD_DROP,		/* POSIX_FADV_DONTNEED */
	IOTUNE_FD_WRITEBACK,	/* sync_file_range(SYNC_FILE_RANGE_WRITE) */
};
struct iotune_fd_job;
typedef void (*iotune_fd_job_ended_fn)(void *private_data);
struct iotune_fd_job *iotune_fd_job_start(struct vfs_handle_struct *handle,
					  struct files_struct *fsp,
					  uint64_t off,
					  uint64_t len,
					  enum iotune_fd_job_kind kind,
					  iotune_fd_job_ended_fn ended,
					  void *private_data);
void iotune_fd_job_forget(struct iotune_fd_job *job);
void iotune_fd_job_submit(struct vfs_handle_struct *handle,
			  struct files_struct *fsp,
			  uint64_t off,
			  uint64_t len,
			  enum iotune_fd_job_kind kind);
void iotune_ra_on_read(struct vfs_handle_struct *handle,
		       struct files_struct *fsp,
		       off_t off,
		       size_t n);
void iotune_ra_on_close(struct vfs_handle_struct *handle,
			struct files_struct *fsp,
			struct iotune_file *file);
void iotune_ra_share_init(struct iotune_share *share);
void iotune_apply_advice(struct iotune_share *share,
			 int fd,
			 struct iotune_ra_file *ra,
			 bool stream);

/* vfs_iotune_pressure.c */
void iotune_pressure_update(struct iotune_process *p);
void iotune_ra_process_fini(struct iotune_process *p);

/* vfs_iotune_stats.c */
int iotune_publisher_init(struct iotune_process *p);
void iotune_share_publish(struct iotune_share *share);
void iotune_publish_timer_arm(struct iotune_process *p);
void iotune_share_retire(struct iotune_share *share);
void iotune_profile_level(struct iotune_process *p, int level);

/* vfs_iotune_smbd.c: smbd internals (4.17, 4.22) */
bool iotune_smbd_version_ok(char *why, size_t why_len);
int iotune_smbd_process_init(struct iotune_process *p,
			     struct smbd_server_connection *sconn);
void iotune_smbd_process_fini(struct iotune_process *p);
struct tevent_context *iotune_smbd_flush_ev(struct iotune_process *p);
void iotune_smbd_flush_started(struct iotune_process *p);
void iotune_smbd_flush_ended(struct iotune_process *p);
void iotune_smbd_run_flush_ev_once(struct iotune_process *p);
void iotune_smbd_caches_made(struct iotune_process *p);
bool iotune_smbd_fsp_may_cache(const struct files_struct *fsp);
bool iotune_smbd_handle_busy(const struct files_struct *fsp);
bool iotune_smbd_client_waiting(const struct files_struct *fsp);
bool iotune_smbd_foreign_handle(struct iotune_process *p,
				const struct file_id *id);
bool iotune_smbd_leases_stay_in_process(void);
const char *iotune_smbd_module_below(int snum, const char *const *names);
bool iotune_smbd_listed_twice(int snum);
bool iotune_smbd_nothing_below(int snum);
const char *iotune_smbd_incompatible_module(int snum);
int iotune_smbd_reopen(int fd, int flags);
int iotune_smbd_set_mtime(struct vfs_handle_struct *handle,
			  struct files_struct *fsp,
			  struct timespec mtime);

#endif /* IOTUNE_VFS_IOTUNE_H */
