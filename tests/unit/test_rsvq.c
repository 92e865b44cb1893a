/*
 * Unit tests of the write cache's batched reservations
 * (include/iotune/rsvq.h): a batch's calls, writes joining the next
 * batch, order behind overlapping queued writes, ENOSPC in one call of
 * a batch, a file system that cannot reserve, a change of the file's
 * space while a batch is on its way, full batches, answers that match no
 * call, and a randomized model that checks every verdict against the
 * bytes a model disk holds reserved.
 *
 * Copyright (C) iotune authors 2026
 * SPDX-License-Identifier: GPL-3.0-or-later
 */

#include <errno.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include <cmocka.h>

#include "iotune/rsvq.h"

#define RSVQ_MODEL_CHECK(x) assert_true(x)
#define RSVQ_MODEL_WRITES 20000
#include "../rsvq_model.h"

#define K 1024ULL

static struct iotune_rsvq q;
static struct iotune_rsvq_calls calls;
static struct iotune_rsvq_decided out;

static int setup(void **state)
{
	iotune_rsvq_init(&q);
	memset(&calls, 0, sizeof(calls));
	memset(&out, 0, sizeof(out));
	return 0;
}

static enum iotune_rsvq_verdict submit(uint64_t id, uint64_t off,
				       uint64_t end)
{
	return iotune_rsvq_submit(&q, id, off, end, &calls);
}

static void assert_call(const struct iotune_rsvq_calls *c, unsigned i,
			uint64_t off, uint64_t end)
{
	assert_true(i < c->n);
	assert_int_equal(c->run[i].off, off);
	assert_int_equal(c->run[i].end, end);
}

static void assert_decided(unsigned i, uint64_t id,
			   enum iotune_rsvq_verdict verdict)
{
	assert_true(i < out.n);
	assert_int_equal(out.id[i], id);
	assert_int_equal(out.verdict[i], verdict);
}

/* an answer to one call of a batch whose others are still on their way */
static void answer_partly(unsigned int run, int err)
{
	assert_true(iotune_rsvq_done(&q, run, err, &out));
	assert_int_equal(out.n, 0);
	assert_int_equal(out.calls.n, 0);
}

static void test_first_write_makes_one_call(void **state)
{
	assert_int_equal(submit(1, 0, 4 * K), IOTUNE_RSVQ_QUEUED);
	assert_int_equal(calls.n, 1);
	assert_call(&calls, 0, 0, 4 * K);
	assert_false(iotune_rsvq_idle(&q));

	assert_true(iotune_rsvq_done(&q, 0, 0, &out));
	assert_int_equal(out.n, 1);
	assert_decided(0, 1, IOTUNE_RSVQ_CACHE);
	assert_int_equal(out.calls.n, 0);
	assert_true(iotune_rsvq_idle(&q));

	/* a rewrite inside reserved bytes makes no call */
	assert_int_equal(submit(2, 1 * K, 2 * K), IOTUNE_RSVQ_CACHE);
	assert_int_equal(calls.n, 0);
	/* bytes past them do */
	assert_int_equal(submit(3, 2 * K, 6 * K), IOTUNE_RSVQ_QUEUED);
	assert_call(&calls, 0, 2 * K, 6 * K);
}

static void test_writes_in_flight_join_the_next_batch(void **state)
{
	assert_int_equal(submit(1, 0, 4 * K), IOTUNE_RSVQ_QUEUED);
	assert_int_equal(submit(2, 4 * K, 8 * K), IOTUNE_RSVQ_QUEUED);
	assert_int_equal(calls.n, 0);	/* waits for the batch on its way */
	assert_int_equal(submit(3, 64 * K, 68 * K), IOTUNE_RSVQ_QUEUED);
	assert_int_equal(submit(4, 8 * K, 12 * K), IOTUNE_RSVQ_QUEUED);

	assert_true(iotune_rsvq_done(&q, 0, 0, &out));
	assert_int_equal(out.n, 1);
	assert_decided(0, 1, IOTUNE_RSVQ_CACHE);
	/* one call per contiguous run of the queued writes' bytes */
	assert_int_equal(out.calls.n, 2);
	assert_call(&out.calls, 0, 64 * K, 68 * K);
	assert_call(&out.calls, 1, 4 * K, 12 * K);

	/* the first answer of two decides nothing */
	answer_partly(1, 0);
	assert_true(iotune_rsvq_done(&q, 0, 0, &out));
	assert_int_equal(out.n, 3);
	assert_decided(0, 2, IOTUNE_RSVQ_CACHE);
	assert_decided(1, 3, IOTUNE_RSVQ_CACHE);
	assert_decided(2, 4, IOTUNE_RSVQ_CACHE);
	assert_true(iotune_rsvq_idle(&q));
}

