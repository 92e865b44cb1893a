/*
 * iotune - per-file write cache (pure core, no Samba)
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

#include "iotune/wcache.h"

/* consecutive EINTR/EAGAIN results before a flush piece counts as failed */
#define IOTUNE_WC_MAX_RETRIES 16

#define MIN(a, b) ((a) < (b) ? (a) : (b))
#define MAX(a, b) ((a) > (b) ? (a) : (b))

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

/* extents: sorted by offset, disjoint and never adjacent */

static uint64_t ext_end(const struct iotune_extent *e)
{
	return e->off + e->len;
}

static uint64_t buffer_end(const struct iotune_wc_buffer *b)
{
	if (b->n_ext == 0) {
		return 0;
	}
	return ext_end(&b->ext[b->n_ext - 1]);
}

static bool ranges_overlap(uint64_t a_off, uint64_t a_end,
			   uint64_t b_off, uint64_t b_end)
{
	return a_off < b_end && b_off < a_end;
}

static bool buffer_overlaps(const struct iotune_wc_buffer *b,
			    uint64_t off, uint64_t end)
{
	size_t i;

	for (i = 0; i < b->n_ext; i++) {
		if (ranges_overlap(off, end, b->ext[i].off, ext_end(&b->ext[i]))) {
			return true;
		}
	}
	return false;
}

/* the extent containing pos, or NULL */
static const struct iotune_extent *buffer_find(const struct iotune_wc_buffer *b,
					       uint64_t pos)
{
	size_t i;

	for (i = 0; i < b->n_ext; i++) {
		if (pos >= b->ext[i].off && pos < ext_end(&b->ext[i])) {
			return &b->ext[i];
		}
	}
	return NULL;
}

