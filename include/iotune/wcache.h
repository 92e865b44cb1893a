/*
 * iotune - per-file write cache (pure core, no Samba)
 *
 * Copyright (C) iotune authors 2026
 * SPDX-License-Identifier: GPL-3.0-or-later
 *
 * One cache holds the dirty data of one file in a window of `capacity`
 * bytes: a buffer plus a sorted list of disjoint dirty extents; full
 * windows go to disk in up to `flushes` slots at once.  The core
 * makes every decision and never does asynchronous I/O itself; it works
 * like the read-ahead core: one call in, one action out.
 *
 *   iotune_wc_submit()      a client write or a barrier (SMB2 FLUSH,
 *                           server-side copy) arrives
 *   iotune_wc_disk_done()   a write the core sent to disk has finished
 *   iotune_wc_flush_done()  a flush piece has been written (or failed)
 *   iotune_wc_tick()        the timer the last action asked for fired
 *   iotune_wc_flush_sync()  a synchronous caller needs the data on disk
 *
 * Each fills a struct iotune_wc_action: a flush piece to write, ops to
 * write to disk, ops that are complete, the time of the next tick, and
 * what to log.  Operations wait in one FIFO per
 * cache, so their order is kept.  Synchronous work the core needs done
 * inline (reserving space, writing pieces for flush_sync) goes through
 * struct iotune_wc_io_ops.  docs/design.md explains the rules; the unit
 * tests (tests/unit/test_wcache.c) check them against a fake disk and a
 * fake clock.
 *
 * Rules in short:
 * - A write is absorbed only when its own bytes are reserved on disk
 *   (io->reserve, a fallocate that may extend the file as the write
 *   would): what was acknowledged fits, and sizes on disk are true.
 *   Nothing else is reserved, so nothing is ever given back: the core
 *   never asks for a truncate or a punched hole.  With reserve_async
 *   the writes ask for their reservations as they arrive, in batches of
 *   include/iotune/rsvq.h (a batch starts when the caller launches it,
 *   with the writes that arrived until then; one batch on its way, the
 *   writes that arrive meanwhile join the next); a write waits in the
 *   FIFO until its verdict came, and one whose bytes did not fit goes
 *   to disk.
 * - A flush that fails keeps its data and is retried with a backoff.
 *   While it is not written, every write or barrier first retries it and
 *   fails with the error when that retry fails (with several failed
 *   windows, it retries them one by one; nothing is acknowledged while
 *   a retry is in flight), so a failing disk fails
 *   requests like a share without the cache.  Nothing spins: a full
 *   window never retries failed data from the failure's completion.
 *   A close (iotune_wc_flush_sync()) fails when the data cannot be
 *   written.
 * - Once the right to cache is lost (iotune_wc_lose_right()), nothing
 *   is absorbed; data that fails to be written then is dropped (another
 *   opener may have written newer data), and the error is kept for the
 *   next write, barrier or close (iotune_wc_take_error()).
 */

#ifndef IOTUNE_WCACHE_H
#define IOTUNE_WCACHE_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <sys/types.h>

#include "iotune/wctimes.h"
#include "iotune/rsvq.h"

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
	IOTUNE_FLUSH_TIMES,		/* timestamps set (fntimes) */
	IOTUNE_FLUSH_RETRY,		/* a failed flush tried again */
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
	uint64_t reserve_calls;
	uint64_t reserve_us;		/* main thread's time in those calls */
	uint64_t reserve_full;		/* no space: written through */
	uint64_t writes_failed;		/* failed with a flush error */
	uint64_t bytes_dropped;		/* could never be written */
};

unsigned iotune_flush_size_bucket(uint64_t bytes);

/*
 * Counts a write that has no cache at all (the handle may not cache, the
 * cache limit is reached): the adapter calls this, so that every write
 * is counted in one place.
 */
void iotune_wc_count_uncached(struct iotune_wc_stats *stats);

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

/* Synchronous work the core asks for inline; any member may be NULL. */
struct iotune_wc_io_ops {
	/* a flush piece, for iotune_wc_flush_sync(): bytes or -1/errno */
	ssize_t (*pwrite)(void *private_data, const void *buf, size_t n,
			  uint64_t off);
	/*
	 * Allocates the blocks of [off, off + len), a write's bytes, and
	 * moves the end of file to off + len when that is further (never
	 * back): 0, or an errno.  ENOSPC/EDQUOT: that write goes to disk
	 * uncached; any other errno: the file system cannot reserve, and
	 * the cache writes everything through from then on.
	 */
	int (*reserve)(void *private_data, uint64_t off, uint64_t len);
	void *private_data;
};

