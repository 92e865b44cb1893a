/*
 * iotune: write cache, read-ahead policy, direct I/O and throughput
 * counters for Samba shares.
 *
 * This file is the only one that sees Samba: a thin adapter that binds
 * iotune's core (modules/ *.c, include/iotune/) to the SMB_VFS_NEXT_*
 * calls.  Options are read once per tree connect and kept as handle
 * data; per-file state lives in an fsp extension.
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
#include "lib/util/tevent_ntstatus.h"

#include "messages.h"
#include "lib/pthreadpool/pthreadpool_tevent.h"
#include <tdb.h>

#include "iotune/config.h"
#include "iotune/dio.h"
#include "iotune/readahead.h"
#include "iotune/stats.h"
#include "iotune/wcache.h"

#undef DBGC_CLASS
#define DBGC_CLASS DBGC_VFS

#define IOTUNE_MODULE_NAME "iotune"

/*
 * The write cache, and why it is coherent (docs/design.md has the long
 * version).
 *
 * A handle may cache while it holds an exclusive or batch oplock, or a
 * lease with WRITE caching, and no break of it is in progress.  Writes
 * are absorbed by a per-file cache (shared by the handles of the file in
 * this process) and acknowledged at once; flushes write the dirty data
 * as few large SMB_VFS_NEXT_PWRITE_SEND calls.
 *
 * smbd 4.17 has no VFS hook for oplock or lease breaks.  When smbd
 * processes a break request it sends the break to the client and, in the
 * same event handler, marks the handle (fsp->sent_oplock_break, or
 * SMB2_LEASE_FLAG_BREAK_IN_PROGRESS on the lease).  The opener that
 * caused the break waits until smbd has processed the client's ack (or
 * the break timed out), and smbd reads the ack from the socket only after
 * epoll_wait().  We chain a tevent trace callback and, at
 * TEVENT_TRACE_BEFORE_WAIT, right before every epoll_wait(), write out
 * every cache whose handles may no longer cache, synchronously.  So all
 * acknowledged data is in the file before the ack can even be read.
 *
 * Flushes run on a private tevent context (flush_ev), not on smbd's main
 * one: that makes an in-flight flush something we can wait for where a
 * synchronous VFS call needs the data on disk (close, ftruncate, the
 * break above).  Async completions are noticed by polling flush_ev from a
 * 1 ms timer on the main context while flushes are in flight.  Modules
 * below iotune must complete async I/O on the context they are given, as
 * vfs_default does; vfs_io_uring does not and is refused below iotune.
 *
 * Only one flush per cache is in flight; writes that cannot be absorbed
 * meanwhile wait in a FIFO, asynchronously.  A failed flush keeps its
 * data, and its error fails the next write, flush or close.
 */

struct iotune_share {
	struct iotune_share *prev, *next;	/* in proc->shares */
	struct iotune_config config;
	const char *name;
	bool sync_always;
	struct iotune_process *proc;
	unsigned serial;
	struct iotune_ra_config ra_config;
	bool ra_active;			/* prefetch or drop-behind to do */
	bool dio_unsupported;		/* the file system refused O_DIRECT */
	struct iotune_stats stats;
	struct iotune_stats published;
};

/* Per smbd process: shared by all tree connects with iotune */
struct iotune_process {
	struct tevent_context *ev;
	struct tevent_context *flush_ev;
	tevent_trace_callback_t prev_trace_cb;
	void *prev_trace_private;
	unsigned connections;
	struct iotune_cache *caches;
	unsigned num_caches;
	unsigned flushes_in_flight;
	struct tevent_timer *poll_timer;
	struct tevent_threaded_context *tctx;
	struct tevent_immediate *poke_im;
	bool poke_pending;
	uint64_t next_cache_gen;
	struct messaging_context *msg_ctx;
	bool counting;		/* smbcontrol ... profile off stops it */
	struct iotune_share *shares;
	unsigned next_share_serial;
	struct tdb_context *stats_tdb;
	bool stats_tdb_failed;
	struct tevent_timer *publish_timer;
	struct iotune_ra_budget ra_budget;
};

static struct iotune_process *iotune_proc;

struct iotune_waiter;

/* The dirty data of one file in this process */
struct iotune_cache {
	struct iotune_cache *prev, *next;
	struct iotune_process *proc;
	struct iotune_share *share;
	struct file_id id;
	uint64_t gen;
	struct iotune_file *files;	/* attached handles; head does I/O */
	struct iotune_wcache wc;
	struct tevent_req *flush_subreq;
	struct tevent_timer *deadline_timer;
	struct tevent_immediate *wake_im;
	struct iotune_waiter *waiters;
	bool disabled;			/* lost its right to cache */
	bool break_flushed;		/* ... and was written out for it */
	bool flush_dio;			/* the piece in flight is direct */
	uint64_t flush_started_us;
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
	struct iotune_ra_file ra;
	int direct_fd;			/* O_DIRECT twin of fd, or -1 */
	bool direct_reads;
	bool direct_writes;
	struct iotune_dio_align align;
};

/* Something that waits for a cache's I/O in flight, in FIFO order */
struct iotune_waiter {
	struct iotune_waiter *prev, *next;
	struct iotune_cache *cache;
	/* true when done (and removed from the list) */
	bool (*step)(struct iotune_waiter *w);
	struct tevent_req *req;
};

static uint64_t iotune_now_us(void)
{
	struct timespec ts;

	clock_gettime(CLOCK_MONOTONIC, &ts);
	return (uint64_t)ts.tv_sec * 1000000 + (uint64_t)ts.tv_nsec / 1000;
}

static uint64_t iotune_now_ms(void)
{
	return iotune_now_us() / 1000;
}

static bool iotune_counting(const struct iotune_share *share)
{
	return share->config.stats && share->proc->counting;
}

/* One read or write as the client sees it: ops, bytes, latency */
static void iotune_count_io(struct iotune_share *share,
			    bool is_write,
			    ssize_t ret,
			    uint64_t started_us)
{
	struct iotune_stats *s = &share->stats;
	uint64_t us = iotune_now_us() - started_us;

	if (!iotune_counting(share)) {
		return;
	}
	if (is_write) {
		s->write_ops++;
		s->write_bytes += ret > 0 ? (uint64_t)ret : 0;
		iotune_latency_add(&s->write_latency, us);
	} else {
		s->read_ops++;
		s->read_bytes += ret > 0 ? (uint64_t)ret : 0;
		iotune_latency_add(&s->read_latency, us);
	}
}

static const char *iotune_lookup_option(void *private_data, const char *name)
{
	int snum = *(int *)private_data;

	return lp_parm_const_string(snum, IOTUNE_MODULE_NAME, name, NULL);
}

static struct iotune_share *iotune_share_of(struct vfs_handle_struct *handle)
{
	struct iotune_share *share = NULL;

	SMB_VFS_HANDLE_GET_DATA(handle, share, struct iotune_share,
				smb_panic(__location__));
	return share;
}

static struct iotune_file *iotune_file_of(struct vfs_handle_struct *handle,
					  struct files_struct *fsp)
{
	return VFS_FETCH_FSP_EXTENSION(handle, fsp);
}

static struct iotune_cache *iotune_find_cache(const struct file_id *id)
{
	struct iotune_cache *c = NULL;

	if (iotune_proc == NULL) {
		return NULL;
	}
	for (c = iotune_proc->caches; c != NULL; c = c->next) {
		if (file_id_equal(&c->id, id)) {
			return c;
		}
	}
	return NULL;
}

/* The cache holding data of this handle's file, if any */
static struct iotune_cache *iotune_cache_of(struct files_struct *fsp)
{
	if (fsp->fsp_flags.is_directory || fsp_is_alternate_stream(fsp)) {
		return NULL;
	}
	return iotune_find_cache(&fsp->file_id);
}

/* May this handle keep written data in memory right now? */
static bool iotune_fsp_may_cache(const struct iotune_share *share,
				 const struct iotune_file *file,
				 const struct files_struct *fsp)
{
	const struct smb2_lease *lease = NULL;

	if (share->config.write_cache_size == 0 || share->sync_always) {
		return false;
	}
	if (file == NULL || file->write_through ||
	    fsp->fsp_flags.is_directory || fsp_is_alternate_stream(fsp)) {
		return false;
	}
	if (fsp->oplock_type == LEASE_OPLOCK) {
		if (fsp->lease == NULL) {
			return false;
		}
		lease = &fsp->lease->lease;
		return (lease->lease_state & SMB2_LEASE_WRITE) &&
		       !(lease->lease_flags & SMB2_LEASE_FLAG_BREAK_IN_PROGRESS);
	}
	if (EXCLUSIVE_OPLOCK_TYPE(fsp->oplock_type)) {
		return fsp->sent_oplock_break == NO_BREAK_SENT;
	}
	return false;
}

static bool iotune_cache_may_continue(const struct iotune_cache *cache)
{
	const struct iotune_file *f = NULL;

	if (cache->disabled) {
		return false;
	}
	for (f = cache->files; f != NULL; f = f->next) {
		if (!iotune_fsp_may_cache(cache->share, f, f->fsp)) {
			return false;
		}
	}
	return true;
}

/* the handle through which the cache's flushes go */
static struct iotune_file *iotune_cache_owner(struct iotune_cache *cache)
{
	return cache->files;
}


/*
 * Direct I/O.  Each file on a share with "direct io" gets a second file
 * descriptor opened with O_DIRECT.  Requests of at least "direct io min
 * size" go through it: reads are expanded to aligned blocks (into an
 * aligned bounce buffer when needed) and trimmed, writes are split into a
 * buffered head and tail around an aligned direct middle.  Linux keeps
 * buffered and direct I/O of one file coherent (a direct read writes back
 * dirty cached pages of its range first, a direct write invalidates them).
 * The work runs in smbd's thread pool for async requests.
 */
struct iotune_dio_io {
	int buffered_fd;
	int direct_fd;
	struct iotune_dio_align align;
	bool is_write;
	void *buf;
	size_t len;
	uint64_t off;
	ssize_t ret;
	int err;
	bool split;
	bool bounced;
};

