/*
 * Unit tests of the table that finds a pass-through request's record
 * when it completes (include/iotune/passtab.h): claims, slots taken by
 * another key, keys left behind by requests freed without being
 * received, and a randomized model of requests whose addresses come
 * back, as freed memory does.
 *
 * Copyright (C) iotune authors 2026
 * SPDX-License-Identifier: GPL-3.0-or-later
 */

#include <setjmp.h>
#include <stdarg.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include <cmocka.h>

#include "iotune/passtab.h"

/* Addresses of fake requests, 16-byte aligned like talloc's chunks */
static const void *addr(unsigned k)
{
	return (const void *)(uintptr_t)(0x10000 + 16 * (uintptr_t)k);
}

/* The first address from the one numbered from on that hashes to slot */
static unsigned same_slot(unsigned slot, unsigned from)
{
	unsigned k;

	for (k = from; k < from + 64 * IOTUNE_PASSTAB_SLOTS; k++) {
		if (iotune_passtab_slot(addr(k)) == slot) {
			return k;
		}
	}
	fail_msg("no address from %u on hashes to slot %u", from, slot);
	return 0;
}

/*
 * Requests in flight at once are allocated close together: addresses a
 * few chunks apart must spread over the slots, or the table would send
 * most requests to the talloc fallback.
 */
static void test_near_addresses_spread(void **state)
{
	static const unsigned strides[] = { 1, 10, 32, 256 };	/* x 16 */
	bool used[IOTUNE_PASSTAB_SLOTS];
	unsigned s;
	unsigned k;
	unsigned distinct;

	for (s = 0; s < sizeof(strides) / sizeof(strides[0]); s++) {
		memset(used, 0, sizeof(used));
		distinct = 0;
		for (k = 0; k < 64; k++) {
			unsigned i = iotune_passtab_slot(addr(k * strides[s]));

			distinct += used[i] ? 0 : 1;
			used[i] = true;
		}
		/* at random, 64 keys would take about 57 of 256 slots */
		assert_true(distinct >= 60);
	}
}

static void test_claim_find_release(void **state)
{
	struct iotune_passtab t = {0};
	int i = iotune_passtab_claim(&t, addr(1));

	assert_int_equal(i, (int)iotune_passtab_slot(addr(1)));
	assert_int_equal(iotune_passtab_find(&t, addr(1)), i);
	assert_int_equal(iotune_passtab_find(&t, addr(2)), -1);
	iotune_passtab_release(&t, i);
	assert_int_equal(iotune_passtab_find(&t, addr(1)), -1);
}

static void test_slot_taken_by_another_key(void **state)
{
	struct iotune_passtab t = {0};
	unsigned a = 3;
	unsigned b = same_slot(iotune_passtab_slot(addr(a)), a + 1);
	int i = iotune_passtab_claim(&t, addr(a));

	assert_true(i >= 0);
	assert_int_equal(iotune_passtab_claim(&t, addr(b)), -1);
	assert_int_equal(iotune_passtab_find(&t, addr(b)), -1);
	/* a's record is still a's */
	assert_int_equal(iotune_passtab_find(&t, addr(a)), i);
	iotune_passtab_release(&t, i);
	assert_int_equal(iotune_passtab_claim(&t, addr(b)), i);
}

/* A request freed without being received; a newer one at its address */
static void test_stale_key_taken_over(void **state)
{
	struct iotune_passtab t = {0};
	int i = iotune_passtab_claim(&t, addr(5));

	assert_int_equal(iotune_passtab_claim(&t, addr(5)), i);
	assert_int_equal(iotune_passtab_find(&t, addr(5)), i);
}

static void test_forget_clears_only_its_key(void **state)
{
	struct iotune_passtab t = {0};
	unsigned a = 7;
	unsigned b = same_slot(iotune_passtab_slot(addr(a)), a + 1);
	int i = iotune_passtab_claim(&t, addr(a));

	iotune_passtab_forget(&t, addr(b));
	assert_int_equal(iotune_passtab_find(&t, addr(a)), i);
	iotune_passtab_forget(&t, addr(a));
	assert_int_equal(iotune_passtab_find(&t, addr(a)), -1);
	assert_int_equal(iotune_passtab_claim(&t, addr(b)), i);
}

/*
 * The model: a pool of addresses, most of them in few slots.  A request
 * is a pass-through one with its record in the table, one with its
 * record elsewhere (its slot was taken), or one of iotune's own.
 */
enum kind { FREE, IN_TABLE, ELSEWHERE, OWN };

#define POOL 24

struct model {
	struct iotune_passtab t;
	unsigned rec[IOTUNE_PASSTAB_SLOTS];	/* the adapter's records */
	enum kind kind[POOL];
	unsigned id[POOL];
	unsigned key[POOL];
	unsigned next_id;
	unsigned in_table, elsewhere, own, stale;
};

static void model_init(struct model *m)
{
	unsigned i;

	memset(m, 0, sizeof(*m));
	/* six addresses for each of four slots */
	for (i = 0; i < POOL; i++) {
		m->key[i] = same_slot(i % 4, i == 0 ? 0 : m->key[i - 1] + 1);
	}
	m->next_id = 1;
}

static void model_send(struct model *m, unsigned a, bool pass)
{
	const void *key = addr(m->key[a]);
	int i = -1;

	m->id[a] = m->next_id++;
	if (!pass) {
		iotune_passtab_forget(&m->t, key);
		m->kind[a] = OWN;
		return;
	}
	i = iotune_passtab_claim(&m->t, key);
	if (i < 0) {
		m->kind[a] = ELSEWHERE;
		return;
	}
	m->rec[i] = m->id[a];
	m->kind[a] = IN_TABLE;
}

static void model_recv(struct model *m, unsigned a)
{
	int i = iotune_passtab_find(&m->t, addr(m->key[a]));

	switch (m->kind[a]) {
	case IN_TABLE:
		assert_true(i >= 0);
		assert_int_equal(m->rec[i], m->id[a]);
		iotune_passtab_release(&m->t, i);
		m->in_table++;
		break;
	case ELSEWHERE:
		assert_int_equal(i, -1);
		m->elsewhere++;
		break;
	case OWN:
		assert_int_equal(i, -1);
		m->own++;
		break;
	case FREE:
		fail();
	}
	m->kind[a] = FREE;
}

static void test_randomized_addresses_come_back(void **state)
{
	struct model m;
	unsigned step;
	unsigned a;
	unsigned r;

	model_init(&m);
	srand(1);
	for (step = 0; step < 200000; step++) {
		r = (unsigned)rand();
		a = (r >> 8) % POOL;
		if (m.kind[a] == FREE) {
			model_send(&m, a, r % 4 != 0);
		} else if (r % 16 == 0) {
			/* freed without being received: its key stays */
			m.kind[a] = FREE;
			m.stale++;
		} else {
			model_recv(&m, a);
		}
	}
	/* every case came up often */
	assert_true(m.in_table > 1000);
	assert_true(m.elsewhere > 1000);
	assert_true(m.own > 1000);
	assert_true(m.stale > 1000);
}

int main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(test_claim_find_release),
		cmocka_unit_test(test_slot_taken_by_another_key),
		cmocka_unit_test(test_stale_key_taken_over),
		cmocka_unit_test(test_forget_clears_only_its_key),
		cmocka_unit_test(test_near_addresses_spread),
		cmocka_unit_test(test_randomized_addresses_come_back),
	};

	return cmocka_run_group_tests_name("passtab", tests, NULL, NULL);
}
