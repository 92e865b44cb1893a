/*
 * iotune - per-file write cache: the queue of operations and what each
 * one needs (absorb, copy, go to disk, wait, fail), and windows (pure
 * core, no Samba).  Reservations are in wcache_reserve.c, flushes and
 * their errors in wcache_flush.c, buffers, extents and reads in
 * wcache_buf.c; the rules are summed up in include/iotune/wcache.h and
 * explained in docs/design.md.
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
#include <stdlib.h>
#include <string.h>

#include "wcache_priv.h"

static const char *flush_reason_names[IOTUNE_FLUSH_REASONS] = {
	[IOTUNE_FLUSH_FULL] = "full",
	[IOTUNE_FLUSH_NONCONTIG] = "noncontiguous",
	[IOTUNE_FLUSH_BYPASS] = "bypass",
	[IOTUNE_FLUSH_FSYNC] = "fsync",
	[IOTUNE_FLUSH_CLOSE] = "close",
	[IOTUNE_FLUSH_SIZE_CHANGE] = "size_change",
	[IOTUNE_FLUSH_OFFLOAD] = "offload",
	[IOTUNE_FLUSH_SENDFILE] = "sendfile",
	[IOTUNE_FLUSH_TIMEOUT] = "timeout",
	[IOTUNE_FLUSH_DISCONNECT] = "disconnect",
	[IOTUNE_FLUSH_BREAK] = "break",
	[IOTUNE_FLUSH_SYNC_IO] = "sync_io",
	[IOTUNE_FLUSH_TIMES] = "times",
	[IOTUNE_FLUSH_RETRY] = "retry",
};

const char *iotune_flush_reason_name(enum iotune_flush_reason reason)
{
	if ((unsigned)reason >= IOTUNE_FLUSH_REASONS) {
		return "unknown";
	}
	return flush_reason_names[reason];
}

unsigned iotune_flush_size_bucket(uint64_t bytes)
{
	unsigned b = 0;
	uint64_t limit = 4096;

	while (b < IOTUNE_FLUSH_SIZE_BUCKETS - 1 && bytes >= limit) {
		limit <<= 1;
		b++;
	}
	return b;
}

void iotune_wc_count_uncached(struct iotune_wc_stats *stats)
{
	if (stats != NULL) {
		stats->writes_total++;
		stats->writes_bypassed++;
	}
}

/* lists of ops: doubly linked, appended at the tail (they are short) */

static void op_append(struct iotune_wc_op **list, struct iotune_wc_op *op)
{
	struct iotune_wc_op *last = *list;

	op->next = NULL;
	if (last == NULL) {
		op->prev = NULL;
		*list = op;
		return;
	}
	while (last->next != NULL) {
		last = last->next;
	}
	last->next = op;
	op->prev = last;
}

static void op_remove(struct iotune_wc_op **list, struct iotune_wc_op *op)
{
	if (op->prev != NULL) {
		op->prev->next = op->next;
	} else {
		*list = op->next;
	}
	if (op->next != NULL) {
		op->next->prev = op->prev;
	}
	op->prev = op->next = NULL;
}

/* op leaves the queue to be written to disk by the caller */
static void op_leave_queue(struct iotune_wcache *c, struct iotune_wc_op *op)
{
	op_remove(&c->queue, op);
	iotune_wc_reserve_leave(c, op);
}

static void op_to_disk(struct iotune_wcache *c, struct iotune_wc_op *op,
		       struct iotune_wc_action *act)
{
	op_leave_queue(c, op);
	op->state = IOTUNE_WC_OP_TO_DISK;
	op_append(&c->to_disk, op);
	act->to_disk = true;
}

/* op leaves the queue: the caller copies its data into the cache */
static void op_to_copy(struct iotune_wcache *c, struct iotune_wc_op *op,
		       struct iotune_wc_action *act)
{
	op_leave_queue(c, op);
	op->state = IOTUNE_WC_OP_TO_COPY;
	op_append(&c->to_copy, op);
	act->to_copy = true;
}

