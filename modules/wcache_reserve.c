/*
 * iotune - per-file write cache: the disk space reserved for windows,
 * ahead of a stream, and what is given back past the end of file (pure
 * core, no Samba).  The rules are summed up in include/iotune/wcache.h
 * and explained in docs/design.md ("Reservation").
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
#include <stdint.h>

#include "wcache_priv.h"

#define WC_RESERVE_ALIGN IOTUNE_WC_RESERVE_ALIGN

/*
 * A stream reserves ahead of its windows, twice as far at each call, up
 * to this (or one window, if larger).  Linux's fallocate waits for the
 * direct writes in flight on the file (inode_dio_wait): on an O_DIRECT
 * share, a reservation per window stopped smbd's main thread for a
 * window's flush, about 0.6 ms per MiB, and cut 64 KiB writes by a
 * quarter.
 */
#define WC_RESERVE_AHEAD_MAX (16 * 1024 * 1024)

/* One call of io->reserve for [lo, hi): 0, ENOSPC or EOPNOTSUPP */
static int reserve_range(struct iotune_wcache *c, uint64_t lo, uint64_t hi)
{
	int ret;

	WC_COUNT(c, reserve_calls, 1);
	ret = c->io->reserve(c->io->private_data, lo, hi - lo);
	if (ret == ENOSPC || ret == EDQUOT) {
		/* a failed call may leave blocks behind: given back too */
		c->reserved_end = MAX(c->reserved_end, hi);
		return ENOSPC;
	}
	if (ret != 0) {
		c->no_reserve = true;
		return EOPNOTSUPP;
	}
	c->reserved_end = MAX(c->reserved_end, hi);
	return 0;
}

/*
 * Where a reservation for [lo, hi) starts and how far ahead it reaches:
 * a window that continues the range reserved last reserves from its end,
 * twice as far ahead as the last time; any other starts a new range.
 */
static void reserve_plan(struct iotune_wcache *c, uint64_t base, uint64_t lo,
			 uint64_t *from, uint64_t *to)
{
	uint64_t hi = base + c->p.capacity;
	uint64_t most = MAX(c->p.capacity, WC_RESERVE_AHEAD_MAX);

	if (c->p.sparse || c->p.reserve_once) {
		/* holes would fill up, or stay reserved for good */
		*from = lo;
		*to = hi;
		c->reserved_from = lo;
		return;
	}
	if (c->reserved_to > c->reserved_from && lo >= c->reserved_from &&
	    lo <= c->reserved_to) {
		*from = c->reserved_to;
		c->reserve_ahead = MIN(2 * c->reserve_ahead, most);
	} else {
		*from = lo;
		c->reserve_ahead = c->p.capacity;
		c->reserved_from = lo;
	}
	*to = hi;
	if (base <= UINT64_MAX - c->reserve_ahead) {
		*to = MAX(hi, base + c->reserve_ahead);
	}
}

uint64_t iotune_wc_reserve_round_up(uint64_t size)
{
	return (size + WC_RESERVE_ALIGN - 1) &
	       ~(uint64_t)(WC_RESERVE_ALIGN - 1);
}

/* The end of file on disk, rounded up to a whole reservation block */
static uint64_t eof_aligned(const struct iotune_wcache *c)
{
	return iotune_wc_reserve_round_up(c->disk_size);
}

int iotune_wc_reserve_window(struct iotune_wcache *c, uint64_t base)
{
	uint64_t lo = base & ~(uint64_t)(WC_RESERVE_ALIGN - 1);
	uint64_t hi = base + c->p.capacity;
	uint64_t from = 0;
	uint64_t to = 0;
	int ret;

	if (!c->p.sparse) {
		/* a file without holes has its blocks up to the end of file */
		lo = MAX(lo, eof_aligned(c));
	}
	if (c->io->reserve == NULL || c->no_reserve || lo >= hi) {
		return 0;
	}
	if (lo >= c->reserved_from && hi <= c->reserved_to) {
		return 0;	/* reserved ahead */
	}
	reserve_plan(c, base, lo, &from, &to);
	ret = reserve_range(c, from, to);
	if (ret != 0 && to > hi) {
		/* no room ahead (or past the largest file): this window */
		c->no_reserve = false;
		c->reserve_ahead = c->p.capacity;
		to = hi;
		ret = reserve_range(c, from, to);
	}
	if (ret != 0) {
		if (ret == ENOSPC) {
			WC_COUNT(c, reserve_full, 1);
		}
		iotune_wc_forget_reservations(c);
		return ret;
	}
	c->reserved_to = to;
	return 0;
}

void iotune_wc_forget_reservations(struct iotune_wcache *c)
{
	c->reserved_from = 0;
	c->reserved_to = 0;
}

/*
 * [*off, *off + *len): what was reserved past the end of file, for the
 * caller to give back; the cache forgets all it reserved.
 */
void iotune_wc_take_reserved_past_eof(struct iotune_wcache *c,
				      uint64_t *off,
				      uint64_t *len)
{
	uint64_t eof = eof_aligned(c);

	*off = 0;
	*len = 0;
	if (c->reserved_end > eof) {
		*off = eof;
		*len = c->reserved_end - eof;
	}
	c->reserved_end = 0;
	iotune_wc_forget_reservations(c);
}

bool iotune_wc_take_reservation(struct iotune_wcache *c,
				uint64_t *off,
				uint64_t *len)
{
	*off = 0;
	*len = 0;
	if (iotune_wc_is_dirty(c) || iotune_wc_flush_in_flight(c) ||
	    iotune_wc_copies_in_flight(c) || c->queue != NULL ||
	    c->to_disk != NULL || c->on_disk != NULL ||
	    c->reserved_end <= eof_aligned(c)) {
		return false;
	}
	iotune_wc_take_reserved_past_eof(c, off, len);
	return true;
}
