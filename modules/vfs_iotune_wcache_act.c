/*
 * iotune: carrying out the write cache core's actions (the core,
 * modules/wcache*.c, decides): flush pieces written on the private flush
 * context, writes sent to disk, large writes copied in smbd's thread
 * pool, requests completed from an immediate event (never inside a
 * synchronous VFS call or the trace callback), ticks, log lines; and
 * barriers, requests that wait until older data is on disk (SMB2 FLUSH,
 * server-side copy); and how a caller on the main thread sleeps until
 * our jobs in smbd's thread pool (copies, reservations) have returned.
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
#include <pthread.h>
#include "smbd/smbd.h"
#include "smbd/globals.h"
#include "lib/pthreadpool/pthreadpool_tevent.h"

#include "vfs_iotune_wcache.h"

#undef DBGC_CLASS
#define DBGC_CLASS DBGC_VFS

/* A request that waits until older data is on disk (fsync, copies) */
struct iotune_barrier {
	struct iotune_wc_op op;
	struct iotune_cache *cache;
	struct tevent_req *req;
	void (*then)(struct tevent_req *req, int err);
};

static void iotune_cache_copy(struct iotune_cache *cache,
			      struct iotune_wc_op *op);

const char *iotune_cache_name(const struct iotune_cache *cache)
{
	return cache->files != NULL ? fsp_str_dbg(cache->files->fsp) : "?";
}