static bool iotune_dio_wanted(const struct iotune_share *share,
			      const struct iotune_file *file,
			      bool is_write,
			      size_t n)
{
	if (file == NULL || file->direct_fd == -1 ||
	    n < share->config.direct_io_min_size || n == 0) {
		return false;
	}
	return is_write ? file->direct_writes : file->direct_reads;
}

static ssize_t iotune_pread_full(int fd, void *buf, size_t n, uint64_t off,
				 uint64_t align)
{
	size_t done = 0;

	while (done < n) {
		ssize_t r = pread(fd, (char *)buf + done, n - done,
				  (off_t)(off + done));

		if (r == -1 && errno == EINTR) {
			continue;
		}
		if (r == -1) {
			return -1;
		}
		done += (size_t)r;
		/* end of file: a direct read cannot go on unaligned */
		if (r == 0 || (align != 0 && (size_t)r % align != 0)) {
			break;
		}
	}
	return (ssize_t)done;
}

static ssize_t iotune_pwrite_full(int fd, const void *buf, size_t n,
				  uint64_t off)
{
	size_t done = 0;

	while (done < n) {
		ssize_t r = pwrite(fd, (const char *)buf + done, n - done,
				   (off_t)(off + done));

		if (r == -1 && errno == EINTR) {
			continue;
		}
		if (r <= 0) {
			return done > 0 ? (ssize_t)done : -1;
		}
		done += (size_t)r;
	}
	return (ssize_t)done;
}

static ssize_t iotune_dio_read(struct iotune_dio_io *io)
{
	struct iotune_dio_read_plan plan;
	void *b = io->buf;
	ssize_t got;
	uint64_t n;

	iotune_dio_plan_read(&io->align, 0, io->off, io->len,
			     (uintptr_t)io->buf, &plan);
	if (plan.bounce) {
		if (posix_memalign(&b, io->align.memory, plan.len) != 0) {
			errno = ENOMEM;
			return -1;
		}
		io->bounced = true;
	}
	got = iotune_pread_full(io->direct_fd, b, plan.len, plan.off,
				io->align.offset);
	if (got < 0) {
		int err = errno;

		if (b != io->buf) {
			free(b);
		}
		errno = err;
		return -1;
	}
	n = iotune_dio_read_result(&plan, io->len, (uint64_t)got);
	if (b != io->buf) {
		memcpy(io->buf, (char *)b + plan.skip, n);
		free(b);
	}
	return (ssize_t)n;
}

static ssize_t iotune_dio_write(struct iotune_dio_io *io)
{
	struct iotune_dio_write_plan plan;
	const char *src = io->buf;
	void *mid = NULL;
	ssize_t r;

	iotune_dio_plan_write(&io->align, 0, io->off, io->len,
			      (uintptr_t)io->buf, &plan);
	if (plan.mid_len == 0) {
		return iotune_pwrite_full(io->buffered_fd, src, io->len,
					  io->off);
	}
	io->split = plan.head_len > 0 || plan.tail_len > 0;
	if (plan.head_len > 0) {
		r = iotune_pwrite_full(io->buffered_fd, src, plan.head_len,
				       io->off);
		if (r != (ssize_t)plan.head_len) {
			return r;
		}
	}
	mid = (void *)(src + plan.head_len);
	if (plan.bounce) {
		if (posix_memalign(&mid, io->align.memory, plan.mid_len) != 0) {
			errno = ENOMEM;
			return plan.head_len > 0 ? (ssize_t)plan.head_len : -1;
		}
		memcpy(mid, src + plan.head_len, plan.mid_len);
		io->bounced = true;
	}
	r = iotune_pwrite_full(io->direct_fd, mid, plan.mid_len, plan.mid_off);
	if (plan.bounce) {
		free(mid);
	}
	if (r != (ssize_t)plan.mid_len) {
		if (r <= 0) {
			return plan.head_len > 0 ? (ssize_t)plan.head_len : -1;
		}
		return (ssize_t)plan.head_len + r;
	}
	if (plan.tail_len > 0) {
		r = iotune_pwrite_full(io->buffered_fd,
				       src + plan.head_len + plan.mid_len,
				       plan.tail_len, plan.tail_off);
		if (r != (ssize_t)plan.tail_len) {
			return (ssize_t)(plan.head_len + plan.mid_len) +
			       (r > 0 ? r : 0);
		}
	}
	return (ssize_t)io->len;
}

static void iotune_dio_run(void *private_data)
{
	struct iotune_dio_io *io = private_data;

	errno = 0;
	io->ret = io->is_write ? iotune_dio_write(io) : iotune_dio_read(io);
	io->err = io->ret < 0 ? errno : 0;
}

static void iotune_dio_count(struct iotune_share *share,
			     const struct iotune_dio_io *io)
{
	struct iotune_stats *s = &share->stats;

	if (!iotune_counting(share)) {
		return;
	}
	if (io->is_write) {
		s->dio_writes++;
		s->dio_write_bytes += io->ret > 0 ? (uint64_t)io->ret : 0;
	} else {
		s->dio_reads++;
		s->dio_read_bytes += io->ret > 0 ? (uint64_t)io->ret : 0;
	}
	s->dio_splits += io->split ? 1 : 0;
	s->dio_bounces += io->bounced ? 1 : 0;
}

static void iotune_dio_setup(struct iotune_dio_io *io,
			     struct iotune_file *file,
			     bool is_write,
			     const void *buf,
			     size_t n,
			     uint64_t off)
{
	*io = (struct iotune_dio_io) {
		.buffered_fd = fsp_get_io_fd(file->fsp),
		.direct_fd = file->direct_fd,
		.align = file->align,
		.is_write = is_write,
		.buf = discard_const_p(void, buf),
		.len = n,
		.off = off,
	};
}

/* Synchronous direct I/O, for the sync VFS paths */
static ssize_t iotune_dio_sync(struct iotune_share *share,
			       struct iotune_file *file,
			       bool is_write,
			       const void *buf,
			       size_t n,
			       uint64_t off)
{
	struct iotune_dio_io io;

	iotune_dio_setup(&io, file, is_write, buf, n, off);
	iotune_dio_run(&io);
	iotune_dio_count(share, &io);
	errno = io.err;
	return io.ret;
}

struct iotune_dio_state {
	struct iotune_share *share;
	struct iotune_dio_io io;
	struct tevent_req *subreq;
	bool in_flight;
};

static void iotune_dio_orphan_done(struct tevent_req *subreq)
{
	struct iotune_dio_state *state = tevent_req_callback_data(
		subreq, struct iotune_dio_state);

	(void)pthreadpool_tevent_job_recv(subreq);
	state->in_flight = false;
	TALLOC_FREE(state);	/* and subreq, its child */
}

/*
 * Freed while a pool thread still uses io (smbd's shutdown close does
 * that): refuse, like vfs_default, and free it when the job is done.
 */
static int iotune_dio_state_destructor(struct iotune_dio_state *state)
{
	if (!state->in_flight) {
		return 0;
	}
	tevent_req_set_callback(state->subreq, iotune_dio_orphan_done, state);
	return -1;
}

static void iotune_dio_done(struct tevent_req *subreq);

static struct tevent_req *iotune_dio_send(TALLOC_CTX *mem_ctx,
					  struct tevent_context *ev,
					  struct vfs_handle_struct *handle,
					  struct iotune_file *file,
					  bool is_write,
					  const void *buf,
					  size_t n,
					  uint64_t off)
{
	struct tevent_req *req = NULL;
	struct tevent_req *subreq = NULL;
	struct iotune_dio_state *state = NULL;

	req = tevent_req_create(mem_ctx, &state, struct iotune_dio_state);
	if (req == NULL) {
		return NULL;
	}
	state->share = iotune_share_of(handle);
	iotune_dio_setup(&state->io, file, is_write, buf, n, off);
	subreq = pthreadpool_tevent_job_send(state, ev,
					     handle->conn->sconn->pool,
					     iotune_dio_run, &state->io);
	if (tevent_req_nomem(subreq, req)) {
		return tevent_req_post(req, ev);
	}
	state->subreq = subreq;
	state->in_flight = true;
	talloc_set_destructor(state, iotune_dio_state_destructor);
	tevent_req_set_callback(subreq, iotune_dio_done, req);
	return req;
}

static void iotune_dio_done(struct tevent_req *subreq)
{
	struct tevent_req *req = tevent_req_callback_data(
		subreq, struct tevent_req);
	struct iotune_dio_state *state = tevent_req_data(
		req, struct iotune_dio_state);
	int ret;

	ret = pthreadpool_tevent_job_recv(subreq);
	TALLOC_FREE(subreq);
	state->in_flight = false;
	if (ret != 0) {
		/* the pool could not run it: do it here */
		iotune_dio_run(&state->io);
	}
	iotune_dio_count(state->share, &state->io);
	tevent_req_done(req);
}

/* like SMB_VFS_PREAD_RECV / SMB_VFS_PWRITE_RECV */
static ssize_t iotune_dio_recv(struct tevent_req *req,
			       struct vfs_aio_state *vfs_aio_state)
{
	struct iotune_dio_state *state = tevent_req_data(
		req, struct iotune_dio_state);
	ssize_t ret = state->io.ret;
	int err = state->io.err;

	if (tevent_req_is_unix_error(req, &vfs_aio_state->error)) {
		tevent_req_received(req);
		return -1;
	}
	*vfs_aio_state = (struct vfs_aio_state) { .error = err };
	tevent_req_received(req);
	return ret;
}