/* a write that bridges two runs makes them one call */
static void test_a_bridging_write_joins_runs(void **state)
{
	assert_int_equal(submit(1, 100 * K, 104 * K), IOTUNE_RSVQ_QUEUED);
	assert_int_equal(submit(2, 0, 4 * K), IOTUNE_RSVQ_QUEUED);
	assert_int_equal(submit(3, 8 * K, 12 * K), IOTUNE_RSVQ_QUEUED);
	assert_int_equal(submit(4, 2 * K, 10 * K), IOTUNE_RSVQ_QUEUED);
	assert_true(iotune_rsvq_done(&q, 0, 0, &out));
	assert_int_equal(out.calls.n, 1);
	assert_call(&out.calls, 0, 0, 12 * K);
}

static void test_order_behind_overlapping_queued_writes(void **state)
{
	assert_int_equal(submit(1, 0, 8 * K), IOTUNE_RSVQ_QUEUED);
	assert_true(iotune_rsvq_done(&q, 0, 0, &out));

	/* reaches past [0, 8K): a batch of its own */
	assert_int_equal(submit(5, 4 * K, 12 * K), IOTUNE_RSVQ_QUEUED);
	/* reserved, and overlapping nothing queued: at once */
	assert_int_equal(submit(6, 0, 2 * K), IOTUNE_RSVQ_CACHE);
	/* reserved, but write 5 overlaps it and was first: behind it */
	assert_int_equal(submit(7, 4 * K, 6 * K), IOTUNE_RSVQ_QUEUED);
	assert_int_equal(calls.n, 0);

	assert_true(iotune_rsvq_done(&q, 0, 0, &out));
	/* write 7's bytes are reserved now: decided without a call */
	assert_int_equal(out.n, 2);
	assert_decided(0, 5, IOTUNE_RSVQ_CACHE);
	assert_decided(1, 7, IOTUNE_RSVQ_CACHE);
	assert_int_equal(out.calls.n, 0);
	assert_true(iotune_rsvq_idle(&q));
}

/*
 * A queued write whose bytes became known meanwhile still goes with its
 * batch when another write of the batch needs a call: the batch goes
 * whole, and its calls cover only bytes of writes that wait.
 */
static void test_a_batch_goes_whole(void **state)
{
	assert_int_equal(submit(1, 0, 8 * K), IOTUNE_RSVQ_QUEUED);
	assert_int_equal(submit(2, 16 * K, 20 * K), IOTUNE_RSVQ_QUEUED);
	assert_int_equal(submit(3, 0, 4 * K), IOTUNE_RSVQ_QUEUED);
	assert_true(iotune_rsvq_done(&q, 0, 0, &out));
	assert_int_equal(out.n, 1);
	assert_decided(0, 1, IOTUNE_RSVQ_CACHE);
	assert_int_equal(out.calls.n, 2);
	assert_call(&out.calls, 0, 16 * K, 20 * K);
	assert_call(&out.calls, 1, 0, 4 * K);
	answer_partly(0, 0);
	assert_true(iotune_rsvq_done(&q, 1, 0, &out));
	assert_int_equal(out.n, 2);
	assert_decided(0, 2, IOTUNE_RSVQ_CACHE);
	assert_decided(1, 3, IOTUNE_RSVQ_CACHE);
}

/* a batch of writes 2 and 3, calls [4K, 8K) and [1M, 1M + 4K) */
static void two_calls(void)
{
	assert_int_equal(submit(1, 0, 4 * K), IOTUNE_RSVQ_QUEUED);
	assert_int_equal(submit(2, 4 * K, 8 * K), IOTUNE_RSVQ_QUEUED);
	assert_int_equal(submit(3, 1024 * K, 1028 * K), IOTUNE_RSVQ_QUEUED);
	assert_true(iotune_rsvq_done(&q, 0, 0, &out));
	assert_call(&out.calls, 0, 4 * K, 8 * K);
	assert_call(&out.calls, 1, 1024 * K, 1028 * K);
}

static void test_no_space_in_one_call_of_a_batch(void **state)
{
	two_calls();
	answer_partly(0, ENOSPC);
	assert_true(iotune_rsvq_done(&q, 1, 0, &out));
	assert_int_equal(out.n, 2);
	assert_decided(0, 2, IOTUNE_RSVQ_THROUGH);
	assert_decided(1, 3, IOTUNE_RSVQ_CACHE);
	assert_false(out.cannot_reserve);
	assert_true(iotune_rsvq_idle(&q));

	/* the call that succeeded is known; the next write tries again */
	assert_int_equal(submit(4, 1025 * K, 1026 * K), IOTUNE_RSVQ_CACHE);
	assert_int_equal(submit(5, 4 * K, 8 * K), IOTUNE_RSVQ_QUEUED);
	assert_call(&calls, 0, 4 * K, 8 * K);
	assert_true(iotune_rsvq_done(&q, 0, EDQUOT, &out));
	assert_decided(0, 5, IOTUNE_RSVQ_THROUGH);
	assert_int_equal(submit(6, 4 * K, 8 * K), IOTUNE_RSVQ_QUEUED);
}

