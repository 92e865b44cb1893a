/*
 * iotune - per-file write cache (pure core, no Samba)
 *
 * Copyright (C) iotune authors 2026
 * SPDX-License-Identifier: GPL-3.0-or-later
 *
 * One cache holds the dirty data of one file in a window of `capacity`
 * bytes: a buffer plus a sorted list of disjoint dirty extents.  The core
 * never does I/O itself.  It answers what to do with a write (absorb it,
 * let it bypass, or flush first), hands out the pieces a flush has to
 * write and takes their results, and overlays dirty data on what a read
 * got from disk.  See docs/design.md.
 *
 * At most one flush is in flight per cache.  A flush takes the whole
 * active buffer ("flushing"); new writes go to a fresh active buffer.
 * Reads overlay disk data with the flushing buffer and then the active
 * one, so data that was acknowledged to the client is never hidden while
 * it is on its way to disk.  A flush that fails keeps its unwritten
 * extents in the flushing buffer, records the error for the next caller
 * and is retried by the next flush: data is never dropped silently.
 */

#ifndef IOTUNE_WCACHE_H
#define IOTUNE_WCACHE_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <sys/types.h>

enum iotune_flush_reason {
	IOTUNE_FLUSH_FULL,		/* window completely dirty */
	IOTUNE_FLUSH_NONCONTIG,		/* write outside the window */
	IOTUNE_FLUSH_BYPASS,		/* large write overlaps dirty data */
	IOTUNE_FLUSH_FSYNC,		/* SMB2 FLUSH, write-through */
	IOTUNE_FLUSH_CLOSE,
	IOTUNE_FLUSH_SIZE_CHANGE,	/* ftruncate, fallocate */
	IOTUNE_FLUSH_OFFLOAD,		/* server-side copy */
	IOTUNE_FLUSH_SENDFILE,
	IOTUNE_FLUSH_TIMEOUT,
	IOTUNE_FLUSH_DISCONNECT,
	IOTUNE_FLUSH_BREAK,		/* oplock/lease lost or breaking */
	IOTUNE_FLUSH_SYNC_IO,		/* sync pwrite / recvfile fallback */
	IOTUNE_FLUSH_REASONS
};

const char *iotune_flush_reason_name(enum iotune_flush_reason reason);

/* flush sizes: bucket i counts flush writes of < 4K << i bytes */
#define IOTUNE_FLUSH_SIZE_BUCKETS 10

struct iotune_wc_stats {
	uint64_t writes_total;
	uint64_t writes_cached;
	uint64_t writes_bypassed;
	uint64_t bytes_absorbed;
	uint64_t flushes[IOTUNE_FLUSH_REASONS];
	uint64_t flush_writes;
	uint64_t flush_bytes;
	uint64_t flush_size[IOTUNE_FLUSH_SIZE_BUCKETS];
	uint64_t flush_short_writes;
	uint64_t flush_errors;
	uint64_t read_hits_full;
	uint64_t read_hits_overlay;
	uint64_t caches_active;
	uint64_t caches_refused;
};

unsigned iotune_flush_size_bucket(uint64_t bytes);

struct iotune_extent {
	uint64_t off;
	uint64_t len;
};

/* the most extents one buffer tracks; one more is a non-coalescable write */
#define IOTUNE_WC_MAX_EXTENTS 64

struct iotune_wc_buffer {
	uint64_t base;
	uint8_t *data;
	size_t n_ext;
	struct iotune_extent ext[IOTUNE_WC_MAX_EXTENTS];
};

struct iotune_wcache {
	uint64_t capacity;
	uint64_t timeout_ms;
	uint64_t disk_size;
	struct iotune_wc_buffer active;
	struct iotune_wc_buffer flushing;
	uint8_t *spare;			/* a free buffer, kept for reuse */
	uint64_t dirty_since_ms;	/* 0: active is clean */
	bool flush_in_flight;
	size_t flush_idx;		/* extent of flushing being written */
	uint64_t flush_pos;		/* bytes of it already written */
	unsigned flush_retries;		/* EINTR/EAGAIN in a row */
	uint64_t failed_at_ms;		/* last failed flush, for the retry */
	int error;			/* not yet reported flush error */
	uint64_t bypass_lo;		/* union of bypass writes in flight */
	uint64_t bypass_hi;
	unsigned bypass_in_flight;
	struct iotune_wc_stats *stats;
};

int iotune_wc_init(struct iotune_wcache *c,
		   uint64_t capacity,
		   uint64_t timeout_ms,
		   uint64_t disk_size,
		   struct iotune_wc_stats *stats);

/* Frees the buffers; dirty data is lost: flush first. */
void iotune_wc_destroy(struct iotune_wcache *c);

