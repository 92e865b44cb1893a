/*
 * iotune: everything that leans on smbd internals rather than on the VFS
 * contract.  Written against smbd 4.17 (Debian 12's 4.17.12); every piece
 * checked again in Samba 4.22.11's source (Debian 13) and run there by
 * the samba422 test stage.  Each names what it relies on, and
 * iotune_smbd_version_ok() refuses a tree connect in an smbd of another
 * major.minor than the Samba tree the module was built against.  What
 * differs between releases is in iotune_compat.h.
 *
 * - The tevent trace callback: smbd installs its own in smbd_process()
 *   before its main loop (4.17 process.c, 4.22 smb2_process.c); we chain
 *   it while the process has caches or flushes in flight (and remove
 *   ours only when it is still the one installed).  It lets the write
 *   cache check, before every loop iteration, whether a handle lost its
 *   right to cache: smbd has no VFS hook for oplock and lease breaks
 *   (docs/design.md, "Coherence").
 * - The right to cache is read from files_struct fields smbd sets when
 *   it sends a break (fsp->oplock_type, sent_oplock_break, the lease's
 *   BREAK_IN_PROGRESS flag; smb2_oplock.c in 4.17 and 4.22 alike).
 * - Foreign handles: smbd keeps every files_struct of the process in
 *   sconn->files, new ones at the head, and their number in
 *   sconn->num_files (files.c, 4.17 and 4.22; both also move a handle
 *   found deep in the list to the head).
 * - Pipelining: fsp->num_aio_requests counts a handle's requests in
 *   flight (4.17, 4.22).
 * - A private tevent context for flushes, so that synchronous VFS calls
 *   can wait for a flush in flight, and its polling.
 * - MSG_PROFILE: smbd's messaging gives a message type to one handler;
 *   ours passes it on to smbd's exported set_profile_level() (profile.c,
 *   4.17 and 4.22).
 * - Multichannel: smbd passes every connection of a client GUID to one
 *   process when "server multi channel support" is on
 *   (smbXsrv_server_multi_channel_enabled(), 4.17 and 4.22).
 * - The share's "vfs objects" (lp_vfs_objects()): vfs_io_uring completes
 *   I/O on its own and is refused below iotune; batch reservations need
 *   nothing below iotune; iotune listed twice is refused.
 * - Setting a modification time again: vfs_default's and vfs_glusterfs's
 *   fntimes do nothing when the times asked for equal those in
 *   fsp->fsp_name->st, smbd's last stat of the handle (4.17, 4.22), which
 *   may be older than the data that landed since.
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
#include "smbd/globals.h"
#include "messages.h"
#include "iotune_compat.h"

#include "vfs_iotune.h"

#undef DBGC_CLASS
#define DBGC_CLASS DBGC_VFS

struct iotune_smbd {
	struct iotune_process *proc;
	struct tevent_context *ev;
	struct tevent_context *flush_ev;
	tevent_trace_callback_t prev_trace_cb;
	void *prev_trace_private;
	bool traced;			/* iotune_trace_callback chained */
	unsigned flushes_in_flight;
	struct tevent_timer *poll_timer;
	struct messaging_context *msg_ctx;
	struct smbd_server_connection *sconn;
	struct files_struct *files_seen;	/* sconn->files at last scan */
	size_t num_files_seen;			/* sconn->num_files then */
};

/*
 * The smbd iotune runs in must be the major.minor of the Samba tree it
 * was built against: smbd's structs (files_struct, the VFS table) change
 * between releases without notice to modules.
 */