/* what is known after a failed call does not depend on its place */
static void test_no_space_in_the_last_call(void **state)
{
	two_calls();
	assert_true(iotune_rsvq_done(&q, 0, 0, &out));
	assert_true(iotune_rsvq_done(&q, 1, ENOSPC, &out));
	assert_decided(0, 2, IOTUNE_RSVQ_CACHE);
	assert_decided(1, 3, IOTUNE_RSVQ_THROUGH);
	assert_int_equal(submit(4, 5 * K, 6 * K), IOTUNE_RSVQ_CACHE);
	assert_int_equal(submit(5, 1025 * K, 1026 * K), IOTUNE_RSVQ_QUEUED);
}

static void test_cannot_reserve_sends_everything_through(void **state)
{
	assert_int_equal(submit(1, 0, 4 * K), IOTUNE_RSVQ_QUEUED);
	assert_int_equal(submit(2, 4 * K, 8 * K), IOTUNE_RSVQ_QUEUED);
	assert_int_equal(submit(3, 0, 4 * K), IOTUNE_RSVQ_QUEUED);
	assert_true(iotune_rsvq_done(&q, 0, EOPNOTSUPP, &out));
	assert_true(out.cannot_reserve);
	assert_int_equal(out.n, 3);
	assert_decided(0, 1, IOTUNE_RSVQ_THROUGH);
	assert_decided(1, 2, IOTUNE_RSVQ_THROUGH);
	assert_decided(2, 3, IOTUNE_RSVQ_THROUGH);
	assert_int_equal(out.calls.n, 0);
	assert_true(iotune_rsvq_idle(&q));
	assert_int_equal(submit(4, 0, 4 * K), IOTUNE_RSVQ_THROUGH);
	assert_int_equal(calls.n, 0);
}

/* a call that succeeded still counts when another of its batch cannot */
static void test_cannot_reserve_in_one_call(void **state)
{
	two_calls();
	assert_int_equal(submit(4, 8 * K, 12 * K), IOTUNE_RSVQ_QUEUED);
	assert_true(iotune_rsvq_done(&q, 1, 0, &out));
	assert_true(iotune_rsvq_done(&q, 0, EOPNOTSUPP, &out));
	assert_true(out.cannot_reserve);
	assert_int_equal(out.n, 3);
	assert_decided(0, 2, IOTUNE_RSVQ_THROUGH);
	assert_decided(1, 3, IOTUNE_RSVQ_CACHE);
	assert_decided(2, 4, IOTUNE_RSVQ_THROUGH);	/* the next batch */
	assert_int_equal(out.calls.n, 0);
	assert_int_equal(submit(5, 1025 * K, 1026 * K), IOTUNE_RSVQ_THROUGH);
}

static void test_forget_while_a_batch_is_on_its_way(void **state)
{
	assert_int_equal(submit(1, 0, 4 * K), IOTUNE_RSVQ_QUEUED);
	assert_int_equal(submit(2, 4 * K, 8 * K), IOTUNE_RSVQ_QUEUED);
	iotune_rsvq_forget(&q);
	/* the call may have landed before the truncate: made again */
	assert_true(iotune_rsvq_done(&q, 0, 0, &out));
	assert_int_equal(out.n, 0);
	assert_int_equal(out.calls.n, 1);
	assert_call(&out.calls, 0, 0, 4 * K);
	assert_true(iotune_rsvq_done(&q, 0, 0, &out));
	assert_int_equal(out.n, 1);
	assert_decided(0, 1, IOTUNE_RSVQ_CACHE);
	assert_call(&out.calls, 0, 4 * K, 8 * K);
	assert_true(iotune_rsvq_done(&q, 0, 0, &out));
	assert_decided(0, 2, IOTUNE_RSVQ_CACHE);

	/* after a forget, reserved bytes are not known any more */
	iotune_rsvq_forget(&q);
	assert_int_equal(submit(3, 0, 4 * K), IOTUNE_RSVQ_QUEUED);
	assert_int_equal(calls.n, 1);
}

/* between the answers of a batch of two calls, with a next batch */
static void test_forget_between_answers(void **state)
{
	two_calls();
	assert_int_equal(submit(4, 0, 2 * K), IOTUNE_RSVQ_CACHE);
	assert_int_equal(submit(5, 6 * K, 10 * K), IOTUNE_RSVQ_QUEUED);
	assert_true(iotune_rsvq_done(&q, 1, 0, &out));
	iotune_rsvq_forget(&q);
	assert_true(iotune_rsvq_done(&q, 0, 0, &out));
	/* both calls again, nothing decided */
	assert_int_equal(out.n, 0);
	assert_int_equal(out.calls.n, 2);
	assert_true(iotune_rsvq_done(&q, 0, 0, &out));
	assert_true(iotune_rsvq_done(&q, 1, 0, &out));
	assert_int_equal(out.n, 2);
	assert_decided(0, 2, IOTUNE_RSVQ_CACHE);
	assert_decided(1, 3, IOTUNE_RSVQ_CACHE);
	assert_int_equal(out.calls.n, 1);
	assert_call(&out.calls, 0, 6 * K, 10 * K);
	assert_true(iotune_rsvq_done(&q, 0, 0, &out));
	assert_decided(0, 5, IOTUNE_RSVQ_CACHE);
}

