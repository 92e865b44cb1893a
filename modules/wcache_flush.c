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

/* The piece of the flush in flight to write next; false when done. */
static bool next_piece(struct iotune_wcache *c, uint64_t *off,
		       const uint8_t **buf, size_t *len)
{
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
	return false;
}

/* Puts the next piece into act, or ends a flush that wrote everything. */
static bool issue_piece(struct iotune_wcache *c, struct iotune_wc_action *act)
{
	if (next_piece(c, &act->flush_off, &act->flush_buf, &act->flush_len)) {
		act->flush_io = true;
		return true;
	}
	c->flush_in_flight = false;
	c->flushing.n_ext = 0;
	c->flush_idx = 0;
	c->flush_pos = 0;
	c->backoff_ms = 0;
	if (c->spare == NULL) {
		c->spare = c->flushing.data;
	} else {
		free(c->flushing.data);
	}
	c->flushing.data = NULL;
	return false;
}

static void move_active_to_flushing(struct iotune_wcache *c)
{
	uint8_t *free_data = c->flushing.data;

	c->flushing = c->active;
	c->active.n_ext = 0;
	c->active.base = 0;
	c->window = false;
	c->active.data = free_data;
	c->dirty_since_ms = 0;
	c->flush_idx = 0;
	c->flush_pos = 0;
}

/*
 * Starts a flush: of the remains of a failed flush when there are any
 * (they go first), else of the whole active buffer.
 */
bool iotune_wc_begin_flush(struct iotune_wcache *c,
			enum iotune_flush_reason reason,
			struct iotune_wc_action *act)
{
	if (c->flush_in_flight) {
		return false;
	}
	if (c->failed) {
		c->failed = false;
		reason = IOTUNE_FLUSH_RETRY;
	} else if (c->active.n_ext > 0 && !iotune_wc_copies_in_flight(c)) {
		move_active_to_flushing(c);
	} else {
		/* nothing to write, or copies still land in the window */
		return false;
	}
	c->flush_in_flight = true;
	c->flush_reason = reason;
	c->flush_retries = 0;
	WC_COUNT(c, flushes[reason], 1);
	return issue_piece(c, act);
}

uint64_t iotune_wc_drop_flushing(struct iotune_wcache *c)
{
	uint64_t bytes = iotune_wc_buf_bytes(&c->flushing);

	if (c->flush_idx < c->flushing.n_ext) {
		bytes -= c->flush_pos;
	}
	/* what was written already stays counted as written */
	c->flushing.n_ext = 0;
	c->flush_idx = 0;
	c->flush_pos = 0;
	c->failed = false;
	WC_COUNT(c, bytes_dropped, bytes);
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
 * The piece in flight failed with err.  While the cache may cache, the
 * flush stops and keeps its data for a retry.  Once the right is lost,
 * the failed extent is dropped (another opener may have written there
 * since) and the flush goes on with the next one.
 */
static enum piece_result piece_failed(struct iotune_wcache *c, int err,
				      uint64_t now_ms,
				      struct iotune_wc_action *act)
{
	note_error(c, err, now_ms, act);
	c->flush_retries = 0;
	if (c->lost) {
		uint64_t bytes = c->flushing.ext[c->flush_idx].len -
				 c->flush_pos;

		/* data is gone: the next write, barrier or close hears it */
		if (c->error == 0) {
			c->error = err;
		}
		WC_COUNT(c, bytes_dropped, bytes);
		act->dropped += bytes;
		act->drop_err = err;
		c->flush_idx++;
		c->flush_pos = 0;
		return issue_piece(c, act) ? PIECE_MORE : PIECE_FLUSHED;
	}
	c->flush_in_flight = false;
	c->failed = true;
	c->backoff_ms = c->backoff_ms == 0 ? WC_RETRY_MIN_MS :
			MIN(c->backoff_ms * 2, WC_RETRY_MAX_MS);
	c->retry_at_ms = now_ms + c->backoff_ms;
	return PIECE_FAILED;
}

/* Takes the result of the piece in flight; act gets the next one. */
static enum piece_result piece_result(struct iotune_wcache *c, ssize_t ret,
				      int err, uint64_t now_ms,
				      struct iotune_wc_action *act)
{
	const struct iotune_extent *e = &c->flushing.ext[c->flush_idx];

	if (ret > 0) {
		uint64_t want = e->len - c->flush_pos;
		uint64_t got = MIN((uint64_t)ret, want);

		WC_COUNT(c, flush_writes, 1);
		WC_COUNT(c, flush_bytes, got);
		WC_COUNT(c, flush_size[iotune_flush_size_bucket(got)], 1);
		WC_COUNT(c, flush_short_writes, got < want ? 1 : 0);
		c->flush_pos += got;
		c->disk_size = MAX(c->disk_size, e->off + c->flush_pos);
		c->flush_retries = 0;
		return issue_piece(c, act) ? PIECE_MORE : PIECE_FLUSHED;
	}
	if (ret < 0 && (err == EINTR || err == EAGAIN) &&
	    c->flush_retries < WC_MAX_EINTR) {
		c->flush_retries++;
		return issue_piece(c, act) ? PIECE_MORE : PIECE_FLUSHED;
	}
	return piece_failed(c, ret == 0 || err == 0 ? EIO : err, now_ms, act);
}

uint64_t iotune_wc_next_tick(const struct iotune_wcache *c)
{
	if (c->flush_in_flight) {
		return 0;	/* flush_done() decides again */
	}
	if (c->failed) {
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
	if (c->flush_in_flight) {
		return;
	}
	if (c->failed && now_ms >= c->retry_at_ms) {
		iotune_wc_begin_flush(c, IOTUNE_FLUSH_RETRY, act);
	} else if (!c->failed && c->dirty_since_ms != 0 &&
		   now_ms >= c->dirty_since_ms + c->p.timeout_ms) {
		iotune_wc_begin_flush(c, IOTUNE_FLUSH_TIMEOUT, act);
	}
}

void iotune_wc_flush_done(struct iotune_wcache *c,
			  ssize_t ret,
			  int err,
			  uint64_t now_ms,
			  struct iotune_wc_action *act)
{
	*act = (struct iotune_wc_action) { 0 };
	if (!c->flush_in_flight) {
		return;
	}
	if (piece_result(c, ret, err, now_ms, act) == PIECE_MORE) {
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
	if (c->failed) {
		/* never retried once another opener may have written */
		act->dropped += iotune_wc_drop_flushing(c);
		act->drop_err = c->last_err;
		if (c->error == 0) {
			c->error = c->last_err;
		}
	}
	act->tick_ms = iotune_wc_next_tick(c);
}

int iotune_wc_flush_sync(struct iotune_wcache *c,
			 enum iotune_flush_reason reason,
			 uint64_t now_ms,
			 struct iotune_wc_action *act)
{
	*act = (struct iotune_wc_action) { 0 };
	if (c->flush_in_flight || iotune_wc_copies_in_flight(c)) {
		return EBUSY;
	}
	c->last_err = 0;
	while (iotune_wc_begin_flush(c, reason, act)) {
		enum piece_result r = PIECE_MORE;

		while (r == PIECE_MORE) {
			ssize_t ret;

			errno = 0;
			ret = c->io->pwrite(c->io->private_data,
					    act->flush_buf, act->flush_len,
					    act->flush_off);
			r = piece_result(c, ret, ret < 0 ? errno : 0, now_ms,
					 act);
		}
		if (r == PIECE_FAILED) {
			break;	/* kept: retried later */
		}
	}
	act->flush_io = false;
	iotune_wc_run(c, now_ms, act);
	return c->last_err;
}

