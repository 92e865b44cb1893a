/*
 * iotune: the write cache's Samba side, its caches.  The core
 * (modules/wcache*.c) decides everything: what to absorb, what to write
 * to disk and when, the order of waiting requests, retries, the lost
 * right to cache.  This file keeps one cache per file per smbd process:
 * creates and ends them, says which handles may cache, writes them out
 * for synchronous VFS calls, closes and breaks, and reports the sizes
 * they hold.  vfs_iotune_wcache_act.c carries out the core's actions.
 *
 * Why the cache is coherent without a VFS hook for breaks: before every
 * loop iteration of smbd's main context, iotune_caches_check() (called by
 * vfs_iotune_smbd.c) writes out, synchronously, every cache whose handles
 * lost or are losing their oplock or lease, or whose file is open through
 * a share without iotune; the acknowledgement of a break can only be
 * processed in a later iteration.  Flushes run on a private tevent
 * context so that such synchronous waits are possible.  docs/design.md
 * has the long version, and the rules for errors and reservations.
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
#include <sys/vfs.h>
#include "smbd/smbd.h"
#include "smbd/globals.h"

#include "vfs_iotune_wcache.h"

#undef DBGC_CLASS
#define DBGC_CLASS DBGC_VFS

struct iotune_wcache *iotune_cache_core(struct iotune_cache *cache)
{
	return &cache->wc;
}

/*
 * Where every write costs a round trip or a device command (direct I/O,
 * a cluster or network file system below or under the share), even large
 * writes gain from coalescing; on a local file system through the page
 * cache a write of 64 KiB or more does not.
 */
static bool iotune_backend_per_op_costly(const struct iotune_share *share,
					 int snum)
{
	static const char *const remote[] = {
		"glusterfs", "ceph", "ceph_new", NULL,
	};
	static const long remote_fs[] = {
		0x65735546,	/* FUSE (GlusterFS, CephFS, ... mounts) */
		0x6969,		/* NFS */
		(long)0xfe534d42, (long)0xff534d42,	/* SMB2, CIFS */
		0x00c36400,	/* CephFS */
		0x01161970,	/* GFS2 */
		0x7461636f,	/* OCFS2 */
		0x47504653,	/* GPFS */
		0x0bd00bd0,	/* Lustre */
	};
	struct statfs sfs;
	size_t i;

	if (share->config.direct_io == IOTUNE_DIRECT_WRITES ||
	    share->config.direct_io == IOTUNE_DIRECT_BOTH ||
	    iotune_smbd_module_below(snum, remote) != NULL) {
		return true;
	}
	if (statfs(share->conn->connectpath, &sfs) != 0) {
		return false;
	}
	for (i = 0; i < ARRAY_SIZE(remote_fs); i++) {
		if ((long)sfs.f_type == remote_fs[i]) {
			return true;
		}
	}
	return false;
}

/* The write cache's settings of a share that come from its backend */
void iotune_wcache_share_init(struct iotune_share *share, int snum)
{
	uint64_t bypass = share->config.write_cache_bypass_size;
	bool costly = iotune_backend_per_op_costly(share, snum);

	if (bypass == IOTUNE_SIZE_AUTO) {
		bypass = costly ? IOTUNE_BYPASS_COSTLY : IOTUNE_BYPASS_LOCAL;
	}
	share->wc_bypass = MIN(bypass, share->config.write_cache_size);
	share->wc_flushes = costly ? IOTUNE_WC_MAX_FLUSHES : 1;
	share->wc_reserve_async = iotune_cache_reserve_async(share);
	/* through the page cache of a local file system only */
	share->wc_writeback = share->config.write_cache_start_writeback &&
			      !costly;
	DBG_INFO("share '%s': writes of %" PRIu64 " bytes or more go "
		 "straight to disk, %u windows per file on their way to "
		 "disk at once, reservations %s, write-back %s\n",
		 share->name, share->wc_bypass, share->wc_flushes,
		 share->wc_reserve_async ? "in batches in the thread pool" :
		 "inline", share->wc_writeback ?
		 "started as each window is written" : "left to the kernel");
}

