/*
 * A model of the batched reservations' caller and disk, shared by the
 * unit test's randomized sequence (tests/unit/test_rsvq.c) and the fuzz
 * target (tests/fuzz/fuzz_rsvq.c): each decides the sequence, this file
 * plays it against include/iotune/rsvq.h and checks every rule.
 *
 * Writes lie in a file of RSVQ_MODEL_UNITS units and are submitted in
 * order, a BUSY one again before any later one.  The model disk holds
 * the units reserved: a call reserves its units when it is answered with
 * success, unless a truncate came after it was made (it may have landed
 * before it), and a truncate frees every unit.  Checks: every write is
 * decided once; a write is cached only when every unit of it is reserved
 * on the model disk; writes that overlap are decided in submission
 * order; every unit of a call is a unit of a write that waits; a batch's
 * calls come only when none is on its way (deferred: only at a launch);
 * an answer that matches no call changes nothing; once every call is
 * answered and every batch launched, every write is decided.
 *
 * The includer defines RSVQ_MODEL_CHECK(cond) (how a broken rule fails)
 * and RSVQ_MODEL_WRITES (the most writes one sequence makes).
 *
 * Copyright (C) iotune authors 2026
 * SPDX-License-Identifier: GPL-3.0-or-later
 */

#ifndef IOTUNE_TESTS_RSVQ_MODEL_H
#define IOTUNE_TESTS_RSVQ_MODEL_H

#include <stdbool.h>
#include <stdint.h>
#include <string.h>

#include "iotune/rsvq.h"

#define RSVQ_MODEL_UNITS 64

struct rsvq_model {
	struct iotune_rsvq q;
	bool reserved[RSVQ_MODEL_UNITS];
	unsigned int waiting[RSVQ_MODEL_UNITS];	/* queued writes over it */
	unsigned int kept[RSVQ_MODEL_UNITS];	/* writes over it that left
						 * but stay in a batch */
	uint64_t off[RSVQ_MODEL_WRITES + 1];
	uint64_t end[RSVQ_MODEL_WRITES + 1];
	int state[RSVQ_MODEL_WRITES + 1];	/* 0 new, 1 queued, 2 decided,
						 * 3 left, 4 left and decided */
	struct iotune_rsvq_calls fly;
	uint64_t fly_truncates[IOTUNE_RSVQ_RUNS];
	bool answered[IOTUNE_RSVQ_RUNS];
	uint64_t truncates;
	uint64_t head;		/* first write not yet accepted */
	uint64_t n;		/* writes made */
	bool disabled;
	bool deferred;		/* batches start at rsvq_model_launch() */
	/* how often each path came up */
	unsigned int cached, queued, busy, through, again, disables;
	unsigned int launches, cancels;
};

static void rsvq_model_reset(struct rsvq_model *m, bool deferred)
{
	memset(m, 0, sizeof(*m));
	iotune_rsvq_init(&m->q);
	m->q.deferred = deferred;
	m->deferred = deferred;
	m->head = 1;
}

/* a new write of [off, end); false when the sequence is full */
static bool rsvq_model_write(struct rsvq_model *m, uint64_t off,
			     uint64_t end)
{
	if (m->n == RSVQ_MODEL_WRITES) {
		return false;
	}
	m->n++;
	m->off[m->n] = off;
	m->end[m->n] = end;
	return true;
}

static void rsvq_model_decide(struct rsvq_model *m, uint64_t id,
			      enum iotune_rsvq_verdict v)
{
	uint64_t i;
	uint64_t u;

	RSVQ_MODEL_CHECK(id >= 1 && id <= m->n && m->state[id] != 2 &&
			 m->state[id] != 4);
	if (m->state[id] == 3) {
		m->state[id] = 4;	/* a verdict nobody waits for */
		return;
	}
	for (i = 1; i < id && m->end[id] > m->off[id]; i++) {
		/* (an empty write has no bytes to order) */
		if (m->off[i] < m->end[id] && m->off[id] < m->end[i]) {
			RSVQ_MODEL_CHECK(m->state[i] >= 2);
		}
	}
	RSVQ_MODEL_CHECK(v == IOTUNE_RSVQ_CACHE || v == IOTUNE_RSVQ_THROUGH);
	for (u = m->off[id]; v == IOTUNE_RSVQ_CACHE && u < m->end[id]; u++) {
		RSVQ_MODEL_CHECK(m->reserved[u]);
	}
	for (u = m->off[id]; m->state[id] == 1 && u < m->end[id]; u++) {
		m->waiting[u]--;
	}
	if (v == IOTUNE_RSVQ_CACHE) {
		m->cached++;
	} else {
		m->through++;
	}
	m->state[id] = 2;
}

static bool rsvq_model_flying(const struct rsvq_model *m)
{
	unsigned int i;

	for (i = 0; i < m->fly.n; i++) {
		if (!m->answered[i]) {
			return true;
		}
	}
	return false;
}

static void rsvq_model_start(struct rsvq_model *m,
			     const struct iotune_rsvq_calls *c)
{
	unsigned int i;
	uint64_t u;

	if (c->n == 0) {
		return;
	}
	RSVQ_MODEL_CHECK(!rsvq_model_flying(m) && c->n <= IOTUNE_RSVQ_RUNS);
	m->fly = *c;
	for (i = 0; i < c->n; i++) {
		RSVQ_MODEL_CHECK(c->run[i].off < c->run[i].end);
		for (u = c->run[i].off; u < c->run[i].end; u++) {
			RSVQ_MODEL_CHECK(u < RSVQ_MODEL_UNITS &&
					 (m->waiting[u] > 0 ||
					  m->kept[u] > 0));
		}
		m->fly_truncates[i] = m->truncates;
		m->answered[i] = false;
	}
}