static void op_complete(struct iotune_wcache *c, struct iotune_wc_op *op,
			ssize_t ret, int err, struct iotune_wc_action *act)
{
	op_leave_queue(c, op);
	op->ret = ret;
	op->err = ret < 0 ? err : 0;
	op->state = IOTUNE_WC_OP_DONE;
	op_append(&c->done, op);
	act->done = true;
}

static uint64_t bypass_size(const struct iotune_wc_params *p)
{
	if (p->bypass_size == 0 || p->bypass_size > p->capacity) {
		return p->capacity;
	}
	return p->bypass_size;
}

bool iotune_wc_would_keep(const struct iotune_wc_params *p,
			  uint64_t off,
			  uint64_t n)
{
	return off + n >= off && n < bypass_size(p);
}

int iotune_wc_init(struct iotune_wcache *c,
		   const struct iotune_wc_params *params,
		   uint64_t disk_size,
		   const struct iotune_wc_io_ops *io,
		   struct iotune_wc_stats *stats)
{
	if (params->capacity == 0 || io == NULL) {
		return EINVAL;
	}
	*c = (struct iotune_wcache) {
		.p = *params,
		.disk_size = disk_size,
		.io = io,
		.stats = stats,
		.times = {
			.known = IOTUNE_TS_NONE,
			.pinned = IOTUNE_TS_NONE,
			.last_write = IOTUNE_TS_NONE,
		},
	};
	c->p.bypass_size = bypass_size(&c->p);
	c->rq.deferred = true;	/* the caller launches batches */
	c->p.flushes = MAX(1, MIN(c->p.flushes, IOTUNE_WC_MAX_FLUSHES));
	return 0;
}

void iotune_wc_destroy(struct iotune_wcache *c)
{
	unsigned s;

	iotune_wc_free_buffers(c);
	c->active.n_ext = 0;
	for (s = 0; s < IOTUNE_WC_MAX_FLUSHES; s++) {
		c->fl[s] = (struct iotune_wc_flush) { 0 };
	}
}

int iotune_wc_take_error(struct iotune_wcache *c)
{
	int err = c->error;

	c->error = 0;
	return err;
}

bool iotune_wc_is_dirty(const struct iotune_wcache *c)
{
	const struct iotune_wc_flush *f = NULL;

	WC_FOR_EACH_FLUSH(c, f) {
		return true;
	}
	return c->active.n_ext > 0;
}

bool iotune_wc_idle(const struct iotune_wcache *c)
{
	return !iotune_wc_is_dirty(c) && !iotune_wc_flush_in_flight(c) &&
	       c->queue == NULL && c->to_disk == NULL && c->on_disk == NULL &&
	       !iotune_wc_copies_in_flight(c) && c->done == NULL &&
	       c->error == 0 && !iotune_wc_reserving(c);
}

bool iotune_wc_copies_in_flight(const struct iotune_wcache *c)
{
	return c->to_copy != NULL || c->copying != NULL;
}

void iotune_wc_set_disk_size(struct iotune_wcache *c, uint64_t size)
{
	c->disk_size = size;
	/* blocks past a new end of file are gone */
	iotune_wc_forget_reservations(c);
}

void iotune_wc_note_disk_write(struct iotune_wcache *c,
			       uint64_t off,
			       ssize_t written)
{
	if (written > 0) {
		c->disk_size = MAX(c->disk_size, off + (uint64_t)written);
	}
}

static bool list_overlaps(const struct iotune_wc_op *op, uint64_t off,
			  uint64_t end)
{
	for (; op != NULL; op = op->next) {
		if (op->off < end && off < op->off + op->n) {
			return true;
		}
	}
	return false;
}

/*
 * A write on its way to disk, or into the cache by a copy, that overlaps
 * [off, end): a newer write waits for it, so that it cannot land later.
 */
