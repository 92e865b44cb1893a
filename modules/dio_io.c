/*
 * iotune - direct I/O execution over plain descriptors (pure core, no
 * Samba): carries out the plans of dio.c with pread/pwrite on a buffered
 * descriptor and its O_DIRECT twin.  Blocking; the adapter runs it in
 * smbd's thread pool (modules/vfs_iotune_dio.c).
 *
 * Bounce buffers (for a client buffer that is not aligned in memory, as
 * smbd's are) are kept for reuse, a few per process: allocating and
 * freeing a megabyte for each request let glibc give the memory back and
 * fault it in again, zeroed, every time.
 *
 * Its loops are not Samba's sys_pread_full()/sys_pwrite_full(): an
 * O_DIRECT read that ends at the end of file returns an unaligned count,
 * and the next read at that unaligned offset would fail; and a short
 * write must report how much it wrote, not -1.
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

#include <errno.h>
#include <pthread.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <unistd.h>

#include "iotune/dio.h"

/* bounce buffers kept for reuse: this many, each of at most this size */
#define BOUNCE_KEEP 4
#define BOUNCE_KEEP_MAX (4 * 1024 * 1024)

struct bounce {
	void *buf;
	size_t len;
};

static pthread_mutex_t bounce_lock = PTHREAD_MUTEX_INITIALIZER;
static struct bounce bounce_kept[BOUNCE_KEEP];

/*
 * Bounce buffers are mapped pages of their own, not malloc()ed: page
 * aligned, and freeing one does not move glibc's dynamic mmap threshold
 * (which made later large allocations of smbd come from a heap that was
 * trimmed and faulted in again at every request).
 */
static void bounce_unmap(struct bounce *b)
{
	if (b->buf != NULL) {
		munmap(b->buf, b->len);
	}
	*b = (struct bounce) { 0 };
}

/* A buffer of at least n bytes aligned to align: a kept one, or new pages */
static void *bounce_get(size_t align, size_t n, struct bounce *b)
{
	size_t page = (size_t)sysconf(_SC_PAGESIZE);
	unsigned i;

	*b = (struct bounce) { 0 };
	if (align > page) {
		errno = EINVAL;		/* never seen: alignment is <= 4096 */
		return NULL;
	}
	pthread_mutex_lock(&bounce_lock);
	for (i = 0; i < BOUNCE_KEEP; i++) {
		struct bounce *k = &bounce_kept[i];

		if (k->buf != NULL && k->len >= n) {
			*b = *k;
			*k = (struct bounce) { 0 };
			pthread_mutex_unlock(&bounce_lock);
			return b->buf;
		}
	}
	pthread_mutex_unlock(&bounce_lock);
	b->len = (n + page - 1) & ~(page - 1);
	b->buf = mmap(NULL, b->len, PROT_READ | PROT_WRITE,
		      MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
	if (b->buf == MAP_FAILED) {
		*b = (struct bounce) { 0 };
		errno = ENOMEM;
		return NULL;
	}
	return b->buf;
}

/* Keeps b for the next request when there is room, else unmaps it */
static void bounce_put(struct bounce *b)
{
	struct bounce drop = *b;
	unsigned i;

	pthread_mutex_lock(&bounce_lock);
	for (i = 0; b->len <= BOUNCE_KEEP_MAX && i < BOUNCE_KEEP; i++) {
		struct bounce *k = &bounce_kept[i];

		if (k->buf == NULL || k->len < b->len) {
			drop = *k;	/* a smaller one makes room */
			*k = *b;
			break;
		}
	}
	pthread_mutex_unlock(&bounce_lock);
	bounce_unmap(&drop);
	*b = (struct bounce) { 0 };
}

/* Reads until n bytes, the end of file, or (direct) an unaligned count */
static ssize_t pread_full(int fd, void *buf, size_t n, uint64_t off,
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
		if (r == 0 || (align != 0 && (size_t)r % align != 0)) {
			break;
		}
	}
	return (ssize_t)done;
}

/* Writes n bytes; a failure after some progress returns the progress */
static ssize_t pwrite_full(int fd, const void *buf, size_t n, uint64_t off)
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

