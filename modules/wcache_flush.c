/*
 * iotune - per-file write cache: flushes (pieces, results, short writes,
 * EINTR), errors (kept and retried with a backoff, or dropped once the
 * right to cache is lost, rate-limited log lines), timers, and the
 * synchronous flush (pure core, no Samba).
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

/* consecutive EINTR/EAGAIN results before a flush piece counts as failed */
#define WC_MAX_EINTR 16

/* a failed flush is tried again after this, doubling up to the maximum */
#define WC_RETRY_MIN_MS 100
#define WC_RETRY_MAX_MS 10000

/* at most one log line per cache in this time; the rest are counted */
#define WC_LOG_INTERVAL_MS 10000

bool iotune_wc_failed(const struct iotune_wcache *c)
{
	unsigned s;

	for (s = 0; s < c->p.flushes; s++) {
		if (c->fl[s].failed) {
			return true;
		}
	}
	return false;
}

bool iotune_wc_retrying(const struct iotune_wcache *c)
{
	const struct iotune_wc_flush *f = NULL;

	WC_FOR_EACH_FLUSH(c, f) {
		if (f->in_flight && f->reason == IOTUNE_FLUSH_RETRY) {
			return true;
		}
	}
	return false;
}

bool iotune_wc_flush_in_flight(const struct iotune_wcache *c)
{
	unsigned s;

	for (s = 0; s < c->p.flushes; s++) {
		if (c->fl[s].in_flight) {
			return true;
		}
	}
	return false;
}

/* The piece of a flush to write next; false when it is all written. */
static bool next_piece(struct iotune_wc_flush *f, uint64_t *off,
		       const uint8_t **buf, size_t *len)
{
	while (f->idx < f->buf.n_ext) {
		const struct iotune_extent *e = &f->buf.ext[f->idx];

		if (f->pos < e->len) {
			*off = e->off + f->pos;
			*buf = f->buf.data + (*off - f->buf.base);
			*len = e->len - f->pos;
			return true;
		}
		f->idx++;
		f->pos = 0;
	}
	return false;
}

/* The slot is free again; its buffer is kept for the next window. */
static void slot_free(struct iotune_wcache *c, struct iotune_wc_flush *f)
{
	iotune_wc_put_buffer(c, f->buf.data);
	*f = (struct iotune_wc_flush) { 0 };
}

bool iotune_wc_slots_overlap(const struct iotune_wcache *c, uint64_t off,
			     uint64_t end)
{
	const struct iotune_wc_flush *f = NULL;

	WC_FOR_EACH_FLUSH(c, f) {
		if (iotune_wc_buf_overlaps(&f->buf, off, end)) {
			return true;
		}
	}
	return false;
}

/*
 * Asks for the write-back of what was written since the last one asked,
 * as one range, when it may start: one write-back per cache on its way
 * (a client that fills the page cache faster than the disk drains it
 * must not queue a job per window in smbd's pool), and never over a
 * window still on its way (its bytes would be written back in part).
 * A synchronous flush writes several windows in one action: the later
 * ones join the range that action already asks for.
 */
static void wb_issue(struct iotune_wcache *c, struct iotune_wc_action *act)
{
	uint64_t lo = c->wb_lo;
	uint64_t hi = c->wb_hi;

	if (hi == 0) {
		return;
	}
	if (act->writeback_len != 0) {
		lo = MIN(lo, act->writeback_off);
		hi = MAX(hi, act->writeback_off + act->writeback_len);
	} else if (c->wb_busy) {
		return;
	}
	if (iotune_wc_slots_overlap(c, lo, hi)) {
		return;
	}
	act->writeback_off = lo;
	act->writeback_len = hi - lo;
	c->wb_busy = true;
	c->wb_lo = c->wb_hi = 0;
}

/*
 * All of f's window is written: its write-back may start (its first
 * extent to its last), now or after the one on its way.  Only once the
 * last piece landed, so that it never asks for bytes still on their way.
 */
static void note_written(struct iotune_wcache *c,
			 const struct iotune_wc_flush *f)
{
	uint64_t off;
	uint64_t end;

	if (!c->p.writeback || f->buf.n_ext == 0) {
		return;
	}
	off = f->buf.ext[0].off;
	end = iotune_wc_ext_end(&f->buf.ext[f->buf.n_ext - 1]);
	if (c->wb_hi != 0) {
		off = MIN(off, c->wb_lo);
		end = MAX(end, c->wb_hi);
	}
	c->wb_lo = off;
	c->wb_hi = end;
}

