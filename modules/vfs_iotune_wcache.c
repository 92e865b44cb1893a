/*
 * iotune: the write cache's Samba side.  The core (modules/wcache.c)
 * decides everything: what to absorb, what to write to disk and when,
 * the order of waiting requests, retries, the lost right to cache.  This
 * file keeps one cache per file per smbd process, feeds the core's calls
 * and carries out its actions: flush pieces on the private flush context,
 * writes sent to disk, requests completed, timers, log lines.
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
#include <sched.h>
#include <sys/vfs.h>
#include "smbd/smbd.h"
#include "smbd/globals.h"
#include "lib/pthreadpool/pthreadpool_tevent.h"

#include "vfs_iotune.h"

#undef DBGC_CLASS
#define DBGC_CLASS DBGC_VFS

/* writes of at least this are copied into the cache in the thread pool */
#define IOTUNE_COPY_IN_POOL (64 * 1024)

/* bypass size "auto" on a local file system: coalescing writes this
 * large saves less than the copy into the cache costs */
#define IOTUNE_BYPASS_LOCAL (64 * 1024)

struct iotune_copy_job;

/* The dirty data of one file in this process */
struct iotune_cache {
	struct iotune_cache *prev, *next;
	struct iotune_process *proc;
	struct iotune_share *share;
	struct file_id id;
	struct iotune_file *files;	/* attached handles; head does I/O */
	struct iotune_wcache wc;
	struct iotune_wc_io_ops io;
	struct tevent_req *flush_subreq;
	bool flush_dio;			/* the piece in flight is direct */
	uint64_t flush_started_us;
	struct tevent_timer *tick_timer;
	uint64_t tick_ms;
	struct tevent_immediate *wake_im;
	struct iotune_copy_job *copies;	/* copies into it in flight */
	unsigned sync;			/* synchronous callers using it */
	bool lost;			/* written out for a lost right */
	bool ending;
};

/*
 * A large write copied into the cache by a thread of smbd's pool, so
 * that the main thread does not spend its time in memcpy.  The job tells
 * it is done through an atomic flag too: a synchronous wait (close, a
 * break) cannot run the main event loop, so it waits for the flag.
 */
struct iotune_copy_job {
	struct iotune_copy_job *prev, *next;	/* in cache->copies */
	struct iotune_cache *cache;
	struct iotune_wc_op *op;
	void *dst;
	const void *src;
	size_t n;
	int copied;			/* atomic: the memcpy is done */
	bool finished;			/* the core knows it */
};

/* A request that waits until older data is on disk (fsync, copies) */
struct iotune_barrier {
	struct iotune_wc_op op;
	struct iotune_cache *cache;
	struct tevent_req *req;
	void (*then)(struct tevent_req *req, int err);
};

static void iotune_cache_apply(struct iotune_cache *cache,
			       const struct iotune_wc_action *act);
static void iotune_cache_copy(struct iotune_cache *cache,
			      struct iotune_wc_op *op);
static void iotune_cache_maybe_release(struct iotune_cache *cache);

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

	if (bypass == IOTUNE_SIZE_AUTO) {
		bypass = iotune_backend_per_op_costly(share, snum) ?
			 share->config.write_cache_size : IOTUNE_BYPASS_LOCAL;
	}
	share->wc_bypass = MIN(bypass, share->config.write_cache_size);
	DBG_INFO("share '%s': writes of %" PRIu64 " bytes or more go "
		 "straight to disk\n", share->name, share->wc_bypass);
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