/* Adds [off, off+len), merging overlapping and adjacent extents. */
static int buffer_insert(struct iotune_wc_buffer *b, uint64_t off,
			 uint64_t len)
{
	uint64_t end = off + len;
	size_t i = 0;
	size_t j;
	size_t n_new;

	while (i < b->n_ext && ext_end(&b->ext[i]) < off) {
		i++;
	}
	for (j = i; j < b->n_ext && b->ext[j].off <= end; j++) {
		off = MIN(off, b->ext[j].off);
		end = MAX(end, ext_end(&b->ext[j]));
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
static bool buffer_overlay(const struct iotune_wc_buffer *b, uint64_t off,
			   uint8_t *buf, size_t n)
{
	uint64_t end = off + n;
	bool any = false;
	size_t i;

	for (i = 0; i < b->n_ext; i++) {
		uint64_t lo = MAX(off, b->ext[i].off);
		uint64_t hi = MIN(end, ext_end(&b->ext[i]));

		if (lo >= hi) {
			continue;
		}
		memcpy(buf + (lo - off), b->data + (lo - b->base), hi - lo);
		any = true;
	}
	return any;
}

int iotune_wc_init(struct iotune_wcache *c,
		   uint64_t capacity,
		   uint64_t timeout_ms,
		   uint64_t disk_size,
		   struct iotune_wc_stats *stats)
{
	if (capacity == 0 || stats == NULL) {
		return EINVAL;
	}
	*c = (struct iotune_wcache) {
		.capacity = capacity,
		.timeout_ms = timeout_ms,
		.disk_size = disk_size,
		.stats = stats,
	};
	return 0;
}

void iotune_wc_destroy(struct iotune_wcache *c)
{
	free(c->active.data);
	free(c->flushing.data);
	free(c->spare);
	c->active.data = NULL;
	c->flushing.data = NULL;
	c->spare = NULL;
	c->active.n_ext = 0;
	c->flushing.n_ext = 0;
}

int iotune_wc_take_error(struct iotune_wcache *c)
{
	int err = c->error;

	c->error = 0;
	return err;
}

bool iotune_wc_is_dirty(const struct iotune_wcache *c)
{
	return c->active.n_ext > 0 || c->flushing.n_ext > 0;
}

bool iotune_wc_flush_in_flight(const struct iotune_wcache *c)
{
	return c->flush_in_flight;
}

static bool bypass_overlaps(const struct iotune_wcache *c, uint64_t off,
			    uint64_t end)
{
	return c->bypass_in_flight > 0 &&
	       ranges_overlap(off, end, c->bypass_lo, c->bypass_hi);
}

static bool active_full(const struct iotune_wcache *c)
{
	return c->active.n_ext == 1 &&
	       c->active.ext[0].off == c->active.base &&
	       c->active.ext[0].len == c->capacity;
}

/* A window for a first write: aligned to its size, to 4K, or at off. */
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

static bool ensure_active_buffer(struct iotune_wcache *c)
{
	if (c->active.data != NULL) {
		return true;
	}
	if (c->spare != NULL) {
		c->active.data = c->spare;
		c->spare = NULL;
		return true;
	}
	c->active.data = malloc(c->capacity);
	return c->active.data != NULL;
}

enum iotune_wc_verdict iotune_wc_write(struct iotune_wcache *c,
				       uint64_t off,
				       const void *data,
				       size_t n,
				       uint64_t now_ms,
				       enum iotune_flush_reason *reason,
				       int *err)
{
	uint64_t end = off + n;

	if (c->error != 0) {
		*err = iotune_wc_take_error(c);
		c->stats->writes_total++;
		return IOTUNE_WC_ERROR;
	}
	if (end < off) {
		/* let the file system report the bad offset */
		c->stats->writes_total++;
		c->stats->writes_bypassed++;
		return IOTUNE_WC_BYPASS;
	}
	if (n > c->capacity) {
		if (buffer_overlaps(&c->active, off, end) ||
		    buffer_overlaps(&c->flushing, off, end)) {
			*reason = IOTUNE_FLUSH_BYPASS;
			return IOTUNE_WC_FLUSH_FIRST;
		}
		c->stats->writes_total++;
		c->stats->writes_bypassed++;
		return IOTUNE_WC_BYPASS;
	}
	if (bypass_overlaps(c, off, end)) {
		/* its flush must not overtake the disk write in flight */
		*reason = IOTUNE_FLUSH_BYPASS;
		return IOTUNE_WC_FLUSH_FIRST;
	}
	if (c->active.n_ext == 0) {
		if (!ensure_active_buffer(c)) {
			*err = ENOMEM;
			c->stats->writes_total++;
			return IOTUNE_WC_ERROR;
		}
		c->active.base = choose_base(c->capacity, off, end);
	} else if (off < c->active.base ||
		   end > c->active.base + c->capacity) {
		*reason = IOTUNE_FLUSH_NONCONTIG;
		return IOTUNE_WC_FLUSH_FIRST;
	}
	if (n == 0) {
		c->stats->writes_total++;
		c->stats->writes_cached++;
		return IOTUNE_WC_ABSORBED;
	}
	if (buffer_insert(&c->active, off, n) != 0) {
		*reason = IOTUNE_FLUSH_NONCONTIG;
		return IOTUNE_WC_FLUSH_FIRST;
	}
	memcpy(c->active.data + (off - c->active.base), data, n);
	if (c->dirty_since_ms == 0) {
		c->dirty_since_ms = now_ms != 0 ? now_ms : 1;
	}
	c->stats->writes_total++;
	c->stats->writes_cached++;
	c->stats->bytes_absorbed += n;
	return IOTUNE_WC_ABSORBED;
}

void iotune_wc_bypass_start(struct iotune_wcache *c, uint64_t off, size_t n)
{
	uint64_t end = off + n;

	if (c->bypass_in_flight == 0) {
		c->bypass_lo = off;
		c->bypass_hi = end;
	} else {
		c->bypass_lo = MIN(c->bypass_lo, off);
		c->bypass_hi = MAX(c->bypass_hi, end);
	}
	c->bypass_in_flight++;
}

void iotune_wc_note_disk_write(struct iotune_wcache *c,
			       uint64_t off,
			       ssize_t written)
{
	if (written > 0) {
		c->disk_size = MAX(c->disk_size, off + (uint64_t)written);
	}
}

void iotune_wc_bypass_done(struct iotune_wcache *c,
			   uint64_t off,
			   size_t n,
			   ssize_t written)
{
	if (c->bypass_in_flight > 0) {
		c->bypass_in_flight--;
	}
	if (c->bypass_in_flight == 0) {
		c->bypass_lo = 0;
		c->bypass_hi = 0;
	}
	iotune_wc_note_disk_write(c, off, written);
}

bool iotune_wc_wants_flush(const struct iotune_wcache *c,
			   uint64_t now_ms,
			   enum iotune_flush_reason *reason)
{
	uint64_t deadline;

	if (c->flush_in_flight) {
		return false;
	}
	if (active_full(c)) {
		*reason = IOTUNE_FLUSH_FULL;
		return true;
	}
	deadline = iotune_wc_deadline(c);
	if (deadline != 0 && now_ms >= deadline) {
		*reason = IOTUNE_FLUSH_TIMEOUT;
		return true;
	}
	return false;
}

uint64_t iotune_wc_deadline(const struct iotune_wcache *c)
{
	uint64_t since = c->dirty_since_ms;

	if (c->flushing.n_ext > 0 && !c->flush_in_flight &&
	    (since == 0 || c->failed_at_ms < since)) {
		since = c->failed_at_ms;
	}
	if (since == 0) {
		return 0;
	}
	return since + c->timeout_ms;
}

static void move_active_to_flushing(struct iotune_wcache *c)
{
	uint8_t *free_data = c->flushing.data;

	c->flushing = c->active;
	c->active.n_ext = 0;
	c->active.base = 0;
	c->active.data = free_data != NULL ? free_data : c->spare;
	if (c->active.data == c->spare) {
		c->spare = NULL;
	}
	c->flush_idx = 0;
	c->flush_pos = 0;
}

bool iotune_wc_flush_begin(struct iotune_wcache *c,
			   enum iotune_flush_reason reason,
			   bool force)
{
	const struct iotune_wc_buffer *b = NULL;

	if (c->flush_in_flight) {
		return false;
	}
	if (c->flushing.n_ext == 0) {
		b = &c->active;
	} else {
		b = &c->flushing;	/* the remains of a failed flush */
	}
	if (b->n_ext == 0) {
		return false;
	}
	if (!force && bypass_overlaps(c, b->ext[0].off, buffer_end(b))) {
		return false;
	}
	if (b == &c->active) {
		move_active_to_flushing(c);
		c->dirty_since_ms = 0;
	}
	c->failed_at_ms = 0;
	c->flush_in_flight = true;
	c->stats->flushes[reason]++;
	return true;
}

static void finish_flush(struct iotune_wcache *c)
{
	c->flush_in_flight = false;
	c->flushing.n_ext = 0;
	c->flush_idx = 0;
	c->flush_pos = 0;
	if (c->spare == NULL) {
		c->spare = c->flushing.data;
	} else {
		free(c->flushing.data);
	}
	c->flushing.data = NULL;
}

bool iotune_wc_flush_next(struct iotune_wcache *c,
			  uint64_t *off,
			  const uint8_t **buf,
			  size_t *len)
{
	if (!c->flush_in_flight) {
		return false;
	}
	while (c->flush_idx < c->flushing.n_ext) {
		const struct iotune_extent *e = &c->flushing.ext[c->flush_idx];

		if (c->flush_pos < e->len) {
			*off = e->off + c->flush_pos;
			*buf = c->flushing.data + (*off - c->flushing.base);
			*len = e->len - c->flush_pos;
			return true;
		}
		c->flush_idx++;
		c->flush_pos = 0;
	}
	finish_flush(c);
	return false;
}

void iotune_wc_flush_result(struct iotune_wcache *c,
			    ssize_t ret,
			    int err,
			    uint64_t now_ms)
{
	const struct iotune_extent *e = NULL;
	struct iotune_wc_stats *st = c->stats;

	if (!c->flush_in_flight || c->flush_idx >= c->flushing.n_ext) {
		return;
	}
	e = &c->flushing.ext[c->flush_idx];
	if (ret > 0) {
		uint64_t want = e->len - c->flush_pos;
		uint64_t got = MIN((uint64_t)ret, want);

		st->flush_writes++;
		st->flush_bytes += got;
		st->flush_size[iotune_flush_size_bucket(got)]++;
		if (got < want) {
			st->flush_short_writes++;
		}
		c->flush_pos += got;
		c->disk_size = MAX(c->disk_size, e->off + c->flush_pos);
		c->flush_retries = 0;
		return;
	}
	if (ret < 0 && (err == EINTR || err == EAGAIN) &&
	    c->flush_retries < IOTUNE_WC_MAX_RETRIES) {
		c->flush_retries++;
		return;
	}
	if (ret == 0 || err == 0) {
		err = EIO;
	}
	/* keep the rest in flushing: retried by the next flush */
	c->error = err;
	c->flush_retries = 0;
	c->flush_in_flight = false;
	c->failed_at_ms = now_ms != 0 ? now_ms : 1;
	st->flush_errors++;
}

int iotune_wc_flush_sync(struct iotune_wcache *c,
			 enum iotune_flush_reason reason,
			 const struct iotune_wc_io_ops *ops,
			 uint64_t now_ms)
{
	uint64_t off;
	const uint8_t *buf = NULL;
	size_t len;

	if (c->flush_in_flight) {
		return EBUSY;
	}
	while (iotune_wc_flush_begin(c, reason, true)) {
		while (iotune_wc_flush_next(c, &off, &buf, &len)) {
			ssize_t ret;

			errno = 0;
			ret = ops->pwrite(ops->private_data, buf, len, off);
			iotune_wc_flush_result(c, ret, ret < 0 ? errno : 0,
					       now_ms);
			if (!c->flush_in_flight) {
				break;
			}
		}
		if (c->error != 0) {
			break;
		}
	}
	return iotune_wc_take_error(c);
}

uint64_t iotune_wc_logical_size(const struct iotune_wcache *c)
{
	uint64_t size = c->disk_size;

	size = MAX(size, buffer_end(&c->active));
	size = MAX(size, buffer_end(&c->flushing));
	return size;
}

void iotune_wc_set_disk_size(struct iotune_wcache *c, uint64_t size)
{
	c->disk_size = size;
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
			next = ext_end(a);
		}
		if (f != NULL) {
			next = MAX(next, ext_end(f));
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
	buffer_overlay(&c->flushing, off, buf, end - off);
	buffer_overlay(&c->active, off, buf, end - off);
	*got = end - off;
	c->stats->read_hits_full++;
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
		uint64_t hi = MIN(end, ext_end(&b->ext[i]));

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
		uint64_t hi = MIN(end, ext_end(&b->ext[i]));
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
		any |= buffer_overlay(&c->flushing, off, out, valid);
		any |= buffer_overlay(&c->active, off, out, valid);
		if (any) {
			c->stats->read_hits_overlay++;
		}
	}
	return valid;
}