enum iotune_wc_op_kind {
	IOTUNE_WC_OP_WRITE,	/* a client write */
	IOTUNE_WC_OP_BARRIER,	/* done once older data is on disk */
};

enum iotune_wc_op_state {
	IOTUNE_WC_OP_IDLE,	/* in no list of the cache */
	IOTUNE_WC_OP_QUEUED,	/* waits in the cache's FIFO */
	IOTUNE_WC_OP_TO_DISK,	/* to be written to disk by the caller */
	IOTUNE_WC_OP_ON_DISK,	/* its disk write is in flight */
	IOTUNE_WC_OP_TO_COPY,	/* to be copied into the cache by the caller */
	IOTUNE_WC_OP_COPYING,	/* its copy is in flight */
	IOTUNE_WC_OP_DONE,	/* complete: ret / err, to be taken */
};

/* A write's reservation when they are made in batches (reserve_async) */
enum iotune_wc_rsv {
	IOTUNE_WC_RSV_NONE,	/* not asked for (yet) */
	IOTUNE_WC_RSV_WAIT,	/* in a batch: iotune_wc_reserve_done() */
	IOTUNE_WC_RSV_BUSY,	/* the next batch was full: asked again */
	IOTUNE_WC_RSV_OK,	/* its bytes are reserved */
	IOTUNE_WC_RSV_NO_SPACE,	/* they could not be: written through */
};

/* One client request, owned by the caller (part of its request state) */
struct iotune_wc_op {
	struct iotune_wc_op *prev, *next;	/* in one list of the cache */
	enum iotune_wc_op_kind kind;
	enum iotune_wc_op_state state;
	bool may_cache;		/* its handle holds the right to cache */
	bool busy;		/* other requests are in flight: the caller
				 * would rather copy a large write itself */
	bool client_waiting;	/* more requests of the client wait to
				 * be read: with reserve_async, its
				 * reservation goes in a batch, not
				 * inline (as when the last batch
				 * held several writes) */
	uint64_t off;		/* write */
	const void *data;
	size_t n;
	enum iotune_flush_reason reason;	/* barrier */
	uint8_t *copy_dst;	/* TO_COPY: where op->data goes */
	ssize_t ret;		/* DONE: bytes written (0 for a barrier) */
	int err;		/* DONE with ret -1: the errno */
	void *private_data;	/* the caller's */
	bool waited;		/* the core's: it waited for a flush */
	enum iotune_wc_rsv rsv;	/* the core's: its reservation (async) */
	uint64_t rsv_id;	/* the core's: its id in the batches */
};

/*
 * Window buffers a process's caches share.  A cache that ends leaves its
 * buffers here (up to IOTUNE_WC_POOL_MAX of them and max_bytes in all;
 * the rest are unmapped), and a new cache of the same capacity takes
 * them before it maps new ones: a client that writes one new file after
 * another would otherwise fault in and zero fresh pages for each file's
 * windows.  A kept buffer is given to the kernel's lazy free
 * (MADV_FREE: its pages are taken back under memory pressure, and then
 * come back as zeros); where that fails, it is not kept.  The core never
 * reads a buffer's bytes outside its dirty extents, so what an earlier
 * window left in it is never written, read or copied.
 */
#define IOTUNE_WC_POOL_MAX 5	/* IOTUNE_WC_MAX_FLUSHES windows + active */
#define IOTUNE_WC_POOL_BYTES (8 * 1024 * 1024)

struct iotune_wc_pool {
	uint8_t *buf[IOTUNE_WC_POOL_MAX];
	uint64_t len[IOTUNE_WC_POOL_MAX];	/* ... each one's size */
	unsigned n;
	uint64_t bytes;			/* kept, in all */
	uint64_t max_bytes;		/* 0: IOTUNE_WC_POOL_BYTES */
	uint64_t taken;			/* buffers caches took from it */
};

/* Unmaps what the pool keeps (the process ends). */
void iotune_wc_pool_free(struct iotune_wc_pool *pool);