/* The cache holding data of this handle's file, if any */
struct iotune_cache *iotune_cache_of(struct files_struct *fsp)
{
	if (fsp->fsp_flags.is_directory || fsp_is_alternate_stream(fsp)) {
		return NULL;
	}
	return iotune_find_cache(iotune_process_current(), &fsp->file_id);
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

static const char *iotune_cache_name(const struct iotune_cache *cache)
{
	return cache->files != NULL ? fsp_str_dbg(cache->files->fsp) : "?";
}

/* Log lines for what the core reports: failures, drops, no reservation */
static void iotune_cache_log(struct iotune_cache *cache,
			     const struct iotune_wc_action *act)
{
	struct iotune_share *share = cache->share;

	if (act->log_err != 0) {
		DBG_ERR("share '%s': writing cached data of '%s' failed: %s"
			" (%u more failures not logged); %s\n",
			share->name, iotune_cache_name(cache),
			strerror(act->log_err), act->log_repeats,
			cache->lost ? "the file may not be cached any more, "
			"what cannot be written is dropped" :
			"the data is kept and retried, the error goes to the "
			"next write, flush or close");
	}
	if (act->dropped > 0) {
		DBG_ERR("share '%s': %" PRIu64 " bytes of acknowledged data of "
			"'%s' could not be written (%s) and are lost; the "
			"error goes to the next write, flush or close\n",
			share->name, act->dropped, iotune_cache_name(cache),
			act->drop_err != 0 ? strerror(act->drop_err) :
			"the file closed first");
	}
	if (act->cannot_reserve && !share->reserve_warned) {
		share->reserve_warned = true;
		share->wc_on = false;
		DBG_WARNING("share '%s': the file system cannot reserve space "
			    "(fallocate) for '%s': the write cache writes "
			    "through on this share\n", share->name,
			    iotune_cache_name(cache));
	}
}

static void iotune_op_complete(struct iotune_wc_op *op)
{
	struct iotune_barrier *b = NULL;

	if (op->kind == IOTUNE_WC_OP_WRITE) {
		iotune_pwrite_complete(op);
		return;
	}
	b = op->private_data;
	b->cache = NULL;
	b->then(b->req, op->ret < 0 ? op->err : 0);
}

static void iotune_cache_maybe_release(struct iotune_cache *cache);

/* Completes the requests the core is done with, from the main loop. */
static void iotune_cache_wake_handler(struct tevent_context *ev,
				      struct tevent_immediate *im,
				      void *private_data)
{
	struct iotune_cache *cache = private_data;
	struct iotune_wc_op *op = NULL;

	while ((op = iotune_wc_next_done(&cache->wc)) != NULL) {
		iotune_op_complete(op);
	}
	iotune_cache_maybe_release(cache);
}

static void iotune_tick_fn(struct tevent_context *ev,
			   struct tevent_timer *te,
			   struct timeval now,
			   void *private_data)
{
	struct iotune_cache *cache = private_data;
	struct iotune_wc_action act;

	cache->tick_timer = NULL;
	cache->tick_ms = 0;
	iotune_wc_tick(&cache->wc, iotune_now_ms(), &act);
	iotune_cache_apply(cache, &act);
	iotune_cache_maybe_release(cache);
}

static void iotune_cache_arm_tick(struct iotune_cache *cache, uint64_t at)
{
	uint64_t now = iotune_now_ms();
	uint64_t delay = at > now ? at - now : 0;

	if (at == cache->tick_ms && cache->tick_timer != NULL) {
		return;
	}
	TALLOC_FREE(cache->tick_timer);
	cache->tick_ms = at;
	if (at == 0) {
		return;
	}
	cache->tick_timer = tevent_add_timer(
		cache->proc->ev, cache,
		tevent_timeval_current_ofs(delay / 1000, (delay % 1000) * 1000),
		iotune_tick_fn, cache);
}

static void iotune_flush_piece_done(struct tevent_req *subreq);

/* Issues the flush piece the core asks for, on the flush context. */
static void iotune_cache_issue(struct iotune_cache *cache,
			       const struct iotune_wc_action *act)
{
	struct iotune_file *owner = cache->files;
	struct iotune_wc_action next;
	struct tevent_req *subreq = NULL;

	SMB_ASSERT(owner != NULL && cache->flush_subreq == NULL);
	cache->flush_dio = iotune_dio_wanted(cache->share, owner, true,
					     act->flush_len);
	subreq = iotune_disk_send(cache, iotune_smbd_flush_ev(cache->proc),
				  owner->handle, owner, owner->fsp,
				  cache->flush_dio, true, act->flush_buf,
				  act->flush_len, act->flush_off);
	if (subreq == NULL) {
		iotune_wc_flush_done(&cache->wc, -1, ENOMEM, iotune_now_ms(),
				     &next);
		iotune_cache_apply(cache, &next);
		return;
	}
	tevent_req_set_callback(subreq, iotune_flush_piece_done, cache);
	cache->flush_subreq = subreq;
	cache->flush_started_us = iotune_now_us();
	iotune_smbd_flush_started(cache->proc);
}

static void iotune_flush_piece_done(struct tevent_req *subreq)
{
	struct iotune_cache *cache = tevent_req_callback_data(
		subreq, struct iotune_cache);
	struct vfs_aio_state aio_state = { 0 };
	struct iotune_wc_action act;
	ssize_t ret;

	ret = iotune_disk_recv(subreq, cache->flush_dio, true, &aio_state);
	TALLOC_FREE(subreq);
	cache->flush_subreq = NULL;
	iotune_smbd_flush_ended(cache->proc);
	if (iotune_counting(cache->share)) {
		iotune_latency_add(&cache->share->stats.flush_latency,
				   iotune_now_us() - cache->flush_started_us);
	}
	iotune_wc_flush_done(&cache->wc, ret, ret < 0 ? aio_state.error : 0,
			     iotune_now_ms(), &act);
	iotune_cache_apply(cache, &act);
	iotune_cache_maybe_release(cache);
}

static void iotune_copy_run(void *private_data)
{
	struct iotune_copy_job *job = private_data;

	memcpy(job->dst, job->src, job->n);
	__atomic_store_n(&job->copied, 1, __ATOMIC_RELEASE);
}

/* The copy landed: the core absorbs the write. */
static void iotune_copy_finish(struct iotune_copy_job *job)
{
	struct iotune_cache *cache = job->cache;
	struct iotune_wc_action act;

	job->finished = true;
	DLIST_REMOVE(cache->copies, job);
	iotune_wc_copy_done(&cache->wc, job->op, iotune_now_ms(), &act);
	iotune_cache_apply(cache, &act);
}

static void iotune_copy_job_done(struct tevent_req *subreq)
{
	struct iotune_copy_job *job = tevent_req_callback_data(
		subreq, struct iotune_copy_job);
	int ret = pthreadpool_tevent_job_recv(subreq);

	TALLOC_FREE(subreq);
	if (!job->finished) {
		struct iotune_cache *cache = job->cache;

		if (ret != 0) {
			iotune_copy_run(job);	/* the pool could not */
		}
		iotune_copy_finish(job);
		iotune_cache_maybe_release(cache);
	}
	TALLOC_FREE(job);
}

/* Starts the copy of a write into the cache in smbd's thread pool */
static void iotune_cache_copy(struct iotune_cache *cache,
			      struct iotune_wc_op *op)
{
	struct smbd_server_connection *sconn = cache->files->handle->conn->sconn;
	struct iotune_copy_job *job = NULL;
	struct tevent_req *subreq = NULL;