/* A disk read or write, direct (file's O_DIRECT twin) or through the VFS */
static struct tevent_req *iotune_disk_send(TALLOC_CTX *mem_ctx,
					   struct tevent_context *ev,
					   struct vfs_handle_struct *handle,
					   struct iotune_file *file,
					   struct files_struct *fsp,
					   bool dio,
					   bool is_write,
					   const void *buf,
					   size_t n,
					   uint64_t off)
{
	if (dio) {
		return iotune_dio_send(mem_ctx, ev, handle, file, is_write,
				       buf, n, off);
	}
	if (is_write) {
		return SMB_VFS_NEXT_PWRITE_SEND(mem_ctx, ev, handle, fsp, buf,
						n, (off_t)off);
	}
	return SMB_VFS_NEXT_PREAD_SEND(mem_ctx, ev, handle, fsp,
				       discard_const_p(void, buf), n,
				       (off_t)off);
}

/* The result of a disk read or write, direct or through the VFS */
static ssize_t iotune_disk_recv(struct tevent_req *subreq,
				bool dio,
				bool is_write,
				struct vfs_aio_state *vfs_aio_state)
{
	if (dio) {
		return iotune_dio_recv(subreq, vfs_aio_state);
	}
	if (is_write) {
		return SMB_VFS_PWRITE_RECV(subreq, vfs_aio_state);
	}
	return SMB_VFS_PREAD_RECV(subreq, vfs_aio_state);
}

/*
 * Opens the O_DIRECT twin of a new file's descriptor.  A file system that
 * refuses O_DIRECT is logged once per share and the share's files use the
 * page cache.
 */
static void iotune_dio_open(struct iotune_share *share,
			    struct iotune_file *file,
			    int flags,
			    bool reads,
			    bool writes)
{
	char path[64];
	struct stat st;
	int fd;

	if (file->direct_fd != -1 || share->dio_unsupported ||
	    (!reads && !writes)) {
		return;
	}
	/* directories refuse O_DIRECT: that says nothing of the files */
	if (fstat(file->fd, &st) != 0 || !S_ISREG(st.st_mode)) {
		return;
	}
	snprintf(path, sizeof(path), "/proc/self/fd/%d", file->fd);
	fd = open(path, (flags & O_ACCMODE) | O_DIRECT | O_CLOEXEC);
	if (fd == -1) {
		DBG_DEBUG("open(%s, O_DIRECT): %s\n", path, strerror(errno));
		share->stats.dio_fallbacks++;
		if (errno == EINVAL) {
			share->dio_unsupported = true;
			DBG_WARNING("share '%s': the file system refuses "
				    "O_DIRECT; 'iotune:direct io' falls back "
				    "to the page cache\n", share->name);
		}
		return;
	}
	file->align = iotune_dio_align_probe(fd, "/sys");
	file->direct_fd = fd;
	file->direct_reads = reads;
	file->direct_writes = writes;
}

static void iotune_dio_close(struct iotune_file *file)
{
	if (file->direct_fd != -1) {
		close(file->direct_fd);
		file->direct_fd = -1;
	}
}

static void iotune_poll_timer_arm(struct iotune_process *p);

static void iotune_poke_handler(struct tevent_context *ev,
				struct tevent_immediate *im,
				void *private_data)
{
	struct iotune_process *p = private_data;

	p->poke_pending = false;
}

/*
 * Makes epoll_wait() return: from a trace callback at BEFORE_WAIT, a
 * scheduled immediate alone would only run after the next event.
 */
static void iotune_poke_main_loop(struct iotune_process *p)
{
	if (p->poke_pending || p->tctx == NULL) {
		return;
	}
	p->poke_pending = true;
	tevent_threaded_schedule_immediate(p->tctx, p->poke_im,
					   iotune_poke_handler, p);
}

static void iotune_cache_wake_handler(struct tevent_context *ev,
				      struct tevent_immediate *im,
				      void *private_data);

static void iotune_cache_wake(struct iotune_cache *cache)
{
	if (cache->waiters == NULL) {
		return;
	}
	tevent_schedule_immediate(cache->wake_im, cache->proc->ev,
				  iotune_cache_wake_handler, cache);
}

static void iotune_waiter_remove(struct iotune_waiter *w)
{
	if (w->cache != NULL) {
		DLIST_REMOVE(w->cache->waiters, w);
		w->cache = NULL;
	}
}

static int iotune_waiter_destructor(struct iotune_waiter *w)
{
	iotune_waiter_remove(w);
	return 0;
}

static void iotune_waiter_add(struct iotune_cache *cache,
			      struct iotune_waiter *w,
			      struct tevent_req *req,
			      bool (*step)(struct iotune_waiter *w))
{
	*w = (struct iotune_waiter) {
		.cache = cache,
		.step = step,
		.req = req,
	};
	DLIST_ADD_END(cache->waiters, w);
	talloc_set_destructor(w, iotune_waiter_destructor);
}

static void iotune_cache_flush_io(struct iotune_cache *cache);
static void iotune_cache_maybe_release(struct iotune_cache *cache);

static void iotune_cache_wake_handler(struct tevent_context *ev,
				      struct tevent_immediate *im,
				      void *private_data)
{
	struct iotune_cache *cache = private_data;

	while (cache->waiters != NULL) {
		if (!cache->waiters->step(cache->waiters)) {
			return;
		}
	}
	iotune_cache_maybe_release(cache);
}

static void iotune_log_flush_error(struct iotune_cache *cache, int err)
{
	struct iotune_file *owner = iotune_cache_owner(cache);

	DBG_ERR("share '%s': writing cached data of '%s' failed: %s; the "
		"data is kept and the error goes to the next write, flush "
		"or close\n",
		cache->share->name,
		owner != NULL ? fsp_str_dbg(owner->fsp) : "?",
		strerror(err));
}

static void iotune_cache_flush_done(struct tevent_req *subreq)
{
	struct iotune_cache *cache = tevent_req_callback_data(
		subreq, struct iotune_cache);
	struct vfs_aio_state aio_state = { 0 };
	ssize_t ret;

	ret = iotune_disk_recv(subreq, cache->flush_dio, true, &aio_state);
	TALLOC_FREE(subreq);
	cache->flush_subreq = NULL;
	cache->proc->flushes_in_flight--;
	if (iotune_counting(cache->share)) {
		iotune_latency_add(&cache->share->stats.flush_latency,
				   iotune_now_us() - cache->flush_started_us);
	}

	iotune_wc_flush_result(&cache->wc, ret, ret < 0 ? aio_state.error : 0,
			       iotune_now_ms());
	if (!iotune_wc_flush_in_flight(&cache->wc) && cache->wc.error != 0) {
		iotune_log_flush_error(cache, cache->wc.error);
	}
	iotune_cache_flush_io(cache);
}

/* Issues the next piece of the flush in flight, or finishes it. */
static void iotune_cache_flush_io(struct iotune_cache *cache)
{
	struct iotune_process *p = cache->proc;
	struct iotune_file *owner = iotune_cache_owner(cache);
	struct tevent_req *subreq = NULL;
	const uint8_t *buf = NULL;
	uint64_t off;
	size_t len;

	if (!iotune_wc_flush_next(&cache->wc, &off, &buf, &len)) {
		iotune_cache_wake(cache);
		return;
	}
	cache->flush_dio = iotune_dio_wanted(cache->share, owner, true, len);
	subreq = iotune_disk_send(cache, p->flush_ev, owner->handle, owner,
				  owner->fsp, cache->flush_dio, true, buf, len,
				  off);
	if (subreq == NULL) {
		iotune_wc_flush_result(&cache->wc, -1, ENOMEM,
				       iotune_now_ms());
		iotune_cache_wake(cache);
		return;
	}
	tevent_req_set_callback(subreq, iotune_cache_flush_done, cache);
	cache->flush_subreq = subreq;
	cache->flush_started_us = iotune_now_us();
	p->flushes_in_flight++;
	iotune_poll_timer_arm(p);
}

static bool iotune_cache_start_flush(struct iotune_cache *cache,
				     enum iotune_flush_reason reason)
{
	if (!iotune_wc_flush_begin(&cache->wc, reason, false)) {
		return false;
	}
	DBG_DEBUG("share '%s': flush (%s) of '%s'\n", cache->share->name,
		  iotune_flush_reason_name(reason),
		  fsp_str_dbg(iotune_cache_owner(cache)->fsp));
	iotune_cache_flush_io(cache);
	return true;
}

/* Runs flush_ev until no flush of this cache is in flight. */
static void iotune_cache_wait_idle(struct iotune_cache *cache)
{
	while (cache->flush_subreq != NULL) {
		if (tevent_loop_once(cache->proc->flush_ev) != 0) {
			DBG_ERR("tevent_loop_once() on the flush context "
				"failed: %s\n", strerror(errno));
			smb_panic("iotune: cannot wait for a flush");
		}
	}
}

static ssize_t iotune_cache_sync_pwrite(void *private_data,
					const void *buf,
					size_t n,
					uint64_t off)
{
	struct iotune_file *owner = private_data;
	struct iotune_share *share = iotune_share_of(owner->handle);

	if (iotune_dio_wanted(share, owner, true, n)) {
		return iotune_dio_sync(share, owner, true, buf, n, off);
	}
	return SMB_VFS_NEXT_PWRITE(owner->handle, owner->fsp, buf, n,
				   (off_t)off);
}

/*
 * Writes everything dirty before returning: for sync VFS calls and for
 * breaks.  Returns 0 or the errno of a failure, which is then reported.
 */
static int iotune_cache_flush_now(struct iotune_cache *cache,
				  enum iotune_flush_reason reason)
{
	struct iotune_file *owner = iotune_cache_owner(cache);
	struct iotune_wc_io_ops ops = {
		.pwrite = iotune_cache_sync_pwrite,
		.private_data = owner,
	};
	uint64_t started;
	int err;

	iotune_cache_wait_idle(cache);
	if (!iotune_wc_is_dirty(&cache->wc)) {
		return iotune_wc_take_error(&cache->wc);
	}
	started = iotune_now_us();
	err = iotune_wc_flush_sync(&cache->wc, reason, &ops, iotune_now_ms());
	if (iotune_counting(cache->share)) {
		iotune_latency_add(&cache->share->stats.flush_latency,
				   iotune_now_us() - started);
	}
	if (err != 0) {
		iotune_log_flush_error(cache, err);
	}
	iotune_cache_wake(cache);
	return err;
}

