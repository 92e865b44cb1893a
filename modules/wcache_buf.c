/*
 * iotune - write cache buffers: their memory (and a process's pool of
 * them), extents, reads from the cache, snapshots (pure core, no Samba).
 * The queue is in wcache.c, flushes and errors in wcache_flush.c.
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
#include <sys/mman.h>

#include "wcache_priv.h"

/* extents: sorted by offset, disjoint and never adjacent */

uint64_t iotune_wc_ext_end(const struct iotune_extent *e)
{
	return e->off + e->len;
}

/*
 * Window buffers are mapped pages of their own, not malloc()ed: they
 * start on a page (a flush on an O_DIRECT share needs no bounce), and
 * freeing a megabyte does not move glibc's dynamic mmap threshold, which
 * made smbd's own per-request buffers come from a heap that was trimmed
 * and faulted in again at every request (1 MiB writes at 0.76-0.93x of a
 * share without iotune after small writes had been cached).
 */
static void buffer_unmap(struct iotune_wcache *c, uint8_t *data)
{
	if (data != NULL) {
		munmap(data, c->p.capacity);
	}
}

_Static_assert(IOTUNE_WC_POOL_MAX >= IOTUNE_WC_MAX_FLUSHES + 1,
	       "the pool holds the buffers of a cache with every slot used");

/* A buffer of the cache's capacity from the process's pool, or NULL */
static uint8_t *pool_take(struct iotune_wcache *c)
{
	struct iotune_wc_pool *pool = c->p.pool;
	uint8_t *data = NULL;
	unsigned i;

	if (pool == NULL) {
		return NULL;
	}
	for (i = 0; i < pool->n; i++) {
		if (pool->len[i] == c->p.capacity) {
			data = pool->buf[i];
			pool->n--;
			pool->bytes -= c->p.capacity;
			pool->buf[i] = pool->buf[pool->n];
			pool->len[i] = pool->len[pool->n];
			pool->taken++;
			return data;
		}
	}
	return NULL;
}

/* Whether the pool may keep a buffer of the cache's capacity */
static bool pool_has_room(const struct iotune_wcache *c)
{
	const struct iotune_wc_pool *pool = c->p.pool;
	uint64_t most = IOTUNE_WC_POOL_BYTES;

	if (pool == NULL || pool->n == IOTUNE_WC_POOL_MAX) {
		return false;
	}
	if (pool->max_bytes != 0) {
		most = pool->max_bytes;
	}
	return pool->bytes + c->p.capacity <= most;
}

/*
 * A buffer the cache no longer needs (it ends, or has spares enough)
 * goes to the process's pool while there is room, its pages given to
 * the kernel's lazy free; else, or without lazy free, it is unmapped.
 */
static void pool_put(struct iotune_wcache *c, uint8_t *data)
{
	struct iotune_wc_pool *pool = c->p.pool;

	if (data == NULL) {
		return;
	}
#ifdef MADV_FREE
	if (pool_has_room(c) &&
	    madvise(data, c->p.capacity, MADV_FREE) == 0) {
		pool->buf[pool->n] = data;
		pool->len[pool->n] = c->p.capacity;
		pool->n++;
		pool->bytes += c->p.capacity;
		return;
	}
#endif
	buffer_unmap(c, data);
}

void iotune_wc_pool_free(struct iotune_wc_pool *pool)
{
	unsigned i;

	for (i = 0; i < pool->n; i++) {
		munmap(pool->buf[i], pool->len[i]);
	}
	pool->n = 0;
	pool->bytes = 0;
}

