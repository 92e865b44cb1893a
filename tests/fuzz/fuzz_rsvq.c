/*
 * libFuzzer target: the write cache's batched reservations
 * (include/iotune/rsvq.h) driven by a sequence decoded from the input:
 * writes (some empty) submitted in order, a BUSY one again before any
 * later one; answers to any call of the batch on its way (success,
 * ENOSPC, EDQUOT, an error that disables the queue), answers that match
 * no call; truncates; a new queue once one is disabled.  A model disk
 * holds the units reserved (a call reserves when answered with success,
 * unless a truncate came after it was made).  A write may be cached only
 * when its units are reserved; overlapping writes are decided in
 * submission order, each once; a call covers only units of writes that
 * wait; when the input ends and every call is answered, every write is
 * decided.  (tests/unit/test_rsvq.c runs the same checks on a fixed
 * pseudo-random sequence.)
 *
 * Copyright (C) iotune authors 2026
 * SPDX-License-Identifier: GPL-3.0-or-later
 */

#include <errno.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <string.h>

#include "iotune/rsvq.h"

#define UNITS 64
#define MAX_WRITES 512

#define CHECK(x) do { if (!(x)) { __builtin_trap(); } } while (0)

static struct iotune_rsvq q;
static bool reserved[UNITS];
static unsigned int waiting[UNITS];
static uint64_t w_off[MAX_WRITES + 1];
static uint64_t w_end[MAX_WRITES + 1];
static int w_state[MAX_WRITES + 1];	/* 0 new, 1 queued, 2 decided */
static struct iotune_rsvq_calls fly;
static uint64_t fly_truncates[IOTUNE_RSVQ_RUNS];
static bool answered[IOTUNE_RSVQ_RUNS];
static uint64_t truncates;
static uint64_t head;		/* first write not yet accepted */
static uint64_t n;		/* writes made */
static bool disabled;

static void decide(uint64_t id, enum iotune_rsvq_verdict v)
{
	uint64_t i;
	uint64_t u;

	CHECK(id >= 1 && id <= n && w_state[id] != 2);
	for (i = 1; i < id && w_end[id] > w_off[id]; i++) {
		if (w_off[i] < w_end[id] && w_off[id] < w_end[i]) {
			CHECK(w_state[i] == 2);
		}
	}
	CHECK(v == IOTUNE_RSVQ_CACHE || v == IOTUNE_RSVQ_THROUGH);
	for (u = w_off[id]; v == IOTUNE_RSVQ_CACHE && u < w_end[id]; u++) {
		CHECK(reserved[u]);
	}
	for (u = w_off[id]; w_state[id] == 1 && u < w_end[id]; u++) {
		waiting[u]--;
	}
	w_state[id] = 2;
}

static bool flying(void)
{
	unsigned int i;

	for (i = 0; i < fly.n; i++) {
		if (!answered[i]) {
			return true;
		}
	}
	return false;
}

static void start(const struct iotune_rsvq_calls *c)
{
	unsigned int i;
	uint64_t u;

	if (c->n == 0) {
		return;
	}
	CHECK(!flying() && c->n <= IOTUNE_RSVQ_RUNS);
	fly = *c;
	for (i = 0; i < c->n; i++) {
		CHECK(c->run[i].off < c->run[i].end);
		for (u = c->run[i].off; u < c->run[i].end; u++) {
			CHECK(u < UNITS && waiting[u] > 0);
		}
		fly_truncates[i] = truncates;
		answered[i] = false;
	}
}

static void submit_all(void)
{
	struct iotune_rsvq_calls c;
	enum iotune_rsvq_verdict v;
	uint64_t u;

	while (head <= n) {
		v = iotune_rsvq_submit(&q, head, w_off[head], w_end[head], &c);
		if (v == IOTUNE_RSVQ_BUSY) {
			CHECK(c.n == 0 && flying());
			return;
		}
		if (v != IOTUNE_RSVQ_QUEUED) {
			CHECK(c.n == 0);
			decide(head++, v);
			continue;
		}
		w_state[head] = 1;
		for (u = w_off[head]; u < w_end[head]; u++) {
			waiting[u]++;
		}
		head++;
		start(&c);
	}
}

static void answer(unsigned int run, int err)
{
	struct iotune_rsvq_decided out;
	uint64_t u;
	unsigned int i;

	if (run >= fly.n || answered[run]) {
		CHECK(!iotune_rsvq_done(&q, run, err, &out));
		CHECK(out.n == 0 && out.calls.n == 0);
		return;
	}
	answered[run] = true;
	if (err == 0 && fly_truncates[run] == truncates) {
		for (u = fly.run[run].off; u < fly.run[run].end; u++) {
			reserved[u] = true;
		}
	}
	CHECK(iotune_rsvq_done(&q, run, err, &out));
	for (i = 0; i < out.n; i++) {
		decide(out.id[i], out.verdict[i]);
	}
	disabled |= out.cannot_reserve;
	start(&out.calls);
}

static void drain(void)
{
	unsigned int i;

	while (flying()) {
		for (i = 0; i < fly.n; i++) {
			if (!answered[i]) {
				answer(i, 0);
				break;
			}
		}
		submit_all();
	}
	CHECK(head > n && iotune_rsvq_idle(&q));
}

static void reset(void)
{
	iotune_rsvq_init(&q);
	memset(reserved, 0, sizeof(reserved));
	memset(waiting, 0, sizeof(waiting));
	memset(w_state, 0, sizeof(w_state));
	memset(&fly, 0, sizeof(fly));
	truncates = 0;
	head = 1;
	n = 0;
	disabled = false;
}

static void step(uint8_t a, uint8_t b)
{
	static const int errs[8] = { 0, 0, 0, 0, 0, ENOSPC, EDQUOT,
				     EOPNOTSUPP };

	switch (a % 5) {
	case 0:
	case 1:
		if (n == MAX_WRITES) {
			break;
		}
		n++;
		w_off[n] = b % (UNITS - 4);
		w_end[n] = w_off[n] + (a >> 3) % 5;
		break;
	case 2:
		answer(b % (IOTUNE_RSVQ_RUNS + 1), errs[(a >> 3) % 8]);
		break;
	case 3:
		truncates++;
		memset(reserved, 0, sizeof(reserved));
		iotune_rsvq_forget(&q);
		break;
	default:
		if (disabled && iotune_rsvq_idle(&q)) {
			iotune_rsvq_init(&q);	/* a new cache */
			disabled = false;
		}
		break;
	}
	submit_all();
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
	size_t i;
	uint64_t id;

	reset();
	for (i = 0; i + 1 < size; i += 2) {
		step(data[i], data[i + 1]);
	}
	drain();
	for (id = 1; id <= n; id++) {
		CHECK(w_state[id] == 2);
	}
	return 0;
}