bool iotune_smbd_version_ok(char *why, size_t why_len)
{
	const char *v = samba_version_string();
	unsigned major = 0;
	unsigned minor = 0;

	if (sscanf(v, "%u.%u", &major, &minor) != 2 ||
	    major != IOTUNE_BUILT_MAJOR || minor != IOTUNE_BUILT_MINOR) {
		snprintf(why, why_len, "iotune was built for smbd %d.%d, this "
			 "smbd is %s: install the iotune package built for "
			 "it", IOTUNE_BUILT_MAJOR, IOTUNE_BUILT_MINOR, v);
		return false;
	}
	if (!IOTUNE_SAMBA_TESTED(major, minor)) {
		DBG_NOTICE("iotune was not tested with smbd %u.%u\n", major,
			   minor);
	}
	return true;
}

/*
 * May a handle keep written data in memory right now?  smbd (4.17,
 * 4.22) sets fsp->sent_oplock_break when it sends an oplock break, and
 * SMB2_LEASE_FLAG_BREAK_IN_PROGRESS in the lease (whose state still shows
 * WRITE during the break) when it sends a lease break, in the same event
 * handler as the break itself.
 */
bool iotune_smbd_fsp_may_cache(const struct files_struct *fsp)
{
	const struct smb2_lease *lease = NULL;

	if (fsp->oplock_type == LEASE_OPLOCK) {
		if (fsp->lease == NULL) {
			return false;
		}
		lease = &fsp->lease->lease;
		if (lease->lease_flags & SMB2_LEASE_FLAG_BREAK_IN_PROGRESS) {
			return false;
		}
		return (lease->lease_state & SMB2_LEASE_WRITE) != 0;
	}
	if (EXCLUSIVE_OPLOCK_TYPE(fsp->oplock_type)) {
		return fsp->sent_oplock_break == NO_BREAK_SENT;
	}
	return false;
}

/*
 * Are other requests of this handle in flight (a client that pipelines)?
 * smbd (4.17, 4.22) counts a handle's async requests in
 * fsp->num_aio_requests; a request is added after its send function
 * returned.
 */
bool iotune_smbd_handle_busy(const struct files_struct *fsp)
{
	return fsp->num_aio_requests > 0;
}

/*
 * Whether more requests of the client wait in a socket of its
 * connections.  smbd reads one request at a time and answers a cached
 * write before it reads the next, so fsp->num_aio_requests does not show
 * a client that keeps several writes in flight; the bytes waiting in its
 * sockets do (FIONREAD: one ioctl per connection).
 */
bool iotune_smbd_client_waiting(const struct files_struct *fsp)
{
	struct smbXsrv_connection *xconn = NULL;
	int n;

	if (fsp->conn->sconn == NULL || fsp->conn->sconn->client == NULL) {
		return false;	/* an internal connection: no client */
	}
	for (xconn = fsp->conn->sconn->client->connections; xconn != NULL;
	     xconn = xconn->next) {
		n = 0;
		if (xconn->transport.sock != -1 &&
		    ioctl(xconn->transport.sock, FIONREAD, &n) == 0 && n > 0) {
			return true;
		}
	}
	return false;
}

static bool iotune_conn_is_ours(const struct iotune_process *p,
				const struct connection_struct *conn)
{
	const struct iotune_share *share = NULL;

	for (share = p->shares; share != NULL; share = share->next) {
		if (share->conn == conn) {
			return true;
		}
	}
	return false;
}

/*
 * Is the file open in this process through a share without iotune (two
 * shares on one path, or one lease used through both)?  Such a handle
 * reads and writes the disk past the cache.  smbd (4.17, 4.22) adds new
 * handles at the head of sconn->files and counts them in
 * sconn->num_files: the list is only walked when either changed since
 * the last walk.  (The head alone is not enough: smbd also moves a handle
 * found deep in the list to the head, which can put the old head back
 * there in the same loop iteration that added a new handle.)
 */
bool iotune_smbd_foreign_handle(struct iotune_process *p,
				const struct file_id *id)
{
	struct iotune_smbd *s = p->smbd;
	struct files_struct *fsp = NULL;

	for (fsp = s->sconn->files; fsp != NULL; fsp = fsp->next) {
		if (fsp->fsp_flags.is_fsa &&
		    file_id_equal(&fsp->file_id, id) &&
		    !iotune_conn_is_ours(p, fsp->conn)) {
			return true;
		}
	}
	return false;
}

