/*
 * iotune - per-file write cache: the disk space reserved for what a
 * write acknowledged from the cache will write (pure core, no Samba).
 * The rules are summed up in include/iotune/wcache.h and explained in
 * docs/design.md ("Reservation").
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

/*
 * A write is reserved exactly: io->reserve allocates the blocks of
 * [off, end) and moves the end of file to end when that is further, as
 * the write itself would.  Nothing else is ever reserved, so nothing is
 * ever given back: no truncate, no punched hole, nothing decided on a
 * size read earlier.  The range reserved last is remembered, so that a
 * write into it (rewriting cached bytes, a stream's next piece of a
 * block) makes no call.
 */
static bool reserved_already(const struct iotune_wcache *c, uint64_t off,
			     uint64_t end)
{
	return c->reserved_hi > c->reserved_lo && off >= c->reserved_lo &&
	       end <= c->reserved_hi;
}

static void remember_reserved(struct iotune_wcache *c, uint64_t off,
			      uint64_t end)
{
	if (c->reserved_hi > c->reserved_lo && off <= c->reserved_hi &&
	    end >= c->reserved_lo) {
		/* touches or overlaps what is known: one range */
		c->reserved_lo = MIN(c->reserved_lo, off);
		c->reserved_hi = MAX(c->reserved_hi, end);
		return;
	}
	c->reserved_lo = off;
	c->reserved_hi = end;
}

/* whether caching [off, end) would make a reservation call */
bool iotune_wc_reserve_needed(const struct iotune_wcache *c, uint64_t off,
			      uint64_t end)
{
	return c->io->reserve != NULL && end > off &&
	       !reserved_already(c, off, end);
}

int iotune_wc_reserve_write(struct iotune_wcache *c, uint64_t off,
			    uint64_t end)
{
	int ret;

	if (!iotune_wc_reserve_needed(c, off, end)) {
		return 0;
	}
	WC_COUNT(c, reserve_calls, 1);
	ret = c->io->reserve(c->io->private_data, off, end - off);
	if (ret == ENOSPC || ret == EDQUOT) {
		/* the write goes to disk and fails there, as without us */
		WC_COUNT(c, reserve_full, 1);
		iotune_wc_forget_reservations(c);
		return ENOSPC;
	}
	if (ret != 0) {
		c->no_reserve = true;
		iotune_wc_forget_reservations(c);
		return EOPNOTSUPP;
	}
	remember_reserved(c, off, end);
	c->disk_size = MAX(c->disk_size, end);
	return 0;
}

void iotune_wc_forget_reservations(struct iotune_wcache *c)
{
	c->reserved_lo = 0;
	c->reserved_hi = 0;
}