void iotune_wc_writeback_done(struct iotune_wcache *c,
			      struct iotune_wc_action *act)
{
	*act = (struct iotune_wc_action) { 0 };
	c->wb_busy = false;
	wb_issue(c, act);
	act->tick_ms = iotune_wc_next_tick(c);
}

/* Puts the next piece of slot s into act, or ends a flush that is done. */
static bool issue_piece(struct iotune_wcache *c, unsigned s,
			struct iotune_wc_action *act)
{
	struct iotune_wc_flush *f = &c->fl[s];

	if (next_piece(f, &act->flush_off, &act->flush_buf, &act->flush_len)) {
		act->flush_io = true;
		act->flush_slot = s;
		f->in_flight = true;
		return true;
	}
	note_written(c, f);
	slot_free(c, f);
	wb_issue(c, act);
	if (!iotune_wc_failed(c)) {
		c->backoff_ms = 0;
	}
	return false;
}

/* A slot for the active window: free, and not overlapping it; or -1. */
static int slot_for_active(const struct iotune_wcache *c)
{
	int free_slot = -1;
	unsigned s;

	for (s = 0; s < c->p.flushes; s++) {
		const struct iotune_wc_flush *f = &c->fl[s];

		if (f->buf.n_ext == 0) {
			free_slot = free_slot == -1 ? (int)s : free_slot;
		} else if (iotune_wc_buf_overlaps(&f->buf, c->active.base,
						  c->active.base +
						  c->p.capacity)) {
			return -1;	/* older data there lands first */
		}
	}
	return free_slot;
}

static void move_active_to(struct iotune_wcache *c, struct iotune_wc_flush *f)
{
	f->buf = c->active;
	f->idx = 0;
	f->pos = 0;
	c->active.data = NULL;
	c->active.n_ext = 0;
	c->active.base = 0;
	c->window = false;
	c->dirty_since_ms = 0;
}

static bool start_slot(struct iotune_wcache *c, unsigned s,
		       enum iotune_flush_reason reason,
		       struct iotune_wc_action *act)
{
	struct iotune_wc_flush *f = &c->fl[s];

	f->failed = false;
	f->reason = reason;
	f->retries = 0;
	if (reason == IOTUNE_FLUSH_RETRY) {
		/* what waits from now on waits for this retry */
		c->last_failed = false;
	}
	WC_COUNT(c, flushes[reason], 1);
	return issue_piece(c, s, act);
}

/*
 * Starts a flush: of the remains of a failed flush when there are any
 * (they go first), else of the whole active window, in a free slot.  At
 * most one piece is issued per action.
 */
bool iotune_wc_begin_flush(struct iotune_wcache *c,
			   enum iotune_flush_reason reason,
			   struct iotune_wc_action *act)
{
	int slot;
	unsigned s;

	if (act->flush_io) {
		return false;	/* the next call starts it */
	}
	for (s = 0; s < c->p.flushes; s++) {
		if (!c->fl[s].failed) {
			continue;
		}
		if (reason == IOTUNE_FLUSH_FULL) {
			/*
			 * A full window waits for the failed data: that is
			 * retried when its time comes or a request asks,
			 * never at once from the failure's own completion.
			 */
			return false;
		}
		return start_slot(c, s, IOTUNE_FLUSH_RETRY, act);
	}
	if (c->active.n_ext == 0 || iotune_wc_copies_in_flight(c)) {
		/* nothing to write, or copies still land in the window */
		return false;
	}
	slot = slot_for_active(c);
	if (slot == -1) {
		return false;	/* behind the flushes in flight */
	}
	move_active_to(c, &c->fl[slot]);
	return start_slot(c, (unsigned)slot, reason, act);
}

/* Drops what slot f has not written yet: its bytes */
static uint64_t drop_slot(struct iotune_wcache *c, struct iotune_wc_flush *f)
{
	uint64_t bytes = 0;
	size_t i;

	for (i = f->idx; i < f->buf.n_ext; i++) {
		bytes += f->buf.ext[i].len;
	}
	if (f->idx < f->buf.n_ext) {
		bytes -= f->pos;
	}
	/* what was written already stays counted as written */
	slot_free(c, f);
	WC_COUNT(c, bytes_dropped, bytes);
	return bytes;
}

