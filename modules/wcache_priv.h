/*
 * iotune - write cache internals shared by modules/wcache*.c (pure core)
 *
 * Copyright (C) iotune authors 2026
 * SPDX-License-Identifier: GPL-3.0-or-later
 *
 * wcache.c: the queue and its steps; wcache_flush.c: flushes and
 * errors; wcache_buf.c: buffers (a window of `capacity` bytes at `base`
 * with a sorted list of disjoint, never adjacent dirty extents) and reads.
 */

#ifndef IOTUNE_WCACHE_PRIV_H
#define IOTUNE_WCACHE_PRIV_H

#include "iotune/util.h"
#include "iotune/wcache.h"

/* counts into c->stats unless counting is off (stats NULL) */
#define WC_COUNT(c, field, n)                                          \
	do {                                                           \
		if ((c)->stats != NULL) {                              \
			(c)->stats->field += (n);                      \
		}                                                      \
	} while (0)

uint64_t iotune_wc_ext_end(const struct iotune_extent *e);

/* end of the last extent, 0 when empty */
uint64_t iotune_wc_buf_end(const struct iotune_wc_buffer *b);

/* total dirty bytes */
uint64_t iotune_wc_buf_bytes(const struct iotune_wc_buffer *b);

bool iotune_wc_buf_overlaps(const struct iotune_wc_buffer *b,
			    uint64_t off,
			    uint64_t end);

/* Adds [off, off+len), merging; -1 when it needs more extents. */
int iotune_wc_buf_insert(struct iotune_wc_buffer *b,
			 uint64_t off,
			 uint64_t len);

/* Copies the parts of b inside [off, off+n) into buf (which is at off). */
bool iotune_wc_buf_overlay(const struct iotune_wc_buffer *b,
			   uint64_t off,
			   uint8_t *buf,
			   size_t n);

/* A window's buffer: a spare one, or new pages (aligned for O_DIRECT) */
uint8_t *iotune_wc_take_buffer(struct iotune_wcache *c);

/* A buffer no longer needed: kept as a spare, or to the pool (may be NULL) */
void iotune_wc_put_buffer(struct iotune_wcache *c, uint8_t *data);

/* Gives the active, flush and spare buffers to the pool, or frees them */
void iotune_wc_free_buffers(struct iotune_wcache *c);

/* The windows on their way to disk (slots in use) */
#define WC_FOR_EACH_FLUSH(c, f)                                        \
	for ((f) = &(c)->fl[0]; (f) < &(c)->fl[(c)->p.flushes]; (f)++)  \
		if ((f)->buf.n_ext > 0)

/* wcache.c */
void iotune_wc_run(struct iotune_wcache *c, uint64_t now_ms,
		   struct iotune_wc_action *act);
bool iotune_wc_active_full(const struct iotune_wcache *c);

/* wcache_reserve.c */
/*
 * Reserves the bytes [off, end) of a write about to be absorbed: 0,
 * ENOSPC (no room: write it through) or EOPNOTSUPP (cannot reserve).
 */
int iotune_wc_reserve_write(struct iotune_wcache *c, uint64_t off,
			    uint64_t end);
/* reserve_async: a write asks for its reservation as it arrives */
void iotune_wc_reserve_ask(struct iotune_wcache *c, struct iotune_wc_op *op,
			   struct iotune_wc_action *act);
/* 0: reserved, ENOSPC: write it through, EAGAIN: wait for its verdict */
int iotune_wc_reserve_state(struct iotune_wcache *c, struct iotune_wc_op *op,
			    struct iotune_wc_action *act);
/* op leaves the queue (to disk, complete, to copy, cancelled) */
void iotune_wc_reserve_leave(struct iotune_wcache *c, struct iotune_wc_op *op);
/* the cache ends: nothing is known reserved any more */
void iotune_wc_reserve_end(struct iotune_wcache *c);

/* wcache_flush.c */
/* does [off, end) overlap a window on its way to disk? */
bool iotune_wc_slots_overlap(const struct iotune_wcache *c, uint64_t off,
			     uint64_t end);
/* a retry of failed data is being written */
bool iotune_wc_retrying(const struct iotune_wcache *c);
bool iotune_wc_begin_flush(struct iotune_wcache *c,
			   enum iotune_flush_reason reason,
			   struct iotune_wc_action *act);
/* drops the data of the slots (of the failed ones only): its bytes */
uint64_t iotune_wc_drop_flushes(struct iotune_wcache *c, bool failed_only);
uint64_t iotune_wc_drop_active(struct iotune_wcache *c);
void iotune_wc_flush_if_due(struct iotune_wcache *c, uint64_t now_ms,
			    struct iotune_wc_action *act);

#endif /* IOTUNE_WCACHE_PRIV_H */