/* Log lines for what the core reports: failures, drops, no reservation */
void iotune_cache_log(struct iotune_cache *cache,
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

void iotune_op_complete(struct iotune_wc_op *op)
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

/* The completions and the release check run from an immediate event */
void iotune_cache_wake(struct iotune_cache *cache)
{
	tevent_schedule_immediate(cache->wake_im, cache->proc->ev,
				  iotune_cache_wake_handler, cache);
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

/* A piece of a flush is being written */
bool iotune_cache_flushing(const struct iotune_cache *cache)
{
	unsigned s;

	for (s = 0; s < IOTUNE_WC_MAX_FLUSHES; s++) {
		if (cache->flushes[s].subreq != NULL) {
			return true;
		}
	}
	return false;
}

/*
 * Whether a flush piece leaves any of its bytes in the page cache: one
 * written buffered, or a direct one whose plan (modules/dio.c, as
 * dio_io.c makes it) has a buffered head or tail.
 */
bool iotune_piece_buffered(const struct iotune_file *owner, bool dio,
			   uint64_t off, uint64_t len)
{
	struct iotune_dio_write_plan plan;

	if (!dio) {
		return true;
	}
	iotune_dio_plan_write(&owner->dio.align, 0, off, len, 0, &plan);
	return plan.head_len > 0 || plan.tail_len > 0;
}

/* Issues the flush piece the core asks for, on the flush context. */
static void iotune_cache_issue(struct iotune_cache *cache,
			       const struct iotune_wc_action *act)
{
	struct iotune_file *owner = cache->files;
	struct iotune_flush_io *fio = &cache->flushes[act->flush_slot];
	struct iotune_wc_action next;
	struct tevent_req *subreq = NULL;

	SMB_ASSERT(owner != NULL && act->flush_slot < IOTUNE_WC_MAX_FLUSHES &&
		   fio->subreq == NULL);
	fio->cache = cache;
	fio->slot = act->flush_slot;
	fio->dio = iotune_dio_wanted(cache->share, owner, true,
				     act->flush_len);
	fio->buffered = iotune_piece_buffered(owner, fio->dio, act->flush_off,
					      act->flush_len);
	subreq = iotune_disk_send(cache, iotune_smbd_flush_ev(cache->proc),
				  owner->handle, owner, owner->fsp, fio->dio,
				  true, act->flush_buf, act->flush_len,
				  act->flush_off);
	if (subreq == NULL) {
		iotune_wc_flush_done(&cache->wc, fio->slot, -1, ENOMEM,
				     iotune_now_ms(), &next);
		iotune_cache_apply(cache, &next);
		return;
	}
	tevent_req_set_callback(subreq, iotune_flush_piece_done, fio);
	fio->subreq = subreq;
	fio->started_us = iotune_now_us();
	iotune_smbd_flush_started(cache->proc);
}

static void iotune_flush_piece_done(struct tevent_req *subreq)
{
	/* a member of its cache, not a talloc object of its own */
	struct iotune_flush_io *fio = (struct iotune_flush_io *)
		tevent_req_callback_data_void(subreq);
	struct iotune_cache *cache = fio->cache;
	struct vfs_aio_state aio_state = { 0 };
	struct iotune_wc_action act;
	ssize_t ret;

	ret = iotune_disk_recv(subreq, fio->dio, true, &aio_state);
	TALLOC_FREE(subreq);
	fio->subreq = NULL;
	cache->wb_buffered |= fio->buffered;
	iotune_smbd_flush_ended(cache->proc);
	if (iotune_counting(cache->share)) {
		iotune_latency_add(&cache->share->stats.flush_latency,
				   iotune_now_us() - fio->started_us);
	}
	iotune_wc_flush_done(&cache->wc, fio->slot, ret,
			     ret < 0 ? aio_state.error : 0, iotune_now_ms(),
			     &act);
	iotune_cache_apply(cache, &act);
	iotune_cache_maybe_release(cache);
}

static void iotune_copy_run(void *private_data)
{
	struct iotune_copy_job *job = private_data;

	memcpy(job->dst, job->src, job->n);
	iotune_pool_job_returned(&job->copied);
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
	struct vfs_handle_struct *handle = cache->files->handle;
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
						     handle->conn->sconn->pool,
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

/*
 * A job of ours in smbd's thread pool (a copy, a reservation) says that
 * its work is done, for a caller on the main thread that cannot wait for
 * the job's completion on the main loop (a synchronous flush, a cache
 * that ends): that caller sleeps until then.  One condition for the
 * process: such waits are rare and short, and an accepted pool job
 * always has a thread, so they end.
 */
static pthread_mutex_t iotune_pool_mutex = PTHREAD_MUTEX_INITIALIZER;
static pthread_cond_t iotune_pool_returned = PTHREAD_COND_INITIALIZER;

void iotune_pool_job_returned(int *flag)
{
	pthread_mutex_lock(&iotune_pool_mutex);
	__atomic_store_n(flag, 1, __ATOMIC_RELEASE);
	pthread_cond_broadcast(&iotune_pool_returned);
	pthread_mutex_unlock(&iotune_pool_mutex);
}

void iotune_pool_job_wait(int *flag)
{
	pthread_mutex_lock(&iotune_pool_mutex);
	while (!__atomic_load_n(flag, __ATOMIC_ACQUIRE)) {
		pthread_cond_wait(&iotune_pool_returned, &iotune_pool_mutex);
	}
	pthread_mutex_unlock(&iotune_pool_mutex);
}

/* A synchronous caller waits for the copies in flight to land. */
void iotune_cache_wait_copies(struct iotune_cache *cache)
{
	while (cache->copies != NULL) {
		struct iotune_copy_job *job = cache->copies;

		iotune_pool_job_wait(&job->copied);
		iotune_copy_finish(job);
	}
}

static void iotune_cache_writeback_ended(void *private_data);

/*
 * Starts the write-back the core asks for, in smbd's pool; its end tells
 * the core, which has one per cache on its way.  One that cannot start
 * ends at once, and so may the one the core asks for next.  None when
 * every piece that landed since the last one was written with O_DIRECT
 * (a handle opened unbuffered on a `direct io = client` share): nothing
 * of them is in the page cache.
 */
static void iotune_cache_writeback(struct iotune_cache *cache, uint64_t off,
				   uint64_t len)
{
	struct iotune_file *owner = cache->files;
	struct iotune_wc_action next;

	SMB_ASSERT(cache->writeback == NULL);
	while (len > 0) {
		if (owner != NULL && cache->wb_buffered) {
			cache->writeback = iotune_fd_job_start(
				owner->handle, owner->fsp, off, len,
				IOTUNE_FD_WRITEBACK,
				iotune_cache_writeback_ended, cache);
		}
		if (cache->writeback != NULL) {
			cache->wb_buffered = false;
			return;
		}
		iotune_wc_writeback_done(&cache->wc, &next);
		off = next.writeback_off;
		len = next.writeback_len;
	}
}

static void iotune_cache_writeback_ended(void *private_data)
{
	struct iotune_cache *cache = private_data;
	struct iotune_wc_action act;

	cache->writeback = NULL;
	iotune_wc_writeback_done(&cache->wc, &act);
	iotune_cache_apply(cache, &act);
}

/*
 * Carries out an action of the core: the flush piece, writes to send to
 * disk, the timer.  Completed requests are completed from an immediate
 * event (never inside a synchronous VFS call or the trace callback); the
 * caller that submitted an op takes it itself (iotune_cache_submit()).
 */
void iotune_cache_apply(struct iotune_cache *cache,
			       const struct iotune_wc_action *act)
{
	struct iotune_wc_op *op = NULL;

	iotune_cache_log(cache, act);
	while ((op = iotune_wc_next_to_disk(&cache->wc)) != NULL) {
		iotune_pwrite_dispatch(op);
	}
	while ((op = iotune_wc_next_to_copy(&cache->wc)) != NULL) {
		iotune_cache_copy(cache, op);
	}
	if (act->done) {
		iotune_cache_wake(cache);
	}
	if (act->writeback_len > 0) {
		iotune_cache_writeback(cache, act->writeback_off,
				       act->writeback_len);
	}
	/* not act->tick_ms: a failed dispatch or copy above ran the core */
	iotune_cache_arm_tick(cache, iotune_wc_next_tick(&cache->wc));
	iotune_cache_times_landed(cache);
	/* a batch of reservations formed: it starts now or soon */
	if (act->reserve_due) {
		iotune_cache_reserve_due(cache);
	}
	/*
	 * Last: a piece that cannot be issued fails at once, and the
	 * action that failure asks for (a retry tick) must not be undone by
	 * this one's.
	 */
	if (act->flush_io) {
		iotune_cache_issue(cache, act);
	}
}

/*
 * Submits op.  True when the core completed it at once: the caller
 * completes its request itself, and the wake scheduled for it is
 * cancelled when it has nothing else to do.  tevent runs one immediate
 * per loop iteration, so a cached write costs smbd one turn of its loop
 * (the tevent_req_post() of its request) and not two.
 */
bool iotune_cache_submit(struct iotune_cache *cache, struct iotune_wc_op *op)
{
	struct iotune_wc_action act;

	cache->submits++;
	if (op->kind == IOTUNE_WC_OP_WRITE) {
		iotune_cache_times_write(cache);
		iotune_cache_reserve_prepare(cache);
	}
	iotune_wc_submit(&cache->wc, op, iotune_now_ms(), &act);
	iotune_cache_apply(cache, &act);
	if (!iotune_wc_take_done(&cache->wc, op)) {
		return false;
	}
	if (!iotune_wc_has_done(&cache->wc) && !iotune_cache_idle(cache)) {
		tevent_schedule_immediate(cache->wake_im, cache->proc->ev,
					  NULL, NULL);
	}
	return true;
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

/*
 * A write sent to disk past the cache landed, in its own completion (not
 * inside iotune_cache_apply()): the cache may have nothing left to do.
 * Neither the idle timer, which found it busy, nor a wake looks again.
 */
void iotune_cache_write_landed(struct iotune_cache *cache,
			       struct iotune_wc_op *op,
			       ssize_t ret,
			       int err)
{
	iotune_cache_disk_done(cache, op, ret, err);
	iotune_cache_maybe_release(cache);
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
	if (iotune_cache_submit(cache, &b->op)) {
		b->cache = NULL;
		next(req, b->op.ret < 0 ? b->op.err : 0);
	}
out:
	if (!tevent_req_is_in_progress(req)) {
		return tevent_req_post(req, ev);
	}
	return req;
}
