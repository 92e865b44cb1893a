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
#include "lib/dbwrap/dbwrap.h"
#include "lib/dbwrap/dbwrap_open.h"
#include "lib/util/util_tdb.h"

#include "vfs_iotune.h"

#undef DBGC_CLASS
#define DBGC_CLASS DBGC_VFS

/*
 * Counters are published per tree connect in iotune_stats.tdb, opened
 * through dbwrap like smbd's own databases: a tdb in smbd's lock
 * directory, or with "clustering = yes" a CTDB persistent database that
 * every node of the cluster holds a copy of.  Records are text, at most
 * once a second per tree connect and at disconnect:
 *   live:<node>:<pid>:<serial>:<share>   a connection's counters
 *   total:<node>:<share>                 counters of connections that ended
 * (<node> is the CTDB node number, 0 without clustering).  A connection
 * that ends adds its counters to its node's total and deletes its own
 * record in one transaction: nothing is lost or counted twice, and two
 * nodes never write the same record.  The record of a process that died
 * stays and is still summed.
 */
#define IOTUNE_STATS_TDB "iotune_stats.tdb"

struct iotune_publisher {
	struct iotune_process *proc;
	struct db_context *db;
	uint32_t node;
	bool failed;
	struct tevent_timer *timer;
};

int iotune_publisher_init(struct iotune_process *p)
{
	p->publisher = talloc_zero(p, struct iotune_publisher);
	if (p->publisher == NULL) {
		return ENOMEM;
	}
	p->publisher->proc = p;
	p->publisher->node = lp_clustering() ? get_my_vnn() : 0;
	return 0;
}

static bool iotune_stats_open(struct iotune_publisher *pub)
{
	char *path = NULL;

	if (pub->db != NULL) {
		return true;
	}
	if (pub->failed) {
		return false;
	}
	path = lock_path(talloc_tos(), IOTUNE_STATS_TDB);
	if (path == NULL) {
		return false;
	}
	pub->db = db_open(pub, path, 0, TDB_DEFAULT, O_RDWR | O_CREAT, 0644,
			  DBWRAP_LOCK_ORDER_NONE, DBWRAP_FLAG_NONE);
	if (pub->db == NULL) {
		DBG_WARNING("cannot open %s: %s; iotune counters of this "
			    "process are not published\n", path,
			    strerror(errno));
		pub->failed = true;
	}
	TALLOC_FREE(path);
	return pub->db != NULL;
}

static char *iotune_share_key(TALLOC_CTX *mem_ctx,
			      const struct iotune_share *share)
{
	return talloc_asprintf(mem_ctx, "live:%" PRIu32 ":%d:%u:%s",
			       share->proc->publisher->node, (int)getpid(),
			       share->serial, share->name);
}

static NTSTATUS iotune_stats_store(struct db_context *db, const char *key,
				   const struct iotune_stats *stats)
{
	size_t len = iotune_stats_format(stats, NULL, 0);
	char *buf = talloc_array(talloc_tos(), char, len + 1);
	NTSTATUS status;

	if (buf == NULL) {
		return NT_STATUS_NO_MEMORY;
	}
	iotune_stats_format(stats, buf, len + 1);
	status = dbwrap_store(db, string_tdb_data(key),
			      make_tdb_data((uint8_t *)buf, len), TDB_REPLACE);
	TALLOC_FREE(buf);
	return status;
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
	    NT_STATUS_IS_OK(iotune_stats_store(pub->db, key, &share->stats))) {
		share->published = share->stats;
	}
	TALLOC_FREE(key);
}

/* The node's total of a share so far (zeros when there is none yet) */
static void iotune_stats_fetch_total(struct db_context *db, const char *key,
				     struct iotune_stats *total)
{
	TDB_DATA old = tdb_null;
	NTSTATUS status;

	*total = (struct iotune_stats) { 0 };
	status = dbwrap_fetch(db, talloc_tos(), string_tdb_data(key), &old);
	if (NT_STATUS_IS_OK(status) &&
	    iotune_stats_parse((const char *)old.dptr, old.dsize,
			       total) != 0) {
		DBG_WARNING("bad record '%s' in %s, starting it anew\n",
			    key, IOTUNE_STATS_TDB);
		*total = (struct iotune_stats) { 0 };
	}
	TALLOC_FREE(old.dptr);
}

/* At disconnect: the connection's counters go into its node's total. */
void iotune_share_retire(struct iotune_share *share)
{
	struct iotune_publisher *pub = share->proc->publisher;
	struct iotune_stats total;
	char *key = NULL;
	char *total_key = NULL;

	if (!share->config.stats || !iotune_stats_open(pub)) {
		return;
	}
	key = iotune_share_key(talloc_tos(), share);
	total_key = talloc_asprintf(talloc_tos(), "total:%" PRIu32 ":%s",
				    pub->node, share->name);
	if (key == NULL || total_key == NULL ||
	    dbwrap_transaction_start(pub->db) != 0) {
		goto done;
	}
	iotune_stats_fetch_total(pub->db, total_key, &total);
	iotune_stats_merge(&total, &share->stats);
	if (!NT_STATUS_IS_OK(iotune_stats_store(pub->db, total_key,
						&total))) {
		dbwrap_transaction_cancel(pub->db);
		goto done;
	}
	(void)dbwrap_delete(pub->db, string_tdb_data(key));
	if (dbwrap_transaction_commit(pub->db) != 0) {
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