struct iotune_wc_params {
	uint64_t capacity;	/* the window */
	uint64_t timeout_ms;	/* dirty data older than this is written */
	uint64_t bypass_size;	/* writes of at least this go to disk */
	uint64_t copy_size;	/* larger writes of busy ops are copied by the
				 * caller, in its thread pool (0: the core
				 * copies all) */
	unsigned flushes;	/* windows on their way to disk at once
				 * (1 .. IOTUNE_WC_MAX_FLUSHES; 0: 1) */
	bool reserve_async;	/* reservations in batches off the main
				 * thread (act->reserve, answered with
				 * iotune_wc_reserve_done()); false: one
				 * io->reserve call inline per write */
	struct iotune_wc_pool *pool;	/* buffers shared with the other
					 * caches of the process (NULL:
					 * each cache maps its own) */
	bool writeback;		/* once all of a window is written, ask
				 * for its write-back to start
				 * (act->writeback_*): a page-cache
				 * backend's later fsync finds it on its
				 * way to disk */
};

/*
 * A reservation this slow costs a round trip to a server (GlusterFS, a
 * FUSE or network file system), as much as the write it would save.  The
 * adapter then makes the share's reservations in batches (reserve_async,
 * iotune_wc_reserve_in_batches()): the writes a pipelining client sends
 * share one.
 */
#define IOTUNE_WC_RESERVE_SLOW_US 50

/* the most windows of one cache on their way to disk at once */
#define IOTUNE_WC_MAX_FLUSHES 4

/*
 * A window on its way to disk.  The windows of one cache that are being
 * flushed never overlap each other, so they may land in any order; the
 * active window (newer data) may overlap them, and waits for them before
 * it is flushed itself.
 */
struct iotune_wc_flush {
	struct iotune_wc_buffer buf;	/* no extents: the slot is free */
	bool in_flight;		/* a piece of it is being written */
	bool failed;		/* holds unwritten remains, retried later */
	enum iotune_flush_reason reason;
	size_t idx;		/* extent being written */
	uint64_t pos;		/* bytes of it already written */
	unsigned retries;	/* EINTR/EAGAIN in a row */
};

struct iotune_wcache {
	struct iotune_wc_params p;
	uint64_t disk_size;
	struct iotune_wc_buffer active;
	bool window;			/* active has its window placed */
	struct iotune_wc_flush fl[IOTUNE_WC_MAX_FLUSHES];
	uint8_t *spare[IOTUNE_WC_MAX_FLUSHES];	/* free buffers, for reuse */
	uint64_t dirty_since_ms;	/* 0: active is clean */
	uint64_t retry_at_ms;		/* failed flushes are tried again */
	bool last_failed;		/* the last flush piece done failed */
	uint64_t backoff_ms;
	int error;			/* dropped data not yet reported */
	int last_err;			/* the last flush error */
	bool lost;			/* may no longer cache */
	bool no_reserve;		/* the file system cannot reserve */
	uint64_t reserved_lo;		/* [lo, hi): reserved last, known */
	uint64_t reserved_hi;
	struct iotune_rsvq rq;		/* reserve_async: the batches */
	uint64_t rsv_ids;		/* the last op's rsv_id */
	uint64_t landed;		/* writes of cached data that landed */
	bool wb_busy;			/* a write-back is on its way */
	uint64_t wb_lo;			/* written, not asked for yet: */
	uint64_t wb_hi;			/* [lo, hi) (hi 0: none) */
	struct iotune_wc_times times;	/* wctimes.h */
	uint64_t log_next_ms;		/* rate limit of error lines */
	unsigned log_repeats;
	struct iotune_wc_op *queue;	/* QUEUED ops, oldest first */
	struct iotune_wc_op *to_disk;	/* TO_DISK ops */
	struct iotune_wc_op *on_disk;	/* ON_DISK ops */
	struct iotune_wc_op *to_copy;	/* TO_COPY ops */
	struct iotune_wc_op *copying;	/* COPYING ops */
	struct iotune_wc_op *done;	/* DONE ops */
	const struct iotune_wc_io_ops *io;
	struct iotune_wc_stats *stats;	/* NULL: not counting */
};