static bool in_flight_overlaps(const struct iotune_wcache *c, uint64_t off,
			       uint64_t end)
{
	return list_overlaps(c->on_disk, off, end) ||
	       list_overlaps(c->to_disk, off, end) ||
	       list_overlaps(c->to_copy, off, end) ||
	       list_overlaps(c->copying, off, end);
}

static bool dirty_overlaps(const struct iotune_wcache *c, uint64_t off,
			   uint64_t end)
{
	return iotune_wc_slots_overlap(c, off, end) ||
	       iotune_wc_buf_overlaps(&c->active, off, end);
}

/* Where a window for a write of [off, end) starts */
static uint64_t choose_base(uint64_t capacity, uint64_t off, uint64_t end)
{
	uint64_t base = off - off % capacity;

	if (end - base <= capacity) {
		return base;
	}
	base = off & ~(uint64_t)4095;
	if (end - base <= capacity) {
		return base;
	}
	return off;
}

/* Places a window into the empty active buffer: 0 or ENOMEM */
static int place_window(struct iotune_wcache *c, uint64_t off, uint64_t end)
{
	uint64_t base = choose_base(c->p.capacity, off, end);

	if (c->active.data == NULL) {
		c->active.data = iotune_wc_take_buffer(c);
		if (c->active.data == NULL) {
			return ENOMEM;
		}
	}
	c->active.base = base;
	c->window = true;
	return 0;
}

bool iotune_wc_active_full(const struct iotune_wcache *c)
{
	return c->active.n_ext == 1 &&
	       c->active.ext[0].off == c->active.base &&
	       c->active.ext[0].len == c->p.capacity;
}

enum absorb_result {
	ABSORB_NO, ABSORB_COPIED, ABSORB_TO_COPY,
	ABSORB_NO_SPACE,	/* its bytes could not be reserved */
	ABSORB_NO_RESERVE,	/* the file system cannot reserve */
};

/*
 * Takes a write into the active window once its bytes are reserved:
 * copied now, or (a large write over clean bytes) left for the caller to
 * copy; ABSORB_NO when there is no window (place_window() places one for
 * the first write) or it does not fit.
 */
static enum absorb_result absorb(struct iotune_wcache *c,
				 struct iotune_wc_op *op,
				 uint64_t now_ms)
{
	uint64_t end = op->off + op->n;
	uint8_t *dst = NULL;
	bool caller_copies = false;

	if (!c->window || op->off < c->active.base ||
	    end > c->active.base + c->p.capacity) {
		return ABSORB_NO;
	}
	switch (c->p.reserve_async ? 0 :
		iotune_wc_reserve_write(c, op->off, end)) {
	case 0:
		break;	/* async: step_absorb() saw it reserved */
	case ENOSPC:
		return ABSORB_NO_SPACE;
	default:
		return ABSORB_NO_RESERVE;
	}
	dst = c->active.data + (op->off - c->active.base);
	caller_copies = c->p.copy_size != 0 && op->n >= c->p.copy_size &&
			op->busy &&
			!iotune_wc_buf_overlaps(&c->active, op->off, end);
	if (iotune_wc_buf_insert(&c->active, op->off, op->n) != 0) {
		return ABSORB_NO;
	}
	if (c->dirty_since_ms == 0) {
		c->dirty_since_ms = now_ms != 0 ? now_ms : 1;
	}
	WC_COUNT(c, writes_cached, 1);
	WC_COUNT(c, bytes_absorbed, op->n);
	if (caller_copies) {
		op->copy_dst = dst;
		return ABSORB_TO_COPY;
	}
	memcpy(dst, op->data, op->n);
	return ABSORB_COPIED;
}

/*
 * A write that goes to disk: once no older dirty data it overlaps is
 * left, so that the older data can never land over it.
 */
static bool step_to_disk(struct iotune_wcache *c, struct iotune_wc_op *op,
			 enum iotune_flush_reason reason,
			 struct iotune_wc_action *act)
{
	uint64_t end = op->off + op->n;