	/* on no parent: its completion may come after the cache ended */
	job = talloc_zero(NULL, struct iotune_copy_job);
	if (job != NULL) {
		*job = (struct iotune_copy_job) {
			.cache = cache, .op = op, .dst = op->copy_dst,
			.src = op->data, .n = op->n,
		};
		subreq = pthreadpool_tevent_job_send(job, cache->proc->ev,
						     sconn->pool,
						     iotune_copy_run, job);
	}
	if (subreq == NULL) {
		struct iotune_copy_job inline_job = {
			.cache = cache, .op = op, .dst = op->copy_dst,
			.src = op->data, .n = op->n,
		};

		TALLOC_FREE(job);
		iotune_copy_run(&inline_job);
		DLIST_ADD(cache->copies, &inline_job);
		iotune_copy_finish(&inline_job);
		return;
	}
	DLIST_ADD_END(cache->copies, job);
	tevent_req_set_callback(subreq, iotune_copy_job_done, job);
}

/* A synchronous caller waits for the copies in flight to land. */
static void iotune_cache_wait_copies(struct iotune_cache *cache)
{
	while (cache->copies != NULL) {
		struct iotune_copy_job *job = cache->copies;

		while (!__atomic_load_n(&job->copied, __ATOMIC_ACQUIRE)) {
			sched_yield();
		}
		iotune_copy_finish(job);
	}
}

/*
 * Carries out an action of the core: the flush piece, writes to send to
 * disk, the timer.  Completed requests are completed from an immediate
 * event (never inside a synchronous VFS call or the trace callback); the
 * caller that submitted an op takes it itself with iotune_wc_take_done().
 */
static void iotune_cache_apply(struct iotune_cache *cache,
			       const struct iotune_wc_action *act)
{
	struct iotune_wc_op *op = NULL;

	iotune_cache_log(cache, act);
	if (act->flush_io) {
		iotune_cache_issue(cache, act);
	}
	while ((op = iotune_wc_next_to_disk(&cache->wc)) != NULL) {
		iotune_pwrite_dispatch(op);
	}
	while ((op = iotune_wc_next_to_copy(&cache->wc)) != NULL) {
		iotune_cache_copy(cache, op);
	}
	if (act->done) {
		tevent_schedule_immediate(cache->wake_im, cache->proc->ev,
					  iotune_cache_wake_handler, cache);
	}
	iotune_cache_arm_tick(cache, act->tick_ms);
}

void iotune_cache_submit(struct iotune_cache *cache, struct iotune_wc_op *op)
{
	struct iotune_wc_action act;

	iotune_wc_submit(&cache->wc, op, iotune_now_ms(), &act);
	iotune_cache_apply(cache, &act);
}

bool iotune_cache_cancel(struct iotune_cache *cache, struct iotune_wc_op *op)
{
	if (!iotune_wc_cancel(&cache->wc, op)) {
		return false;	/* its copy is in flight */
	}
	/* what waited behind it may go on now */
	iotune_cache_arm_tick(cache, iotune_now_ms());
	return true;
}

void iotune_cache_disk_done(struct iotune_cache *cache,
			    struct iotune_wc_op *op,
			    ssize_t ret,
			    int err)
{
	struct iotune_wc_action act;

	iotune_wc_disk_done(&cache->wc, op, ret, err, iotune_now_ms(), &act);
	iotune_cache_apply(cache, &act);
}

/* Synchronous writes of flush pieces, through the cache's first handle */
static ssize_t iotune_cache_sync_pwrite(void *private_data,
					const void *buf,
					size_t n,
					uint64_t off)
{
	struct iotune_cache *cache = private_data;
	struct iotune_file *owner = cache->files;

	if (iotune_dio_wanted(cache->share, owner, true, n)) {
		return iotune_dio_sync(cache->share, owner, true, buf, n, off);
	}
	return SMB_VFS_NEXT_PWRITE(owner->handle, owner->fsp, buf, n,
				   (off_t)off);
}

/* Space for what the cache will write, without changing the file size */
static int iotune_cache_reserve(void *private_data, uint64_t off,
				uint64_t len)
{
	struct iotune_cache *cache = private_data;
	struct iotune_file *owner = cache->files;
	int ret;

	ret = SMB_VFS_NEXT_FALLOCATE(owner->handle, owner->fsp,
				     VFS_FALLOCATE_FL_KEEP_SIZE, (off_t)off,
				     (off_t)len);
	return ret == 0 ? 0 : errno;
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
		while (cache->flush_subreq != NULL || cache->copies != NULL) {
			iotune_cache_wait_copies(cache);
			if (cache->flush_subreq != NULL) {
				iotune_smbd_run_flush_ev_once(cache->proc);
			}
		}
		err = iotune_wc_flush_sync(&cache->wc, reason,
					   iotune_now_ms(), &act);
		iotune_cache_apply(cache, &act);
	} while (err == 0 && (iotune_wc_is_dirty(&cache->wc) ||
			      cache->flush_subreq != NULL ||
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
}

/* Gives back what was reserved past the end of file and never written */
static void iotune_cache_unreserve(struct iotune_cache *cache,
				   uint64_t off,
				   uint64_t len)
{
	struct iotune_file *owner = cache->files;

	if (len == 0 || owner == NULL || fsp_get_io_fd(owner->fsp) == -1) {
		return;
	}
	if (SMB_VFS_NEXT_FALLOCATE(owner->handle, owner->fsp,
				   VFS_FALLOCATE_FL_PUNCH_HOLE |
				   VFS_FALLOCATE_FL_KEEP_SIZE,
				   (off_t)off, (off_t)len) != 0) {
		DBG_DEBUG("giving back %" PRIu64 " bytes reserved past the "
			  "end of '%s': %s\n", len, iotune_cache_name(cache),
			  strerror(errno));
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
	uint64_t off;
	uint64_t len;

	SMB_ASSERT(cache->flush_subreq == NULL && cache->sync == 0);
	iotune_cache_wait_copies(cache);
	TALLOC_FREE(cache->tick_timer);
	cache->ending = true;
	iotune_wc_end(&cache->wc, &off, &len, &act);
	iotune_cache_log(cache, &act);
	while ((op = iotune_wc_next_done(&cache->wc)) != NULL) {
		iotune_op_complete(op);
	}
	while ((op = iotune_wc_next_orphan(&cache->wc)) != NULL) {
		iotune_pwrite_detach(op);
	}
	iotune_cache_unreserve(cache, off, len);
	while (cache->files != NULL) {
		iotune_cache_detach(cache->files);
	}
	DLIST_REMOVE(p->caches, cache);
	p->num_caches--;
	cache->share->stats.wc.caches_active--;
	iotune_wc_destroy(&cache->wc);
	TALLOC_FREE(cache);
}

/*
 * Frees a cache that has nothing more to do: clean, nothing waiting,
 * nothing unreported.  Not while a synchronous flush runs: its caller,
 * or the loop around it, may still use the cache.
 */
static void iotune_cache_maybe_release(struct iotune_cache *cache)
{
	if (cache->ending || cache->flush_subreq != NULL ||
	    cache->copies != NULL ||
	    !iotune_wc_idle(&cache->wc)) {
		return;
	}
	if (cache->proc->sync > 0) {
		/* a synchronous flush may hold it: look again later */
		tevent_schedule_immediate(cache->wake_im, cache->proc->ev,
					  iotune_cache_wake_handler, cache);
		return;
	}
	iotune_cache_end(cache);
}

static struct iotune_cache *iotune_cache_create(struct iotune_share *share,
						struct iotune_file *file)
{
	struct iotune_process *p = share->proc;
	struct iotune_cache *cache = NULL;
	struct iotune_wc_params params = {
		.capacity = share->config.write_cache_size,
		.timeout_ms = share->config.write_cache_flush_timeout_ms,
		.bypass_size = share->wc_bypass,
		.copy_size = IOTUNE_COPY_IN_POOL,
	};
	SMB_STRUCT_STAT st;

	if (p->num_caches >= MIN(p->max_caches,
				 share->config.write_cache_max_files)) {
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
	/* holes inside the file must be reserved too */
	params.sparse = (uint64_t)st.st_ex_blocks * 512 <
			(uint64_t)st.st_ex_size;
	cache = talloc_zero(p, struct iotune_cache);
	if (cache == NULL) {
		return NULL;
	}
	cache->wake_im = tevent_create_immediate(cache);
	cache->io = (struct iotune_wc_io_ops) {
		.pwrite = iotune_cache_sync_pwrite,
		.reserve = iotune_cache_reserve,
		.private_data = cache,
	};
	if (cache->wake_im == NULL ||
	    iotune_wc_init(&cache->wc, &params, (uint64_t)st.st_ex_size,
			   &cache->io, iotune_cache_stats(share)) != 0) {
		TALLOC_FREE(cache);
		return NULL;
	}
	cache->proc = p;
	cache->share = share;
	cache->id = file->fsp->file_id;
	DLIST_ADD(p->caches, cache);
	p->num_caches++;
	share->stats.wc.caches_active++;
	return cache;
}

/*
 * The cache a write of this handle goes to: NULL when it must go to disk
 * directly.  The write's op says whether this handle may cache.
 */
struct iotune_cache *iotune_cache_for_write(struct iotune_share *share,
					    struct iotune_file *file,
					    struct files_struct *fsp,
					    bool *may_cache)
{
	struct iotune_cache *cache = iotune_cache_of(fsp);

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
	cache = iotune_cache_create(share, file);
	if (cache != NULL) {
		iotune_cache_attach(cache, file);
	}
	return cache;
}

/*
 * Before every loop iteration: write out every cache whose handles lost,
 * or are losing, their oplock or lease, or whose file was opened through
 * a share without iotune, before smbd can read the client's ack.
 */
void iotune_caches_check(struct iotune_process *p, bool files_changed)
{
	struct iotune_cache *cache = NULL;
	struct iotune_cache *next = NULL;
	struct iotune_wc_action act;

	for (cache = p->caches; cache != NULL; cache = next) {
		next = cache->next;
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
 * write, flush or close does.
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
	iotune_cache_maybe_release(cache);
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
 * process.  (Other processes see it after the flush timeout at most.)
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
}

static int iotune_barrier_destructor(struct iotune_barrier *b)
{
	if (b->cache != NULL) {
		iotune_cache_cancel(b->cache, &b->op);
	}
	return 0;
}

/*
 * Continues with next(req, 0) at once when the file has no cache, else
 * once the data written before this call is on disk (or with the error
 * of a failed flush).  Returns req, posted when it is already over.
 */
struct tevent_req *iotune_after_flush(
	struct tevent_req *req,
	struct tevent_context *ev,
	struct files_struct *fsp,
	enum iotune_flush_reason reason,
	void (*next)(struct tevent_req *req, int err))
{
	struct iotune_cache *cache = iotune_cache_of(fsp);
	struct iotune_barrier *b = NULL;

	if (cache == NULL) {
		next(req, 0);
		goto out;
	}
	b = talloc_zero(req, struct iotune_barrier);
	if (b == NULL) {
		tevent_req_error(req, ENOMEM);
		goto out;
	}
	*b = (struct iotune_barrier) {
		.op = { .kind = IOTUNE_WC_OP_BARRIER, .reason = reason,
			.private_data = b },
		.cache = cache, .req = req, .then = next,
	};
	talloc_set_destructor(b, iotune_barrier_destructor);
	iotune_cache_submit(cache, &b->op);
	if (iotune_wc_take_done(&cache->wc, &b->op)) {
		b->cache = NULL;
		next(req, b->op.ret < 0 ? b->op.err : 0);
	}
out:
	if (!tevent_req_is_in_progress(req)) {
		return tevent_req_post(req, ev);
	}
	return req;
}