static void test_full_runs_are_busy(void **state)
{
	uint64_t i;

	assert_int_equal(submit(1, 0, 4 * K), IOTUNE_RSVQ_QUEUED);
	for (i = 0; i < IOTUNE_RSVQ_RUNS; i++) {
		assert_int_equal(submit(10 + i, 100 * K * (i + 1),
					100 * K * (i + 1) + 4 * K),
				 IOTUNE_RSVQ_QUEUED);
	}
	/* a write that joins a run still fits: a disjoint one does not */
	assert_int_equal(submit(20, 104 * K, 108 * K), IOTUNE_RSVQ_QUEUED);
	assert_int_equal(submit(21, 50 * K, 54 * K), IOTUNE_RSVQ_BUSY);
	assert_int_equal(calls.n, 0);
	assert_true(iotune_rsvq_done(&q, 0, 0, &out));
	assert_int_equal(out.n, 1);
	assert_int_equal(out.calls.n, IOTUNE_RSVQ_RUNS);
	assert_call(&out.calls, IOTUNE_RSVQ_RUNS - 1, 100 * K, 108 * K);
	/* room again */
	assert_int_equal(submit(21, 50 * K, 54 * K), IOTUNE_RSVQ_QUEUED);
	for (i = 0; i < IOTUNE_RSVQ_RUNS; i++) {
		assert_true(iotune_rsvq_done(&q, (unsigned int)i, 0, &out));
	}
	assert_int_equal(out.n, IOTUNE_RSVQ_RUNS + 1);
	for (i = 0; i < IOTUNE_RSVQ_RUNS; i++) {
		assert_decided((unsigned int)i, 10 + i, IOTUNE_RSVQ_CACHE);
	}
	assert_decided(IOTUNE_RSVQ_RUNS, 20, IOTUNE_RSVQ_CACHE);
	assert_call(&out.calls, 0, 50 * K, 54 * K);
}

static void test_full_writes_are_busy(void **state)
{
	uint64_t i;

	assert_int_equal(submit(1, 0, 4 * K), IOTUNE_RSVQ_QUEUED);
	for (i = 0; i < IOTUNE_RSVQ_WRITES; i++) {
		assert_int_equal(submit(10 + i, 8 * K + i, 8 * K + i + 1),
				 IOTUNE_RSVQ_QUEUED);
	}
	assert_int_equal(submit(99, 8 * K, 9 * K), IOTUNE_RSVQ_BUSY);
	assert_true(iotune_rsvq_done(&q, 0, 0, &out));
	assert_int_equal(out.calls.n, 1);
	assert_call(&out.calls, 0, 8 * K, 8 * K + IOTUNE_RSVQ_WRITES);
	assert_int_equal(submit(99, 8 * K, 9 * K), IOTUNE_RSVQ_QUEUED);
	assert_true(iotune_rsvq_done(&q, 0, 0, &out));
	assert_int_equal(out.n, IOTUNE_RSVQ_WRITES);
	for (i = 0; i < IOTUNE_RSVQ_WRITES; i++) {
		assert_decided((unsigned int)i, 10 + i, IOTUNE_RSVQ_CACHE);
	}
}

/* a write that leaves the next batch: its bytes are not reserved */
static void test_a_cancelled_write_leaves_the_next_batch(void **state)
{
	assert_int_equal(submit(1, 0, 4 * K), IOTUNE_RSVQ_QUEUED);
	assert_int_equal(submit(2, 4 * K, 8 * K), IOTUNE_RSVQ_QUEUED);
	assert_int_equal(submit(3, 8 * K, 12 * K), IOTUNE_RSVQ_QUEUED);
	assert_int_equal(submit(4, 64 * K, 68 * K), IOTUNE_RSVQ_QUEUED);
	/* the batch on its way keeps its write */
	assert_false(iotune_rsvq_cancel(&q, 1));
	assert_true(iotune_rsvq_cancel(&q, 2));
	assert_false(iotune_rsvq_cancel(&q, 2));	/* gone already */

	assert_true(iotune_rsvq_done(&q, 0, 0, &out));
	assert_int_equal(out.n, 1);
	assert_decided(0, 1, IOTUNE_RSVQ_CACHE);
	assert_int_equal(out.calls.n, 2);
	assert_call(&out.calls, 0, 8 * K, 12 * K);
	assert_call(&out.calls, 1, 64 * K, 68 * K);
	assert_true(iotune_rsvq_done(&q, 0, 0, &out));
	assert_true(iotune_rsvq_done(&q, 1, 0, &out));
	assert_int_equal(out.n, 2);
	assert_decided(0, 3, IOTUNE_RSVQ_CACHE);
	assert_decided(1, 4, IOTUNE_RSVQ_CACHE);
	/* nothing of write 2's bytes is known to be reserved */
	assert_int_equal(submit(5, 4 * K, 8 * K), IOTUNE_RSVQ_QUEUED);
	assert_int_equal(calls.n, 1);
	assert_call(&calls, 0, 4 * K, 8 * K);
}

