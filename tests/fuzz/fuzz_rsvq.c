/*
 * libFuzzer target: the write cache's batched reservations
 * (include/iotune/rsvq.h) driven by a sequence decoded from the input:
 * writes (some empty); answers to any call of the batch on its way
 * (success, ENOSPC, EDQUOT, an error that disables the queue) or to no
 * call; truncates; a new queue once one is disabled.  tests/rsvq_model.h
 * plays the sequence and checks every rule, as the unit test's
 * randomized sequence does (tests/unit/test_rsvq.c).
 *
 * Copyright (C) iotune authors 2026
 * SPDX-License-Identifier: GPL-3.0-or-later
 */

#include <errno.h>
#include <stddef.h>
#include <stdint.h>

#define RSVQ_MODEL_CHECK(x) do { if (!(x)) { __builtin_trap(); } } while (0)
#define RSVQ_MODEL_WRITES 512
#include "../rsvq_model.h"

static struct rsvq_model m;

static void step(uint8_t a, uint8_t b)
{
	static const int errs[8] = { 0, 0, 0, 0, 0, ENOSPC, EDQUOT,
				     EOPNOTSUPP };
	uint64_t off = b % (RSVQ_MODEL_UNITS - 4);

	switch (a % 6) {
	case 0:
	case 1:
		(void)rsvq_model_write(&m, off, off + (a >> 3) % 5);
		break;
	case 2:
		rsvq_model_answer(&m, b % (IOTUNE_RSVQ_RUNS + 1),
				  errs[(a >> 3) % 8]);
		break;
	case 3:
		rsvq_model_truncate(&m);
		break;
	case 4:
		if ((a & 0x80) != 0) {
			rsvq_model_cancel(&m, m.head - 1 - b % 8);
		} else {
			rsvq_model_launch(&m);
		}
		break;
	default:
		rsvq_model_new_queue(&m);
		break;
	}
	rsvq_model_submit(&m);
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
	size_t i;

	rsvq_model_reset(&m, size > 0 && (data[0] & 0x80) != 0);
	for (i = 0; i + 1 < size; i += 2) {
		step(data[i], data[i + 1]);
	}
	rsvq_model_drain(&m);
	return 0;
}