uint64_t iotune_wc_drop_flushes(struct iotune_wcache *c, bool failed_only)
{
	uint64_t bytes = 0;
	unsigned s;

	for (s = 0; s < c->p.flushes; s++) {
		struct iotune_wc_flush *f = &c->fl[s];

		if (f->buf.n_ext > 0 && (f->failed || !failed_only)) {
			bytes += drop_slot(c, f);
		}
	}
	return bytes;
}

uint64_t iotune_wc_drop_active(struct iotune_wcache *c)
{
	uint64_t bytes = iotune_wc_buf_bytes(&c->active);

	c->active.n_ext = 0;
	c->window = false;
	c->dirty_since_ms = 0;
	WC_COUNT(c, bytes_dropped, bytes);
	return bytes;
}

/* Records a flush error for the log, rate-limited. */
static void note_error(struct iotune_wcache *c, int err, uint64_t now_ms,
		       struct iotune_wc_action *act)
{
	c->last_err = err;
	WC_COUNT(c, flush_errors, 1);
	if (now_ms >= c->log_next_ms) {
		act->log_err = err;
		act->log_repeats = c->log_repeats;
		c->log_repeats = 0;
		c->log_next_ms = now_ms + WC_LOG_INTERVAL_MS;
	} else {
		c->log_repeats++;
	}
}

enum piece_result { PIECE_MORE, PIECE_FLUSHED, PIECE_FAILED };

/*
 * The piece of slot s failed with err.  While the cache may cache, the
 * flush stops and keeps its data for a retry.  Once the right is lost,
 * the failed extent is dropped (another opener may have written there
 * since) and the flush goes on with the next one.
 */
static enum piece_result piece_failed(struct iotune_wcache *c, unsigned s,
				      int err, uint64_t now_ms,
				      struct iotune_wc_action *act)
{
	struct iotune_wc_flush *f = &c->fl[s];

	note_error(c, err, now_ms, act);
	f->retries = 0;
	c->last_failed = true;
	if (c->lost) {
		uint64_t bytes = f->buf.ext[f->idx].len - f->pos;

		/* data is gone: the next write, barrier or close hears it */
		if (c->error == 0) {
			c->error = err;
		}
		WC_COUNT(c, bytes_dropped, bytes);
		act->dropped += bytes;
		act->drop_err = err;
		f->idx++;
		f->pos = 0;
		return issue_piece(c, s, act) ? PIECE_MORE : PIECE_FLUSHED;
	}
	f->in_flight = false;
	f->failed = true;
	c->backoff_ms = c->backoff_ms == 0 ? WC_RETRY_MIN_MS :
			MIN(c->backoff_ms * 2, WC_RETRY_MAX_MS);
	c->retry_at_ms = now_ms + c->backoff_ms;
	return PIECE_FAILED;
}

/* Takes the result of slot s's piece; act gets its next one. */
static enum piece_result piece_result(struct iotune_wcache *c, unsigned s,
				      ssize_t ret, int err, uint64_t now_ms,
				      struct iotune_wc_action *act)
{
	struct iotune_wc_flush *f = &c->fl[s];
	const struct iotune_extent *e = &f->buf.ext[f->idx];

	f->in_flight = false;
	if (ret > 0) {
		uint64_t want = e->len - f->pos;
		uint64_t got = MIN((uint64_t)ret, want);

		WC_COUNT(c, flush_writes, 1);
		WC_COUNT(c, flush_bytes, got);
		WC_COUNT(c, flush_size[iotune_flush_size_bucket(got)], 1);
		WC_COUNT(c, flush_short_writes, got < want ? 1 : 0);
		f->pos += got;
		c->landed++;
		c->disk_size = MAX(c->disk_size, e->off + f->pos);
		f->retries = 0;
		c->last_failed = false;
		return issue_piece(c, s, act) ? PIECE_MORE : PIECE_FLUSHED;
	}
	if (ret < 0 && (err == EINTR || err == EAGAIN) &&
	    f->retries < WC_MAX_EINTR) {
		f->retries++;
		return issue_piece(c, s, act) ? PIECE_MORE : PIECE_FLUSHED;
	}
	return piece_failed(c, s, ret == 0 || err == 0 ? EIO : err, now_ms,
			    act);
}