	if (end >= op->off && dirty_overlaps(c, op->off, end)) {
		iotune_wc_begin_flush(c, reason, act);
		return false;
	}
	WC_COUNT(c, writes_bypassed, 1);
	op_to_disk(c, op, act);
	return true;
}

/*
 * A large write that would wait for the cache's flush goes to disk
 * itself when no older data it overlaps is cached or on its way: the
 * cache does not serialize a pipelined stream of large writes.  Small
 * writes wait; coalescing them is what the cache is for.
 */
static bool steps_aside(const struct iotune_wcache *c,
			const struct iotune_wc_op *op)
{
	uint64_t end = op->off + op->n;

	return c->p.copy_size != 0 && op->n >= c->p.copy_size &&
	       !dirty_overlaps(c, op->off, end) &&
	       !in_flight_overlaps(c, op->off, end);
}

/* A small write while the cache may cache: absorb it, or wait. */
static bool step_absorb(struct iotune_wcache *c, struct iotune_wc_op *op,
			uint64_t now_ms, struct iotune_wc_action *act)
{
	enum absorb_result r;
	int ret;

	if (in_flight_overlaps(c, op->off, op->off + op->n)) {
		return false;	/* disk_done(), copy_done() run it again */
	}
	if (c->p.reserve_async) {
		switch (iotune_wc_reserve_state(c, op, act)) {
		case 0:
			break;
		case ENOSPC:
			if (!step_to_disk(c, op, IOTUNE_FLUSH_BYPASS, act)) {
				return false;
			}
			WC_COUNT(c, reserve_full, c->no_reserve ? 0 : 1);
			return true;
		default:
			return false;	/* reserve_done() runs it again */
		}
	}
	while ((r = absorb(c, op, now_ms)) == ABSORB_NO) {
		if (c->active.n_ext > 0) {
			/* outside the window, or too many extents */
			if (iotune_wc_begin_flush(c, IOTUNE_FLUSH_NONCONTIG,
						  act)) {
				continue;
			}
			if (steps_aside(c, op)) {
				return step_to_disk(c, op, IOTUNE_FLUSH_BYPASS,
						    act);
			}
			return false;	/* behind the flush */
		}
		ret = place_window(c, op->off, op->off + op->n);
		if (ret != 0) {
			op_complete(c, op, -1, ret, act);
			return true;
		}
	}
	if (r == ABSORB_NO_SPACE || r == ABSORB_NO_RESERVE) {
		act->cannot_reserve |= r == ABSORB_NO_RESERVE;
		return step_to_disk(c, op, IOTUNE_FLUSH_BYPASS, act);
	}
	if (r == ABSORB_TO_COPY) {
		op_to_copy(c, op, act);
		return true;
	}
	if (iotune_wc_active_full(c)) {
		iotune_wc_begin_flush(c, IOTUNE_FLUSH_FULL, act);
	}
	op_complete(c, op, (ssize_t)op->n, 0, act);
	return true;
}

/* The op must hear how a retry ends first: one is due, or in flight */
static bool must_retry(const struct iotune_wcache *c)
{
	return iotune_wc_failed(c) || iotune_wc_retrying(c);
}

/*
 * The remains of a failed flush go first: the op waits for a retry (one
 * at a time), and fails with its error when the flush it waited for
 * failed; it is never acknowledged while that retry is in flight.  When
 * that one worked but another window is still failed, it waits again.
 */
static bool step_retry(struct iotune_wcache *c, struct iotune_wc_op *op,
		       struct iotune_wc_action *act)
{
	if (op->waited && c->last_failed) {
		if (op->kind == IOTUNE_WC_OP_WRITE) {
			WC_COUNT(c, writes_failed, 1);
		}
		op_complete(c, op, -1, c->last_err, act);
		return true;
	}
	if (!iotune_wc_retrying(c)) {
		iotune_wc_begin_flush(c, IOTUNE_FLUSH_RETRY, act);
	}
	return false;
}

