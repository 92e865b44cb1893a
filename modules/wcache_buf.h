/*
 * iotune - write cache buffers (pure core, private to modules/wcache*.c)
 *
 * Copyright (C) iotune authors 2026
 * SPDX-License-Identifier: GPL-3.0-or-later
 *
 * A buffer is a window of `capacity` bytes at `base` with a sorted list
 * of disjoint, never adjacent dirty extents.  These helpers know nothing
 * of flushes, queues or errors (modules/wcache.c has those).
 */

#ifndef IOTUNE_WCACHE_BUF_H
#define IOTUNE_WCACHE_BUF_H

#include "iotune/wcache.h"

#ifndef MIN
#define MIN(a, b) ((a) < (b) ? (a) : (b))
#endif
#ifndef MAX
#define MAX(a, b) ((a) > (b) ? (a) : (b))
#endif

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

#endif /* IOTUNE_WCACHE_BUF_H */