/* submits the writes not yet accepted, in order, up to a BUSY one */
static void rsvq_model_submit(struct rsvq_model *m)
{
	struct iotune_rsvq_calls c;
	enum iotune_rsvq_verdict v;
	uint64_t id;
	uint64_t u;

	while (m->head <= m->n) {
		id = m->head;
		v = iotune_rsvq_submit(&m->q, id, m->off[id], m->end[id], &c);
		if (v == IOTUNE_RSVQ_BUSY) {
			RSVQ_MODEL_CHECK(c.n == 0 &&
					 (rsvq_model_flying(m) ||
					  iotune_rsvq_due(&m->q)));
			m->busy++;
			return;
		}
		m->head++;
		if (v != IOTUNE_RSVQ_QUEUED) {
			RSVQ_MODEL_CHECK(c.n == 0);
			rsvq_model_decide(m, id, v);
			continue;
		}
		m->queued++;
		RSVQ_MODEL_CHECK(!m->deferred || c.n == 0);
		m->state[id] = 1;
		for (u = m->off[id]; u < m->end[id]; u++) {
			m->waiting[u]++;
		}
		rsvq_model_start(m, &c);
	}
}

/* the answer err to call run, or to no call at all */
static void rsvq_model_answer(struct rsvq_model *m, unsigned int run,
			      int err)
{
	struct iotune_rsvq_decided out;
	uint64_t u;
	unsigned int i;

	if (run >= m->fly.n || m->answered[run]) {
		RSVQ_MODEL_CHECK(!iotune_rsvq_done(&m->q, run, err, &out));
		RSVQ_MODEL_CHECK(out.n == 0 && out.calls.n == 0);
		return;
	}
	m->answered[run] = true;
	if (err == 0 && m->fly_truncates[run] == m->truncates) {
		for (u = m->fly.run[run].off; u < m->fly.run[run].end; u++) {
			m->reserved[u] = true;
		}
	}
	RSVQ_MODEL_CHECK(iotune_rsvq_done(&m->q, run, err, &out));
	for (i = 0; i < out.n; i++) {
		rsvq_model_decide(m, out.id[i], out.verdict[i]);
	}
	if (out.cannot_reserve) {
		m->disabled = true;
		m->disables++;
	}
	if (out.n == 0 && (out.calls.n > 0 || iotune_rsvq_due(&m->q))) {
		m->again++;	/* a truncate came: the batch goes again */
	}
	rsvq_model_start(m, &out.calls);
}

/* deferred: the batch that waits starts (its calls are made) */
static void rsvq_model_launch(struct rsvq_model *m)
{
	struct iotune_rsvq_calls c;

	if (!iotune_rsvq_launch(&m->q, &c)) {
		RSVQ_MODEL_CHECK(c.n == 0 && !iotune_rsvq_due(&m->q));
		return;
	}
	RSVQ_MODEL_CHECK(m->deferred && c.n > 0);
	m->launches++;
	rsvq_model_start(m, &c);
}

/*
 * The queued write id leaves (its request ended): out of a batch not
 * started, its bytes are in no later call; a write the batches keep may
 * be in one (kept).
 */
static void rsvq_model_cancel(struct rsvq_model *m, uint64_t id)
{
	uint64_t u;
	bool left;

	if (id < 1 || id >= m->head || m->state[id] != 1) {
		return;
	}
	left = iotune_rsvq_cancel(&m->q, id);
	m->cancels++;
	m->state[id] = left ? 4 : 3;
	for (u = m->off[id]; u < m->end[id]; u++) {
		m->waiting[u]--;
		m->kept[u] += left ? 0 : 1;
	}
}

static void rsvq_model_truncate(struct rsvq_model *m)
{
	m->truncates++;
	memset(m->reserved, 0, sizeof(m->reserved));
	iotune_rsvq_forget(&m->q);
}

/* a disabled queue, idle, is replaced, as by a new cache */
static void rsvq_model_new_queue(struct rsvq_model *m)
{
	if (m->disabled && iotune_rsvq_idle(&m->q)) {
		iotune_rsvq_init(&m->q);
		m->q.deferred = m->deferred;
		m->disabled = false;
	}
}

/* answers every call with success until every write is decided */
static void rsvq_model_drain(struct rsvq_model *m)
{
	unsigned int i;
	uint64_t id;

	rsvq_model_submit(m);
	while (rsvq_model_flying(m) || iotune_rsvq_due(&m->q)) {
		if (!rsvq_model_flying(m)) {
			rsvq_model_launch(m);
			continue;
		}
		for (i = 0; m->answered[i]; i++) {
		}
		rsvq_model_answer(m, i, 0);
		rsvq_model_submit(m);
	}
	RSVQ_MODEL_CHECK(m->head > m->n && iotune_rsvq_idle(&m->q));
	for (id = 1; id <= m->n; id++) {
		RSVQ_MODEL_CHECK(m->state[id] == 2 || m->state[id] >= 3);
	}
}

#endif /* IOTUNE_TESTS_RSVQ_MODEL_H */
