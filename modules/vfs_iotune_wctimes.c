/*
 * iotune: the write cache's Samba side for file times.  The core
 * (modules/wcache_times.c, rules in include/iotune/wctimes.h) decides;
 * this file asks it when smbd sets times (the fntimes hook), sets the
 * pinned modification time again after cached data landed, and, on an
 * smbd that reports the file system's modification time to clients
 * (IOTUNE_SMBD_FS_WRITE_TIME, 4.23+), reports the time of cached writes
 * that have not landed through the stat overlay.
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

#include "includes.h"
#include "smbd/smbd.h"
#include "iotune_compat.h"

#include "vfs_iotune_wcache.h"

#undef DBGC_CLASS
#define DBGC_CLASS DBGC_VFS

static struct iotune_ts iotune_ts_of(struct timespec t)
{
	if (is_omit_timespec(&t)) {
		return IOTUNE_TS_NONE;
	}
	return (struct iotune_ts) { .sec = t.tv_sec, .nsec = t.tv_nsec };
}

static struct timespec iotune_timespec_of(struct iotune_ts t)
{
	return (struct timespec) { .tv_sec = t.sec, .tv_nsec = t.nsec };
}

/*
 * smbd sets times on fsp: 0 when it may go on, or the errno of writing
 * the cache out first.
 */
int iotune_cache_times_set(struct vfs_handle_struct *handle,
			   struct files_struct *fsp,
			   const struct smb_file_time *ft)
{
	struct iotune_cache *cache = iotune_cache_of(fsp);
	struct iotune_ts disk = IOTUNE_TS_NONE;
	struct iotune_ts mtime = IOTUNE_TS_NONE;
	enum iotune_times_verdict v;
	SMB_STRUCT_STAT st;

	if (cache == NULL || ft == NULL) {
		return 0;
	}
	mtime = iotune_ts_of(ft->mtime);
	/* 4.23+ sets the sticky write time after every write: no stat then */
	if (iotune_wc_times_need_disk(&cache->wc, mtime) &&
	    SMB_VFS_NEXT_FSTAT(handle, fsp, &st) == 0) {
		disk = iotune_ts_of(st.st_ex_mtime);
	}
	v = iotune_wc_times_set(&cache->wc, mtime, disk);
	if (v != IOTUNE_TIMES_FLUSH) {
		DBG_DEBUG("'%s': times set, the cache stays (%s)\n",
			  fsp_str_dbg(fsp),
			  v == IOTUNE_TIMES_PIN ? "pinned" : "nothing cached");
		return 0;
	}
	return iotune_cache_flush_keep(cache, IOTUNE_FLUSH_TIMES);
}

/*
 * smbd set the times: the modification time is pinned, set again after
 * cached data lands, until the handle that set it leaves the cache.
 */
void iotune_cache_times_done(struct vfs_handle_struct *handle,
			     struct files_struct *fsp,
			     const struct smb_file_time *ft)
{
	struct iotune_cache *cache = NULL;
	struct iotune_file *file = NULL;

	if (ft == NULL || is_omit_timespec(&ft->mtime)) {
		return;
	}
	cache = iotune_cache_of(fsp);
	if (cache == NULL) {
		return;
	}
	file = iotune_file_of(handle, fsp);
	iotune_wc_times_pin(&cache->wc, iotune_ts_of(ft->mtime));
	/* a handle not in the cache: pinned until the cache ends */
	cache->pinned_by = file != NULL && file->cache == cache ? file : NULL;
}

/* A cache was made for a file whose stat is st */
void iotune_cache_times_made(struct iotune_cache *cache,
			     const SMB_STRUCT_STAT *st)
{
	iotune_wc_times_known(&cache->wc, iotune_ts_of(st->st_ex_mtime));
}

/* After cached data landed: the pinned modification time set again */
void iotune_cache_times_landed(struct iotune_cache *cache)
{
	struct iotune_file *owner = cache->files;
	struct iotune_ts t;
	int err;

	if (owner == NULL || !iotune_wc_times_landed(&cache->wc, &t)) {
		return;
	}
	err = iotune_smbd_set_mtime(owner->handle, owner->fsp,
				    iotune_timespec_of(t));
	if (err != 0) {
		DBG_NOTICE("share '%s': setting the modification time of "
			   "'%s' again after its cached data landed: %s\n",
			   cache->share->name, iotune_cache_name(cache),
			   strerror(err));
	}
}

/* A write was taken into the cache (for the stat overlay below) */
void iotune_cache_times_write(struct iotune_cache *cache)
{
	if (IOTUNE_SMBD_FS_WRITE_TIME) {
		struct timespec now = timespec_current();

		iotune_wc_times_write(&cache->wc, iotune_ts_of(now));
	}
}

/*
 * The stat overlay: where smbd reports the file system's modification
 * time, a stat shows the time of cached writes that have not landed.
 */
void iotune_cache_times_stat(struct iotune_cache *cache, SMB_STRUCT_STAT *st)
{
	struct iotune_ts t;

	if (!IOTUNE_SMBD_FS_WRITE_TIME) {
		return;
	}
	t = iotune_ts_of(st->st_ex_mtime);
	if (iotune_wc_times_mtime(&cache->wc, &t)) {
		st->st_ex_mtime = iotune_timespec_of(t);
	}
}