static struct iotune_wc_stats *iotune_cache_stats(struct iotune_share *share)
{
	return iotune_counting(share) ? &share->stats.wc : NULL;
}

static struct iotune_cache *iotune_find_cache(struct iotune_process *p,
					      const struct file_id *id)
{
	struct iotune_cache *c = NULL;

	for (c = p != NULL ? p->caches : NULL; c != NULL; c = c->next) {
		if (file_id_equal(&c->id, id)) {
			return c;
		}
	}
	return NULL;
}

/* iotune_cache_of() once the process holds a cache */
struct iotune_cache *iotune_cache_lookup(struct files_struct *fsp)
{
	struct iotune_process *p = iotune_process_current();

	if (fsp->fsp_flags.is_directory || fsp_is_alternate_stream(fsp)) {
		return NULL;
	}
	return iotune_find_cache(p, &fsp->file_id);
}

/* May this handle keep written data in memory right now? */
static bool iotune_file_may_cache(const struct iotune_share *share,
				  const struct iotune_file *file,
				  const struct files_struct *fsp)
{
	if (!share->wc_on || file == NULL || file->write_through ||
	    fsp->fsp_flags.is_directory || fsp_is_alternate_stream(fsp)) {
		return false;
	}
	if (fsp->oplock_type == LEASE_OPLOCK && !share->wc_leases) {
		return false;
	}
	return iotune_smbd_fsp_may_cache(fsp);
}

static bool iotune_cache_may_continue(struct iotune_cache *cache,
				      bool files_changed)
{
	const struct iotune_file *f = NULL;

	for (f = cache->files; f != NULL; f = f->next) {
		if (!iotune_file_may_cache(iotune_share_of(f->handle), f,
					   f->fsp)) {
			return false;
		}
	}
	return !files_changed ||
	       !iotune_smbd_foreign_handle(cache->proc, &cache->id);
}

/* Synchronous writes of flush pieces, through the cache's first handle */
static ssize_t iotune_cache_sync_pwrite(void *private_data,
					const void *buf,
					size_t n,
					uint64_t off)
{
	struct iotune_cache *cache = private_data;
	struct iotune_file *owner = cache->files;
	bool dio = iotune_dio_wanted(cache->share, owner, true, n);

	cache->wb_buffered |= iotune_piece_buffered(owner, dio, off, n);
	if (dio) {
		return iotune_dio_sync(cache->share, owner, true, buf, n, off);
	}
	return SMB_VFS_NEXT_PWRITE(owner->handle, owner->fsp, buf, n,
				   (off_t)off);
}

/*
 * Writes everything dirty before returning: for synchronous VFS calls and
 * for a lost right.  Returns 0 or the errno of a failure.
 */
static int iotune_cache_flush_now(struct iotune_cache *cache,
				  enum iotune_flush_reason reason)
{
	struct iotune_wc_action act;
	uint64_t started = iotune_now_us();
	int err = 0;

	cache->sync++;
	cache->proc->sync++;
	do {
		while (iotune_cache_flushing(cache) ||
		       cache->copies != NULL) {
			iotune_cache_wait_copies(cache);
			if (iotune_cache_flushing(cache)) {
				iotune_smbd_run_flush_ev_once(cache->proc);
			}
		}
		err = iotune_wc_flush_sync(&cache->wc, reason,
					   iotune_now_ms(), &act);
		iotune_cache_apply(cache, &act);
	} while (err == 0 && (iotune_wc_is_dirty(&cache->wc) ||
			      iotune_cache_flushing(cache) ||
			      cache->copies != NULL));
	cache->sync--;
	cache->proc->sync--;
	if (iotune_counting(cache->share)) {
		iotune_latency_add(&cache->share->stats.flush_latency,
				   iotune_now_us() - started);
	}
	return err;
}