static void iotune_deadline_fn(struct tevent_context *ev,
			       struct tevent_timer *te,
			       struct timeval now,
			       void *private_data);

static void iotune_cache_arm_deadline(struct iotune_cache *cache)
{
	uint64_t deadline = iotune_wc_deadline(&cache->wc);
	uint64_t now = iotune_now_ms();
	uint64_t delay;

	if (cache->deadline_timer != NULL || deadline == 0) {
		return;
	}
	delay = deadline > now ? deadline - now : 0;
	cache->deadline_timer = tevent_add_timer(
		cache->proc->ev, cache,
		tevent_timeval_current_ofs(delay / 1000,
					   (delay % 1000) * 1000),
		iotune_deadline_fn, cache);
}

static void iotune_deadline_fn(struct tevent_context *ev,
			       struct tevent_timer *te,
			       struct timeval now,
			       void *private_data)
{
	struct iotune_cache *cache = private_data;
	enum iotune_flush_reason reason;

	cache->deadline_timer = NULL;
	if (iotune_wc_wants_flush(&cache->wc, iotune_now_ms(), &reason)) {
		iotune_cache_start_flush(cache, reason);
	}
	iotune_cache_arm_deadline(cache);
	iotune_cache_maybe_release(cache);
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

static void iotune_cache_destroy(struct iotune_cache *cache)
{
	struct iotune_process *p = cache->proc;

	SMB_ASSERT(cache->flush_subreq == NULL);
	SMB_ASSERT(cache->waiters == NULL);
	while (cache->files != NULL) {
		iotune_cache_detach(cache->files);
	}
	DLIST_REMOVE(p->caches, cache);
	p->num_caches--;
	cache->share->stats.wc.caches_active--;
	iotune_wc_destroy(&cache->wc);
	TALLOC_FREE(cache);
}

/* Frees a cache that has nothing more to do. */
static void iotune_cache_maybe_release(struct iotune_cache *cache)
{
	if (cache->flush_subreq != NULL || cache->waiters != NULL ||
	    cache->wc.bypass_in_flight > 0 ||
	    iotune_wc_is_dirty(&cache->wc) || cache->wc.error != 0) {
		return;
	}
	if (cache->disabled || cache->files == NULL ||
	    cache->deadline_timer == NULL) {
		iotune_cache_destroy(cache);
	}
}

/*
 * Ends a cache whose last handle goes: smbd waits for a handle's async
 * requests before closing it, so waiters are not expected here; any that
 * are left fail rather than wait forever.
 */
static void iotune_cache_end(struct iotune_cache *cache)
{
	while (cache->waiters != NULL) {
		struct iotune_waiter *w = cache->waiters;

		iotune_waiter_remove(w);
		tevent_req_error(w->req, EBADF);
	}
	cache->disabled = true;
	iotune_cache_destroy(cache);
}

static struct iotune_cache *iotune_cache_create(struct iotune_share *share,
						struct iotune_file *file)
{
	struct iotune_process *p = share->proc;
	struct iotune_cache *cache = NULL;
	SMB_STRUCT_STAT st;
	int ret;

	if (p->num_caches >= share->config.write_cache_max_files) {
		share->stats.wc.caches_refused++;
		DBG_INFO("share '%s': %u write caches active, '%s' is not "
			 "cached\n", share->name, p->num_caches,
			 fsp_str_dbg(file->fsp));
		return NULL;
	}
	ret = SMB_VFS_NEXT_FSTAT(file->handle, file->fsp, &st);
	if (ret != 0) {
		return NULL;
	}
	cache = talloc_zero(p, struct iotune_cache);
	if (cache == NULL) {
		return NULL;
	}
	cache->wake_im = tevent_create_immediate(cache);
	if (cache->wake_im == NULL) {
		TALLOC_FREE(cache);
		return NULL;
	}
	ret = iotune_wc_init(&cache->wc, share->config.write_cache_size,
			     share->config.write_cache_flush_timeout_ms,
			     (uint64_t)st.st_ex_size, &share->stats.wc);
	if (ret != 0) {
		TALLOC_FREE(cache);
		return NULL;
	}
	cache->proc = p;
	cache->share = share;
	cache->id = file->fsp->file_id;
	cache->gen = ++p->next_cache_gen;
	DLIST_ADD(p->caches, cache);
	p->num_caches++;
	share->stats.wc.caches_active++;
	return cache;
}

/*
 * The cache a write of this handle goes to: NULL when it must go to disk
 * directly.
 */
static struct iotune_cache *iotune_cache_for_write(struct iotune_share *share,
						   struct iotune_file *file,
						   struct files_struct *fsp)
{
	struct iotune_cache *cache = iotune_cache_of(fsp);
	bool may = iotune_fsp_may_cache(share, file, fsp);

	DBG_DEBUG("'%s': oplock %d, break sent %d, may cache %d, cache %p\n",
		  fsp_str_dbg(fsp), fsp->oplock_type, fsp->sent_oplock_break,
		  may, cache);

	if (cache != NULL) {
		if (!may) {
			cache->disabled = true;
		} else if (file->cache == NULL && !cache->disabled) {
			DLIST_ADD_END(cache->files, file);
			file->cache = cache;
		}
		return cache;
	}
	if (!may) {
		return NULL;
	}
	cache = iotune_cache_create(share, file);
	if (cache != NULL) {
		DLIST_ADD_END(cache->files, file);
		file->cache = cache;
	}
	return cache;
}

/*
 * At BEFORE_WAIT: write out every cache whose handles lost, or are losing,
 * their oplock or lease, before smbd can read the client's ack.
 */
static void iotune_check_breaks(struct iotune_process *p)
{
	struct iotune_cache *cache = NULL;
	struct iotune_cache *next = NULL;

	for (cache = p->caches; cache != NULL; cache = next) {
		next = cache->next;
		if (cache->break_flushed || iotune_cache_may_continue(cache)) {
			continue;
		}
		/* once: a failing disk must not be retried every iteration */
		cache->break_flushed = true;
		cache->disabled = true;
		if (iotune_wc_is_dirty(&cache->wc) ||
		    cache->flush_subreq != NULL) {
			DBG_DEBUG("share '%s': '%s' may no longer cache\n",
				  cache->share->name,
				  cache->files != NULL ?
				  fsp_str_dbg(cache->files->fsp) : "?");
			(void)iotune_cache_flush_now(cache,
						     IOTUNE_FLUSH_BREAK);
		}
		if (cache->waiters != NULL) {
			iotune_poke_main_loop(p);
			continue;
		}
		iotune_cache_maybe_release(cache);
	}
}

static void iotune_trace_callback(enum tevent_trace_point point,
				  void *private_data)
{
	struct iotune_process *p = private_data;

	if (point == TEVENT_TRACE_BEFORE_WAIT && p->caches != NULL) {
		iotune_check_breaks(p);
	}
	if (p->prev_trace_cb != NULL) {
		p->prev_trace_cb(point, p->prev_trace_private);
	}
}

/* Runs completions that flush_ev has ready, without blocking. */
static void iotune_poll_marker(struct tevent_context *ev,
			       struct tevent_timer *te,
			       struct timeval now,
			       void *private_data)
{
	bool *fired = private_data;

	*fired = true;
}

static void iotune_poll_flush_ev(struct iotune_process *p)
{
	bool fired = false;
	struct tevent_timer *te = NULL;

	te = tevent_add_timer(p->flush_ev, p, tevent_timeval_zero(),
			      iotune_poll_marker, &fired);
	if (te == NULL) {
		return;
	}
	while (!fired) {
		if (tevent_loop_once(p->flush_ev) != 0) {
			TALLOC_FREE(te);
			break;
		}
	}
}

static void iotune_poll_timer_fn(struct tevent_context *ev,
				 struct tevent_timer *te,
				 struct timeval now,
				 void *private_data)
{
	struct iotune_process *p = private_data;

	p->poll_timer = NULL;
	iotune_poll_flush_ev(p);
	iotune_poll_timer_arm(p);
}

static void iotune_poll_timer_arm(struct iotune_process *p)
{
	if (p->poll_timer != NULL || p->flushes_in_flight == 0) {
		return;
	}
	p->poll_timer = tevent_add_timer(p->ev, p,
					 tevent_timeval_current_ofs(0, 1000),
					 iotune_poll_timer_fn, p);
}


/*
 * Counters are published per tree connect in a TDB in smbd's lock
 * directory, at most once a second and at disconnect, as text records:
 *   live:<pid>:<serial>:<share>   a connection's counters
 *   total:<share>                 counters of connections that ended
 * A connection that ends adds its counters to the total and deletes its
 * own record in one transaction: nothing is lost or counted twice.  The
 * record of a process that died stays and is still summed.
 */
#define IOTUNE_STATS_TDB "iotune_stats.tdb"

static bool iotune_stats_open(struct iotune_process *p)
{
	char *path = NULL;

	if (p->stats_tdb != NULL) {
		return true;
	}
	if (p->stats_tdb_failed) {
		return false;
	}
	path = lock_path(talloc_tos(), IOTUNE_STATS_TDB);
	if (path == NULL) {
		return false;
	}
	p->stats_tdb = tdb_open(path, 0, TDB_DEFAULT, O_RDWR | O_CREAT, 0644);
	if (p->stats_tdb == NULL) {
		DBG_WARNING("cannot open %s: %s; iotune counters of this "
			    "process are not published\n", path,
			    strerror(errno));
		p->stats_tdb_failed = true;
	}
	TALLOC_FREE(path);
	return p->stats_tdb != NULL;
}

static TDB_DATA iotune_text_key(const char *key)
{
	return (TDB_DATA) {
		.dptr = discard_const_p(uint8_t, key),
		.dsize = strlen(key),
	};
}

static char *iotune_share_key(TALLOC_CTX *mem_ctx,
			      const struct iotune_share *share)
{
	return talloc_asprintf(mem_ctx, "live:%d:%u:%s", (int)getpid(),
			       share->serial, share->name);
}

static int iotune_stats_store(struct tdb_context *tdb, const char *key,
			      const struct iotune_stats *stats)
{
	size_t len = iotune_stats_format(stats, NULL, 0);
	char *buf = talloc_array(talloc_tos(), char, len + 1);
	int ret;

	if (buf == NULL) {
		return -1;
	}
	iotune_stats_format(stats, buf, len + 1);
	ret = tdb_store(tdb, iotune_text_key(key),
			(TDB_DATA) { .dptr = (uint8_t *)buf, .dsize = len },
			TDB_REPLACE);
	TALLOC_FREE(buf);
	return ret;
}

static void iotune_share_publish(struct iotune_share *share)
{
	struct iotune_process *p = share->proc;
	char *key = NULL;

	if (!share->config.stats || !iotune_stats_open(p)) {
		return;
	}
	key = iotune_share_key(talloc_tos(), share);
	if (key != NULL &&
	    iotune_stats_store(p->stats_tdb, key, &share->stats) == 0) {
		share->published = share->stats;
	}
	TALLOC_FREE(key);
}

/* At disconnect: the connection's counters go into the share's total. */
static void iotune_share_retire(struct iotune_share *share)
{
	struct iotune_process *p = share->proc;
	struct iotune_stats total = { 0 };
	char *key = NULL;
	char *total_key = NULL;
	TDB_DATA old;

	if (!share->config.stats || !iotune_stats_open(p)) {
		return;
	}
	key = iotune_share_key(talloc_tos(), share);
	total_key = talloc_asprintf(talloc_tos(), "total:%s", share->name);
	if (key == NULL || total_key == NULL ||
	    tdb_transaction_start(p->stats_tdb) != 0) {
		goto done;
	}
	old = tdb_fetch(p->stats_tdb, iotune_text_key(total_key));
	if (old.dptr != NULL &&
	    iotune_stats_parse((const char *)old.dptr, old.dsize,
			       &total) != 0) {
		DBG_WARNING("bad record '%s' in %s, starting it anew\n",
			    total_key, IOTUNE_STATS_TDB);
		ZERO_STRUCT(total);
	}
	SAFE_FREE(old.dptr);
	iotune_stats_merge(&total, &share->stats);
	if (iotune_stats_store(p->stats_tdb, total_key, &total) != 0) {
		tdb_transaction_cancel(p->stats_tdb);
		goto done;
	}
	tdb_delete(p->stats_tdb, iotune_text_key(key));
	if (tdb_transaction_commit(p->stats_tdb) != 0) {
		DBG_WARNING("cannot commit iotune counters of '%s'\n",
			    share->name);
	}
done:
	TALLOC_FREE(key);
	TALLOC_FREE(total_key);
}

static void iotune_publish_timer_arm(struct iotune_process *p);

static void iotune_publish_fn(struct tevent_context *ev,
			      struct tevent_timer *te,
			      struct timeval now,
			      void *private_data)
{
	struct iotune_process *p = private_data;
	struct iotune_share *share = NULL;

	p->publish_timer = NULL;
	for (share = p->shares; share != NULL; share = share->next) {
		if (memcmp(&share->stats, &share->published,
			   sizeof(share->stats)) != 0) {
			iotune_share_publish(share);
		}
	}
	iotune_publish_timer_arm(p);
}

static void iotune_publish_timer_arm(struct iotune_process *p)
{
	if (p->publish_timer != NULL || p->shares == NULL) {
		return;
	}
	p->publish_timer = tevent_add_timer(p->ev, p,
					    tevent_timeval_current_ofs(1, 0),
					    iotune_publish_fn, p);
}

static void iotune_reset_counters(struct iotune_process *p)
{
	struct iotune_share *share = NULL;

	for (share = p->shares; share != NULL; share = share->next) {
		uint64_t active = share->stats.wc.caches_active;

		ZERO_STRUCT(share->stats);
		share->stats.wc.caches_active = active;
		iotune_share_publish(share);
	}
}

/*
 * "smbcontrol smbd profile off|count|on|flush" (MSG_PROFILE) goes to one
 * handler only, the one registered last: ours, which passes it on to
 * smbd's set_profile_level() and then switches iotune's counting the same
 * way (flush resets the counters of this process).
 */
static void iotune_profile_message(struct messaging_context *msg_ctx,
				   void *private_data,
				   uint32_t msg_type,
				   struct server_id src,
				   DATA_BLOB *data)
{
	struct iotune_process *p = private_data;
	int level;

	if (data->length != sizeof(level)) {
		DBG_WARNING("got an invalid profile message\n");
		return;
	}
	memcpy(&level, data->data, sizeof(level));
	set_profile_level(level, &src);
	switch (level) {
	case 0:
		p->counting = false;
		break;
	case 1:
	case 2:
		p->counting = true;
		break;
	case 3:
		iotune_reset_counters(p);
		break;
	}
	DBG_NOTICE("profile level %d: iotune counters %s\n", level,
		   level == 3 ? "reset" : p->counting ? "on" : "off");
}

static int iotune_process_destructor(struct iotune_process *p)
{
	tevent_trace_callback_t cb = NULL;
	void *private_data = NULL;

	tevent_get_trace_callback(p->ev, &cb, &private_data);
	if (cb == iotune_trace_callback && private_data == p) {
		tevent_set_trace_callback(p->ev, p->prev_trace_cb,
					  p->prev_trace_private);
	}
	if (p->msg_ctx != NULL) {
		messaging_deregister(p->msg_ctx, MSG_PROFILE, p);
	}
	if (p->stats_tdb != NULL) {
		tdb_close(p->stats_tdb);
		p->stats_tdb = NULL;
	}
	if (iotune_proc == p) {
		iotune_proc = NULL;
	}
	return 0;
}

static struct iotune_process *iotune_process_get(
	struct tevent_context *ev,
	struct messaging_context *msg_ctx)
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
	p->ev = ev;
	p->flush_ev = samba_tevent_context_init(p);
	p->poke_im = tevent_create_immediate(p);
	p->tctx = tevent_threaded_context_create(p, ev);
	if (p->flush_ev == NULL || p->poke_im == NULL || p->tctx == NULL) {
		TALLOC_FREE(p);
		return NULL;
	}
	tevent_get_trace_callback(ev, &p->prev_trace_cb,
				  &p->prev_trace_private);
	tevent_set_trace_callback(ev, iotune_trace_callback, p);
	talloc_set_destructor(p, iotune_process_destructor);
	p->counting = true;
	if (NT_STATUS_IS_OK(messaging_register(msg_ctx, p, MSG_PROFILE,
					       iotune_profile_message))) {
		p->msg_ctx = msg_ctx;
	}
	p->connections = 1;
	iotune_proc = p;
	return p;
}

