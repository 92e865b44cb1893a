/*
 * iotune - per-file write cache: the modification time of a file whose
 * data is still cached (pure core, no Samba).  The rules are in
 * include/iotune/wctimes.h.
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

#include <stdint.h>

#include "wcache_priv.h"

bool iotune_ts_is_none(struct iotune_ts t)
{
	return t.nsec < 0;
}

int iotune_ts_cmp(struct iotune_ts a, struct iotune_ts b)
{
	if (a.sec != b.sec) {
		return a.sec < b.sec ? -1 : 1;
	}
	if (a.nsec != b.nsec) {
		return a.nsec < b.nsec ? -1 : 1;
	}
	return 0;
}

/*
 * Cached data that has not landed yet: it will move the mtime.  (Writes
 * the cache sent to disk past it are in flight like writes on a share
 * without iotune; a pinned time is set again after they land too.)
 */
static bool unlanded(const struct iotune_wcache *c)
{
	return iotune_wc_is_dirty(c) || iotune_wc_copies_in_flight(c);
}

void iotune_wc_times_known(struct iotune_wcache *c, struct iotune_ts mtime)
{
	c->times.known = mtime;
}

/* Is t the time the file has, or had before cached data moved it? */
static bool is_set_already(const struct iotune_wc_times *t,
			   struct iotune_ts mtime, struct iotune_ts disk)
{
	const struct iotune_ts same[] = { disk, t->pinned, t->known };
	size_t i;

	for (i = 0; i < sizeof(same) / sizeof(same[0]); i++) {
		if (!iotune_ts_is_none(same[i]) &&
		    iotune_ts_cmp(mtime, same[i]) == 0) {
			return true;
		}
	}
	return false;
}

enum iotune_times_verdict iotune_wc_times_set(struct iotune_wcache *c,
					      struct iotune_ts mtime,
					      struct iotune_ts disk_mtime)
{
	if (iotune_ts_is_none(mtime) || !unlanded(c)) {
		return IOTUNE_TIMES_PASS;
	}
	if (is_set_already(&c->times, mtime, disk_mtime)) {
		return IOTUNE_TIMES_PIN;
	}
	return IOTUNE_TIMES_FLUSH;
}

bool iotune_wc_times_need_disk(const struct iotune_wcache *c,
			       struct iotune_ts mtime)
{
	return !iotune_ts_is_none(mtime) && unlanded(c);
}

void iotune_wc_times_pin(struct iotune_wcache *c, struct iotune_ts mtime)
{
	if (iotune_ts_is_none(mtime)) {
		return;
	}
	c->times.pinned = mtime;
	c->times.landed_seen = c->landed;
}

void iotune_wc_times_unpin(struct iotune_wcache *c)
{
	c->times.pinned = IOTUNE_TS_NONE;
}

bool iotune_wc_times_landed(struct iotune_wcache *c, struct iotune_ts *mtime)
{
	struct iotune_wc_times *t = &c->times;

	if (iotune_ts_is_none(t->pinned) || t->landed_seen == c->landed) {
		return false;
	}
	t->landed_seen = c->landed;
	*mtime = t->pinned;
	return true;
}

void iotune_wc_times_write(struct iotune_wcache *c, struct iotune_ts now)
{
	struct iotune_wc_times *t = &c->times;

	if (iotune_ts_is_none(t->last_write) ||
	    iotune_ts_cmp(now, t->last_write) > 0) {
		t->last_write = now;
	}
}

bool iotune_wc_times_mtime(const struct iotune_wcache *c,
			   struct iotune_ts *mtime)
{
	const struct iotune_wc_times *t = &c->times;
	struct iotune_ts want = *mtime;

	if (!iotune_ts_is_none(t->pinned)) {
		want = t->pinned;
	} else if (unlanded(c) && !iotune_ts_is_none(t->last_write) &&
		   iotune_ts_cmp(t->last_write, *mtime) > 0) {
		want = t->last_write;
	}
	if (iotune_ts_cmp(want, *mtime) == 0) {
		return false;
	}
	*mtime = want;
	return true;
}
