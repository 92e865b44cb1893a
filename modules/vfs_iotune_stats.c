/*
 * iotune: counters publication.  Each tree connect counts into its
 * struct iotune_stats (core: modules/stats.c); this file stores them in
 * iotune_stats.tdb in smbd's lock directory, where tools/iotune-stat
 * reads them, and applies smbcontrol's profile levels.
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
#include <tdb.h>

#include "vfs_iotune.h"

#undef DBGC_CLASS
#define DBGC_CLASS DBGC_VFS

/*
 * Counters are published per tree connect in a TDB in smbd's lock
 * directory, at most once a second and at disconnect, as text records:
 *   live:<pid>:<serial>:<share>   a connection's counters
 *   total:<share>                 counters of connections that ended
 * A connection that ends adds its counters to the total and deletes its
 * own record in one transaction: nothing is lost or counted twice.  The
 * record of a process that died stays and is still summed.
 */
#define IOTUNE_STATS_TDB "iotune_stats.tdb"

struct iotune_publisher {
	struct iotune_process *proc;
	struct tdb_context *tdb;
	bool failed;
	struct tevent_timer *timer;
};

static int iotune_publisher_destructor(struct iotune_publisher *pub)
{
	if (pub->tdb != NULL) {
		tdb_close(pub->tdb);
		pub->tdb = NULL;
	}
	return 0;
}

int iotune_publisher_init(struct iotune_process *p)
{
	p->publisher = talloc_zero(p, struct iotune_publisher);
	if (p->publisher == NULL) {
		return ENOMEM;
	}
	p->publisher->proc = p;
	talloc_set_destructor(p->publisher, iotune_publisher_destructor);
	return 0;
}

static bool iotune_stats_open(struct iotune_publisher *pub)
{
	char *path = NULL;

	if (pub->tdb != NULL) {
		return true;
	}
	if (pub->failed) {
		return false;
	}
	path = lock_path(talloc_tos(), IOTUNE_STATS_TDB);
	if (path == NULL) {
		return false;
	}
	pub->tdb = tdb_open(path, 0, TDB_DEFAULT, O_RDWR | O_CREAT, 0644);
	if (pub->tdb == NULL) {
		DBG_WARNING("cannot open %s: %s; iotune counters of this "
			    "process are not published\n", path,
			    strerror(errno));
		pub->failed = true;
	}
	TALLOC_FREE(path);
	return pub->tdb != NULL;
}

static TDB_DATA iotune_text_key(const char *key)
{
	return (TDB_DATA) {
		.dptr = discard_const_p(uint8_t, key),
		.dsize = strlen(key),
	};
}

static char *iotune_share_key(TALLOC_CTX *mem_ctx,
			      const struct iotune_share *share)
{
	return talloc_asprintf(mem_ctx, "live:%d:%u:%s", (int)getpid(),
			       share->serial, share->name);
}

static int iotune_stats_store(struct tdb_context *tdb, const char *key,
			      const struct iotune_stats *stats)
{
	size_t len = iotune_stats_format(stats, NULL, 0);
	char *buf = talloc_array(talloc_tos(), char, len + 1);
	int ret;

	if (buf == NULL) {
		return -1;
	}
	iotune_stats_format(stats, buf, len + 1);
	ret = tdb_store(tdb, iotune_text_key(key),
			(TDB_DATA) { .dptr = (uint8_t *)buf, .dsize = len },
			TDB_REPLACE);
	TALLOC_FREE(buf);
	return ret;
}

void iotune_share_publish(struct iotune_share *share)
{
	struct iotune_publisher *pub = share->proc->publisher;
	char *key = NULL;

	if (!share->config.stats || !iotune_stats_open(pub)) {
		return;
	}
	key = iotune_share_key(talloc_tos(), share);
	if (key != NULL &&
	    iotune_stats_store(pub->tdb, key, &share->stats) == 0) {
		share->published = share->stats;
	}
	TALLOC_FREE(key);
}

/* At disconnect: the connection's counters go into the share's total. */
void iotune_share_retire(struct iotune_share *share)
{
	struct iotune_publisher *pub = share->proc->publisher;
	struct iotune_stats total = { 0 };
	char *key = NULL;
	char *total_key = NULL;
	TDB_DATA old;

	if (!share->config.stats || !iotune_stats_open(pub)) {
		return;
	}
	key = iotune_share_key(talloc_tos(), share);
	total_key = talloc_asprintf(talloc_tos(), "total:%s", share->name);
	if (key == NULL || total_key == NULL ||
	    tdb_transaction_start(pub->tdb) != 0) {
		goto done;
	}
	old = tdb_fetch(pub->tdb, iotune_text_key(total_key));
	if (old.dptr != NULL &&
	    iotune_stats_parse((const char *)old.dptr, old.dsize,
			       &total) != 0) {
		DBG_WARNING("bad record '%s' in %s, starting it anew\n",
			    total_key, IOTUNE_STATS_TDB);
		ZERO_STRUCT(total);
	}
	SAFE_FREE(old.dptr);
	iotune_stats_merge(&total, &share->stats);
	if (iotune_stats_store(pub->tdb, total_key, &total) != 0) {
		tdb_transaction_cancel(pub->tdb);
		goto done;
	}
	tdb_delete(pub->tdb, iotune_text_key(key));
	if (tdb_transaction_commit(pub->tdb) != 0) {
		DBG_WARNING("cannot commit iotune counters of '%s'\n",
			    share->name);
	}
done:
	TALLOC_FREE(key);
	TALLOC_FREE(total_key);
}

static void iotune_publish_fn(struct tevent_context *ev,
			      struct tevent_timer *te,
			      struct timeval now,
			      void *private_data)
{
	struct iotune_publisher *pub = private_data;
	struct iotune_share *share = NULL;

	pub->timer = NULL;
	for (share = pub->proc->shares; share != NULL; share = share->next) {
		if (memcmp(&share->stats, &share->published,
			   sizeof(share->stats)) != 0) {
			iotune_share_publish(share);
		}
	}
	iotune_publish_timer_arm(pub->proc);
}

void iotune_publish_timer_arm(struct iotune_process *p)
{
	struct iotune_publisher *pub = p->publisher;

	if (pub->timer != NULL || p->shares == NULL) {
		return;
	}
	pub->timer = tevent_add_timer(p->ev, pub,
				      tevent_timeval_current_ofs(1, 0),
				      iotune_publish_fn, pub);
}

/* "profile flush": zero the counters of this process's connections */
static void iotune_reset_counters(struct iotune_process *p)
{
	struct iotune_share *share = NULL;

	for (share = p->shares; share != NULL; share = share->next) {
		uint64_t active = share->stats.wc.caches_active;

		ZERO_STRUCT(share->stats);
		share->stats.wc.caches_active = active;
		iotune_share_publish(share);
	}
}

/*
 * smbcontrol's profile level, passed on by vfs_iotune_smbd.c after smbd
 * applied it: 0 off, 1 and 2 on, 3 (flush) resets this process's
 * counters.  Every iotune counter follows it.
 */
void iotune_profile_level(struct iotune_process *p, int level)
{
	switch (level) {
	case 0:
		p->counting = false;
		break;
	case 1:
	case 2:
		p->counting = true;
		break;
	case 3:
		iotune_reset_counters(p);
		break;
	}
	iotune_caches_counting(p);
	DBG_NOTICE("profile level %d: iotune counters %s\n", level,
		   level == 3 ? "reset" : p->counting ? "on" : "off");
}