static void iotune_process_put(struct iotune_process *p)
{
	if (--p->connections > 0) {
		return;
	}
	SMB_ASSERT(p->caches == NULL);
	TALLOC_FREE(p);
}

/* Modules that complete async I/O on their own tevent context */
static const char *iotune_incompatible_below[] = { "io_uring", NULL };

static const char *iotune_incompatible_module(int snum)
{
	const char **objects = lp_vfs_objects(snum);
	bool below = false;
	size_t i;
	size_t j;

	for (i = 0; objects != NULL && objects[i] != NULL; i++) {
		if (strequal(objects[i], IOTUNE_MODULE_NAME)) {
			below = true;
			continue;
		}
		for (j = 0; below && iotune_incompatible_below[j] != NULL;
		     j++) {
			if (strequal(objects[i], iotune_incompatible_below[j])) {
				return objects[i];
			}
		}
	}
	return NULL;
}

static int iotune_share_destructor(struct iotune_share *share)
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
	iotune_share_retire(share);
	DLIST_REMOVE(share->proc->shares, share);
	iotune_process_put(share->proc);
	return 0;
}


/*
 * Read-ahead and drop-behind.  readahead(2) and posix_fadvise(WILLNEED or
 * DONTNEED) may block while they submit I/O, so they run in smbd's thread
 * pool, on a dup() of the file descriptor (the file may be closed before
 * the job runs).
 */
struct iotune_ra_job {
	int fd;
	off_t off;
	off_t len;
	bool drop;
};

static void iotune_ra_job_run(void *private_data)
{
	struct iotune_ra_job *job = private_data;

	if (job->drop) {
		(void)posix_fadvise(job->fd, job->off, job->len,
				    POSIX_FADV_DONTNEED);
		return;
	}
	if (readahead(job->fd, job->off, (size_t)job->len) != 0) {
		(void)posix_fadvise(job->fd, job->off, job->len,
				    POSIX_FADV_WILLNEED);
	}
}

static void iotune_ra_job_done(struct tevent_req *req)
{
	struct iotune_ra_job *job = tevent_req_callback_data(
		req, struct iotune_ra_job);

	(void)pthreadpool_tevent_job_recv(req);
	close(job->fd);
	TALLOC_FREE(job);	/* and req, its child */
}

static void iotune_ra_submit(struct vfs_handle_struct *handle,
			     struct files_struct *fsp,
			     uint64_t off,
			     uint64_t len,
			     bool drop)
{
	struct iotune_ra_job *job = NULL;
	struct tevent_req *req = NULL;

	/* on no parent: a job outlives the connection that asked for it */
	job = talloc(NULL, struct iotune_ra_job);
	if (job == NULL) {
		return;
	}
	*job = (struct iotune_ra_job) {
		.fd = dup(fsp_get_io_fd(fsp)),
		.off = (off_t)off,
		.len = (off_t)len,
		.drop = drop,
	};
	if (job->fd == -1) {
		TALLOC_FREE(job);
		return;
	}
	req = pthreadpool_tevent_job_send(job, handle->conn->sconn->ev_ctx,
					  handle->conn->sconn->pool,
					  iotune_ra_job_run, job);
	if (req == NULL) {
		close(job->fd);
		TALLOC_FREE(job);
		return;
	}
	tevent_req_set_callback(req, iotune_ra_job_done, job);
}

