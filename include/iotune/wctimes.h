/*
 * iotune - per-file write cache: the modification time of a file whose
 * data is still cached (pure core, no Samba).
 *
 *   iotune_wc_times_known()    the file's mtime when the cache was made
 *   iotune_wc_times_set()      smbd sets times: flush first, or not
 *   iotune_wc_times_pin()      ... and the set succeeded: pin the time
 *   iotune_wc_times_unpin()    the handle that set it is gone
 *   iotune_wc_times_landed()   cached data landed: the time to set again
 *   iotune_wc_times_mtime()    the mtime a stat reports (smbd 4.23+)
 *
 * Cached data that lands after smbd set a file's modification time moves
 * it past what was set.  Writing the cache out before every set is
 * always right, but smbd 4.23+ sets the time after every write on a
 * handle with a sticky write time, and that would write the cache out
 * after every write.  So a set that only restores the time already set
 * (the file's own mtime, or the one set last through this cache) does
 * not write the cache out.  (The file's own mtime is the one it had when
 * the cache was made, too: each cached write's reservation moves the
 * mtime on disk before smbd sets it back.)  A set of another time still
 * writes the cache out first.  A set without a modification time never
 * does: landing data moves no other time (ctime cannot be set).  Once a
 * set succeeded, the time is remembered ("pinned") and set again after
 * each piece of cached data lands, while the handle that set it is open.
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

#ifndef IOTUNE_WCTIMES_H
#define IOTUNE_WCTIMES_H

#include <stdbool.h>
#include <stdint.h>

/* a point in time; nsec < 0: none (an omitted time) */
struct iotune_ts {
	int64_t sec;
	int64_t nsec;
};

#define IOTUNE_TS_NONE ((struct iotune_ts) { .sec = 0, .nsec = -1 })

struct iotune_wc_times {
	struct iotune_ts known;		/* the mtime before the cache */
	struct iotune_ts pinned;	/* set again after data lands */
	uint64_t landed_seen;		/* landings the pin covers */
	struct iotune_ts last_write;	/* newest cached write not landed */
};

enum iotune_times_verdict {
	IOTUNE_TIMES_PASS,	/* set it: no cached data can undo it */
	IOTUNE_TIMES_PIN,	/* set it, no flush: iotune sets it again */
	IOTUNE_TIMES_FLUSH,	/* write the cache out, then set it */
};

bool iotune_ts_is_none(struct iotune_ts t);
int iotune_ts_cmp(struct iotune_ts a, struct iotune_ts b);

struct iotune_wcache;

/* The file's mtime when the cache was made, before its first write */
void iotune_wc_times_known(struct iotune_wcache *c, struct iotune_ts mtime);

/*
 * smbd sets the modification time mtime (IOTUNE_TS_NONE: not set) of a
 * file whose modification time on disk is disk_mtime: what to do first.
 * Nothing is remembered: once the set succeeded (after a flush, too),
 * the caller pins the time, so that a set that fails pins nothing.
 */
enum iotune_times_verdict iotune_wc_times_set(struct iotune_wcache *c,
					      struct iotune_ts mtime,
					      struct iotune_ts disk_mtime);

/*
 * Whether iotune_wc_times_set() needs the mtime on disk for a set of
 * mtime: only while cached data has not landed (the caller saves a stat
 * otherwise, and passes IOTUNE_TS_NONE).
 */
bool iotune_wc_times_need_disk(const struct iotune_wcache *c,
			       struct iotune_ts mtime);

/* A set of the modification time succeeded: set it again after landings */
void iotune_wc_times_pin(struct iotune_wcache *c, struct iotune_ts mtime);

/* The handle that set the pinned time is gone: landings move the time */
void iotune_wc_times_unpin(struct iotune_wcache *c);

/*
 * After cached data landed: true with *mtime the time to set again, once
 * per landing.
 */
bool iotune_wc_times_landed(struct iotune_wcache *c, struct iotune_ts *mtime);

/* A write was taken into the cache at now (wall clock) */
void iotune_wc_times_write(struct iotune_wcache *c, struct iotune_ts now);

/*
 * The modification time to report for a file whose mtime on disk is
 * *mtime: the pinned time, or the time of the newest cached write that
 * has not landed when that is later.  True when *mtime changed.
 */
bool iotune_wc_times_mtime(const struct iotune_wcache *c,
			   struct iotune_ts *mtime);

#endif