static ssize_t dio_read(struct iotune_dio_io *io)
{
	struct iotune_dio_read_plan plan;
	struct bounce bb = { 0 };
	void *b = io->buf;
	ssize_t got;
	uint64_t n;

	iotune_dio_plan_read(&io->align, 0, io->off, io->len,
			     (uintptr_t)io->buf, &plan);
	if (plan.bounce) {
		b = bounce_get(io->align.memory, plan.len, &bb);
		if (b == NULL) {
			return -1;
		}
		io->bounced = true;
	}
	got = pread_full(io->direct_fd, b, plan.len, plan.off,
			 io->align.offset);
	if (got < 0) {
		int err = errno;

		bounce_put(&bb);
		errno = err;
		return -1;
	}
	n = iotune_dio_read_result(&plan, io->len, (uint64_t)got);
	if (plan.bounce) {
		memcpy(io->buf, (char *)b + plan.skip, n);
		bounce_put(&bb);
	}
	return (ssize_t)n;
}

/*
 * The direct middle of a write; its length, or less / -1.  A buffer
 * that is not aligned bounces through one kept buffer of at most
 * BOUNCE_KEEP_MAX bytes, a piece at a time: a larger one (smbd takes
 * writes of up to 8 MiB) would be mapped, faulted in and unmapped at
 * every request.
 */
static ssize_t dio_write_middle(struct iotune_dio_io *io,
				const struct iotune_dio_write_plan *plan)
{
	const char *src = (const char *)io->buf + plan->head_len;
	size_t piece = plan->mid_len < BOUNCE_KEEP_MAX ? plan->mid_len :
			BOUNCE_KEEP_MAX;
	struct bounce bb = { 0 };
	void *mid = NULL;
	size_t done = 0;
	int err = 0;

	if (!plan->bounce) {
		return pwrite_full(io->direct_fd, src, plan->mid_len,
				   plan->mid_off);
	}
	mid = bounce_get(io->align.memory, piece, &bb);
	if (mid == NULL) {
		return -1;
	}
	io->bounced = true;
	while (done < plan->mid_len) {
		size_t n = plan->mid_len - done < piece ?
			   plan->mid_len - done : piece;
		ssize_t r;

		memcpy(mid, src + done, n);
		r = pwrite_full(io->direct_fd, mid, n, plan->mid_off + done);
		err = errno;
		if (r > 0) {
			done += (size_t)r;
		}
		if (r != (ssize_t)n) {
			break;
		}
	}
	bounce_put(&bb);
	errno = err;
	return done > 0 ? (ssize_t)done : -1;
}

static ssize_t dio_write(struct iotune_dio_io *io)
{
	struct iotune_dio_write_plan plan;
	const char *src = io->buf;
	ssize_t r;

	iotune_dio_plan_write(&io->align, 0, io->off, io->len,
			      (uintptr_t)io->buf, &plan);
	if (plan.mid_len == 0) {
		return pwrite_full(io->buffered_fd, src, io->len, io->off);
	}
	io->split = plan.head_len > 0 || plan.tail_len > 0;
	if (plan.head_len > 0) {
		r = pwrite_full(io->buffered_fd, src, plan.head_len, io->off);
		if (r != (ssize_t)plan.head_len) {
			return r;
		}
	}
	r = dio_write_middle(io, &plan);
	if (r != (ssize_t)plan.mid_len) {
		if (r <= 0) {
			return plan.head_len > 0 ? (ssize_t)plan.head_len : -1;
		}
		return (ssize_t)plan.head_len + r;
	}
	if (plan.tail_len > 0) {
		r = pwrite_full(io->buffered_fd,
				src + plan.head_len + plan.mid_len,
				plan.tail_len, plan.tail_off);
		if (r != (ssize_t)plan.tail_len) {
			return (ssize_t)(plan.head_len + plan.mid_len) +
			       (r > 0 ? r : 0);
		}
	}
	return (ssize_t)io->len;
}

void iotune_dio_io_run(struct iotune_dio_io *io)
{
	errno = 0;
	io->ret = io->is_write ? dio_write(io) : dio_read(io);
	io->err = io->ret < 0 ? errno : 0;
}