uint64_t iotune_wc_next_tick(const struct iotune_wcache *c)
{
	if (iotune_wc_flush_in_flight(c)) {
		return 0;	/* flush_done() decides again */
	}
	if (iotune_wc_failed(c)) {
		return c->retry_at_ms;
	}
	if (iotune_wc_copies_in_flight(c)) {
		return 0;	/* copy_done() decides again */
	}
	if (c->dirty_since_ms != 0) {
		return c->dirty_since_ms + c->p.timeout_ms;
	}
	return 0;
}

/* Starts a flush whose time has come: a timeout, or a retry. */
void iotune_wc_flush_if_due(struct iotune_wcache *c, uint64_t now_ms,
			 struct iotune_wc_action *act)
{
	if (iotune_wc_failed(c)) {
		/* one retry at a time: its completion runs this again */
		if (now_ms >= c->retry_at_ms && !iotune_wc_retrying(c)) {
			iotune_wc_begin_flush(c, IOTUNE_FLUSH_RETRY, act);
		}
	} else if (c->dirty_since_ms != 0 &&
		   now_ms >= c->dirty_since_ms + c->p.timeout_ms) {
		iotune_wc_begin_flush(c, IOTUNE_FLUSH_TIMEOUT, act);
	}
}

void iotune_wc_flush_done(struct iotune_wcache *c,
			  unsigned slot,
			  ssize_t ret,
			  int err,
			  uint64_t now_ms,
			  struct iotune_wc_action *act)
{
	*act = (struct iotune_wc_action) { 0 };
	if (slot >= c->p.flushes || !c->fl[slot].in_flight) {
		return;
	}
	if (piece_result(c, slot, ret, err, now_ms, act) == PIECE_MORE) {
		return;
	}
	if (iotune_wc_active_full(c)) {
		iotune_wc_begin_flush(c, IOTUNE_FLUSH_FULL, act);
	}
	iotune_wc_run(c, now_ms, act);
}

void iotune_wc_lose_right(struct iotune_wcache *c,
			  uint64_t now_ms,
			  struct iotune_wc_action *act)
{
	*act = (struct iotune_wc_action) { 0 };
	c->lost = true;
	if (iotune_wc_failed(c)) {
		/* never retried once another opener may have written */
		act->dropped += iotune_wc_drop_flushes(c, true);
		act->drop_err = c->last_err;
		if (c->error == 0) {
			c->error = c->last_err;
		}
		wb_issue(c, act);	/* it may have waited for them */
	}
	act->tick_ms = iotune_wc_next_tick(c);
}

int iotune_wc_flush_sync(struct iotune_wcache *c,
			 enum iotune_flush_reason reason,
			 uint64_t now_ms,
			 struct iotune_wc_action *act)
{
	*act = (struct iotune_wc_action) { 0 };
	if (iotune_wc_flush_in_flight(c) || iotune_wc_copies_in_flight(c)) {
		return EBUSY;
	}
	c->last_err = 0;
	while (iotune_wc_begin_flush(c, reason, act)) {
		unsigned s = act->flush_slot;
		enum piece_result r = PIECE_MORE;

		while (r == PIECE_MORE) {
			ssize_t ret;

			errno = 0;
			ret = c->io->pwrite(c->io->private_data,
					    act->flush_buf, act->flush_len,
					    act->flush_off);
			act->flush_io = false;
			r = piece_result(c, s, ret, ret < 0 ? errno : 0,
					 now_ms, act);
		}
		if (r == PIECE_FAILED) {
			break;	/* kept: retried later */
		}
	}
	act->flush_io = false;
	if (iotune_wc_failed(c)) {
		/*
		 * Nothing starts now: a queued write would retry at once,
		 * and the caller (a close) may end the cache next.  The
		 * queue runs at the retry's time or when a disk write lands.
		 */
		act->tick_ms = iotune_wc_next_tick(c);
		return c->last_err;
	}
	iotune_wc_run(c, now_ms, act);
	return c->last_err;
}
