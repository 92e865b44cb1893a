/*
 * iotune - the write cache's reservations made in batches: which writes
 * wait, which calls a batch makes, what its answers decide, and when a
 * deferred batch starts (pure core, no Samba).  The rules are in
 * include/iotune/rsvq.h; modules/wcache_reserve.c is the write cache's
 * glue, modules/vfs_iotune_reserve.c makes the calls.
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
#include <string.h>

#include "iotune/rsvq.h"
#include "iotune/util.h"

static bool touches(const struct iotune_rsvq_range *a, uint64_t off,
		    uint64_t end)
{
	return a->end > a->off && a->off <= end && off <= a->end;
}

static bool overlaps(const struct iotune_rsvq_range *a, uint64_t off,
		     uint64_t end)
{
	return a->off < end && off < a->end;
}

static bool covered(const struct iotune_rsvq_range *a, uint64_t off,
		    uint64_t end)
{
	return a->end > a->off && off >= a->off && end <= a->end;
}

static bool batch_overlaps(const struct iotune_rsvq_batch *b, uint64_t off,
			   uint64_t end)
{
	unsigned int i;

	for (i = 0; i < b->n_writes; i++) {
		if (overlaps(&b->w[i], off, end)) {
			return true;
		}
	}
	return false;
}

/*
 * Adds a write to a batch: its bytes join the runs they touch (a union
 * of touching ranges has no gap, so a run holds only bytes of writes).
 * false, and the batch unchanged, when it is full.
 */
static bool batch_add(struct iotune_rsvq_batch *b, uint64_t id,
		      uint64_t off, uint64_t end)
{
	struct iotune_rsvq_range run[IOTUNE_RSVQ_RUNS + 1];
	struct iotune_rsvq_range r = { .off = off, .end = end };
	unsigned int n = 0;
	unsigned int i;

	if (b->n_writes == IOTUNE_RSVQ_WRITES) {
		return false;
	}
	for (i = 0; i < b->n_runs; i++) {
		if (touches(&b->run[i], r.off, r.end)) {
			r.off = MIN(r.off, b->run[i].off);
			r.end = MAX(r.end, b->run[i].end);
			continue;
		}
		run[n++] = b->run[i];
	}
	if (n == IOTUNE_RSVQ_RUNS) {
		return false;
	}
	run[n++] = r;
	memcpy(b->run, run, n * sizeof(run[0]));
	b->n_runs = n;
	b->id[b->n_writes] = id;
	b->w[b->n_writes] = (struct iotune_rsvq_range) { off, end };
	b->n_writes++;
	return true;
}

static void batch_calls(const struct iotune_rsvq_batch *b,
			struct iotune_rsvq_calls *calls)
{
	calls->n = b->n_runs;
	memcpy(calls->run, b->run, b->n_runs * sizeof(b->run[0]));
}

/* (Re)starts the batch in q->fly; its calls are to be made now */
/* fly is formed: its calls start now, or (deferred) at launch() */
static void fly(struct iotune_rsvq *q, struct iotune_rsvq_calls *calls)
{
	q->flying = true;
	q->started = !q->deferred;
	q->fly.answered = 0;
	q->fly.epoch = q->epoch;
	calls->n = 0;
	if (q->started) {
		batch_calls(&q->fly, calls);
	}
}

static void remember(struct iotune_rsvq *q, const struct iotune_rsvq_range *r)
{
	if (touches(&q->known, r->off, r->end)) {
		q->known.off = MIN(q->known.off, r->off);
		q->known.end = MAX(q->known.end, r->end);
		return;
	}
	q->known = *r;
}

static void decide(struct iotune_rsvq_decided *out, uint64_t id,
		   enum iotune_rsvq_verdict verdict)
{
	out->id[out->n] = id;
	out->verdict[out->n] = verdict;
	out->n++;
}

/* the call of a batch whose run holds write i */
static unsigned int run_of(const struct iotune_rsvq_batch *b,
			   unsigned int i)
{
	unsigned int r;

	for (r = 0; r < b->n_runs; r++) {
		if (covered(&b->run[r], b->w[i].off, b->w[i].end)) {
			return r;
		}
	}
	/*
	 * Not reached: a batch's runs are unions of its writes' bytes, so
	 * one of them holds each write whole.
	 */
	return 0;
}

/*
 * All calls of q->fly are answered: its writes' verdicts.  A failed call
 * makes nothing known (whatever its place in the batch); a call that
 * succeeded is known after that.
 */