static void iotune_cache_attach(struct iotune_cache *cache,
				struct iotune_file *file)
{
	DLIST_ADD_END(cache->files, file);
	file->cache = cache;
}

static void iotune_cache_detach(struct iotune_file *file)
{
	struct iotune_cache *cache = file->cache;

	if (cache == NULL) {
		return;
	}
	DLIST_REMOVE(cache->files, file);
	file->cache = NULL;
	if (cache->pinned_by == file) {
		cache->pinned_by = NULL;
		iotune_wc_times_unpin(&cache->wc);
	}
}

/*
 * Ends a cache: data that is still dirty is dropped (and logged), ops
 * still queued fail (smbd waits for a handle's requests before closing
 * it, so none are expected).  Callers flush first.
 */
static void iotune_cache_end(struct iotune_cache *cache)
{
	struct iotune_process *p = cache->proc;
	struct iotune_wc_action act;
	struct iotune_wc_op *op = NULL;

	SMB_ASSERT(!iotune_cache_flushing(cache) && cache->sync == 0);
	iotune_cache_wait_copies(cache);
	iotune_cache_reserve_end(cache);
	TALLOC_FREE(cache->tick_timer);
	cache->ending = true;
	iotune_wc_end(&cache->wc, &act);
	iotune_cache_log(cache, &act);
	while ((op = iotune_wc_next_done(&cache->wc)) != NULL) {
		iotune_op_complete(op);
	}
	while ((op = iotune_wc_next_orphan(&cache->wc)) != NULL) {
		iotune_pwrite_detach(op);
	}
	while (cache->files != NULL) {
		iotune_cache_detach(cache->files);
	}
	DLIST_REMOVE(p->caches, cache);
	p->num_caches--;
	cache->share->stats.wc.caches_active--;
	if (cache->writeback != NULL) {
		/* it runs on; what waits for it is forgotten */
		iotune_fd_job_forget(cache->writeback);
		cache->writeback = NULL;
	}
	iotune_wc_destroy(&cache->wc);
	TALLOC_FREE(cache);
}

/* Nothing dirty, nothing waiting, nothing in flight, nothing unreported */
bool iotune_cache_idle(const struct iotune_cache *cache)
{
	return !cache->ending && !iotune_cache_flushing(cache) &&
	       cache->copies == NULL && cache->reserves == NULL &&
	       iotune_wc_idle(&cache->wc);
}

static void iotune_cache_release(struct iotune_cache *cache, bool keep);

static void iotune_cache_idle_timer_fn(struct tevent_context *ev,
				       struct tevent_timer *te,
				       struct timeval now,
				       void *private_data)
{
	struct iotune_cache *cache = private_data;

	cache->idle_timer = NULL;
	/* written to since it was armed: idle for a second from now on */
	iotune_cache_release(cache, cache->submits != cache->idle_mark);
}

/*
 * Frees a cache that has nothing more to do.  Not while a synchronous
 * flush runs: its caller, or the loop around it, may still use the cache.
 * A cache whose handles still hold the right to cache stays up to
 * IOTUNE_CACHE_IDLE_KEEP_MS for the stream's next write, or until a new
 * cache needs its place: ended at every window written out, a stream
 * mapped and faulted in a new window buffer for each window
 * (iotune_caches_evict_idle()).
 */
static void iotune_cache_release(struct iotune_cache *cache, bool keep)
{
	if (!iotune_cache_idle(cache)) {
		return;
	}
	if (cache->proc->sync > 0) {
		/* a synchronous flush may hold it: look again later */
		iotune_cache_wake(cache);
		return;
	}
	if (!keep || cache->lost || cache->files == NULL) {
		iotune_cache_end(cache);
		return;
	}
	if (cache->idle_timer == NULL) {
		cache->idle_mark = cache->submits;
		cache->idle_timer = tevent_add_timer(
			cache->proc->ev, cache,
			tevent_timeval_current_ofs(
				IOTUNE_CACHE_IDLE_KEEP_MS / 1000,
				(IOTUNE_CACHE_IDLE_KEEP_MS % 1000) * 1000),
			iotune_cache_idle_timer_fn, cache);
	}
	if (cache->idle_timer == NULL) {
		iotune_cache_end(cache);
	}
}