/* What the caller must do after a call */
struct iotune_wc_action {
	bool flush_io;		/* write this piece, then flush_done() */
	unsigned flush_slot;	/* ... and give flush_done() this */
	uint64_t flush_off;
	const uint8_t *flush_buf;
	size_t flush_len;
	bool to_disk;		/* ops to take with iotune_wc_next_to_disk() */
	bool to_copy;		/* ops to take with iotune_wc_next_to_copy() */
	bool done;		/* ops to take with iotune_wc_next_done() */
	uint64_t tick_ms;	/* call iotune_wc_tick() then; 0: no need */
	int log_err;		/* a flush failed with this errno: log it */
	unsigned log_repeats;	/* ... failures not logged before it */
	uint64_t dropped;	/* bytes dropped for good: log it */
	int drop_err;		/* ... because of this errno (0: ended) */
	bool cannot_reserve;	/* the file system refused a reservation */
	bool reserve_due;	/* reserve_async: a batch of reservations
				 * waits for iotune_wc_reserve_launch() */
	uint64_t writeback_off;	/* params.writeback: windows written in
				 * full, within this range: start their
				 * write-back (nothing to wait for),
				 * then iotune_wc_writeback_done() */
	uint64_t writeback_len;	/* ... 0: none */
};

/*
 * Would a cache with these params keep a write of n bytes at off (if it
 * has the right to)?  Writes of the bypass size or more go to disk: the
 * caller makes no cache for them.
 */
bool iotune_wc_would_keep(const struct iotune_wc_params *p,
			  uint64_t off,
			  uint64_t n);

int iotune_wc_init(struct iotune_wcache *c,
		   const struct iotune_wc_params *params,
		   uint64_t disk_size,
		   const struct iotune_wc_io_ops *io,
		   struct iotune_wc_stats *stats);

/* Frees the buffers; dirty data is lost: flush first, see iotune_wc_end */
void iotune_wc_destroy(struct iotune_wcache *c);

/* A write or barrier arrives: decided at once, or queued behind others */
void iotune_wc_submit(struct iotune_wcache *c,
		      struct iotune_wc_op *op,
		      uint64_t now_ms,
		      struct iotune_wc_action *act);

/*
 * The next op to write to disk (now ON_DISK): write op->data, then call
 * iotune_wc_disk_done().  NULL when there is none.
 */
struct iotune_wc_op *iotune_wc_next_to_disk(struct iotune_wcache *c);

/*
 * The next op whose data the caller copies (now COPYING): op->n bytes
 * from op->data to op->copy_dst, then iotune_wc_copy_done().  Large
 * writes are copied this way (params copy_size) so that the copy can run
 * in a thread pool, off the thread that serves requests.  NULL when
 * there is none.
 */
struct iotune_wc_op *iotune_wc_next_to_copy(struct iotune_wcache *c);

/* The copy of a COPYING op is done: the write is absorbed. */
void iotune_wc_copy_done(struct iotune_wcache *c,
			 struct iotune_wc_op *op,
			 uint64_t now_ms,
			 struct iotune_wc_action *act);

/* Copies in flight: synchronous callers wait for them to be done. */
bool iotune_wc_copies_in_flight(const struct iotune_wcache *c);

/*
 * The next complete op (now IDLE, out of the cache): complete its request
 * with op->ret / op->err.  NULL when there is none.
 */
struct iotune_wc_op *iotune_wc_next_done(struct iotune_wcache *c);

/* Takes op itself when it is complete (for the caller that submitted it) */
bool iotune_wc_take_done(struct iotune_wcache *c, struct iotune_wc_op *op);

/* Complete ops are left for iotune_wc_next_done() */
bool iotune_wc_has_done(const struct iotune_wcache *c);

/* The disk write of an ON_DISK op returned ret (bytes, or -1 and err). */
void iotune_wc_disk_done(struct iotune_wcache *c,
			 struct iotune_wc_op *op,
			 ssize_t ret,
			 int err,
			 uint64_t now_ms,
			 struct iotune_wc_action *act);

/*
 * The flush piece of an action (act->flush_slot) returned ret (bytes, or
 * -1/err).  Pieces of different slots may be in flight at once, one per
 * slot; their results may come in any order.
 */
void iotune_wc_flush_done(struct iotune_wcache *c,
			  unsigned slot,
			  ssize_t ret,
			  int err,
			  uint64_t now_ms,
			  struct iotune_wc_action *act);

/*
 * The write-back an action asked for (act->writeback_*) has ended, or
 * could not start.  One write-back per cache is on its way at a time:
 * the windows written meanwhile are asked for now, as one range (the
 * first written byte to the last; never over a window still on its
 * way).  A cache that ends forgets them: the kernel writes them back.
 */
void iotune_wc_writeback_done(struct iotune_wcache *c,
			      struct iotune_wc_action *act);

/* The tick asked for has come: timed flush, retry of a failed flush. */
void iotune_wc_tick(struct iotune_wcache *c,
		    uint64_t now_ms,
		    struct iotune_wc_action *act);