static void decide_fly(struct iotune_rsvq *q, struct iotune_rsvq_decided *out)
{
	const struct iotune_rsvq_batch *b = &q->fly;
	unsigned int i;

	for (i = 0; i < b->n_runs; i++) {
		if (b->err[i] == 0) {
			continue;
		}
		q->known = (struct iotune_rsvq_range) { 0, 0 };
		if (b->err[i] != ENOSPC && b->err[i] != EDQUOT &&
		    !q->disabled) {
			q->disabled = true;
			out->cannot_reserve = true;
		}
	}
	for (i = 0; i < b->n_runs; i++) {
		if (b->err[i] == 0) {
			remember(q, &b->run[i]);
		}
	}
	for (i = 0; i < b->n_writes; i++) {
		decide(out, b->id[i], b->err[run_of(b, i)] == 0 ?
		       IOTUNE_RSVQ_CACHE : IOTUNE_RSVQ_THROUGH);
	}
}

static bool batch_known(const struct iotune_rsvq *q,
			const struct iotune_rsvq_batch *b)
{
	unsigned int i;

	for (i = 0; i < b->n_writes; i++) {
		if (!covered(&q->known, b->w[i].off, b->w[i].end)) {
			return false;
		}
	}
	return true;
}

/*
 * The queued writes follow: through when the queue cannot reserve,
 * cached at once when the batch just answered reserved all of their
 * bytes; else they go as the next batch, whole.  (Deciding only some of
 * them now would leave calls for bytes no waiting write covers, or a
 * rest whose runs no longer fit: a decided write may have bridged them.)
 */
static void drop_gone(struct iotune_rsvq_batch *b);

static void start_next(struct iotune_rsvq *q, struct iotune_rsvq_decided *out)
{
	struct iotune_rsvq_batch *n = &q->next;
	unsigned int i;

	q->flying = false;
	drop_gone(n);
	if (n->n_writes == 0) {
		*n = (struct iotune_rsvq_batch) { 0 };
		return;
	}
	if (q->disabled || batch_known(q, n)) {
		for (i = 0; i < n->n_writes; i++) {
			decide(out, n->id[i], q->disabled ?
			       IOTUNE_RSVQ_THROUGH : IOTUNE_RSVQ_CACHE);
		}
		*n = (struct iotune_rsvq_batch) { 0 };
		return;
	}
	q->fly = *n;
	*n = (struct iotune_rsvq_batch) { 0 };
	fly(q, &out->calls);
}

void iotune_rsvq_init(struct iotune_rsvq *q)
{
	*q = (struct iotune_rsvq) { 0 };
}

enum iotune_rsvq_verdict iotune_rsvq_submit(struct iotune_rsvq *q,
					    uint64_t id, uint64_t off,
					    uint64_t end,
					    struct iotune_rsvq_calls *calls)
{
	calls->n = 0;
	if (q->disabled || end < off) {
		return IOTUNE_RSVQ_THROUGH;	/* (end < off: fails there) */
	}
	if (end == off) {
		return IOTUNE_RSVQ_CACHE;	/* nothing to reserve */
	}
	if (!q->flying) {
		/* nothing is queued */
		if (covered(&q->known, off, end)) {
			return IOTUNE_RSVQ_CACHE;
		}
		q->fly = (struct iotune_rsvq_batch) { 0 };
		(void)batch_add(&q->fly, id, off, end);
		fly(q, calls);
		return IOTUNE_RSVQ_QUEUED;
	}
	if (covered(&q->known, off, end) &&
	    !batch_overlaps(&q->fly, off, end) &&
	    !batch_overlaps(&q->next, off, end)) {
		return IOTUNE_RSVQ_CACHE;
	}
	if (!q->started && q->next.n_writes == 0 &&
	    batch_add(&q->fly, id, off, end)) {
		return IOTUNE_RSVQ_QUEUED;	/* joins it before its launch */
	}
	if (!batch_add(&q->next, id, off, end)) {
		return IOTUNE_RSVQ_BUSY;
	}
	return IOTUNE_RSVQ_QUEUED;
}

bool iotune_rsvq_done(struct iotune_rsvq *q, unsigned int run, int err,
		      struct iotune_rsvq_decided *out)
{
	unsigned int all;

	out->n = 0;
	out->cannot_reserve = false;
	out->calls.n = 0;
	if (!q->flying || !q->started || run >= q->fly.n_runs ||
	    (q->fly.answered & (1u << run)) != 0) {
		return false;
	}
	q->fly.answered |= 1u << run;
	q->fly.err[run] = err;
	all = (1u << q->fly.n_runs) - 1;
	if (q->fly.answered != all) {
		return true;	/* the batch's other calls are on their way */
	}
	if (q->fly.epoch != q->epoch) {
		/* the space changed meanwhile: what landed may be gone */
		drop_gone(&q->fly);
		if (q->fly.n_writes == 0) {
			start_next(q, out);	/* every write of it left */
			return true;
		}
		fly(q, &out->calls);
		return true;
	}
	decide_fly(q, out);
	start_next(q, out);
	return true;
}

/*
 * The next batch without the write id: made again from its other writes,
 * so that its calls cover only bytes of writes that still wait.  When
 * they no longer fit (the write bridged runs, and without it there are
 * too many), the batch stays as it was: the write's bytes are reserved
 * with it, and its verdict comes.
 */
