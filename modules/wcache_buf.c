/*
 * iotune - write cache buffers: extents, reads from the cache, snapshots
 * (pure core, no Samba).  The queue, flushes and errors are in wcache.c.
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

#include "wcache_buf.h"

/* extents: sorted by offset, disjoint and never adjacent */

uint64_t iotune_wc_ext_end(const struct iotune_extent *e)
{
	return e->off + e->len;
}

uint64_t iotune_wc_buf_end(const struct iotune_wc_buffer *b)
{
	if (b->n_ext == 0) {
		return 0;
	}
	return iotune_wc_ext_end(&b->ext[b->n_ext - 1]);
}

uint64_t iotune_wc_buf_bytes(const struct iotune_wc_buffer *b)
{
	uint64_t bytes = 0;
	size_t i;

	for (i = 0; i < b->n_ext; i++) {
		bytes += b->ext[i].len;
	}
	return bytes;
}

static bool ranges_overlap(uint64_t a_off, uint64_t a_end,
			   uint64_t b_off, uint64_t b_end)
{
	return a_off < b_end && b_off < a_end;
}

bool iotune_wc_buf_overlaps(const struct iotune_wc_buffer *b,
			    uint64_t off, uint64_t end)
{
	size_t i;

	for (i = 0; i < b->n_ext; i++) {
		if (ranges_overlap(off, end, b->ext[i].off,
				   iotune_wc_ext_end(&b->ext[i]))) {
			return true;
		}
	}
	return false;
}

/* the extent containing pos, or NULL */
static const struct iotune_extent *buffer_find(
	const struct iotune_wc_buffer *b,
	uint64_t pos)
{
	size_t i;

	for (i = 0; i < b->n_ext; i++) {
		if (pos >= b->ext[i].off &&
		    pos < iotune_wc_ext_end(&b->ext[i])) {
			return &b->ext[i];
		}
	}
	return NULL;
}

/* Adds [off, off+len), merging overlapping and adjacent extents. */
int iotune_wc_buf_insert(struct iotune_wc_buffer *b, uint64_t off,
			 uint64_t len)
{
	uint64_t end = off + len;
	size_t i = 0;
	size_t j;
	size_t n_new;

	while (i < b->n_ext && iotune_wc_ext_end(&b->ext[i]) < off) {
		i++;
	}
	for (j = i; j < b->n_ext && b->ext[j].off <= end; j++) {
		off = MIN(off, b->ext[j].off);
		end = MAX(end, iotune_wc_ext_end(&b->ext[j]));
	}
	n_new = b->n_ext - (j - i) + 1;
	if (n_new > IOTUNE_WC_MAX_EXTENTS) {
		return -1;
	}
	memmove(&b->ext[i + 1], &b->ext[j],
		(b->n_ext - j) * sizeof(b->ext[0]));
	b->ext[i] = (struct iotune_extent) { .off = off, .len = end - off };
	b->n_ext = n_new;
	return 0;
}

/* Copies the parts of b inside [off, off+n) into buf (which is at off). */
bool iotune_wc_buf_overlay(const struct iotune_wc_buffer *b,
			   uint64_t off, uint8_t *buf, size_t n)
{
	uint64_t end = off + n;
	bool any = false;
	size_t i;

	for (i = 0; i < b->n_ext; i++) {
		uint64_t lo = MAX(off, b->ext[i].off);
		uint64_t hi = MIN(end, iotune_wc_ext_end(&b->ext[i]));

		if (lo >= hi) {
			continue;
		}
		memcpy(buf + (lo - off), b->data + (lo - b->base), hi - lo);
		any = true;
	}
	return any;
}

uint64_t iotune_wc_logical_size(const struct iotune_wcache *c)
{
	uint64_t size = c->disk_size;

	size = MAX(size, iotune_wc_buf_end(&c->active));
	size = MAX(size, iotune_wc_buf_end(&c->flushing));
	return size;
}

static bool dirty_covers(const struct iotune_wcache *c, uint64_t off,
			 uint64_t end)
{
	uint64_t pos = off;

	while (pos < end) {
		const struct iotune_extent *a = buffer_find(&c->active, pos);
		const struct iotune_extent *f = buffer_find(&c->flushing, pos);
		uint64_t next = 0;

		if (a != NULL) {
			next = iotune_wc_ext_end(a);
		}
		if (f != NULL) {
			next = MAX(next, iotune_wc_ext_end(f));
		}
		if (next == 0) {
			return false;
		}
		pos = next;
	}
	return true;
}