void iotune_cache_maybe_release(struct iotune_cache *cache)
{
	iotune_cache_release(cache, true);
}

/* Makes room for a new cache: ends an idle one, if there is one */
static bool iotune_caches_evict_idle(struct iotune_process *p)
{
	struct iotune_cache *cache = NULL;

	if (p->sync > 0 || p->caches == NULL) {
		return false;
	}
	/* new caches are added at the head: the oldest first */
	cache = p->caches->prev;
	while (cache != NULL) {
		if (iotune_cache_idle(cache)) {
			iotune_cache_end(cache);
			return true;
		}
		cache = cache == p->caches ? NULL : cache->prev;
	}
	return false;
}

static struct iotune_wc_params iotune_cache_params(
	const struct iotune_share *share)
{
	return (struct iotune_wc_params) {
		.capacity = share->config.write_cache_size,
		.timeout_ms = share->config.write_cache_flush_timeout_ms,
		.bypass_size = share->wc_bypass,
		.flushes = share->wc_flushes,
		.copy_size = IOTUNE_COPY_IN_POOL,
		.reserve_async = share->wc_reserve_async,
		.writeback = share->wc_writeback,
		.pool = &share->proc->wc_pool,
	};
}

static struct iotune_cache *iotune_cache_create(
	struct iotune_share *share,
	struct iotune_file *file,
	const struct iotune_wc_params *share_params)
{
	struct iotune_process *p = share->proc;
	struct iotune_cache *cache = NULL;
	uint64_t most = MIN(p->max_caches, share->config.write_cache_max_files);
	SMB_STRUCT_STAT st;

	while (p->num_caches >= most && iotune_caches_evict_idle(p)) {
		;
	}
	if (p->num_caches >= most) {
		if (iotune_counting(share)) {
			share->stats.wc.caches_refused++;
		}
		DBG_INFO("share '%s': %u write caches active, '%s' is not "
			 "cached\n", share->name, p->num_caches,
			 fsp_str_dbg(file->fsp));
		return NULL;
	}
	if (iotune_smbd_foreign_handle(p, &file->fsp->file_id)) {
		DBG_INFO("share '%s': '%s' is also open through a share "
			 "without iotune: not cached\n", share->name,
			 fsp_str_dbg(file->fsp));
		return NULL;
	}
	if (SMB_VFS_NEXT_FSTAT(file->handle, file->fsp, &st) != 0) {
		return NULL;
	}
	cache = talloc_zero(p, struct iotune_cache);
	if (cache == NULL) {
		return NULL;
	}
	cache->wake_im = tevent_create_immediate(cache);
	cache->io = (struct iotune_wc_io_ops) {
		.pwrite = iotune_cache_sync_pwrite,
		.reserve = iotune_cache_reserve_inline,
		.private_data = cache,
	};
	if (cache->wake_im == NULL ||
	    iotune_wc_init(&cache->wc, share_params, (uint64_t)st.st_ex_size,
			   &cache->io, iotune_cache_stats(share)) != 0) {
		TALLOC_FREE(cache);
		return NULL;
	}
	iotune_cache_times_made(cache, &st);
	cache->proc = p;
	cache->share = share;
	cache->id = file->fsp->file_id;
	DLIST_ADD(p->caches, cache);
	p->num_caches++;
	share->stats.wc.caches_active++;
	iotune_smbd_caches_made(p);
	return cache;
}