/* A read of n bytes at off arrives: prefetch ahead, drop behind. */
static void iotune_ra_on_read(struct vfs_handle_struct *handle,
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
	share->proc->ra_budget.limit = share->config.readahead_budget;
	iotune_ra_read(&share->ra_config, &file->ra, &share->proc->ra_budget,
		       &share->stats.ra, (uint64_t)off, n, &act);
	if (act.prefetch_len > 0) {
		iotune_ra_submit(handle, fsp, act.prefetch_off,
				 act.prefetch_len, false);
	}
	if (act.drop_len > 0) {
		iotune_ra_submit(handle, fsp, act.drop_off, act.drop_len,
				 true);
	}
}

/*
 * The handle closes: drop what the readers left, free the budget.  This
 * drop is done here, in the synchronous close: smbd may exit right after
 * the close, before a job of its thread pool would run.
 */
static void iotune_ra_on_close(struct vfs_handle_struct *handle,
			       struct files_struct *fsp,
			       struct iotune_file *file)
{
	struct iotune_share *share = iotune_share_of(handle);
	struct iotune_ra_action act;
	size_t i;

	for (i = 0; i < IOTUNE_RA_STREAMS; i++) {
		if (iotune_ra_drop_rest(&share->ra_config, &file->ra, i,
					&share->stats.ra, &act)) {
			(void)posix_fadvise(fsp_get_io_fd(fsp),
					    (off_t)act.drop_off,
					    (off_t)act.drop_len,
					    POSIX_FADV_DONTNEED);
		}
	}
	iotune_ra_close(&file->ra, &share->proc->ra_budget);
}

/*
 * The advice for a new open: the share's fadvise option, else what the
 * read-ahead mode needs (off and adaptive switch Linux's own read-ahead
 * off with RANDOM), else the client's hint.
 */
static int iotune_open_advice(const struct iotune_share *share,
			      enum iotune_ra_hint hint)
{
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
	if (share->config.readahead == IOTUNE_RA_OFF ||
	    share->config.readahead == IOTUNE_RA_ADAPTIVE) {
		return POSIX_FADV_RANDOM;
	}
	if (hint == IOTUNE_RA_HINT_SEQUENTIAL) {
		return POSIX_FADV_SEQUENTIAL;
	}
	if (hint == IOTUNE_RA_HINT_RANDOM) {
		return POSIX_FADV_RANDOM;
	}
	return -1;
}

static void iotune_apply_advice(struct iotune_share *share, int fd,
				enum iotune_ra_hint hint)
{
	int advice = iotune_open_advice(share, hint);

	if (advice == -1 || fd == -1) {
		return;
	}
	/* these advices only set flags on the open file: they never block */
	if (posix_fadvise(fd, 0, 0, advice) == 0) {
		share->stats.fadvise_calls++;
	}
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

	ret = iotune_config_load(&share->config, iotune_lookup_option, &snum,
				 errbuf, sizeof(errbuf));
	if (ret != 0) {
		DBG_ERR("share '%s': %s; refusing the tree connect\n",
			service, errbuf);
		TALLOC_FREE(share);
		errno = EINVAL;
		return -1;
	}
	bad_module = iotune_incompatible_module(snum);
	if (bad_module != NULL) {
		DBG_ERR("share '%s': 'vfs objects' lists '%s' after iotune; "
			"iotune must be below it or it must go; refusing the "
			"tree connect\n", service, bad_module);
		TALLOC_FREE(share);
		errno = EINVAL;
		return -1;
	}

	share->proc = iotune_process_get(handle->conn->sconn->ev_ctx,
					 handle->conn->sconn->msg_ctx);
	if (share->proc == NULL) {
		TALLOC_FREE(share);
		errno = ENOMEM;
		return -1;
	}
	share->name = lp_const_servicename(snum);
	share->sync_always = lp_sync_always(snum);
	share->ra_config = (struct iotune_ra_config) {
		.mode = (enum iotune_ra_mode)share->config.readahead,
		.fixed_offset = share->config.readahead_offset,
		.fixed_size = share->config.readahead_size,
		.initial_window = MIN(128 * 1024,
				      share->config.readahead_max),
		.max_window = share->config.readahead_max,
		.drop_behind = share->config.drop_behind,
	};
	share->ra_active = share->config.drop_behind ||
			   share->config.readahead == IOTUNE_RA_FIXED ||
			   share->config.readahead == IOTUNE_RA_ADAPTIVE;
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
	struct iotune_cache *cache = file->cache;

	if (cache != NULL && cache->files == file && file->next == NULL) {
		/* the last handle goes without our close: save what we can */
		(void)iotune_cache_flush_now(cache, IOTUNE_FLUSH_CLOSE);
		iotune_cache_end(cache);
	} else if (cache != NULL) {
		iotune_cache_detach(file);
	}
	iotune_dio_close(file);
}

static int iotune_openat(struct vfs_handle_struct *handle,
			 const struct files_struct *dirfsp,
			 const struct smb_filename *smb_fname,
			 struct files_struct *fsp,
			 const struct vfs_open_how *how)
{
	struct iotune_file *file = NULL;
	struct iotune_share *share = NULL;
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
			.handle = handle, .fsp = fsp, .direct_fd = -1,
		};
	}
	file->fd = fd;
	file->write_through = (how->flags & (O_SYNC | O_DSYNC)) != 0;
	share = iotune_share_of(handle);
	iotune_apply_advice(share, fd, file->ra.hint);
	iotune_dio_close(file);
	if (!fsp_is_alternate_stream(fsp)) {
		iotune_dio_open(share, file, how->flags,
				share->config.direct_io == IOTUNE_DIRECT_READS ||
				share->config.direct_io == IOTUNE_DIRECT_BOTH,
				share->config.direct_io == IOTUNE_DIRECT_WRITES ||
				share->config.direct_io == IOTUNE_DIRECT_BOTH);
	}
	return fd;
}

/* The client's access pattern hints live only in the create options. */
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
	struct iotune_file *file = NULL;
	NTSTATUS status;

	status = SMB_VFS_NEXT_CREATE_FILE(handle, req, dirfsp, smb_fname,
					  access_mask, share_access,
					  create_disposition, create_options,
					  file_attributes, oplock_request,
					  lease, allocation_size, private_flags,
					  sd, ea_list, result, pinfo, in_blobs,
					  out_blobs);
	if (!NT_STATUS_IS_OK(status) || *result == NULL) {
		return status;
	}
	file = iotune_file_of(handle, *result);
	if (file == NULL) {
		return status;
	}
	if (create_options & FILE_RANDOM_ACCESS) {
		file->ra.hint = IOTUNE_RA_HINT_RANDOM;
	} else if (create_options & FILE_SEQUENTIAL_ONLY) {
		file->ra.hint = IOTUNE_RA_HINT_SEQUENTIAL;
	}
	if (file->ra.hint != IOTUNE_RA_HINT_NONE) {
		iotune_apply_advice(iotune_share_of(handle), file->fd,
				    file->ra.hint);
	}
	if ((create_options & FILE_NO_INTERMEDIATE_BUFFERING) &&
	    iotune_share_of(handle)->config.direct_io ==
	    IOTUNE_DIRECT_CLIENT && !fsp_is_alternate_stream(*result)) {
		iotune_dio_open(iotune_share_of(handle), file,
				(*result)->fsp_flags.can_write ? O_RDWR
							       : O_RDONLY,
				true, true);
	}
	return status;
}

/*
 * The last handle of a cache that closes writes it out; another one
 * closing only leaves (its data is in the cache, which stays).
 */
static int iotune_close(struct vfs_handle_struct *handle,
			struct files_struct *fsp)
{
	struct iotune_file *file = iotune_file_of(handle, fsp);
	struct iotune_cache *cache = NULL;
	int err = 0;
	int ret;

	if (file == NULL || file->fd != fsp_get_pathref_fd(fsp)) {
		return SMB_VFS_NEXT_CLOSE(handle, fsp);
	}
	iotune_ra_on_close(handle, fsp, file);
	cache = file->cache;
	if (cache != NULL) {
		err = iotune_cache_flush_now(cache, IOTUNE_FLUSH_CLOSE);
		iotune_cache_detach(file);
		if (cache->files == NULL) {
			iotune_cache_end(cache);
		}
	}
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

/*
 * Before a call that works on the file directly (size changes, sendfile,
 * sync I/O, server-side copy): write everything out and wait for it.
 */
static int iotune_flush_for(struct files_struct *fsp,
			    enum iotune_flush_reason reason)
{
	struct iotune_cache *cache = iotune_cache_of(fsp);

