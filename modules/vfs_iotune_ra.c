/*
 * iotune: read-ahead and fadvise glue.  The core (modules/readahead.c)
 * decides per read what to prefetch and what to drop behind a stream;
 * this file runs readahead(2) and posix_fadvise() in smbd's thread pool
 * (they may block while they submit I/O, never in the main thread),
 * the write cache's write-backs there too (sync_file_range(2), asked by
 * modules/wcache_flush.c), and applies the share's and the client's
 * advice at open.
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

#include "vfs_iotune.h"

#undef DBGC_CLASS
#define DBGC_CLASS DBGC_VFS

/* a share's limit lowers the process's, never raises it; 0 is none */
static uint64_t iotune_lower_limit(uint64_t global, uint64_t share)
{
	if (global == 0 || share == 0) {
		return global == 0 ? share : global;
	}
	return MIN(global, share);
}

/* Where the core counts: the share's counters, or nowhere when off */
static struct iotune_ra_stats *iotune_ra_stats_of(struct iotune_share *share)
{
	static struct iotune_ra_stats discarded;

	return iotune_counting(share) ? &share->stats.ra : &discarded;
}

/*
 * Read-ahead, drop-behind and the write cache's write-backs.
 * readahead(2), posix_fadvise(WILLNEED or DONTNEED) and
 * sync_file_range(2) may block while they submit I/O, so they run in
 * smbd's thread pool, on a dup() of the file descriptor (the file may be
 * closed before the job runs).  A write-back only starts the writing of
 * the range's dirty pages (SYNC_FILE_RANGE_WRITE alone): it waits for
 * nothing and consumes no error of the file's; a later fsync reports
 * what the writing met.
 */
struct iotune_fd_job {
	int fd;
	off_t off;
	off_t len;
	enum iotune_fd_job_kind kind;
	iotune_fd_job_ended_fn ended;	/* NULL: nobody waits for it */
	void *private_data;
};

static void iotune_fd_job_run(void *private_data)
{
	struct iotune_fd_job *job = private_data;

	switch (job->kind) {
	case IOTUNE_FD_PREFETCH:
		if (readahead(job->fd, job->off, (size_t)job->len) != 0) {
			(void)posix_fadvise(job->fd, job->off, job->len,
					    POSIX_FADV_WILLNEED);
		}
		return;
	case IOTUNE_FD_DROP:
		(void)posix_fadvise(job->fd, job->off, job->len,
				    POSIX_FADV_DONTNEED);
		return;
	case IOTUNE_FD_WRITEBACK:
		(void)sync_file_range(job->fd, job->off, job->len,
				      SYNC_FILE_RANGE_WRITE);
		return;
	}
}

static void iotune_fd_job_done(struct tevent_req *req)
{
	struct iotune_fd_job *job = tevent_req_callback_data(
		req, struct iotune_fd_job);
	iotune_fd_job_ended_fn ended = job->ended;
	void *private_data = job->private_data;

	(void)pthreadpool_tevent_job_recv(req);
	close(job->fd);
	TALLOC_FREE(job);	/* and req, its child */
	if (ended != NULL) {
		ended(private_data);
	}
}

/*
 * Starts a job in smbd's pool.  ended (if not NULL) is called with
 * private_data from the main event loop once it has run, unless
 * iotune_fd_job_forget() was called first.  NULL: it did not start (no
 * descriptor, no memory), and ended will not be called.
 */
struct iotune_fd_job *iotune_fd_job_start(struct vfs_handle_struct *handle,
					  struct files_struct *fsp,
					  uint64_t off,
					  uint64_t len,
					  enum iotune_fd_job_kind kind,
					  iotune_fd_job_ended_fn ended,
					  void *private_data)
{
	struct iotune_fd_job *job = NULL;
	struct tevent_req *req = NULL;

	/* on no parent: a job outlives the connection that asked for it */
	job = talloc(NULL, struct iotune_fd_job);
	if (job == NULL) {
		return NULL;
	}
	*job = (struct iotune_fd_job) {
		.fd = dup(fsp_get_io_fd(fsp)),
		.off = (off_t)off,
		.len = (off_t)len,
		.kind = kind,
		.ended = ended,
		.private_data = private_data,
	};
	if (job->fd == -1) {
		TALLOC_FREE(job);
		return NULL;
	}
	req = pthreadpool_tevent_job_send(job, handle->conn->sconn->ev_ctx,
					  handle->conn->sconn->pool,
					  iotune_fd_job_run, job);
	if (req == NULL) {
		close(job->fd);
		TALLOC_FREE(job);
		return NULL;
	}
	tevent_req_set_callback(req, iotune_fd_job_done, job);
	return job;
}

