/*
 * iotune: the write cache's reservations on the Samba side (the core,
 * modules/wcache_reserve.c and modules/rsvq.c, decides which bytes and
 * in which batch; docs/design.md "Reservation" says why).
 *
 * - A call made inline, on the main thread, through the VFS
 *   (SMB_VFS_NEXT_FALLOCATE): for a write alone in flight (unless the
 *   batch launched last held several: iotune_wc_reserve_ask()), for every
 *   write where reservations are cheap, and for the batches of shares
 *   where one is a round trip; its cost says which shares those are
 *   (IOTUNE_WC_RESERVE_SLOW_US).
 * - When a batch starts (the core's iotune_rsvq_pace()): once no more
 *   requests of the client wait in its sockets (their writes join the
 *   batch), checked again before every loop iteration
 *   (iotune_caches_check()), and as many writes joined as the batch
 *   launched last held or a reservation's cost went by (a timer);
 *   at once when it is full (a write went to the next batch), at the
 *   latest after IOTUNE_RSV_WAIT_US (a timer too).
 * - With "write cache batch reservations = yes" (nothing below iotune):
 *   each call of a batch is a fallocate(2) in smbd's thread pool, on a
 *   dup() of the file's descriptor (a handle may close while the call
 *   is on its way; the open file stays the same), answered to the core
 *   from the job's completion on the main loop.  A cache that ends
 *   waits for its calls, so that none lands after the close: asleep on
 *   a condition the jobs signal (an accepted pool job always has a
 *   thread, so the wait ends).
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
#include "lib/pthreadpool/pthreadpool_tevent.h"

#include "vfs_iotune_wcache.h"

#undef DBGC_CLASS
#define DBGC_CLASS DBGC_VFS

/*
 * What a reservation costs on the share, for IOTUNE_WC_RESERVE_SLOW_US:
 * the fastest of each batch of 8 (published from the 4th on).  The
 * fastest, because a fallocate on a direct I/O share waits for the
 * file's direct writes in flight, and that wait is not what a
 * reservation costs; on GlusterFS every one is a round trip.
 */
#define IOTUNE_RESERVE_BATCH 8

static void iotune_reserve_cost(struct iotune_share *share, uint64_t us)
{
	if (share->reserve_batch == 0 || us < share->reserve_batch_min_us) {
		share->reserve_batch_min_us = us;
	}
	share->reserve_batch++;
	if (share->reserve_batch >= IOTUNE_RESERVE_BATCH / 2) {
		share->reserve_cost_us = MAX(share->reserve_batch_min_us, 1);
	}
	if (share->reserve_batch == IOTUNE_RESERVE_BATCH) {
		share->reserve_batch = 0;
	}
}

bool iotune_cache_reserve_slow(const struct iotune_share *share)
{
	return share->reserve_cost_us >= IOTUNE_WC_RESERVE_SLOW_US;
}

/*
 * The blocks of a write the cache acknowledges, [off, off + len): a
 * fallocate without KEEP_SIZE, which also moves the end of file to
 * off + len when that is further, as the write will.  So every tree,
 * handle and process sees the size a share without the cache shows, and
 * the blocks held are those the data needs: nothing is ever given back.
 */
int iotune_cache_reserve_inline(void *private_data, uint64_t off,
				uint64_t len)
{
	struct iotune_cache *cache = private_data;
	struct iotune_file *owner = cache->files;
	uint64_t started = iotune_now_us();
	uint64_t us;
	int ret;

	ret = SMB_VFS_NEXT_FALLOCATE(owner->handle, owner->fsp, 0,
				     (off_t)off, (off_t)len);
	ret = ret == 0 ? 0 : errno;
	us = iotune_now_us() - started;
	if (iotune_counting(cache->share)) {
		/* the time smbd's main thread could not serve anyone */
		cache->share->stats.wc.reserve_us += us;
	}
	if (ret != 0) {
		return ret;
	}
	iotune_reserve_cost(cache->share, us);
	return 0;
}

/* One call of a batch, made in smbd's thread pool */
struct iotune_rsv_job {
	struct iotune_rsv_job *prev, *next;	/* in cache->reserves */
	struct iotune_cache *cache;	/* NULL: no answer is awaited */
	unsigned run;
	int fd;				/* a dup(): the job closes it */
	uint64_t off;
	uint64_t len;
	int err;
	int called;			/* atomic: the call returned */
};