	if (cache == NULL) {
		return 0;
	}
	return iotune_cache_flush_now(cache, reason);
}

/*
 * Waits, in FIFO order with the writes, until the cache holds no data
 * written before it; then calls then() with 0 or the flush error.
 */
struct iotune_barrier {
	struct iotune_waiter waiter;
	enum iotune_flush_reason reason;
	void (*then)(struct tevent_req *req, int err);
};

static bool iotune_barrier_step(struct iotune_waiter *w)
{
	struct iotune_barrier *b = talloc_get_type_abort(
		w, struct iotune_barrier);
	struct iotune_cache *cache = w->cache;
	struct tevent_req *req = w->req;
	int err;

	if (cache->flush_subreq != NULL) {
		return false;
	}
	if (cache->wc.error == 0 && iotune_wc_is_dirty(&cache->wc)) {
		/* false: behind a bypass write in flight, which wakes us */
		iotune_cache_start_flush(cache, b->reason);
		if (cache->wc.error == 0) {
			return false;
		}
	}
	err = iotune_wc_take_error(&cache->wc);
	iotune_waiter_remove(w);
	b->then(req, err);
	return true;
}

static bool iotune_barrier_add(struct tevent_req *req,
			       struct iotune_cache *cache,
			       enum iotune_flush_reason reason,
			       void (*then)(struct tevent_req *req, int err))
{
	struct iotune_barrier *b = talloc(req, struct iotune_barrier);

	if (b == NULL) {
		return false;
	}
	b->reason = reason;
	b->then = then;
	iotune_waiter_add(cache, &b->waiter, req, iotune_barrier_step);
	talloc_set_name_const(b, "struct iotune_barrier");
	iotune_cache_wake(cache);
	return true;
}

/* The result every async I/O request of ours carries */
struct iotune_aio_result {
	ssize_t ret;
	struct vfs_aio_state vfs_aio_state;
};

static ssize_t iotune_aio_recv(struct tevent_req *req,
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

/*
 * Continues with next(req, 0) at once when the file has no cache, else
 * once the data written before this call is on disk.  Returns req, posted
 * when it is already over.
 */
static struct tevent_req *iotune_after_flush(
	struct tevent_req *req,
	struct tevent_context *ev,
	struct files_struct *fsp,
	enum iotune_flush_reason reason,
	void (*next)(struct tevent_req *req, int err))
{
	struct iotune_cache *cache = iotune_cache_of(fsp);

	if (cache == NULL) {
		next(req, 0);
		if (!tevent_req_is_in_progress(req)) {
			return tevent_req_post(req, ev);
		}
		return req;
	}
	if (!iotune_barrier_add(req, cache, reason, next)) {
		tevent_req_error(req, ENOMEM);
		return tevent_req_post(req, ev);
	}
	return req;
}

/* Writes: absorbed by the cache, or sent to disk past it. */

struct iotune_pwrite_state {
	struct tevent_context *ev;
	struct vfs_handle_struct *handle;
	struct files_struct *fsp;
	struct iotune_share *share;
	const void *data;
	size_t n;
	off_t offset;
	uint64_t cache_gen;
	uint64_t started_us;
	bool dio;
	struct iotune_waiter *waiter;
	struct iotune_aio_result result;
};

static void iotune_pwrite_count(struct tevent_req *req)
{
	struct iotune_pwrite_state *state = tevent_req_data(
		req, struct iotune_pwrite_state);

	iotune_count_io(state->share, true, state->result.ret,
			state->started_us);
}

enum iotune_step {
	IOTUNE_STEP_DONE,
	IOTUNE_STEP_FAILED,
	IOTUNE_STEP_DISPATCHED,
	IOTUNE_STEP_WAIT,
};

static void iotune_pwrite_disk_done(struct tevent_req *subreq);

static bool iotune_pwrite_to_disk(struct tevent_req *req,
				  struct iotune_cache *cache)
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
	if (cache != NULL) {
		state->cache_gen = cache->gen;
		iotune_wc_bypass_start(&cache->wc, (uint64_t)state->offset,
				       state->n);
	}
	return true;
}

static void iotune_pwrite_disk_done(struct tevent_req *subreq)
{
	struct tevent_req *req = tevent_req_callback_data(
		subreq, struct tevent_req);
	struct iotune_pwrite_state *state = tevent_req_data(
		req, struct iotune_pwrite_state);
	struct iotune_cache *cache = NULL;

	state->result.ret = iotune_disk_recv(subreq, state->dio, true,
					     &state->result.vfs_aio_state);
	TALLOC_FREE(subreq);
	iotune_pwrite_count(req);
	cache = iotune_cache_of(state->fsp);
	if (cache != NULL && state->cache_gen == cache->gen) {
		iotune_wc_bypass_done(&cache->wc, (uint64_t)state->offset,
				      state->n, state->result.ret);
		iotune_cache_wake(cache);
	}
	tevent_req_done(req);
}

static void iotune_after_absorb(struct iotune_cache *cache)
{
	enum iotune_flush_reason reason;

	if (cache->flush_subreq == NULL &&
	    iotune_wc_wants_flush(&cache->wc, iotune_now_ms(), &reason)) {
		iotune_cache_start_flush(cache, reason);
	}
	iotune_cache_arm_deadline(cache);
}

static enum iotune_step iotune_pwrite_step(struct tevent_req *req,
					   struct iotune_cache *cache,
					   int *err)
{
	struct iotune_pwrite_state *state = tevent_req_data(
		req, struct iotune_pwrite_state);
	enum iotune_flush_reason reason = IOTUNE_FLUSH_NONCONTIG;
	enum iotune_wc_verdict v;
	int tries;

	for (tries = 0; tries < 3; tries++) {
		if (cache->disabled) {
			/* to disk, after everything cached before it */
			reason = IOTUNE_FLUSH_BREAK;
			if (cache->wc.error != 0) {
				*err = iotune_wc_take_error(&cache->wc);
				v = IOTUNE_WC_ERROR;
			} else if (iotune_wc_is_dirty(&cache->wc)) {
				v = IOTUNE_WC_FLUSH_FIRST;
			} else {
				state->share->stats.wc.writes_total++;
				state->share->stats.wc.writes_bypassed++;
				v = IOTUNE_WC_BYPASS;
			}
		} else {
			v = iotune_wc_write(&cache->wc,
					    (uint64_t)state->offset,
					    state->data, state->n,
					    iotune_now_ms(), &reason, err);
		}
		switch (v) {
		case IOTUNE_WC_ABSORBED:
			state->result.ret = (ssize_t)state->n;
			iotune_after_absorb(cache);
			return IOTUNE_STEP_DONE;
		case IOTUNE_WC_ERROR:
			return IOTUNE_STEP_FAILED;
		case IOTUNE_WC_BYPASS:
			if (!iotune_pwrite_to_disk(req, cache)) {
				*err = ENOMEM;
				return IOTUNE_STEP_FAILED;
			}
			return IOTUNE_STEP_DISPATCHED;
		case IOTUNE_WC_FLUSH_FIRST:
			if (cache->flush_subreq != NULL ||
			    !iotune_cache_start_flush(cache, reason)) {
				if (cache->wc.error != 0) {
					continue;
				}
				return IOTUNE_STEP_WAIT;
			}
			continue;
		}
	}
	return IOTUNE_STEP_WAIT;
}

static bool iotune_pwrite_waiter_step(struct iotune_waiter *w)
{
	struct tevent_req *req = w->req;
	int err = 0;

	switch (iotune_pwrite_step(req, w->cache, &err)) {
	case IOTUNE_STEP_WAIT:
		return false;
	case IOTUNE_STEP_DONE:
		iotune_waiter_remove(w);
		iotune_pwrite_count(req);
		tevent_req_done(req);
		return true;
	case IOTUNE_STEP_FAILED:
		iotune_waiter_remove(w);
		iotune_pwrite_count(req);
		tevent_req_error(req, err);
		return true;
	case IOTUNE_STEP_DISPATCHED:
		iotune_waiter_remove(w);
		return true;
	}
	return false;
}

static bool iotune_pwrite_wait(struct tevent_req *req,
			       struct iotune_cache *cache)
{
	struct iotune_pwrite_state *state = tevent_req_data(
		req, struct iotune_pwrite_state);

	state->waiter = talloc(state, struct iotune_waiter);
	if (state->waiter == NULL) {
		return false;
	}
	iotune_waiter_add(cache, state->waiter, req,
			  iotune_pwrite_waiter_step);
	return true;
}

static struct tevent_req *iotune_pwrite_send(struct vfs_handle_struct *handle,
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
	struct iotune_file *file = iotune_file_of(handle, fsp);
	struct iotune_cache *cache = NULL;
	int err = 0;

	req = tevent_req_create(mem_ctx, &state, struct iotune_pwrite_state);
	if (req == NULL) {
		return NULL;
	}
	*state = (struct iotune_pwrite_state) {
		.ev = ev, .handle = handle, .fsp = fsp, .share = share,
		.data = data, .n = n, .offset = offset,
		.started_us = iotune_now_us(),
	};

	if (file != NULL && offset >= 0) {
		cache = iotune_cache_for_write(share, file, fsp);
	}
	if (cache == NULL) {
		share->stats.wc.writes_total++;
		share->stats.wc.writes_bypassed++;
		if (!iotune_pwrite_to_disk(req, NULL)) {
			tevent_req_error(req, ENOMEM);
			return tevent_req_post(req, ev);
		}
		return req;
	}
	if (cache->waiters != NULL) {
		if (!iotune_pwrite_wait(req, cache)) {
			tevent_req_error(req, ENOMEM);
			return tevent_req_post(req, ev);
		}
		return req;
	}
	switch (iotune_pwrite_step(req, cache, &err)) {
	case IOTUNE_STEP_DONE:
		iotune_pwrite_count(req);
		tevent_req_done(req);
		return tevent_req_post(req, ev);
	case IOTUNE_STEP_FAILED:
		iotune_pwrite_count(req);
		tevent_req_error(req, err);
		return tevent_req_post(req, ev);
	case IOTUNE_STEP_DISPATCHED:
		return req;
	case IOTUNE_STEP_WAIT:
		break;
	}
	if (!iotune_pwrite_wait(req, cache)) {
		tevent_req_error(req, ENOMEM);
		return tevent_req_post(req, ev);
	}
	return req;
}

static ssize_t iotune_pwrite_recv(struct tevent_req *req,
				  struct vfs_aio_state *vfs_aio_state)
{
	struct iotune_pwrite_state *state = tevent_req_data(
		req, struct iotune_pwrite_state);