/*
 * Before every loop iteration of smbd's main context: runs flush
 * completions that are ready, then lets the write cache check its caches.
 * An oplock or lease break is sent in one event handler; the client's
 * acknowledgement can only be read in a later iteration, so a cache is
 * written out before the ack (and before a waiting opener) is processed.
 * Compound requests are dispatched through immediates, one per iteration
 * too.
 */
static void iotune_smbd_poll(struct iotune_smbd *s);
static void iotune_trace_remove(struct iotune_smbd *s);

static void iotune_trace_callback(enum tevent_trace_point point,
				  void *private_data)
{
	struct iotune_smbd *s = private_data;

	if (s->prev_trace_cb != NULL) {
		s->prev_trace_cb(point, s->prev_trace_private);
	}
	if (point != TEVENT_TRACE_BEFORE_LOOP_ONCE) {
		return;
	}
	if (s->flushes_in_flight > 0) {
		iotune_smbd_poll(s);
	}
	if (s->proc->caches != NULL) {
		bool files_changed = s->sconn->files != s->files_seen ||
				     s->sconn->num_files != s->num_files_seen;

		s->files_seen = s->sconn->files;
		s->num_files_seen = s->sconn->num_files;
		iotune_caches_check(s->proc, files_changed);
	}
	if (s->proc->caches == NULL && s->flushes_in_flight == 0) {
		iotune_trace_remove(s);
	}
}

/*
 * The trace callback is chained only while the process has caches or
 * flushes in flight: iotune_smbd_caches_made() and a flush's start chain
 * it before the cache can absorb a write, so every cache is checked at
 * every loop iteration (docs/design.md, "Coherence"), and a process that
 * only passes requests through pays nothing at each iteration.  When
 * another callback was chained after ours, ours stays and does nothing.
 */
static void iotune_trace_install(struct iotune_smbd *s)
{
	if (s->traced) {
		return;
	}
	tevent_get_trace_callback(s->ev, &s->prev_trace_cb,
				  &s->prev_trace_private);
	tevent_set_trace_callback(s->ev, iotune_trace_callback, s);
	s->traced = true;
	s->files_seen = NULL;		/* scan all handles at the next check */
	s->num_files_seen = SIZE_MAX;
}

static void iotune_trace_remove(struct iotune_smbd *s)
{
	tevent_trace_callback_t cb = NULL;
	void *private_data = NULL;

	tevent_get_trace_callback(s->ev, &cb, &private_data);
	if (cb == iotune_trace_callback && private_data == s) {
		tevent_set_trace_callback(s->ev, s->prev_trace_cb,
					  s->prev_trace_private);
		s->traced = false;
	}
}

void iotune_smbd_caches_made(struct iotune_process *p)
{
	iotune_trace_install(p->smbd);
}

/* Runs the flush completions flush_ev has ready, without blocking. */
static void iotune_poll_marker(struct tevent_context *ev,
			       struct tevent_timer *te,
			       struct timeval now,
			       void *private_data)
{
	bool *fired = private_data;

	*fired = true;
}

static void iotune_smbd_poll(struct iotune_smbd *s)
{
	bool fired = false;
	struct tevent_timer *te = NULL;

	te = tevent_add_timer(s->flush_ev, s, tevent_timeval_zero(),
			      iotune_poll_marker, &fired);
	if (te == NULL) {
		return;
	}
	while (!fired) {
		if (tevent_loop_once(s->flush_ev) != 0) {
			TALLOC_FREE(te);
			break;
		}
	}
}

static void iotune_poll_timer_arm(struct iotune_smbd *s);

static void iotune_poll_timer_fn(struct tevent_context *ev,
				 struct tevent_timer *te,
				 struct timeval now,
				 void *private_data)
{
	struct iotune_smbd *s = private_data;

	s->poll_timer = NULL;
	iotune_smbd_poll(s);
	iotune_poll_timer_arm(s);
}