/*
 * The op's request goes away (its owner is freed): it leaves the cache.
 * The result of an ON_DISK op is not awaited.  An op whose copy is under
 * way (TO_COPY, COPYING) cannot leave: false, and the caller keeps op
 * until iotune_wc_copy_done().
 */
bool iotune_wc_cancel(struct iotune_wcache *c, struct iotune_wc_op *op);

/*
 * No handle of the file may cache any more (break, a foreign handle):
 * no write is absorbed from now on, and data that fails to be written
 * from now on is dropped (act->dropped) rather than kept.
 */
void iotune_wc_lose_right(struct iotune_wcache *c,
			  uint64_t now_ms,
			  struct iotune_wc_action *act);

/*
 * Writes everything dirty through io->pwrite before returning, for
 * synchronous callers; no flush may be in flight.  Returns 0 or the
 * errno of a failure in this call.  After a failure nothing is in flight
 * and act asks for no piece: the caller may end the cache.
 */
int iotune_wc_flush_sync(struct iotune_wcache *c,
			 enum iotune_flush_reason reason,
			 uint64_t now_ms,
			 struct iotune_wc_action *act);

/*
 * reserve_async: the answer (0 or an errno, as io->reserve's) of the
 * reservation number run of the batch on its way (act->reserve of an
 * earlier call).  An answer that matches no call changes nothing.
 */
void iotune_wc_reserve_done(struct iotune_wcache *c,
			    unsigned run,
			    int err,
			    uint64_t now_ms,
			    struct iotune_wc_action *act);

/*
 * reserve_async: the batch that waits (act->reserve_due) starts: the
 * caller makes calls (none when no batch waits) and answers each, by its
 * index, with iotune_wc_reserve_done().  The writes that arrive before
 * the launch join the batch; iotune_wc_reserve_pace() says when it
 * launches: once the client's waiting requests are read and as many
 * writes joined as the last batch held (or a call's cost went by); at
 * once when it is full; at the latest after max_wait_us.
 */
void iotune_wc_reserve_launch(struct iotune_wcache *c,
			      struct iotune_rsvq_calls *calls);

/* From now on, reservations go in batches (params.reserve_async) */
void iotune_wc_reserve_in_batches(struct iotune_wcache *c);

/*
 * reserve_async: whether the batch that waits starts now (GO: launch it)
 * or waits for more writes (iotune_rsvq_pace() in include/iotune/rsvq.h;
 * w says since when it waits and how long it may, and asks whether the
 * client's requests wait to be read).  A batch full to the next never
 * waits.
 */
enum iotune_rsvq_go iotune_wc_reserve_pace(struct iotune_wcache *c,
					   const struct iotune_rsvq_wait *w,
					   uint64_t *after_us);

/* reserve_async: writes in the batch that waits for its launch (0: none) */
unsigned iotune_wc_reserve_due(const struct iotune_wcache *c);

/* reserve_async: reservations formed or on their way */
bool iotune_wc_reserving(const struct iotune_wcache *c);

/* Takes (and clears) the error of dropped data not yet reported. */
int iotune_wc_take_error(struct iotune_wcache *c);

/*
 * A client changed the file's allocation (fallocate, a hole punched, a
 * truncate): what was reserved may be gone, so writes reserve again.
 */
void iotune_wc_forget_reservations(struct iotune_wcache *c);

/*
 * The cache ends (its last handle closes): data still dirty is dropped
 * (act->dropped), queued ops fail with EBADF (act->done).  Nothing is
 * left to give back: only written bytes were reserved.
 */
void iotune_wc_end(struct iotune_wcache *c, struct iotune_wc_action *act);

/*
 * After iotune_wc_end(): the ops whose disk writes are still in flight,
 * one by one (now IDLE); their results will not be awaited.
 */
struct iotune_wc_op *iotune_wc_next_orphan(struct iotune_wcache *c);

bool iotune_wc_is_dirty(const struct iotune_wcache *c);
bool iotune_wc_flush_in_flight(const struct iotune_wcache *c);

/* A flush failed and its data waits for a retry */
bool iotune_wc_failed(const struct iotune_wcache *c);

/*
 * When iotune_wc_tick() is due now (0: not needed), for a caller whose
 * own actions ran others in between: an action's tick_ms is what was due
 * when that action was made.
 */
uint64_t iotune_wc_next_tick(const struct iotune_wcache *c);

/* Nothing dirty, queued, to take, in flight or unreported: can go. */
bool iotune_wc_idle(const struct iotune_wcache *c);

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