static bool step_write(struct iotune_wcache *c, struct iotune_wc_op *op,
		       uint64_t now_ms, struct iotune_wc_action *act)
{
	if (c->error != 0) {
		WC_COUNT(c, writes_failed, 1);
		op_complete(c, op, -1, iotune_wc_take_error(c), act);
		return true;
	}
	if (!op->may_cache) {
		c->lost = true;
	}
	if (must_retry(c)) {
		return step_retry(c, op, act);
	}
	if (op->n == 0) {
		WC_COUNT(c, writes_cached, 1);
		op_complete(c, op, 0, 0, act);
		return true;
	}
	if (c->lost || c->no_reserve ||
	    !iotune_wc_would_keep(&c->p, op->off, op->n)) {
		return step_to_disk(c, op, c->lost ? IOTUNE_FLUSH_BREAK :
					       IOTUNE_FLUSH_BYPASS, act);
	}
	return step_absorb(c, op, now_ms, act);
}

static bool step_barrier(struct iotune_wcache *c, struct iotune_wc_op *op,
			 struct iotune_wc_action *act)
{
	if (c->error != 0) {
		op_complete(c, op, -1, iotune_wc_take_error(c), act);
		return true;
	}
	if (must_retry(c)) {
		return step_retry(c, op, act);
	}
	if (iotune_wc_is_dirty(c)) {
		iotune_wc_begin_flush(c, op->reason, act);
		return false;
	}
	op_complete(c, op, 0, 0, act);
	return true;
}

/*
 * Decides about the queued ops, in order, as far as it can; then starts
 * a flush that is due and says when to come back.
 */
void iotune_wc_run(struct iotune_wcache *c, uint64_t now_ms,
		   struct iotune_wc_action *act)
{
	bool moved = true;

	while (c->queue != NULL && moved) {
		struct iotune_wc_op *op = c->queue;

		if (op->kind == IOTUNE_WC_OP_WRITE) {
			moved = step_write(c, op, now_ms, act);
		} else {
			moved = step_barrier(c, op, act);
		}
		/* a flush it waits for that fails, fails it */
		op->waited |= !moved && iotune_wc_flush_in_flight(c);
	}
	iotune_wc_flush_if_due(c, now_ms, act);
	act->tick_ms = iotune_wc_next_tick(c);
}

void iotune_wc_submit(struct iotune_wcache *c,
		      struct iotune_wc_op *op,
		      uint64_t now_ms,
		      struct iotune_wc_action *act)
{
	*act = (struct iotune_wc_action) { 0 };
	if (op->kind == IOTUNE_WC_OP_WRITE) {
		WC_COUNT(c, writes_total, 1);
	}
	op->state = IOTUNE_WC_OP_QUEUED;
	op->waited = false;
	op->ret = 0;
	op->err = 0;
	op_append(&c->queue, op);
	iotune_wc_reserve_ask(c, op, act);
	iotune_wc_run(c, now_ms, act);
}

struct iotune_wc_op *iotune_wc_next_to_disk(struct iotune_wcache *c)
{
	struct iotune_wc_op *op = c->to_disk;

	if (op != NULL) {
		op_remove(&c->to_disk, op);
		op->state = IOTUNE_WC_OP_ON_DISK;
		op_append(&c->on_disk, op);
	}
	return op;
}

struct iotune_wc_op *iotune_wc_next_to_copy(struct iotune_wcache *c)
{
	struct iotune_wc_op *op = c->to_copy;

	if (op != NULL) {
		op_remove(&c->to_copy, op);
		op->state = IOTUNE_WC_OP_COPYING;
		op_append(&c->copying, op);
	}
	return op;
}