/* Whoever waited for the job's end is gone; the job runs on. */
void iotune_fd_job_forget(struct iotune_fd_job *job)
{
	job->ended = NULL;
	job->private_data = NULL;
}

void iotune_fd_job_submit(struct vfs_handle_struct *handle,
			  struct files_struct *fsp,
			  uint64_t off,
			  uint64_t len,
			  enum iotune_fd_job_kind kind)
{
	(void)iotune_fd_job_start(handle, fsp, off, len, kind, NULL, NULL);
}

/*
 * The advice for a new open: the share's fadvise option, else what the
 * read-ahead mode needs (off switches Linux's own read-ahead off with
 * RANDOM, adaptive too while its own windows serve reads), else the
 * client's hint.  An alternate data stream gets no read-ahead of
 * iotune's (iotune_ra_on_read() passes streams by): adaptive leaves
 * Linux's on for it.
 */
static int iotune_open_advice(const struct iotune_share *share,
			      struct iotune_ra_file *ra,
			      bool stream)
{
	bool own = !stream && iotune_ra_open(&share->ra_config, ra,
					     &share->proc->ra_budget);

	switch (share->config.fadvise) {
	case IOTUNE_FADVISE_NORMAL:
		return POSIX_FADV_NORMAL;
	case IOTUNE_FADVISE_SEQUENTIAL:
		return POSIX_FADV_SEQUENTIAL;
	case IOTUNE_FADVISE_RANDOM:
		return POSIX_FADV_RANDOM;
	case IOTUNE_FADVISE_NOREUSE:
		return POSIX_FADV_NOREUSE;
	default:
		break;
	}
	if (share->config.readahead == IOTUNE_RA_OFF || own) {
		return POSIX_FADV_RANDOM;
	}
	if (ra->hint == IOTUNE_RA_HINT_SEQUENTIAL) {
		return POSIX_FADV_SEQUENTIAL;
	}
	if (ra->hint == IOTUNE_RA_HINT_RANDOM) {
		return POSIX_FADV_RANDOM;
	}
	return -1;
}

static void iotune_advise(struct iotune_share *share, int fd, int advice)
{
	/* these advices only set flags on the open file: they never block */
	if (posix_fadvise(fd, 0, 0, advice) == 0 && iotune_counting(share)) {
		share->stats.fadvise_calls++;
	}
}

void iotune_apply_advice(struct iotune_share *share, int fd,
			 struct iotune_ra_file *ra, bool stream)
{
	int advice = -1;

	if (share->ra_config.kernel_first) {
		/* a new process's first open: is memory short already? */
		iotune_pressure_update(share->proc);
	}
	advice = iotune_open_advice(share, ra, stream);

	if (advice == -1 || fd == -1) {
		return;
	}
	iotune_advise(share, fd, advice);
}

/*
 * Adaptive read-ahead hands a file between Linux's read-ahead and its
 * own windows as memory pressure comes and goes (readahead.h).  A share
 * whose fadvise option sets the advice keeps it.
 */
static void iotune_ra_handover(struct iotune_share *share,
			       struct iotune_file *file,
			       enum iotune_ra_kernel kernel)
{
	int fd = fsp_get_io_fd(file->fsp);
	int advice = POSIX_FADV_RANDOM;