/* While the main loop is idle, flushes are polled every 200 us. */
static void iotune_poll_timer_arm(struct iotune_smbd *s)
{
	if (s->poll_timer != NULL || s->flushes_in_flight == 0) {
		return;
	}
	s->poll_timer = tevent_add_timer(s->ev, s,
					 tevent_timeval_current_ofs(0, 200),
					 iotune_poll_timer_fn, s);
}

struct tevent_context *iotune_smbd_flush_ev(struct iotune_process *p)
{
	return p->smbd->flush_ev;
}

void iotune_smbd_flush_started(struct iotune_process *p)
{
	p->smbd->flushes_in_flight++;
	iotune_trace_install(p->smbd);
	iotune_poll_timer_arm(p->smbd);
}

void iotune_smbd_flush_ended(struct iotune_process *p)
{
	SMB_ASSERT(p->smbd->flushes_in_flight > 0);
	p->smbd->flushes_in_flight--;
}

/* For a synchronous wait: one event of the flush context, blocking. */
void iotune_smbd_run_flush_ev_once(struct iotune_process *p)
{
	if (tevent_loop_once(p->smbd->flush_ev) != 0) {
		DBG_ERR("tevent_loop_once() on the flush context failed: "
			"%s\n", strerror(errno));
		smb_panic("iotune: cannot wait for a flush");
	}
}

/*
 * "smbcontrol smbd profile off|count|on|flush" (MSG_PROFILE) goes to one
 * handler only, the one registered last: ours, which passes it on to
 * smbd's set_profile_level() and then switches iotune's counting.
 */
static void iotune_profile_message(struct messaging_context *msg_ctx,
				   void *private_data,
				   uint32_t msg_type,
				   struct server_id src,
				   DATA_BLOB *data)
{
	struct iotune_smbd *s = private_data;
	int level;

	if (data->length != sizeof(level)) {
		DBG_WARNING("got an invalid profile message\n");
		return;
	}
	memcpy(&level, data->data, sizeof(level));
	set_profile_level(level, &src);
	iotune_profile_level(s->proc, level);
}

static int iotune_smbd_destructor(struct iotune_smbd *s)
{
	iotune_trace_remove(s);
	if (s->msg_ctx != NULL) {
		messaging_deregister(s->msg_ctx, MSG_PROFILE, s);
	}
	return 0;
}

int iotune_smbd_process_init(struct iotune_process *p,
			     struct smbd_server_connection *sconn)
{
	struct iotune_smbd *s = talloc_zero(p, struct iotune_smbd);
	struct tevent_context *ev = sconn->ev_ctx;
	struct messaging_context *msg_ctx = sconn->msg_ctx;

	if (s == NULL) {
		return ENOMEM;
	}
	s->proc = p;
	s->ev = ev;
	s->sconn = sconn;
	s->flush_ev = samba_tevent_context_init(s);
	if (s->flush_ev == NULL) {
		TALLOC_FREE(s);
		return ENOMEM;
	}
	if (NT_STATUS_IS_OK(messaging_register(msg_ctx, s, MSG_PROFILE,
					       iotune_profile_message))) {
		s->msg_ctx = msg_ctx;
	}
	talloc_set_destructor(s, iotune_smbd_destructor);
	p->smbd = s;
	return 0;
}

void iotune_smbd_process_fini(struct iotune_process *p)
{
	TALLOC_FREE(p->smbd);
}

/*
 * With "server multi channel support" on, smbd (4.17, 4.22) passes every
 * SMB 2.1+ connection of a client GUID to the process that already
 * serves that client: one lease can then only be held through handles of
 * one process.
 * With it off, two connections of one client live in two processes that
 * share a lease without breaking it.
 */
bool iotune_smbd_leases_stay_in_process(void)
{
	return smbXsrv_server_multi_channel_enabled();
}