static void iotune_rsv_run(void *private_data)
{
	struct iotune_rsv_job *job = private_data;
	int ret;

	do {
		ret = fallocate(job->fd, 0, (off_t)job->off, (off_t)job->len);
	} while (ret != 0 && errno == EINTR);
	job->err = ret == 0 ? 0 : errno;
	close(job->fd);
	job->fd = -1;
	iotune_pool_job_returned(&job->called);
}

/* The core hears the answer: writes are decided, a next batch starts */
static void iotune_rsv_answer(struct iotune_cache *cache, unsigned run,
			      int err)
{
	struct iotune_wc_action act;

	iotune_wc_reserve_done(&cache->wc, run, err, iotune_now_ms(), &act);
	iotune_cache_apply(cache, &act);
}

static void iotune_rsv_job_done(struct tevent_req *subreq)
{
	struct iotune_rsv_job *job = tevent_req_callback_data(
		subreq, struct iotune_rsv_job);
	struct iotune_cache *cache = job->cache;
	int ret = pthreadpool_tevent_job_recv(subreq);

	TALLOC_FREE(subreq);
	if (ret != 0 && !__atomic_load_n(&job->called, __ATOMIC_ACQUIRE)) {
		iotune_rsv_run(job);	/* the pool could not */
	}
	if (cache != NULL) {
		DLIST_REMOVE(cache->reserves, job);
		iotune_rsv_answer(cache, job->run, job->err);
		iotune_cache_maybe_release(cache);
	}
	TALLOC_FREE(job);
}

/* A call made now, through the VFS (also one the pool cannot take) */
static void iotune_rsv_inline(struct iotune_cache *cache, unsigned run,
			      uint64_t off, uint64_t len)
{
	iotune_rsv_answer(cache, run,
			  iotune_cache_reserve_inline(cache, off, len));
}

static void iotune_rsv_start(struct iotune_cache *cache, unsigned run,
			     uint64_t off, uint64_t len)
{
	struct vfs_handle_struct *handle = cache->files->handle;
	struct iotune_rsv_job *job = NULL;
	struct tevent_req *subreq = NULL;

	/* on no parent: its completion may come after the cache ended */
	job = talloc_zero(NULL, struct iotune_rsv_job);
	if (job == NULL) {
		iotune_rsv_inline(cache, run, off, len);
		return;
	}
	*job = (struct iotune_rsv_job) {
		.cache = cache, .run = run, .off = off, .len = len,
		.fd = fcntl(fsp_get_io_fd(cache->files->fsp),
			    F_DUPFD_CLOEXEC, 0),
	};
	if (job->fd >= 0) {
		subreq = pthreadpool_tevent_job_send(job, cache->proc->ev,
						     handle->conn->sconn->pool,
						     iotune_rsv_run, job);
	}
	if (subreq == NULL) {
		if (job->fd >= 0) {
			close(job->fd);
		}
		TALLOC_FREE(job);
		iotune_rsv_inline(cache, run, off, len);
		return;
	}
	DLIST_ADD_END(cache->reserves, job);
	tevent_req_set_callback(subreq, iotune_rsv_job_done, job);
}

/*
 * A batch starts: its calls go to the thread pool (write cache batch
 * reservations = yes), or are made inline, one after the other, each
 * answered at once.
 */
static void iotune_cache_reserve_launch(struct iotune_cache *cache)
{
	struct iotune_rsvq_calls calls;
	unsigned i;

	iotune_wc_reserve_launch(&cache->wc, &calls);
	for (i = 0; i < calls.n; i++) {
		uint64_t off = calls.run[i].off;
		uint64_t len = calls.run[i].end - off;

		if (cache->share->wc_reserve_async) {
			iotune_rsv_start(cache, i, off, len);
		} else {
			iotune_rsv_inline(cache, i, off, len);
		}
	}
	if (calls.n > 0 && !cache->share->wc_reserve_async) {
		/* answered: the completions, and the release check */
		iotune_cache_wake(cache);
	}
}

/*
 * How long a batch may wait for the client's requests waiting to be
 * read; a batch that is full starts at once.
 */