	if (kernel == IOTUNE_RA_KERNEL_KEEP ||
	    share->config.fadvise != IOTUNE_FADVISE_NONE || fd == -1) {
		return;
	}
	if (kernel == IOTUNE_RA_KERNEL_ON) {
		advice = file->ra.hint == IOTUNE_RA_HINT_SEQUENTIAL ?
			 POSIX_FADV_SEQUENTIAL : POSIX_FADV_NORMAL;
	}
	DBG_DEBUG("%s: Linux's read-ahead %s\n", fsp_str_dbg(file->fsp),
		  kernel == IOTUNE_RA_KERNEL_ON ? "back on" : "off");
	iotune_advise(share, fd, advice);
}

/* A read of n bytes at off arrives: prefetch ahead, drop behind. */
void iotune_ra_on_read(struct vfs_handle_struct *handle,
		       struct files_struct *fsp,
		       off_t off,
		       size_t n)
{
	struct iotune_share *share = iotune_share_of(handle);
	struct iotune_file *file = NULL;
	struct iotune_ra_action act;

	if (!share->ra_active || off < 0) {
		return;
	}
	file = iotune_file_of(handle, fsp);
	if (file == NULL || fsp_is_alternate_stream(fsp)) {
		return;
	}
	share->proc->ra_budget.limit = iotune_lower_limit(
		share->proc->ra_budget_global, share->config.readahead_budget);
	if (share->ra_config.mode == IOTUNE_RA_ADAPTIVE &&
	    share->ra_config.pressure_permille != 0) {
		iotune_pressure_update(share->proc);
	}
	iotune_ra_read(&share->ra_config, &file->ra, &share->proc->ra_budget,
		       iotune_ra_stats_of(share), (uint64_t)off, n, &act);
	iotune_ra_handover(share, file, act.kernel);
	if (act.prefetch_len > 0) {
		iotune_fd_job_submit(handle, fsp, act.prefetch_off,
				     act.prefetch_len, IOTUNE_FD_PREFETCH);
	}
	if (act.drop_len > 0) {
		iotune_fd_job_submit(handle, fsp, act.drop_off, act.drop_len,
				     IOTUNE_FD_DROP);
	}
}

/*
 * The handle closes: drop what the readers left.  This drop is done here,
 * in the synchronous close: smbd may exit right after the close, before a
 * job of its thread pool would run.  The budget is freed by the fsp
 * extension's destructor (iotune_file_destroy), which runs at every end
 * of the extension, this close included.
 */
void iotune_ra_on_close(struct vfs_handle_struct *handle,
			struct files_struct *fsp,
			struct iotune_file *file)
{
	struct iotune_share *share = iotune_share_of(handle);
	struct iotune_ra_action act;
	size_t i;

	for (i = 0; i < IOTUNE_RA_STREAMS; i++) {
		if (iotune_ra_drop_rest(&share->ra_config, &file->ra, i,
					iotune_ra_stats_of(share), &act)) {
			(void)posix_fadvise(fsp_get_io_fd(fsp),
					    (off_t)act.drop_off,
					    (off_t)act.drop_len,
					    POSIX_FADV_DONTNEED);
		}
	}
}

/* The share's read-ahead settings, from its options */
void iotune_ra_share_init(struct iotune_share *share)
{
	share->ra_config = (struct iotune_ra_config) {
		.mode = (enum iotune_ra_mode)share->config.readahead,
		.fixed_offset = share->config.readahead_offset,
		.fixed_size = share->config.readahead_size,
		.initial_window = MIN(128 * 1024,
				      share->config.readahead_max),
		.max_window = share->config.readahead_max,
		.pressure_permille =
			(unsigned)share->config.readahead_pressure * 10,
		/* an fadvise option is the admin's: it stays */
		.kernel_first = share->config.readahead ==
					IOTUNE_RA_ADAPTIVE &&
				share->config.readahead_pressure != 0 &&
				share->config.fadvise == IOTUNE_FADVISE_NONE,
		.drop_behind = share->config.drop_behind,
	};
	share->ra_active = share->config.drop_behind ||
			   share->config.readahead == IOTUNE_RA_FIXED ||
			   share->config.readahead == IOTUNE_RA_ADAPTIVE;
}