/* a bridging write whose leaving would make too many calls stays */
static void test_a_bridge_that_cannot_leave_stays(void **state)
{
	uint64_t i;

	assert_int_equal(submit(1, 0, 4 * K), IOTUNE_RSVQ_QUEUED);
	assert_int_equal(submit(10, 100 * K, 104 * K), IOTUNE_RSVQ_QUEUED);
	assert_int_equal(submit(11, 108 * K, 112 * K), IOTUNE_RSVQ_QUEUED);
	assert_int_equal(submit(12, 104 * K, 108 * K), IOTUNE_RSVQ_QUEUED);
	for (i = 1; i < IOTUNE_RSVQ_RUNS; i++) {
		assert_int_equal(submit(20 + i, 200 * K * i,
					200 * K * i + 4 * K),
				 IOTUNE_RSVQ_QUEUED);
	}
	assert_false(iotune_rsvq_cancel(&q, 12));
	assert_true(iotune_rsvq_cancel(&q, 21));
	assert_true(iotune_rsvq_cancel(&q, 12));	/* fits now */
	assert_true(iotune_rsvq_done(&q, 0, 0, &out));
	assert_int_equal(out.calls.n, IOTUNE_RSVQ_RUNS);
	assert_call(&out.calls, 0, 100 * K, 104 * K);
	assert_call(&out.calls, 1, 108 * K, 112 * K);
}

static void test_answers_that_match_no_call(void **state)
{
	assert_false(iotune_rsvq_done(&q, 0, 0, &out));
	assert_int_equal(out.n, 0);
	assert_int_equal(submit(1, 0, 4 * K), IOTUNE_RSVQ_QUEUED);
	assert_int_equal(submit(2, 8 * K, 12 * K), IOTUNE_RSVQ_QUEUED);
	assert_int_equal(submit(3, 16 * K, 20 * K), IOTUNE_RSVQ_QUEUED);
	assert_false(iotune_rsvq_done(&q, 1, 0, &out));	/* one call */
	assert_true(iotune_rsvq_done(&q, 0, 0, &out));
	assert_int_equal(out.calls.n, 2);
	assert_true(iotune_rsvq_done(&q, 1, 0, &out));
	assert_false(iotune_rsvq_done(&q, 1, 0, &out));	/* twice */
	assert_int_equal(out.n, 0);
	assert_true(iotune_rsvq_done(&q, 0, 0, &out));
	assert_int_equal(out.n, 2);
	assert_decided(0, 2, IOTUNE_RSVQ_CACHE);
	assert_decided(1, 3, IOTUNE_RSVQ_CACHE);
	assert_false(iotune_rsvq_done(&q, 0, 0, &out));	/* all done */
}

/*
 * Randomized: writes in a 64-unit file (some empty), answers in any
 * order (ENOSPC and EDQUOT now and then, rarely an error that disables
 * the queue, after which a new queue takes over, as a new cache would),
 * answers that match no call, truncates.  tests/rsvq_model.h plays the
 * sequence against a model disk and checks every rule (as the fuzz
 * target does on the sequences libFuzzer finds).
 */
static int model_error(void)
{
	int r = rand() % 1000;

	if (r < 30) {
		return ENOSPC;
	}
	if (r < 40) {
		return EDQUOT;
	}
	return r < 42 ? EOPNOTSUPP : 0;
}

static void model_step(struct rsvq_model *m)
{
	uint64_t off = (uint64_t)rand() % (RSVQ_MODEL_UNITS - 4);
	int r = rand() % 100;

	if (r < 50) {
		(void)rsvq_model_write(m, off, off + (rand() % 50 == 0 ? 0 :
				       1 + (uint64_t)rand() % 4));
	} else if (r < 60 && m->deferred) {
		rsvq_model_launch(m);
	} else if (r < 64) {
		rsvq_model_cancel(m, m->head - 1 - (uint64_t)rand() % 8);
	} else if (r < 97) {
		/* a call on its way, mostly; now and then none */
		rsvq_model_answer(m, (unsigned int)rand() %
				  (IOTUNE_RSVQ_RUNS + 1), model_error());
	} else {
		rsvq_model_truncate(m);
	}
	if (rand() % 20 == 0) {
		rsvq_model_new_queue(m);
	}
	rsvq_model_submit(m);
}

static void randomized_model(bool deferred)
{
	struct rsvq_model *m = calloc(1, sizeof(*m));

	assert_non_null(m);
	srand(7);
	rsvq_model_reset(m, deferred);
	while (m->n < RSVQ_MODEL_WRITES) {
		model_step(m);
	}
	rsvq_model_drain(m);
	/* every path came up often */
	assert_true(m->cached > 1000);
	assert_true(m->queued > 1000);
	assert_true(m->busy > 100);
	assert_true(m->through > 100);
	assert_true(m->again > 100);
	/* (few: a disabled queue stays until it is idle and replaced) */
	assert_true(m->disables > 0);
	assert_true(!deferred || m->launches > 1000);
	assert_true(m->cancels > 100);
	free(m);
}

