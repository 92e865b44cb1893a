/*
 * iotune: what the two files of the write cache's Samba side share:
 * vfs_iotune_wcache.c (caches: their life, who may cache, synchronous
 * flushes, closes, sizes) and vfs_iotune_wcache_act.c (carrying out the
 * core's actions: flush pieces, writes to disk, copies, completions,
 * timers, log lines, barriers).
 *
 * Copyright (C) iotune authors 2026
 * SPDX-License-Identifier: GPL-3.0-or-later
 */

#ifndef IOTUNE_VFS_IOTUNE_WCACHE_H
#define IOTUNE_VFS_IOTUNE_WCACHE_H

#include "vfs_iotune.h"

/* writes of at least this are copied into the cache in the thread pool */
#define IOTUNE_COPY_IN_POOL (64 * 1024)

/* bypass size "auto" on a local file system: coalescing writes this
 * large saves less than the copy into the cache costs */
#define IOTUNE_BYPASS_LOCAL (64 * 1024)

/* ... and where each write costs a round trip or a device command:
 * writes this large already keep the backend busy, while their copy and
 * a window's flush would delay them (bench/write_matrix.py, 256K cells) */
#define IOTUNE_BYPASS_COSTLY (256 * 1024)

/* an idle cache stays this long for the next write of its stream */
#define IOTUNE_CACHE_IDLE_KEEP_MS 1000

struct iotune_copy_job;
struct iotune_rsv_job;
struct iotune_cache;

/* The piece of one flush slot of the core being written */
struct iotune_flush_io {
	struct iotune_cache *cache;
	unsigned slot;
	struct tevent_req *subreq;	/* NULL: none in flight */
	bool dio;			/* the piece is written direct */
	bool buffered;			/* ... or some of it is not */
	uint64_t started_us;
};

/* The dirty data of one file in this process */
struct iotune_cache {
	struct iotune_cache *prev, *next;
	struct iotune_process *proc;
	struct iotune_share *share;
	struct file_id id;
	struct iotune_file *files;	/* attached handles; head does I/O */
	struct iotune_file *pinned_by;	/* set the pinned mtime (wctimes) */
	struct iotune_wcache wc;
	struct iotune_wc_io_ops io;
	struct iotune_flush_io flushes[IOTUNE_WC_MAX_FLUSHES];
	struct tevent_timer *tick_timer;
	uint64_t tick_ms;
	struct tevent_timer *idle_timer;	/* an idle cache ends */
	unsigned submits;		/* requests so far */
	unsigned idle_mark;		/* ... when idle_timer was armed */
	struct tevent_immediate *wake_im;
	struct iotune_copy_job *copies;	/* copies into it in flight */
	struct iotune_rsv_job *reserves;	/* reservations in flight */
	struct iotune_fd_job *writeback;	/* the write-back on its way */
	bool wb_buffered;		/* pieces landed in the page cache
					 * since it started */
	uint64_t reserve_due_us;	/* a batch waits to start since */
	struct tevent_timer *reserve_timer;	/* ... at the latest */
	uint64_t reserve_timer_us;	/* ... at (iotune_now_us()) */
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

/* vfs_iotune_wcache_act.c */
void iotune_cache_apply(struct iotune_cache *cache,
			const struct iotune_wc_action *act);
void iotune_cache_log(struct iotune_cache *cache,
		      const struct iotune_wc_action *act);
void iotune_op_complete(struct iotune_wc_op *op);
void iotune_cache_wait_copies(struct iotune_cache *cache);
void iotune_pool_job_returned(int *flag);
void iotune_pool_job_wait(int *flag);
void iotune_cache_wake(struct iotune_cache *cache);
const char *iotune_cache_name(const struct iotune_cache *cache);

bool iotune_cache_flushing(const struct iotune_cache *cache);
bool iotune_piece_buffered(const struct iotune_file *owner, bool dio,
			   uint64_t off, uint64_t len);

/* vfs_iotune_reserve.c */
int iotune_cache_reserve_inline(void *private_data, uint64_t off,
				uint64_t len);
void iotune_cache_reserve_due(struct iotune_cache *cache);
void iotune_cache_reserve_prepare(struct iotune_cache *cache);
void iotune_cache_reserve_end(struct iotune_cache *cache);
bool iotune_cache_reserve_async(const struct iotune_share *share);

/* vfs_iotune_wcache.c */
void iotune_cache_maybe_release(struct iotune_cache *cache);
int iotune_cache_flush_keep(struct iotune_cache *cache,
			    enum iotune_flush_reason reason);

/* vfs_iotune_wctimes.c */
void iotune_cache_times_made(struct iotune_cache *cache,
			     const SMB_STRUCT_STAT *st);
void iotune_cache_times_landed(struct iotune_cache *cache);
void iotune_cache_times_write(struct iotune_cache *cache);
void iotune_cache_times_stat(struct iotune_cache *cache, SMB_STRUCT_STAT *st);

#endif /* IOTUNE_VFS_IOTUNE_WCACHE_H */