/*
 * The cache a write of this handle goes to: NULL when it must go to disk
 * directly.  file: the handle's, never NULL.  *may_cache, when there is a
 * cache: whether this handle may cache (the write's op says so).
 *
 * A file gets a cache at its first write that the cache would keep: a
 * stream of large writes passes through without one, and without the
 * core's bookkeeping.  Nor while this handle's writes made without a
 * cache are on their way to disk: a cache made now would not know them,
 * and a newer cached write could land before an older one it overlaps.
 * (Per handle: another handle of the file, with the same lease key, may
 * make the cache meanwhile; their overlapping writes, both in flight,
 * then land in either order, as on a share without iotune.)
 */
struct iotune_cache *iotune_cache_for_write(struct iotune_share *share,
					    struct iotune_file *file,
					    struct files_struct *fsp,
					    uint64_t off,
					    size_t n,
					    bool *may_cache)
{
	struct iotune_cache *cache = iotune_cache_of(fsp);
	struct iotune_wc_params params = { 0 };

	/* the cheap reasons first: most writes that pass meet one */
	*may_cache = false;
	if (cache == NULL) {
		if (file->uncached_writes > 0) {
			return NULL;
		}
		params = iotune_cache_params(share);
		if (!iotune_wc_would_keep(&params, off, n)) {
			return NULL;
		}
	}
	*may_cache = iotune_file_may_cache(share, file, fsp);
	DBG_DEBUG("'%s': oplock %d, may cache %d, cache %p\n",
		  fsp_str_dbg(fsp), fsp->oplock_type, *may_cache, cache);
	if (cache != NULL) {
		if (*may_cache && file->cache == NULL && !cache->lost) {
			iotune_cache_attach(cache, file);
		}
		return cache;
	}
	if (!*may_cache) {
		return NULL;
	}
	cache = iotune_cache_create(share, file, &params);
	if (cache != NULL) {
		iotune_cache_attach(cache, file);
	}
	return cache;
}

/*
 * Before every loop iteration: write out every cache whose handles lost,
 * or are losing, their oplock or lease, or whose file was opened through
 * a share without iotune, before smbd can read the client's ack; start
 * the batches of reservations that waited for the client's next writes.
 */
void iotune_caches_check(struct iotune_process *p, bool files_changed)
{
	struct iotune_cache *cache = NULL;
	struct iotune_cache *next = NULL;
	struct iotune_wc_action act;

	for (cache = p->caches; cache != NULL; cache = next) {
		next = cache->next;
		if (iotune_wc_reserve_due(&cache->wc) > 0 ||
		    cache->reserve_due_us != 0) {
			iotune_cache_reserve_due(cache);
		}
		if (cache->lost ||
		    iotune_cache_may_continue(cache, files_changed)) {
			continue;
		}
		/* once: a failing disk must not be retried every iteration */
		cache->lost = true;
		DBG_DEBUG("share '%s': '%s' may no longer cache\n",
			  cache->share->name, iotune_cache_name(cache));
		iotune_wc_lose_right(&cache->wc, iotune_now_ms(), &act);
		iotune_cache_apply(cache, &act);
		(void)iotune_cache_flush_now(cache, IOTUNE_FLUSH_BREAK);
		iotune_cache_maybe_release(cache);
	}
}

/* profile on/off: the core counts into the share, or nowhere */
void iotune_caches_counting(struct iotune_process *p)
{
	struct iotune_cache *cache = NULL;

	for (cache = p->caches; cache != NULL; cache = cache->next) {
		cache->wc.stats = iotune_cache_stats(cache->share);
	}
}

/*
 * Before a call that works on the file directly (size changes, times,
 * sendfile, sync I/O): write everything out and wait for it.  A write
 * (report) also hears of data that was dropped earlier, like the next
 * write, flush or close does.  The cache ends now if it can, not after
 * IOTUNE_CACHE_IDLE_KEEP_MS: the call may change what is allocated (a
 * truncate, a punched hole), and a new cache reserves anew.
 */