enum iotune_wc_verdict {
	IOTUNE_WC_ABSORBED,	/* copied into the cache: acknowledge it */
	IOTUNE_WC_BYPASS,	/* write it to disk now, then bypass_done() */
	IOTUNE_WC_FLUSH_FIRST,	/* flush (or wait for the flush), retry */
	IOTUNE_WC_ERROR,	/* fail it with *err (a flush failed) */
};

/*
 * Decides about one client write of n bytes at off; on ABSORBED the data
 * was copied.  On FLUSH_FIRST *reason says why; on ERROR *err is the
 * errno of an earlier failed flush, which is thereby reported (once).
 * -ENOMEM is reported as ERROR with *err = ENOMEM.
 */
enum iotune_wc_verdict iotune_wc_write(struct iotune_wcache *c,
				       uint64_t off,
				       const void *data,
				       size_t n,
				       uint64_t now_ms,
				       enum iotune_flush_reason *reason,
				       int *err);

void iotune_wc_bypass_start(struct iotune_wcache *c, uint64_t off, size_t n);
void iotune_wc_bypass_done(struct iotune_wcache *c,
			   uint64_t off,
			   size_t n,
			   ssize_t written);

/* Takes (and clears) a flush error not yet reported; 0 when none. */
int iotune_wc_take_error(struct iotune_wcache *c);

bool iotune_wc_is_dirty(const struct iotune_wcache *c);
bool iotune_wc_flush_in_flight(const struct iotune_wcache *c);

/* Should a flush start now?  FULL window or TIMEOUT passed. */
bool iotune_wc_wants_flush(const struct iotune_wcache *c,
			   uint64_t now_ms,
			   enum iotune_flush_reason *reason);

/*
 * When the oldest dirty byte times out, or when the remains of a failed
 * flush are due for a retry; 0 when there is nothing to write.
 */
uint64_t iotune_wc_deadline(const struct iotune_wcache *c);

/*
 * Starts a flush of everything dirty (retrying the remains of a failed
 * flush first).  False when there is nothing to write, a flush is already
 * in flight, or (unless force) the data overlaps a bypass write in flight
 * that it must not overtake.
 */
bool iotune_wc_flush_begin(struct iotune_wcache *c,
			   enum iotune_flush_reason reason,
			   bool force);

/* The next piece the flush in flight must write; false when done. */
bool iotune_wc_flush_next(struct iotune_wcache *c,
			  uint64_t *off,
			  const uint8_t **buf,
			  size_t *len);

/* The result of writing the piece flush_next() gave: bytes or -1/err. */
void iotune_wc_flush_result(struct iotune_wcache *c,
			    ssize_t ret,
			    int err,
			    uint64_t now_ms);

struct iotune_wc_io_ops {
	ssize_t (*pwrite)(void *private_data, const void *buf, size_t n,
			  uint64_t off);
	void *private_data;
};

/*
 * Writes everything dirty through ops, waiting for nothing: for the sync
 * paths (close) and for tests.  Returns 0, or the errno of the failure
 * (which is then also reported, not kept).
 */
int iotune_wc_flush_sync(struct iotune_wcache *c,
			 enum iotune_flush_reason reason,
			 const struct iotune_wc_io_ops *ops,
			 uint64_t now_ms);

/* disk size, or the end of dirty data when that is larger */
uint64_t iotune_wc_logical_size(const struct iotune_wcache *c);

/* after a size change on disk (the cache must be clean) */
void iotune_wc_set_disk_size(struct iotune_wcache *c, uint64_t size);

/* after a write that went to disk past the cache */
void iotune_wc_note_disk_write(struct iotune_wcache *c,
			       uint64_t off,
			       ssize_t written);

/*
 * Serves a read entirely from memory when [off, off+n) is dirty up to the
 * logical end of file; *got is the length.  False: read the disk.
 */
bool iotune_wc_read_cached(struct iotune_wcache *c,
			   uint64_t off,
			   void *buf,
			   size_t n,
			   size_t *got);

/*
 * A copy of the dirty data that overlaps [off, off+n), taken when an
 * async disk read is issued: a flush that completes before the read
 * returns must not make the read miss that data.
 */
struct iotune_wc_snapshot;

/* Returns 0 (with *snap NULL when nothing overlaps) or ENOMEM. */
int iotune_wc_snapshot_take(const struct iotune_wcache *c,
			    uint64_t off,
			    size_t n,
			    struct iotune_wc_snapshot **snap);
void iotune_wc_snapshot_free(struct iotune_wc_snapshot *s);

/*
 * Completes a disk read of n bytes at off that returned disk_got bytes:
 * zero-fills up to the logical end of file and overlays the snapshot (may
 * be NULL) and then the dirty data in c (may be NULL).  Returns the
 * number of valid bytes in buf.
 */
size_t iotune_wc_read_overlay(struct iotune_wcache *c,
			      const struct iotune_wc_snapshot *snap,
			      uint64_t off,
			      void *buf,
			      size_t n,
			      size_t disk_got);

#endif /* IOTUNE_WCACHE_H */