static void test_randomized_model(void **state)
{
	randomized_model(false);
}

static void test_randomized_model_deferred(void **state)
{
	randomized_model(true);
}

/*
 * Deferred: the writes that arrive before the launch join the batch, so
 * the first batch of a stream holds them all; answers before the launch
 * match no call; a cancelled write leaves a batch not launched.
 */
static void test_deferred_batch_waits_for_its_launch(void **state)
{
	q.deferred = true;
	assert_int_equal(submit(1, 0, 4 * K), IOTUNE_RSVQ_QUEUED);
	assert_int_equal(calls.n, 0);
	assert_true(iotune_rsvq_due(&q));
	assert_int_equal(submit(2, 4 * K, 8 * K), IOTUNE_RSVQ_QUEUED);
	assert_int_equal(submit(3, 64 * K, 68 * K), IOTUNE_RSVQ_QUEUED);
	assert_int_equal(submit(4, 8 * K, 12 * K), IOTUNE_RSVQ_QUEUED);
	assert_int_equal(iotune_rsvq_due_writes(&q), 4);
	assert_false(iotune_rsvq_done(&q, 0, 0, &out));	/* no call yet */
	assert_true(iotune_rsvq_cancel(&q, 3));
	assert_true(iotune_rsvq_launch(&q, &calls));
	assert_false(iotune_rsvq_due(&q));
	assert_int_equal(calls.n, 1);
	assert_call(&calls, 0, 0, 12 * K);
	/* on its way: later writes wait for the next batch */
	assert_int_equal(submit(5, 12 * K, 16 * K), IOTUNE_RSVQ_QUEUED);
	assert_false(iotune_rsvq_launch(&q, &calls));
	assert_true(iotune_rsvq_done(&q, 0, 0, &out));
	assert_int_equal(out.n, 3);
	assert_decided(0, 1, IOTUNE_RSVQ_CACHE);
	assert_decided(1, 2, IOTUNE_RSVQ_CACHE);
	assert_decided(2, 4, IOTUNE_RSVQ_CACHE);
	assert_int_equal(out.calls.n, 0);	/* the next waits to launch */
	assert_true(iotune_rsvq_due(&q));
	assert_true(iotune_rsvq_launch(&q, &calls));
	assert_call(&calls, 0, 12 * K, 16 * K);
	assert_true(iotune_rsvq_done(&q, 0, 0, &out));
	assert_decided(0, 5, IOTUNE_RSVQ_CACHE);
	assert_true(iotune_rsvq_idle(&q));
}

/*
 * A write that leaves a batch on its way stays in it; when the batch goes
 * again after a forget, it goes without that write's bytes, and without
 * any call when no write of it is left.
 */
static void test_a_write_that_left_is_not_reserved_again(void **state)
{
	q.deferred = true;
	assert_int_equal(submit(1, 0, 4 * K), IOTUNE_RSVQ_QUEUED);
	assert_int_equal(submit(2, 4 * K, 8 * K), IOTUNE_RSVQ_QUEUED);
	assert_true(iotune_rsvq_launch(&q, &calls));
	assert_call(&calls, 0, 0, 8 * K);
	assert_false(iotune_rsvq_cancel(&q, 1));	/* on its way */
	iotune_rsvq_forget(&q);
	assert_true(iotune_rsvq_done(&q, 0, 0, &out));
	assert_int_equal(out.n, 0);
	assert_true(iotune_rsvq_due(&q));	/* again, deferred */
	assert_true(iotune_rsvq_launch(&q, &calls));
	assert_int_equal(calls.n, 1);
	assert_call(&calls, 0, 4 * K, 8 * K);
	assert_false(iotune_rsvq_cancel(&q, 2));
	iotune_rsvq_forget(&q);
	assert_true(iotune_rsvq_done(&q, 0, 0, &out));
	assert_int_equal(out.n, 0);
	assert_int_equal(out.calls.n, 0);
	assert_false(iotune_rsvq_due(&q));	/* nothing left to reserve */
	assert_true(iotune_rsvq_idle(&q));
}

/* deferred: the only write of a batch not launched leaves: none waits */
static void test_deferred_cancel_of_the_last_write(void **state)
{
	q.deferred = true;
	assert_int_equal(submit(1, 0, 4 * K), IOTUNE_RSVQ_QUEUED);
	assert_true(iotune_rsvq_cancel(&q, 1));
	assert_false(iotune_rsvq_due(&q));
	assert_true(iotune_rsvq_idle(&q));
	assert_false(iotune_rsvq_launch(&q, &calls));
}

static bool more;		/* requests wait to be read */
static unsigned int asked;	/* ... was asked */

static bool more_waiting(void *private_data)
{
	asked++;
	return more;
}

/*
 * pace: a batch waits for the requests that wait to be read, at most
 * max_wait_us (here 2000), then for as many writes as the batch launched
 * last held, at most wait_us (here 100 unless given) after it formed.
 */