/*
 * Makes b again from the writes that stay in it: all but the write id
 * (when id is not NULL; *found says whether it was there) and, with
 * drop_gone, but the writes that left after its calls were made.  False
 * when they do not fit in the calls a batch may make (a write that left
 * had joined two runs): b stays as it was.
 */
static bool batch_rebuild(struct iotune_rsvq_batch *b, const uint64_t *id,
			  bool drop_gone, bool *found)
{
	struct iotune_rsvq_batch k = { 0 };
	unsigned int i;

	*found = false;
	for (i = 0; i < b->n_writes; i++) {
		bool gone = (b->gone & (1u << i)) != 0;

		if (id != NULL && !*found && b->id[i] == *id) {
			*found = true;
			continue;
		}
		if (gone && drop_gone) {
			continue;
		}
		if (!batch_add(&k, b->id[i], b->w[i].off, b->w[i].end)) {
			return false;
		}
		if (gone) {
			k.gone |= 1u << (k.n_writes - 1);
		}
	}
	k.epoch = b->epoch;
	*b = k;
	return true;
}

/* the write id left, but b keeps it: a batch made again drops it */
static void mark_gone(struct iotune_rsvq_batch *b, uint64_t id)
{
	unsigned int i;

	for (i = 0; i < b->n_writes; i++) {
		if (b->id[i] == id) {
			b->gone |= 1u << i;
		}
	}
}

/* the writes that left before its launch, or before it goes again */
static void drop_gone(struct iotune_rsvq_batch *b)
{
	bool found;

	(void)batch_rebuild(b, NULL, true, &found);
}

bool iotune_rsvq_cancel(struct iotune_rsvq *q, uint64_t id)
{
	struct iotune_rsvq_calls none;
	bool found = false;

	if (!batch_rebuild(&q->next, &id, false, &found)) {
		mark_gone(&q->next, id);
		return false;
	}
	if (found || !q->flying) {
		return found;
	}
	if (q->started || !batch_rebuild(&q->fly, &id, false, &found)) {
		mark_gone(&q->fly, id);
		return false;
	}
	if (found && q->fly.n_writes == 0) {
		/* nothing left to launch: the next batch takes its place */
		q->flying = false;
		if (q->next.n_writes > 0) {
			q->fly = q->next;
			q->next = (struct iotune_rsvq_batch) { 0 };
			fly(q, &none);
		}
	}
	return found;
}

void iotune_rsvq_forget(struct iotune_rsvq *q)
{
	q->epoch++;
	q->known = (struct iotune_rsvq_range) { 0, 0 };
}

bool iotune_rsvq_launch(struct iotune_rsvq *q,
			struct iotune_rsvq_calls *calls)
{
	calls->n = 0;
	while (iotune_rsvq_due(q)) {
		drop_gone(&q->fly);
		if (q->fly.n_writes > 0) {
			q->started = true;
			batch_calls(&q->fly, calls);
			return true;
		}
		/* every write of it left: the next one, if any */
		q->flying = false;
		if (q->next.n_writes > 0) {
			q->fly = q->next;
			q->next = (struct iotune_rsvq_batch) { 0 };
			fly(q, calls);
		}
	}
	return false;
}

enum iotune_rsvq_go iotune_rsvq_pace(struct iotune_rsvq_pace *p,
				     unsigned int due, bool full,
				     const struct iotune_rsvq_wait *w,
				     uint64_t *after_us)
{
	uint64_t wait_us;

	*after_us = 0;
	if (due == 0) {
		return IOTUNE_RSVQ_GO;	/* nothing waits: learn nothing */
	}
	if (!full && due < IOTUNE_RSVQ_WRITES &&
	    w->waited_us < w->max_wait_us) {
		if (w->more_waiting(w->private_data)) {
			*after_us = w->max_wait_us - w->waited_us;
			return IOTUNE_RSVQ_WAIT;
		}
		wait_us = MIN(w->wait_us, w->max_wait_us);
		if (due < p->want && w->waited_us < wait_us) {
			*after_us = wait_us - w->waited_us;
			return IOTUNE_RSVQ_WAIT_TIMER;
		}
	}
	p->want = due;
	return IOTUNE_RSVQ_GO;
}

bool iotune_rsvq_due(const struct iotune_rsvq *q)
{
	return q->flying && !q->started;
}

unsigned int iotune_rsvq_due_writes(const struct iotune_rsvq *q)
{
	return iotune_rsvq_due(q) ? q->fly.n_writes : 0;
}

bool iotune_rsvq_due_full(const struct iotune_rsvq *q)
{
	return iotune_rsvq_due(q) && (q->fly.n_writes >= IOTUNE_RSVQ_WRITES ||
				      q->next.n_writes > 0);
}

bool iotune_rsvq_idle(const struct iotune_rsvq *q)
{
	return !q->flying;
}