bool iotune_wc_read_cached(struct iotune_wcache *c,
			   uint64_t off,
			   void *buf,
			   size_t n,
			   size_t *got)
{
	uint64_t size = iotune_wc_logical_size(c);
	uint64_t end;

	if (n == 0 || off >= size) {
		return false;
	}
	end = MIN(off + n, size);
	if (end < off || !dirty_covers(c, off, end)) {
		return false;
	}
	iotune_wc_buf_overlay(&c->flushing, off, buf, end - off);
	iotune_wc_buf_overlay(&c->active, off, buf, end - off);
	*got = end - off;
	WC_COUNT(c, read_hits_full, 1);
	return true;
}

struct iotune_wc_piece {
	uint64_t off;
	uint64_t len;
	uint8_t *data;
};

struct iotune_wc_snapshot {
	size_t n;
	uint64_t end;
	struct iotune_wc_piece piece[];
};

static size_t count_pieces(const struct iotune_wc_buffer *b, uint64_t off,
			   uint64_t end, uint64_t *bytes)
{
	size_t count = 0;
	size_t i;

	for (i = 0; i < b->n_ext; i++) {
		uint64_t lo = MAX(off, b->ext[i].off);
		uint64_t hi = MIN(end, iotune_wc_ext_end(&b->ext[i]));

		if (lo < hi) {
			count++;
			*bytes += hi - lo;
		}
	}
	return count;
}

static void copy_pieces(const struct iotune_wc_buffer *b, uint64_t off,
			uint64_t end, struct iotune_wc_snapshot *s,
			uint8_t **data)
{
	size_t i;

	for (i = 0; i < b->n_ext; i++) {
		uint64_t lo = MAX(off, b->ext[i].off);
		uint64_t hi = MIN(end, iotune_wc_ext_end(&b->ext[i]));
		struct iotune_wc_piece *p = NULL;

		if (lo >= hi) {
			continue;
		}
		p = &s->piece[s->n++];
		p->off = lo;
		p->len = hi - lo;
		p->data = *data;
		memcpy(p->data, b->data + (lo - b->base), p->len);
		*data += p->len;
		s->end = MAX(s->end, hi);
	}
}

int iotune_wc_snapshot_take(const struct iotune_wcache *c,
			    uint64_t off,
			    size_t n,
			    struct iotune_wc_snapshot **snap)
{
	struct iotune_wc_snapshot *s = NULL;
	uint64_t end = off + n;
	uint64_t bytes = 0;
	size_t count;
	uint8_t *data = NULL;

	if (end < off) {
		end = UINT64_MAX;
	}
	*snap = NULL;
	count = count_pieces(&c->flushing, off, end, &bytes) +
		count_pieces(&c->active, off, end, &bytes);
	if (count == 0) {
		return 0;
	}
	s = malloc(sizeof(*s) + count * sizeof(s->piece[0]) + bytes);
	if (s == NULL) {
		return ENOMEM;
	}
	s->n = 0;
	s->end = 0;
	data = (uint8_t *)&s->piece[count];
	copy_pieces(&c->flushing, off, end, s, &data);
	copy_pieces(&c->active, off, end, s, &data);
	*snap = s;
	return 0;
}

void iotune_wc_snapshot_free(struct iotune_wc_snapshot *s)
{
	free(s);
}

size_t iotune_wc_read_overlay(struct iotune_wcache *c,
			      const struct iotune_wc_snapshot *snap,
			      uint64_t off,
			      void *buf,
			      size_t n,
			      size_t disk_got)
{
	uint8_t *out = buf;
	uint64_t size = 0;
	size_t valid = MIN(disk_got, n);
	bool any = false;
	size_t i;

	if (c != NULL) {
		size = iotune_wc_logical_size(c);
	}
	if (snap != NULL) {
		size = MAX(size, snap->end);
	}
	if (size > off) {
		size_t upto = (size_t)MIN((uint64_t)n, size - off);

		if (upto > valid) {
			memset(out + valid, 0, upto - valid);
			valid = upto;
		}
	}
	for (i = 0; snap != NULL && i < snap->n; i++) {
		const struct iotune_wc_piece *p = &snap->piece[i];
		uint64_t lo = MAX(off, p->off);
		uint64_t hi = MIN(off + valid, p->off + p->len);

		if (lo < hi) {
			memcpy(out + (lo - off), p->data + (lo - p->off),
			       hi - lo);
			any = true;
		}
	}
	if (c != NULL) {
		any |= iotune_wc_buf_overlay(&c->flushing, off, out, valid);
		any |= iotune_wc_buf_overlay(&c->active, off, out, valid);
		if (any) {
			WC_COUNT(c, read_hits_overlay, 1);
		}
	}
	return valid;
}