static enum iotune_rsvq_go pace_full(struct iotune_rsvq_pace *p,
				     unsigned due, bool full, bool more_now,
				     uint64_t waited, uint64_t wait,
				     uint64_t *after)
{
	struct iotune_rsvq_wait w = {
		.waited_us = waited,
		.wait_us = wait,
		.max_wait_us = 2000,
		.more_waiting = more_waiting,
	};

	more = more_now;
	return iotune_rsvq_pace(p, due, full, &w, after);
}

static enum iotune_rsvq_go pace(struct iotune_rsvq_pace *p, unsigned due,
				bool more_now, uint64_t waited,
				uint64_t *after)
{
	return pace_full(p, due, due >= IOTUNE_RSVQ_WRITES, more_now, waited,
			 100, after);
}

static void test_pace_first_batch_goes_when_nothing_waits(void **state)
{
	struct iotune_rsvq_pace p = { 0 };
	uint64_t after = 7;

	assert_int_equal(pace(&p, 1, false, 0, &after), IOTUNE_RSVQ_GO);
	assert_int_equal(after, 0);
	assert_int_equal(p.want, 1);
}

static void test_pace_waits_for_requests_to_be_read(void **state)
{
	struct iotune_rsvq_pace p = { 0 };
	uint64_t after = 0;

	assert_int_equal(pace(&p, 1, true, 0, &after), IOTUNE_RSVQ_WAIT);
	assert_int_equal(after, 2000);	/* at the latest */
	assert_int_equal(pace(&p, 3, true, 1999, &after), IOTUNE_RSVQ_WAIT);
	assert_int_equal(after, 1);
	assert_int_equal(p.want, 0);
	/* the longest wait is over: the client is not even asked */
	asked = 0;
	assert_int_equal(pace(&p, 4, true, 2000, &after), IOTUNE_RSVQ_GO);
	assert_int_equal(asked, 0);
	assert_int_equal(after, 0);
	assert_int_equal(p.want, 4);
}

static void test_pace_waits_for_as_many_as_last_time(void **state)
{
	struct iotune_rsvq_pace p = { .want = 4 };
	uint64_t after = 0;

	assert_int_equal(pace(&p, 1, false, 0, &after),
			 IOTUNE_RSVQ_WAIT_TIMER);
	assert_int_equal(after, 100);
	assert_int_equal(pace(&p, 3, false, 40, &after),
			 IOTUNE_RSVQ_WAIT_TIMER);
	assert_int_equal(after, 60);
	assert_int_equal(p.want, 4);
	/* the fourth arrived: no need to wait longer */
	assert_int_equal(pace(&p, 4, false, 70, &after), IOTUNE_RSVQ_GO);
	assert_int_equal(after, 0);
	assert_int_equal(p.want, 4);
}

static void test_pace_learns_more_and_fewer(void **state)
{
	struct iotune_rsvq_pace p = { .want = 2 };
	uint64_t after = 0;

	/* more came than last time: the next batch waits for them all */
	assert_int_equal(pace(&p, 5, false, 10, &after), IOTUNE_RSVQ_GO);
	assert_int_equal(p.want, 5);
	/* a wait in vain: the client keeps fewer in flight now */
	assert_int_equal(pace(&p, 2, false, 100, &after), IOTUNE_RSVQ_GO);
	assert_int_equal(p.want, 2);
	assert_int_equal(pace(&p, 2, false, 0, &after), IOTUNE_RSVQ_GO);
	assert_int_equal(p.want, 2);
}

static void test_pace_full_batch_never_waits(void **state)
{
	struct iotune_rsvq_pace p = { .want = IOTUNE_RSVQ_WRITES };
	uint64_t after = 0;

	asked = 0;
	assert_int_equal(pace(&p, IOTUNE_RSVQ_WRITES, true, 0, &after),
			 IOTUNE_RSVQ_GO);
	assert_int_equal(p.want, IOTUNE_RSVQ_WRITES);
	/* full by its calls: 4 writes, and the 5th went to the next */
	assert_int_equal(pace_full(&p, 4, true, true, 0, 100, &after),
			 IOTUNE_RSVQ_GO);
	assert_int_equal(after, 0);
	assert_int_equal(asked, 0);
	/* ... and the next batch waits for 4, not 16 */
	assert_int_equal(p.want, 4);
}

static void test_pace_wait_is_bounded_by_the_longest(void **state)
{
	struct iotune_rsvq_pace p = { .want = 8 };
	uint64_t after = 0;

	/* a call dearer than the longest wait: the longest wait bounds it */
	assert_int_equal(pace_full(&p, 1, false, false, 500, 5000, &after),
			 IOTUNE_RSVQ_WAIT_TIMER);
	assert_int_equal(after, 1500);
	assert_int_equal(pace_full(&p, 1, false, false, 2000, 5000, &after),
			 IOTUNE_RSVQ_GO);
	/* no wait where a call costs nothing */
	p.want = 8;
	assert_int_equal(pace_full(&p, 1, false, false, 0, 0, &after),
			 IOTUNE_RSVQ_GO);
}