/* Is one of names in the share's "vfs objects" after (below) iotune? */
const char *iotune_smbd_module_below(int snum, const char *const *names)
{
	const char **objects = lp_vfs_objects(snum);
	bool below = false;
	size_t i;
	size_t j;

	for (i = 0; objects != NULL && objects[i] != NULL; i++) {
		if (strequal(objects[i], IOTUNE_MODULE_NAME)) {
			below = true;
			continue;
		}
		for (j = 0; below && names[j] != NULL; j++) {
			if (strequal(objects[i], names[j])) {
				return objects[i];
			}
		}
	}
	return NULL;
}

/* Is iotune the last module in the share's "vfs objects"? */
bool iotune_smbd_nothing_below(int snum)
{
	const char **objects = lp_vfs_objects(snum);
	size_t i;

	for (i = 0; objects != NULL && objects[i] != NULL; i++) {
		if (strequal(objects[i], IOTUNE_MODULE_NAME)) {
			return objects[i + 1] == NULL;
		}
	}
	return false;
}

/*
 * Is iotune listed twice in the share's "vfs objects"?  Its pass-through
 * requests would be told apart by the next layer's request alone, which
 * both layers would claim (vfs_iotune_pass.c).
 */
bool iotune_smbd_listed_twice(int snum)
{
	const char **objects = lp_vfs_objects(snum);
	size_t found = 0;
	size_t i;

	for (i = 0; objects != NULL && objects[i] != NULL; i++) {
		if (strequal(objects[i], IOTUNE_MODULE_NAME)) {
			found++;
		}
	}
	return found > 1;
}

/* Modules that complete async I/O on their own tevent context */
const char *iotune_smbd_incompatible_module(int snum)
{
	static const char *const incompatible[] = { "io_uring", NULL };

	return iotune_smbd_module_below(snum, incompatible);
}

/* Opens fd's file again with other flags (O_DIRECT), through /proc. */
int iotune_smbd_reopen(int fd, int flags)
{
	iotune_proc_fd_path_buf buf;
	const char *path = iotune_proc_fd_path(fd, &buf);

	if (path == NULL) {
		errno = ENOSYS;
		return -1;
	}
	return open(path, flags | O_CLOEXEC);
}

/*
 * Sets fsp's modification time to mtime again, after cached data that
 * landed moved it: 0 or an errno.  The handle's stat is made true first,
 * or the backend may think there is nothing to do.  It runs as whoever
 * smbd is at the moment (a completion, another session's user): a set
 * the file system refuses is done as root, as smbd's own file_ntimes()
 * does ("dos filetimes"); the time is one a client set successfully.
 */
int iotune_smbd_set_mtime(struct vfs_handle_struct *handle,
			  struct files_struct *fsp,
			  struct timespec mtime)
{
	struct smb_file_time ft;
	SMB_STRUCT_STAT st;
	int ret;
	int err;

	if (SMB_VFS_NEXT_FSTAT(handle, fsp, &st) != 0) {
		return errno;
	}
	if (timespec_compare(&st.st_ex_mtime, &mtime) == 0) {
		return 0;
	}
	init_smb_file_time(&ft);
	ft.atime = st.st_ex_atime;
	ft.mtime = mtime;
	fsp->fsp_name->st.st_ex_atime = st.st_ex_atime;
	fsp->fsp_name->st.st_ex_mtime = st.st_ex_mtime;
	ret = SMB_VFS_NEXT_FNTIMES(handle, fsp, &ft);
	err = ret == 0 ? 0 : errno;
	if (err == EPERM || err == EACCES) {
		become_root();
		ret = SMB_VFS_NEXT_FNTIMES(handle, fsp, &ft);
		err = ret == 0 ? 0 : errno;
		unbecome_root();
	}
	if (err == 0) {
		fsp->fsp_name->st.st_ex_mtime = mtime;
	}
	return err;
}