void iotune_wc_copy_done(struct iotune_wcache *c,
			 struct iotune_wc_op *op,
			 uint64_t now_ms,
			 struct iotune_wc_action *act)
{
	*act = (struct iotune_wc_action) { 0 };
	op_remove(&c->copying, op);
	op->ret = (ssize_t)op->n;
	op->err = 0;
	op->state = IOTUNE_WC_OP_DONE;
	op_append(&c->done, op);
	act->done = true;
	if (iotune_wc_active_full(c)) {
		iotune_wc_begin_flush(c, IOTUNE_FLUSH_FULL, act);
	}
	iotune_wc_run(c, now_ms, act);
}

struct iotune_wc_op *iotune_wc_next_done(struct iotune_wcache *c)
{
	struct iotune_wc_op *op = c->done;

	if (op != NULL) {
		op_remove(&c->done, op);
		op->state = IOTUNE_WC_OP_IDLE;
	}
	return op;
}

struct iotune_wc_op *iotune_wc_next_orphan(struct iotune_wcache *c)
{
	struct iotune_wc_op *op = c->on_disk;

	if (op != NULL) {
		op_remove(&c->on_disk, op);
		op->state = IOTUNE_WC_OP_IDLE;
	}
	return op;
}

bool iotune_wc_has_done(const struct iotune_wcache *c)
{
	return c->done != NULL;
}

bool iotune_wc_take_done(struct iotune_wcache *c, struct iotune_wc_op *op)
{
	if (op->state != IOTUNE_WC_OP_DONE) {
		return false;
	}
	op_remove(&c->done, op);
	op->state = IOTUNE_WC_OP_IDLE;
	return true;
}

void iotune_wc_disk_done(struct iotune_wcache *c,
			 struct iotune_wc_op *op,
			 ssize_t ret,
			 int err,
			 uint64_t now_ms,
			 struct iotune_wc_action *act)
{
	*act = (struct iotune_wc_action) { 0 };
	if (op->state == IOTUNE_WC_OP_ON_DISK) {
		op_remove(&c->on_disk, op);
		iotune_wc_note_disk_write(c, op->off, ret);
		op->state = IOTUNE_WC_OP_IDLE;
		c->landed += ret > 0 ? 1 : 0;
	}
	op->ret = ret;
	op->err = ret < 0 ? err : 0;
	iotune_wc_run(c, now_ms, act);
}

void iotune_wc_tick(struct iotune_wcache *c,
		    uint64_t now_ms,
		    struct iotune_wc_action *act)
{
	*act = (struct iotune_wc_action) { 0 };
	iotune_wc_run(c, now_ms, act);
}

bool iotune_wc_cancel(struct iotune_wcache *c, struct iotune_wc_op *op)
{
	switch (op->state) {
	case IOTUNE_WC_OP_QUEUED:
		op_leave_queue(c, op);
		break;
	case IOTUNE_WC_OP_TO_DISK:
		op_remove(&c->to_disk, op);
		break;
	case IOTUNE_WC_OP_ON_DISK:
		op_remove(&c->on_disk, op);
		break;
	case IOTUNE_WC_OP_DONE:
		op_remove(&c->done, op);
		break;
	case IOTUNE_WC_OP_TO_COPY:
	case IOTUNE_WC_OP_COPYING:
		return false;	/* its copy writes into the cache */
	case IOTUNE_WC_OP_IDLE:
		return true;
	}
	op->state = IOTUNE_WC_OP_IDLE;
	return true;
}

void iotune_wc_end(struct iotune_wcache *c, struct iotune_wc_action *act)
{
	*act = (struct iotune_wc_action) { 0 };
	act->drop_err = iotune_wc_failed(c) ? c->last_err : 0;
	act->dropped += iotune_wc_drop_flushes(c, false) +
			iotune_wc_drop_active(c);
	while (c->queue != NULL) {
		op_complete(c, c->queue, -1, EBADF, act);
	}
	/* a batch on its way is answered, and starts no other */
	iotune_wc_reserve_end(c);
}
