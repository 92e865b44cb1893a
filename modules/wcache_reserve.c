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
static bool reserve_needed(const struct iotune_wcache *c, uint64_t off,
			   uint64_t end)
{
	return c->io->reserve != NULL && end > off &&
	       !reserved_already(c, off, end);
}

int iotune_wc_reserve_write(struct iotune_wcache *c, uint64_t off,
			    uint64_t end)
{
	int ret;

	if (!reserve_needed(c, off, end)) {
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

/*
 * Reservations in batches (params.reserve_async, include/iotune/rsvq.h):
 * a write asks for its bytes as it arrives (iotune_wc_reserve_ask()),
 * while the writes ahead of it still wait in the FIFO, so the writes
 * that arrive while one batch is on its way are reserved together by
 * the next.  A write is absorbed once its verdict came (step_absorb()).
 * Ids are a counter, not addresses: the verdict of a write that left the
 * queue meanwhile (to disk, failed, its request ended) matches no op,
 * even when a new op lives where it did.
 */
static bool wants_reservation(const struct iotune_wcache *c,
			      const struct iotune_wc_op *op)
{
	return c->p.reserve_async && op->kind == IOTUNE_WC_OP_WRITE &&
	       op->n > 0 && op->may_cache && !c->lost && !c->no_reserve &&
	       c->io->reserve != NULL &&
	       iotune_wc_would_keep(&c->p, op->off, op->n);
}

static struct iotune_wc_op *queued_op(const struct iotune_wcache *c,
				      uint64_t id)
{
	struct iotune_wc_op *op = NULL;

	for (op = c->queue; op != NULL; op = op->next) {
		if (op->rsv_id == id && op->kind == IOTUNE_WC_OP_WRITE) {
			return op;
		}
	}
	return NULL;
}

/*
 * A batch may have formed: the caller hears it (act may be NULL).  Its
 * calls start at a launch only (c->rq.deferred), never from a submit.
 */
static void note_due(struct iotune_wcache *c, struct iotune_wc_action *act)
{
	if (act != NULL) {
		act->reserve_due = iotune_rsvq_due(&c->rq);
	}
}

void iotune_wc_reserve_launch(struct iotune_wcache *c,
			      struct iotune_rsvq_calls *calls)
{
	if (iotune_rsvq_launch(&c->rq, calls)) {
		WC_COUNT(c, reserve_calls, calls->n);
	}
}

void iotune_wc_reserve_in_batches(struct iotune_wcache *c)
{
	c->p.reserve_async = true;
}

enum iotune_rsvq_go iotune_wc_reserve_pace(struct iotune_wcache *c,
					   const struct iotune_rsvq_wait *w,
					   uint64_t *after_us)
{
	return iotune_rsvq_pace(&c->rq.pace, iotune_rsvq_due_writes(&c->rq),
				iotune_rsvq_due_full(&c->rq), w, after_us);
}

unsigned iotune_wc_reserve_due(const struct iotune_wcache *c)
{
	return iotune_rsvq_due_writes(&c->rq);
}

static void take_verdict(struct iotune_wcache *c, struct iotune_wc_op *op,
			 enum iotune_rsvq_verdict v)
{
	switch (v) {
	case IOTUNE_RSVQ_CACHE:
		op->rsv = IOTUNE_WC_RSV_OK;
		c->disk_size = MAX(c->disk_size, op->off + op->n);
		break;
	case IOTUNE_RSVQ_QUEUED:
		op->rsv = IOTUNE_WC_RSV_WAIT;
		break;
	case IOTUNE_RSVQ_BUSY:
		op->rsv = IOTUNE_WC_RSV_BUSY;
		break;
	case IOTUNE_RSVQ_THROUGH:
		/* no space, or (c->no_reserve) the file system cannot */
		op->rsv = IOTUNE_WC_RSV_NO_SPACE;
		break;
	}
}

static void reserve_inline(struct iotune_wcache *c, struct iotune_wc_op *op,
			   struct iotune_wc_action *act)
{
	switch (iotune_wc_reserve_write(c, op->off, op->off + op->n)) {
	case 0:
		op->rsv = IOTUNE_WC_RSV_OK;
		break;
	case ENOSPC:
		op->rsv = IOTUNE_WC_RSV_NO_SPACE;
		break;
	default:
		/* c->no_reserve: written through from now on */
		act->cannot_reserve = true;
		op->rsv = IOTUNE_WC_RSV_NO_SPACE;
		break;
	}
}

/* an op ahead of op waits for room in a batch: op waits behind it */
static bool busy_ahead(const struct iotune_wcache *c,
		       const struct iotune_wc_op *op)
{
	const struct iotune_wc_op *o = NULL;

	for (o = c->queue; o != NULL && o != op; o = o->next) {
		if (o->rsv == IOTUNE_WC_RSV_BUSY) {
			return true;
		}
	}
	return false;
}

void iotune_wc_reserve_ask(struct iotune_wcache *c, struct iotune_wc_op *op,
			   struct iotune_wc_action *act)
{
	struct iotune_rsvq_calls calls = { 0 };
	enum iotune_rsvq_verdict v;

	op->rsv = IOTUNE_WC_RSV_NONE;
	if (!wants_reservation(c, op)) {
		return;
	}
	op->rsv_id = ++c->rsv_ids;
	if (busy_ahead(c, op)) {
		op->rsv = IOTUNE_WC_RSV_BUSY;
		return;
	}
	if (reserved_already(c, op->off, op->off + op->n)) {
		op->rsv = IOTUNE_WC_RSV_OK;
		return;
	}
	if (!op->busy && !op->client_waiting && iotune_rsvq_idle(&c->rq) &&
	    c->rq.pace.want <= 1) {
		/*
		 * alone in flight, from a client that sent no several at
		 * once last time: an inline call answers soonest
		 */
		reserve_inline(c, op, act);
		return;
	}
	v = iotune_rsvq_submit(&c->rq, op->rsv_id, op->off, op->off + op->n,
			       &calls);
	take_verdict(c, op, v);
	note_due(c, act);
}

/* the ops that found the next batch full ask again, in order (act may
 * be NULL) */
static void ask_busy_again(struct iotune_wcache *c,
			   struct iotune_wc_action *act)
{
	struct iotune_wc_op *op = NULL;

	for (op = c->queue; op != NULL; op = op->next) {
		struct iotune_rsvq_calls calls = { 0 };
		enum iotune_rsvq_verdict v;

		if (op->rsv != IOTUNE_WC_RSV_BUSY) {
			continue;
		}
		v = iotune_rsvq_submit(&c->rq, op->rsv_id, op->off,
				       op->off + op->n, &calls);
		take_verdict(c, op, v);
		note_due(c, act);
		if (v == IOTUNE_RSVQ_BUSY) {
			return;
		}
	}
}

void iotune_wc_reserve_done(struct iotune_wcache *c,
			    unsigned run,
			    int err,
			    uint64_t now_ms,
			    struct iotune_wc_action *act)
{
	struct iotune_rsvq_decided d;
	unsigned i;

	*act = (struct iotune_wc_action) { 0 };
	if (!iotune_rsvq_done(&c->rq, run, err, &d)) {
		return;
	}
	if (d.cannot_reserve) {
		c->no_reserve = true;
		act->cannot_reserve = true;
	}
	for (i = 0; i < d.n; i++) {
		struct iotune_wc_op *op = queued_op(c, d.id[i]);

		if (op != NULL) {
			take_verdict(c, op, d.verdict[i]);
		}
	}
	ask_busy_again(c, act);
	iotune_wc_run(c, now_ms, act);
	note_due(c, act);
}

/*
 * Where a queued write stands with its reservation, from step_absorb():
 * 0 (reserved), ENOSPC (write it through) or EAGAIN (wait: a
 * reserve_done() runs the queue again).
 */
int iotune_wc_reserve_state(struct iotune_wcache *c, struct iotune_wc_op *op,
			    struct iotune_wc_action *act)
{
	if (op->rsv == IOTUNE_WC_RSV_NONE) {
		/* asked for again after a forget, or not yet */
		iotune_wc_reserve_ask(c, op, act);
	}
	switch (op->rsv) {
	case IOTUNE_WC_RSV_OK:
		return 0;
	case IOTUNE_WC_RSV_NO_SPACE:
		return ENOSPC;
	case IOTUNE_WC_RSV_NONE:
		return ENOSPC;	/* not to be cached: never unreserved */
	default:
		return EAGAIN;
	}
}

/*
 * op leaves the queue: a batch that has not started need not reserve it,
 * and the writes that found no room ask again (the caller sees a batch
 * that forms from iotune_wc_reserve_due()).
 */
void iotune_wc_reserve_leave(struct iotune_wcache *c, struct iotune_wc_op *op)
{
	bool room = op->rsv == IOTUNE_WC_RSV_BUSY;

	if (op->rsv == IOTUNE_WC_RSV_WAIT) {
		room = iotune_rsvq_cancel(&c->rq, op->rsv_id);
	}
	op->rsv = IOTUNE_WC_RSV_NONE;
	if (room) {
		ask_busy_again(c, NULL);
	}
}

bool iotune_wc_reserving(const struct iotune_wcache *c)
{
	return !iotune_rsvq_idle(&c->rq);
}

void iotune_wc_reserve_end(struct iotune_wcache *c)
{
	c->reserved_lo = 0;
	c->reserved_hi = 0;
}

void iotune_wc_forget_reservations(struct iotune_wcache *c)
{
	struct iotune_wc_op *op = NULL;

	iotune_wc_reserve_end(c);
	iotune_rsvq_forget(&c->rq);
	for (op = c->queue; op != NULL; op = op->next) {
		if (op->rsv == IOTUNE_WC_RSV_OK) {
			op->rsv = IOTUNE_WC_RSV_NONE;	/* may be gone */
		}
	}
}