/* every write of a waiting batch left: it goes, and nothing is learnt */
static void test_pace_with_nothing_due_learns_nothing(void **state)
{
	struct iotune_rsvq_pace p = { .want = 4 };
	uint64_t after = 7;

	asked = 0;
	assert_int_equal(pace(&p, 0, true, 0, &after), IOTUNE_RSVQ_GO);
	assert_int_equal(after, 0);
	assert_int_equal(asked, 0);
	assert_int_equal(p.want, 4);
}

/*
 * A deferred batch is full once a write had to go to the next batch: by
 * its writes, or by its calls (here 4 disjoint writes, 4 calls).
 */
static void test_deferred_batch_full_by_its_calls(void **state)
{
	uint64_t i;

	q.deferred = true;
	for (i = 0; i < IOTUNE_RSVQ_RUNS; i++) {
		assert_int_equal(submit(1 + i, 100 * K * i,
					100 * K * i + 4 * K),
				 IOTUNE_RSVQ_QUEUED);
		assert_false(iotune_rsvq_due_full(&q));
	}
	/* a write that joins a run still fits */
	assert_int_equal(submit(10, 4 * K, 8 * K), IOTUNE_RSVQ_QUEUED);
	assert_false(iotune_rsvq_due_full(&q));
	assert_int_equal(submit(11, 50 * K, 54 * K), IOTUNE_RSVQ_QUEUED);
	assert_true(iotune_rsvq_due_full(&q));
	assert_int_equal(iotune_rsvq_due_writes(&q), IOTUNE_RSVQ_RUNS + 1);
	assert_true(iotune_rsvq_launch(&q, &calls));
	assert_false(iotune_rsvq_due_full(&q));	/* on its way */
	assert_int_equal(calls.n, IOTUNE_RSVQ_RUNS);
}

static void test_deferred_batch_full_by_its_writes(void **state)
{
	uint64_t i;

	q.deferred = true;
	for (i = 0; i < IOTUNE_RSVQ_WRITES; i++) {
		assert_false(iotune_rsvq_due_full(&q));
		assert_int_equal(submit(1 + i, 4 * K * i, 4 * K * (i + 1)),
				 IOTUNE_RSVQ_QUEUED);
	}
	assert_true(iotune_rsvq_due_full(&q));
	assert_int_equal(iotune_rsvq_due_writes(&q), IOTUNE_RSVQ_WRITES);
}

int main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test_setup(test_first_write_makes_one_call, setup),
		cmocka_unit_test_setup(
			test_writes_in_flight_join_the_next_batch, setup),
		cmocka_unit_test_setup(test_a_bridging_write_joins_runs,
				       setup),
		cmocka_unit_test_setup(
			test_order_behind_overlapping_queued_writes, setup),
		cmocka_unit_test_setup(test_a_batch_goes_whole, setup),
		cmocka_unit_test_setup(test_no_space_in_one_call_of_a_batch,
				       setup),
		cmocka_unit_test_setup(test_no_space_in_the_last_call, setup),
		cmocka_unit_test_setup(
			test_cannot_reserve_sends_everything_through, setup),
		cmocka_unit_test_setup(test_cannot_reserve_in_one_call,
				       setup),
		cmocka_unit_test_setup(
			test_forget_while_a_batch_is_on_its_way, setup),
		cmocka_unit_test_setup(test_forget_between_answers, setup),
		cmocka_unit_test_setup(test_full_runs_are_busy, setup),
		cmocka_unit_test_setup(test_full_writes_are_busy, setup),
		cmocka_unit_test_setup(
			test_a_cancelled_write_leaves_the_next_batch, setup),
		cmocka_unit_test_setup(test_a_bridge_that_cannot_leave_stays,
				       setup),
		cmocka_unit_test_setup(test_answers_that_match_no_call,
				       setup),
		cmocka_unit_test_setup(test_randomized_model, setup),
		cmocka_unit_test_setup(test_randomized_model_deferred, setup),
		cmocka_unit_test_setup(test_deferred_batch_waits_for_its_launch,
				       setup),
		cmocka_unit_test_setup(test_deferred_cancel_of_the_last_write,
				       setup),
		cmocka_unit_test_setup(
			test_a_write_that_left_is_not_reserved_again, setup),
		cmocka_unit_test(test_pace_first_batch_goes_when_nothing_waits),
		cmocka_unit_test(test_pace_waits_for_requests_to_be_read),
		cmocka_unit_test(test_pace_waits_for_as_many_as_last_time),
		cmocka_unit_test(test_pace_learns_more_and_fewer),
		cmocka_unit_test(test_pace_full_batch_never_waits),
		cmocka_unit_test(test_pace_wait_is_bounded_by_the_longest),
		cmocka_unit_test(test_pace_with_nothing_due_learns_nothing),
		cmocka_unit_test_setup(test_deferred_batch_full_by_its_calls,
				       setup),
		cmocka_unit_test_setup(test_deferred_batch_full_by_its_writes,
				       setup),
	};

	return cmocka_run_group_tests_name("rsvq", tests, NULL, NULL);
}