	return iotune_aio_recv(req, &state->result, vfs_aio_state);
}

/* The sync write paths write out the cache first, then go to disk. */
static ssize_t iotune_pwrite(struct vfs_handle_struct *handle,
			     struct files_struct *fsp,
			     const void *data,
			     size_t n,
			     off_t offset)
{
	struct iotune_share *share = iotune_share_of(handle);
	struct iotune_cache *cache = NULL;
	uint64_t started = iotune_now_us();
	ssize_t ret;
	int err;

	err = iotune_flush_for(fsp, IOTUNE_FLUSH_SYNC_IO);
	if (err != 0) {
		errno = err;
		return -1;
	}
	share->stats.wc.writes_total++;
	share->stats.wc.writes_bypassed++;
	if (offset >= 0 && iotune_dio_wanted(share, iotune_file_of(handle, fsp),
					     true, n)) {
		ret = iotune_dio_sync(share, iotune_file_of(handle, fsp), true,
				      data, n, (uint64_t)offset);
	} else {
		ret = SMB_VFS_NEXT_PWRITE(handle, fsp, data, n, offset);
	}
	iotune_count_io(share, true, ret, started);
	cache = iotune_cache_of(fsp);
	if (cache != NULL) {
		iotune_wc_note_disk_write(&cache->wc, (uint64_t)offset, ret);
	}
	return ret;
}

static ssize_t iotune_recvfile(struct vfs_handle_struct *handle,
			       int fromfd,
			       struct files_struct *tofsp,
			       off_t offset,
			       size_t n)
{
	struct iotune_cache *cache = NULL;
	ssize_t ret;
	int err;

	err = iotune_flush_for(tofsp, IOTUNE_FLUSH_SYNC_IO);
	if (err != 0) {
		errno = err;
		return -1;
	}
	ret = SMB_VFS_NEXT_RECVFILE(handle, fromfd, tofsp, offset, n);
	cache = iotune_cache_of(tofsp);
	if (cache != NULL) {
		iotune_wc_note_disk_write(&cache->wc, (uint64_t)offset, ret);
	}
	return ret;
}

/* Reads: from memory when all cached, else disk data overlaid. */

static ssize_t iotune_pread(struct vfs_handle_struct *handle,
			    struct files_struct *fsp,
			    void *data,
			    size_t n,
			    off_t offset)
{
	struct iotune_share *share = iotune_share_of(handle);
	struct iotune_cache *cache = iotune_cache_of(fsp);
	uint64_t started = iotune_now_us();
	size_t got;
	ssize_t ret;

	iotune_ra_on_read(handle, fsp, offset, n);
	if (cache != NULL && offset >= 0 &&
	    iotune_wc_read_cached(&cache->wc, (uint64_t)offset, data, n,
				  &got)) {
		ret = (ssize_t)got;
	} else {
		struct iotune_file *file = iotune_file_of(handle, fsp);

		if (offset >= 0 && iotune_dio_wanted(share, file, false, n)) {
			ret = iotune_dio_sync(share, file, false, data, n,
					      (uint64_t)offset);
		} else {
			ret = SMB_VFS_NEXT_PREAD(handle, fsp, data, n, offset);
		}
		if (ret >= 0 && cache != NULL && offset >= 0) {
			ret = (ssize_t)iotune_wc_read_overlay(
				&cache->wc, NULL, (uint64_t)offset, data, n,
				(size_t)ret);
		}
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

static struct tevent_req *iotune_pread_send(struct vfs_handle_struct *handle,
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
	struct iotune_file *file = NULL;
	size_t got;
	int err;

	req = tevent_req_create(mem_ctx, &state, struct iotune_pread_state);
	if (req == NULL) {
		return NULL;
	}
	*state = (struct iotune_pread_state) {
		.share = iotune_share_of(handle), .started_us = iotune_now_us(),
		.fsp = fsp, .data = data, .n = n, .offset = offset,
	};
	talloc_set_destructor(state, iotune_pread_state_destructor);
	iotune_ra_on_read(handle, fsp, offset, n);

	if (cache != NULL && offset >= 0) {
		if (iotune_wc_read_cached(&cache->wc, (uint64_t)offset, data,
					  n, &got)) {
			state->result.ret = (ssize_t)got;
			iotune_count_io(state->share, false, state->result.ret,
					state->started_us);
			tevent_req_done(req);
			return tevent_req_post(req, ev);
		}
		err = iotune_wc_snapshot_take(&cache->wc, (uint64_t)offset, n,
					      &state->snap);
		if (err != 0) {
			tevent_req_error(req, err);
			return tevent_req_post(req, ev);
		}
	}

	file = iotune_file_of(handle, fsp);
	state->dio = offset >= 0 &&
		     iotune_dio_wanted(state->share, file, false, n);
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

	state->result.ret = iotune_disk_recv(subreq, state->dio, false,
					     &state->result.vfs_aio_state);
	TALLOC_FREE(subreq);
	if (state->result.ret >= 0 && state->offset >= 0) {
		cache = iotune_cache_of(state->fsp);
		if (cache != NULL || state->snap != NULL) {
			state->result.ret = (ssize_t)iotune_wc_read_overlay(
				cache != NULL ? &cache->wc : NULL,
				state->snap, (uint64_t)state->offset,
				state->data, state->n, (size_t)state->result.ret);
		}
	}
	iotune_count_io(state->share, false, state->result.ret,
			state->started_us);
	tevent_req_done(req);
}

static ssize_t iotune_pread_recv(struct tevent_req *req,
				 struct vfs_aio_state *vfs_aio_state)
{
	struct iotune_pread_state *state = tevent_req_data(
		req, struct iotune_pread_state);

	return iotune_aio_recv(req, &state->result, vfs_aio_state);
}

static ssize_t iotune_sendfile(struct vfs_handle_struct *handle,
			       int tofd,
			       struct files_struct *fromfsp,
			       const DATA_BLOB *hdr,
			       off_t offset,
			       size_t n)
{
	int err = iotune_flush_for(fromfsp, IOTUNE_FLUSH_SENDFILE);

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

static struct tevent_req *iotune_fsync_send(struct vfs_handle_struct *handle,
					    TALLOC_CTX *mem_ctx,
					    struct tevent_context *ev,
					    struct files_struct *fsp)
{
	struct tevent_req *req = NULL;
	struct iotune_fsync_state *state = NULL;

	req = tevent_req_create(mem_ctx, &state, struct iotune_fsync_state);
	if (req == NULL) {
		return NULL;
	}
	*state = (struct iotune_fsync_state) {
		.ev = ev, .handle = handle, .fsp = fsp,
	};
	if (iotune_counting(iotune_share_of(handle))) {
		iotune_share_of(handle)->stats.fsync_ops++;
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

	state->result.ret = SMB_VFS_FSYNC_RECV(subreq, &state->result.vfs_aio_state);
	TALLOC_FREE(subreq);
	tevent_req_done(req);
}

static int iotune_fsync_recv(struct tevent_req *req,
			     struct vfs_aio_state *vfs_aio_state)
{
	struct iotune_fsync_state *state = tevent_req_data(
		req, struct iotune_fsync_state);

	return iotune_aio_recv(req, &state->result, vfs_aio_state);
}

/* Size changes: the cache is written out first. */

static int iotune_ftruncate(struct vfs_handle_struct *handle,
			    struct files_struct *fsp,
			    off_t offset)
{
	struct iotune_cache *cache = NULL;
	int err = iotune_flush_for(fsp, IOTUNE_FLUSH_SIZE_CHANGE);
	int ret;

	if (err != 0) {
		errno = err;
		return -1;
	}
	ret = SMB_VFS_NEXT_FTRUNCATE(handle, fsp, offset);
	cache = iotune_cache_of(fsp);
	if (ret == 0 && cache != NULL && offset >= 0) {
		iotune_wc_set_disk_size(&cache->wc, (uint64_t)offset);
	}
	return ret;
}

static int iotune_fallocate(struct vfs_handle_struct *handle,
			    struct files_struct *fsp,
			    uint32_t mode,
			    off_t offset,
			    off_t len)
{
	struct iotune_cache *cache = NULL;
	int err = iotune_flush_for(fsp, IOTUNE_FLUSH_SIZE_CHANGE);
	int ret;

	if (err != 0) {
		errno = err;
		return -1;
	}
	ret = SMB_VFS_NEXT_FALLOCATE(handle, fsp, mode, offset, len);
	cache = iotune_cache_of(fsp);
	if (ret == 0 && cache != NULL &&
	    !(mode & VFS_FALLOCATE_FL_KEEP_SIZE) && offset >= 0 && len > 0) {
		iotune_wc_note_disk_write(&cache->wc, (uint64_t)offset, len);
	}
	return ret;
}

/* The size a client sees includes data still in the cache. */
static int iotune_fstat(struct vfs_handle_struct *handle,
			struct files_struct *fsp,
			SMB_STRUCT_STAT *sbuf)
{
	struct iotune_cache *cache = NULL;
	uint64_t size;
	int ret;

	ret = SMB_VFS_NEXT_FSTAT(handle, fsp, sbuf);
	if (ret != 0) {
		return ret;
	}
	cache = iotune_cache_of(fsp);
	if (cache == NULL || fsp_is_alternate_stream(fsp)) {
		return 0;
	}
	size = iotune_wc_logical_size(&cache->wc);
	if (size > (uint64_t)sbuf->st_ex_size) {
		sbuf->st_ex_size = (off_t)size;
	}
	return 0;
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
	int err = iotune_flush_for(fsp, IOTUNE_FLUSH_DISCONNECT);

	if (err != 0) {
		return map_nt_error_from_unix(err);
	}
	return SMB_VFS_NEXT_DURABLE_DISCONNECT(handle, fsp, old_cookie,
					       mem_ctx, new_cookie);
}

/* Server-side copy: the source's cache is written out first. */

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

static struct tevent_req *iotune_offload_read_send(
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

static NTSTATUS iotune_offload_read_recv(struct tevent_req *req,
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

static struct tevent_req *iotune_offload_write_send(
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

static NTSTATUS iotune_offload_write_recv(struct vfs_handle_struct *handle,
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
	.fstat_fn = iotune_fstat,
	.sendfile_fn = iotune_sendfile,
	.recvfile_fn = iotune_recvfile,
	.offload_read_send_fn = iotune_offload_read_send,
	.offload_read_recv_fn = iotune_offload_read_recv,
	.offload_write_send_fn = iotune_offload_write_send,
	.offload_write_recv_fn = iotune_offload_write_recv,
	.durable_disconnect_fn = iotune_durable_disconnect,
};

static_decl_vfs;
NTSTATUS vfs_iotune_init(TALLOC_CTX *ctx)
{
	return smb_register_vfs(SMB_VFS_INTERFACE_VERSION, IOTUNE_MODULE_NAME,
				&iotune_fns);
}