#define IOTUNE_RSV_WAIT_US 2000

static void iotune_rsv_timer_fn(struct tevent_context *ev,
				struct tevent_timer *te,
				struct timeval now,
				void *private_data)
{
	struct iotune_cache *cache = private_data;

	cache->reserve_timer = NULL;
	iotune_cache_reserve_due(cache);
}

static bool iotune_rsv_client_waiting(void *private_data)
{
	struct iotune_cache *cache = private_data;

	return iotune_smbd_client_waiting(cache->files->fsp);
}

/*
 * The batch asks again at at_us at the latest (a timer armed for an
 * earlier time stays).  false: no timer.
 */
static bool iotune_rsv_arm(struct iotune_cache *cache, uint64_t now,
			   uint64_t at_us)
{
	if (cache->reserve_timer != NULL && cache->reserve_timer_us <= at_us) {
		return true;
	}
	TALLOC_FREE(cache->reserve_timer);
	cache->reserve_timer = tevent_add_timer(
		cache->proc->ev, cache,
		tevent_timeval_current_ofs(0, at_us - now),
		iotune_rsv_timer_fn, cache);
	cache->reserve_timer_us = at_us;
	return cache->reserve_timer != NULL;
}

/*
 * A batch of reservations formed (act->reserve_due).  When it starts is
 * the core's rule (iotune_wc_reserve_pace()): once no more requests of the
 * client wait in its sockets (their writes join it; smbd reads one
 * request per loop iteration, and iotune_caches_check() calls this
 * again before each), and once as many writes joined as the batch
 * launched last held, or a call's cost after it formed: the
 * client sends its next writes one by one as the last batch's answers
 * reach it, and each batch launched early costs the others a call.  A
 * timer bounds both waits; a full batch starts at once.
 */
void iotune_cache_reserve_due(struct iotune_cache *cache)
{
	struct iotune_rsvq_wait w = {
		.wait_us = cache->share->reserve_cost_us,
		.max_wait_us = IOTUNE_RSV_WAIT_US,
		.more_waiting = iotune_rsv_client_waiting,
		.private_data = cache,
	};
	uint64_t now = 0;
	uint64_t after = 0;

	if (iotune_wc_reserve_due(&cache->wc) == 0 || cache->files == NULL) {
		/* launched, or every write of it left */
		cache->reserve_due_us = 0;
		TALLOC_FREE(cache->reserve_timer);
		return;
	}
	now = iotune_now_us();
	if (cache->reserve_due_us == 0) {
		cache->reserve_due_us = now;
	}
	w.waited_us = now - cache->reserve_due_us;
	if (iotune_wc_reserve_pace(&cache->wc, &w, &after) != IOTUNE_RSVQ_GO &&
	    iotune_rsv_arm(cache, now, now + after)) {
		return;
	}
	TALLOC_FREE(cache->reserve_timer);
	cache->reserve_due_us = 0;
	iotune_cache_reserve_launch(cache);
}

/*
 * Before a write: reservations go in batches on shares that ask for it,
 * and on shares where one is a round trip (IOTUNE_WC_RESERVE_SLOW_US),
 * inline there: the writes that arrive while the client keeps several in
 * flight share one round trip, and are cached.
 */
void iotune_cache_reserve_prepare(struct iotune_cache *cache)
{
	if (cache->share->wc_reserve_async ||
	    iotune_cache_reserve_slow(cache->share)) {
		iotune_wc_reserve_in_batches(&cache->wc);
	}
}

/*
 * The cache ends: its calls on their way return first (none may land
 * after the close); their answers are not awaited.
 */
void iotune_cache_reserve_end(struct iotune_cache *cache)
{
	struct iotune_rsv_job *job = NULL;

	TALLOC_FREE(cache->reserve_timer);
	while ((job = cache->reserves) != NULL) {
		iotune_pool_job_wait(&job->called);
		DLIST_REMOVE(cache->reserves, job);
		job->cache = NULL;
	}
}

/*
 * Reservations in batches, when the admin asks for them (tree connect
 * refuses them with a module below iotune, whose fallocate they would
 * bypass)
 */
bool iotune_cache_reserve_async(const struct iotune_share *share)
{
	return share->config.write_cache_batch_reservations;
}
