/*
 * iotune: direct I/O glue.  Each regular file on a share with "direct io"
 * gets a second descriptor opened with O_DIRECT; requests of at least
 * "direct io min size" go through it.  The core (modules/dio.c plans,
 * modules/dio_io.c executes over plain descriptors) does the aligned
 * bounce, the buffered head and tail around a direct middle and short
 * results; this file opens the descriptors, runs async requests in
 * smbd's thread pool and counts.  Linux keeps buffered and direct I/O of
 * one file coherent (a direct read writes back dirty cached pages of its
 * range first, a direct write invalidates them).
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
#include "lib/pthreadpool/pthreadpool_tevent.h"

#include "vfs_iotune.h"

#undef DBGC_CLASS
#define DBGC_CLASS DBGC_VFS

bool iotune_dio_wanted(const struct iotune_share *share,
		       const struct iotune_file *file,
		       bool is_write,
		       size_t n)
{
	if (file == NULL || file->dio.fd == -1 || n == 0 ||
	    n < share->config.direct_io_min_size) {
		return false;
	}
	return is_write ? file->dio.writes : file->dio.reads;
}

static void iotune_dio_count(struct iotune_share *share,
			     const struct iotune_dio_io *io)
{
	struct iotune_stats *s = &share->stats;
	uint64_t bytes = io->ret > 0 ? (uint64_t)io->ret : 0;

	if (!iotune_counting(share)) {
		return;
	}
	if (io->is_write) {
		s->dio_writes++;
		s->dio_write_bytes += bytes;
	} else {
		s->dio_reads++;
		s->dio_read_bytes += bytes;
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
		.direct_fd = file->dio.fd,
		.align = file->dio.align,
		.is_write = is_write,
		.buf = discard_const_p(void, buf),
		.len = n,
		.off = off,
	};
}

/* Synchronous direct I/O, for the sync VFS paths */
ssize_t iotune_dio_sync(struct iotune_share *share,
			struct iotune_file *file,
			bool is_write,
			const void *buf,
			size_t n,
			uint64_t off)
{
	struct iotune_dio_io io;

	iotune_dio_setup(&io, file, is_write, buf, n, off);
	iotune_dio_io_run(&io);
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

static void iotune_dio_job(void *private_data)
{
	iotune_dio_io_run(private_data);
}

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
					     iotune_dio_job, &state->io);
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
		iotune_dio_io_run(&state->io);
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
struct tevent_req *iotune_disk_send(TALLOC_CTX *mem_ctx,
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
ssize_t iotune_disk_recv(struct tevent_req *subreq,
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
void iotune_dio_open(struct iotune_share *share,
		     struct iotune_file *file,
		     int flags,
		     bool reads,
		     bool writes)
{
	struct stat st;
	int fd;

	if (file->dio.fd != -1 || share->dio_unsupported ||
	    (!reads && !writes)) {
		return;
	}
	/* directories refuse O_DIRECT: that says nothing of the files */
	if (fstat(file->fd, &st) != 0 || !S_ISREG(st.st_mode)) {
		return;
	}
	fd = iotune_smbd_reopen(file->fd, (flags & O_ACCMODE) | O_DIRECT);
	if (fd == -1) {
		DBG_DEBUG("reopening fd %d with O_DIRECT: %s\n", file->fd,
			  strerror(errno));
		if (iotune_counting(share)) {
			share->stats.dio_fallbacks++;
		}
		if (errno == EINVAL) {
			share->dio_unsupported = true;
			DBG_WARNING("share '%s': the file system refuses "
				    "O_DIRECT; 'iotune:direct io' falls back "
				    "to the page cache\n", share->name);
		}
		return;
	}
	file->dio = (struct iotune_dio_file) {
		.fd = fd,
		.reads = reads,
		.writes = writes,
		.align = iotune_dio_align_probe(fd, "/sys"),
	};
}

void iotune_dio_close(struct iotune_file *file)
{
	if (file->dio.fd != -1) {
		close(file->dio.fd);
		file->dio.fd = -1;
	}
}