int iotune_flush_for(struct files_struct *fsp,
		     enum iotune_flush_reason reason,
		     bool report)
{
	struct iotune_cache *cache = iotune_cache_of(fsp);
	int err;

	if (cache == NULL) {
		return 0;
	}
	err = iotune_cache_flush_now(cache, reason);
	if (err == 0 && report) {
		err = iotune_wc_take_error(&cache->wc);
	}
	iotune_cache_release(cache, false);
	return err;
}

/* Writes the cache out; it stays for the writes that follow */
int iotune_cache_flush_keep(struct iotune_cache *cache,
			    enum iotune_flush_reason reason)
{
	int err = iotune_cache_flush_now(cache, reason);

	iotune_cache_release(cache, true);
	return err;
}

void iotune_cache_note_disk_write(struct files_struct *fsp,
				  uint64_t off,
				  ssize_t written)
{
	struct iotune_cache *cache = iotune_cache_of(fsp);

	if (cache != NULL) {
		iotune_wc_note_disk_write(&cache->wc, off, written);
	}
}

void iotune_cache_allocation_changed(struct files_struct *fsp)
{
	struct iotune_cache *cache = iotune_cache_of(fsp);

	if (cache != NULL) {
		iotune_wc_forget_reservations(&cache->wc);
	}
}

void iotune_cache_set_disk_size(struct files_struct *fsp, uint64_t size)
{
	struct iotune_cache *cache = iotune_cache_of(fsp);

	if (cache != NULL) {
		iotune_wc_set_disk_size(&cache->wc, size);
	}
}

/*
 * A handle closes: the last handle of a cache writes it out (a failure
 * fails the close); another one only leaves.
 */
int iotune_cache_close(struct iotune_file *file)
{
	struct iotune_cache *cache = file->cache;
	int err;

	if (cache == NULL) {
		return 0;
	}
	err = iotune_cache_flush_now(cache, IOTUNE_FLUSH_CLOSE);
	if (err == 0) {
		err = iotune_wc_take_error(&cache->wc);
	}
	if (cache->files == file && file->next == NULL) {
		iotune_cache_end(cache);
		return err;
	}
	iotune_cache_detach(file);
	return err;
}

/* smbd drops a handle without our close: save what can be saved */
void iotune_cache_file_gone(struct iotune_file *file)
{
	struct iotune_cache *cache = file->cache;

	if (cache == NULL) {
		return;
	}
	if (cache->files == file && file->next == NULL) {
		(void)iotune_cache_flush_now(cache, IOTUNE_FLUSH_CLOSE);
		iotune_cache_end(cache);
		return;
	}
	iotune_cache_detach(file);
}

/* A tree disconnect: the share's caches are written out and end. */
void iotune_caches_of_share_end(struct iotune_share *share)
{
	struct iotune_cache *cache = NULL;
	struct iotune_cache *next = NULL;

	for (cache = share->proc->caches; cache != NULL; cache = next) {
		next = cache->next;
		if (cache->share != share) {
			continue;
		}
		(void)iotune_cache_flush_now(cache, IOTUNE_FLUSH_DISCONNECT);
		iotune_cache_end(cache);
	}
}

/*
 * A stat of any kind: the size includes data still in the cache of this
 * process.  Each cached write's reservation already moved the end of file
 * on disk, for every process; this matters only where the disk's size
 * fell behind the cache (another writer truncated the file under it).
 */
void iotune_cache_logical_size(struct vfs_handle_struct *handle,
			       SMB_STRUCT_STAT *st)
{
	struct iotune_process *p = iotune_process_current();
	struct iotune_cache *cache = NULL;
	struct file_id id;
	uint64_t size;

	if (p == NULL || p->caches == NULL || !S_ISREG(st->st_ex_mode)) {
		return;
	}
	id = vfs_file_id_from_sbuf(handle->conn, st);
	cache = iotune_find_cache(p, &id);
	if (cache == NULL) {
		return;
	}
	size = iotune_wc_logical_size(&cache->wc);
	if (size > (uint64_t)st->st_ex_size) {
		st->st_ex_size = (off_t)size;
	}
	iotune_cache_times_stat(cache, st);
}