uint8_t *iotune_wc_take_buffer(struct iotune_wcache *c)
{
	void *data = NULL;
	unsigned s;

	for (s = 0; s < IOTUNE_WC_MAX_FLUSHES; s++) {
		if (c->spare[s] != NULL) {
			data = c->spare[s];
			c->spare[s] = NULL;
			return data;
		}
	}
	data = pool_take(c);
	if (data != NULL) {
		return data;
	}
	data = mmap(NULL, c->p.capacity, PROT_READ | PROT_WRITE,
		    MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
	return data == MAP_FAILED ? NULL : data;
}

void iotune_wc_put_buffer(struct iotune_wcache *c, uint8_t *data)
{
	unsigned s;

	for (s = 0; data != NULL && s < IOTUNE_WC_MAX_FLUSHES; s++) {
		if (c->spare[s] == NULL) {
			c->spare[s] = data;
			return;
		}
	}
	pool_put(c, data);
}

void iotune_wc_free_buffers(struct iotune_wcache *c)
{
	unsigned s;

	pool_put(c, c->active.data);
	c->active.data = NULL;
	for (s = 0; s < IOTUNE_WC_MAX_FLUSHES; s++) {
		pool_put(c, c->fl[s].buf.data);
		c->fl[s].buf.data = NULL;
		pool_put(c, c->spare[s]);
		c->spare[s] = NULL;
	}
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

/*
 * The part of [lo, hi) from pos on that no copy in flight of c writes:
 * its start (*skip past copies) and its end; ops lists of c are short.
 */
static uint64_t copy_cut(const struct iotune_wcache *c, uint64_t pos,
			 uint64_t hi, uint64_t *start)
{
	const struct iotune_wc_op *lists[2] = { c->to_copy, c->copying };
	uint64_t cut = hi;
	bool moved = true;
	size_t l;

	*start = pos;
	while (moved) {
		const struct iotune_wc_op *op = NULL;

		moved = false;
		for (l = 0; l < 2; l++) {
			for (op = lists[l]; op != NULL; op = op->next) {
				uint64_t end = op->off + op->n;

				if (op->off <= *start && *start < end) {
					*start = end;
					moved = true;
				}
			}
		}
	}
	for (l = 0; l < 2; l++) {
		const struct iotune_wc_op *op = NULL;

		for (op = lists[l]; op != NULL; op = op->next) {
			if (op->off > *start && op->off < cut) {
				cut = op->off;
			}
		}
	}
	return cut;
}

/*
 * Calls fn for each part of b's dirty data inside [off, end), leaving out
 * what copies in flight of c (when c is not NULL) still write.
 */
static void for_each_piece(const struct iotune_wcache *c,
			   const struct iotune_wc_buffer *b,
			   uint64_t off, uint64_t end,
			   void (*fn)(const struct iotune_wc_buffer *b,
				      uint64_t lo, uint64_t hi, void *arg),
			   void *arg)
{
	size_t i;

	for (i = 0; i < b->n_ext; i++) {
		uint64_t lo = MAX(off, b->ext[i].off);
		uint64_t hi = MIN(end, iotune_wc_ext_end(&b->ext[i]));

		while (lo < hi) {
			uint64_t start = lo;
			uint64_t cut = hi;

			if (c != NULL) {
				cut = copy_cut(c, lo, hi, &start);
			}
			if (start < cut && start < hi) {
				fn(b, start, MIN(cut, hi), arg);
			}
			lo = MAX(cut, start);
		}
	}
}

static void end_piece(const struct iotune_wc_buffer *b, uint64_t lo,
		      uint64_t hi, void *arg)
{
	uint64_t *end = arg;

	*end = MAX(*end, hi);
}

/* The size with cached data; writes still being copied do not count. */
uint64_t iotune_wc_logical_size(const struct iotune_wcache *c)
{
	const struct iotune_wc_flush *f = NULL;
	uint64_t size = c->disk_size;
	uint64_t active_end = iotune_wc_buf_end(&c->active);

	WC_FOR_EACH_FLUSH(c, f) {
		size = MAX(size, iotune_wc_buf_end(&f->buf));
	}

	if (active_end > size && iotune_wc_copies_in_flight(c)) {
		active_end = 0;
		for_each_piece(c, &c->active, 0, UINT64_MAX, end_piece,
			       &active_end);
	}
	return MAX(size, active_end);
}

struct overlay_arg {
	uint64_t off;
	uint8_t *buf;
	bool any;
};

static void overlay_piece(const struct iotune_wc_buffer *b, uint64_t lo,
			  uint64_t hi, void *arg)
{
	struct overlay_arg *o = arg;

	memcpy(o->buf + (lo - o->off), b->data + (lo - b->base), hi - lo);
	o->any = true;
}

/* Copies the parts of b inside [off, off+n) into buf (which is at off). */
bool iotune_wc_buf_overlay(const struct iotune_wc_buffer *b,
			   uint64_t off, uint8_t *buf, size_t n)
{
	struct overlay_arg o = { .off = off, .buf = buf };

	for_each_piece(NULL, b, off, off + n, overlay_piece, &o);
	return o.any;
}

/* The same for the windows on their way to disk (they never overlap) */
static bool overlay_flushes(const struct iotune_wcache *c, uint64_t off,
			    uint8_t *buf, size_t n)
{
	const struct iotune_wc_flush *f = NULL;
	bool any = false;

	WC_FOR_EACH_FLUSH(c, f) {
		any |= iotune_wc_buf_overlay(&f->buf, off, buf, n);
	}
	return any;
}

/* The same for the active buffer, without what copies still write */
static bool overlay_active(const struct iotune_wcache *c, uint64_t off,
			   uint8_t *buf, size_t n)
{
	struct overlay_arg o = { .off = off, .buf = buf };

	for_each_piece(c, &c->active, off, off + n, overlay_piece, &o);
	return o.any;
}


static bool dirty_covers(const struct iotune_wcache *c, uint64_t off,
			 uint64_t end)
{
	uint64_t pos = off;

	while (pos < end) {
		const struct iotune_extent *a = buffer_find(&c->active, pos);
		const struct iotune_wc_flush *f = NULL;
		uint64_t next = 0;

		if (a != NULL) {
			next = iotune_wc_ext_end(a);
		}
		WC_FOR_EACH_FLUSH(c, f) {
			const struct iotune_extent *e = buffer_find(&f->buf,
								    pos);

			if (e != NULL) {
				next = MAX(next, iotune_wc_ext_end(e));
			}
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
	uint64_t start;
	uint64_t end;

	if (n == 0 || off >= size) {
		return false;
	}
	end = MIN(off + n, size);
	if (end < off || !dirty_covers(c, off, end) ||
	    copy_cut(c, off, end, &start) != end || start != off) {
		return false;	/* not all there, or copies still write */
	}
	overlay_flushes(c, off, buf, end - off);
	overlay_active(c, off, buf, end - off);
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

struct snap_arg {
	size_t count;
	uint64_t bytes;
	struct iotune_wc_snapshot *s;
	uint8_t *data;
};

static void count_piece(const struct iotune_wc_buffer *b, uint64_t lo,
			uint64_t hi, void *arg)
{
	struct snap_arg *a = arg;

	a->count++;
	a->bytes += hi - lo;
}

static void copy_piece(const struct iotune_wc_buffer *b, uint64_t lo,
		       uint64_t hi, void *arg)
{
	struct snap_arg *a = arg;
	struct iotune_wc_piece *p = &a->s->piece[a->s->n++];

	p->off = lo;
	p->len = hi - lo;
	p->data = a->data;
	memcpy(p->data, b->data + (lo - b->base), p->len);
	a->data += p->len;
	a->s->end = MAX(a->s->end, hi);
}

/* the dirty data in [off, end): the flushes first, the newer active last */
static void snapshot_walk(const struct iotune_wcache *c, uint64_t off,
			  uint64_t end,
			  void (*fn)(const struct iotune_wc_buffer *b,
				     uint64_t lo, uint64_t hi, void *arg),
			  struct snap_arg *a)
{
	const struct iotune_wc_flush *f = NULL;

	WC_FOR_EACH_FLUSH(c, f) {
		for_each_piece(NULL, &f->buf, off, end, fn, a);
	}
	for_each_piece(c, &c->active, off, end, fn, a);
}

int iotune_wc_snapshot_take(const struct iotune_wcache *c,
			    uint64_t off,
			    size_t n,
			    struct iotune_wc_snapshot **snap)
{
	struct iotune_wc_snapshot *s = NULL;
	struct snap_arg a = { 0 };
	uint64_t end = off + n;

	if (end < off) {
		end = UINT64_MAX;
	}
	*snap = NULL;
	snapshot_walk(c, off, end, count_piece, &a);
	if (a.count == 0) {
		return 0;
	}
	s = malloc(sizeof(*s) + a.count * sizeof(s->piece[0]) + a.bytes);
	if (s == NULL) {
		return ENOMEM;
	}
	s->n = 0;
	s->end = 0;
	a.s = s;
	a.data = (uint8_t *)&s->piece[a.count];
	snapshot_walk(c, off, end, copy_piece, &a);
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
		any |= overlay_flushes(c, off, out, valid);
		any |= overlay_active(c, off, out, valid);
		if (any) {
			WC_COUNT(c, read_hits_overlay, 1);
		}
	}
	return valid;
}
