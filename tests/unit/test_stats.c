/*
 * Unit tests of iotune's counters: bucketing, the name table, merging,
 * the record format.
 *
 * Copyright (C) iotune authors 2026
 * SPDX-License-Identifier: GPL-3.0-or-later
 */

#include <errno.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include <cmocka.h>

#include "iotune/stats.h"

/* the definition: the first bucket b with us < 2^b, or the last */
static unsigned reference_bucket(uint64_t us)
{
	unsigned b = 0;

	while (b < IOTUNE_LATENCY_BUCKETS - 1 && us >= ((uint64_t)1 << b)) {
		b++;
	}
	return b;
}

static void test_latency_bucket_edges(void **state)
{
	unsigned b;

	(void)state;
	for (b = 0; b < 64; b++) {
		uint64_t p = (uint64_t)1 << b;

		assert_int_equal(iotune_latency_bucket(p - 1),
				 reference_bucket(p - 1));
		assert_int_equal(iotune_latency_bucket(p),
				 reference_bucket(p));
		assert_int_equal(iotune_latency_bucket(p + 1),
				 reference_bucket(p + 1));
	}
}

static void test_latency_buckets(void **state)
{
	struct iotune_latency l = { 0 };

	(void)state;
	assert_int_equal(iotune_latency_bucket(0), 0);
	assert_int_equal(iotune_latency_bucket(1), 1);
	assert_int_equal(iotune_latency_bucket(2), 2);
	assert_int_equal(iotune_latency_bucket(3), 2);
	assert_int_equal(iotune_latency_bucket(4), 3);
	assert_int_equal(iotune_latency_bucket(1023), 10);
	assert_int_equal(iotune_latency_bucket(1024), 11);
	assert_int_equal(iotune_latency_bucket(UINT64_MAX),
			 IOTUNE_LATENCY_BUCKETS - 1);
	iotune_latency_add(&l, 3);
	iotune_latency_add(&l, 3);
	iotune_latency_add(&l, 5000);
	assert_true(l.count == 3);
	assert_true(l.sum_us == 5006);
	assert_true(l.bucket[2] == 2);
	assert_true(l.bucket[13] == 1);
}

static void test_table_covers_every_counter_once(void **state)
{
	struct iotune_stats s;
	char name[64];
	char other[64];
	size_t i;
	size_t j;

	(void)state;
	assert_int_equal(iotune_stats_count() * sizeof(uint64_t), sizeof(s));
	for (i = 0; i < iotune_stats_count(); i++) {
		const char *n = iotune_stats_name(i, name, sizeof(name));
		const char *c = NULL;

		assert_non_null(n);
		assert_ptr_equal(iotune_stats_field(&s, i),
				 (uint64_t *)&s + i);
		for (c = n; *c != '\0'; c++) {
			assert_true((*c >= 'a' && *c <= 'z') ||
				    (*c >= '0' && *c <= '9') || *c == '_');
		}
		for (j = 0; j < i; j++) {
			assert_string_not_equal(
				n, iotune_stats_name(j, other, sizeof(other)));
		}
	}
	assert_null(iotune_stats_name(iotune_stats_count(), name,
				      sizeof(name)));
	assert_string_equal(iotune_stats_name(0, name, sizeof(name)),
			    "read_ops");
	assert_ptr_equal(iotune_stats_field(&s, 5), &s.read_latency.count);
}

static void fill_random(struct iotune_stats *s, unsigned seed)
{
	size_t i;

	srandom(seed);
	for (i = 0; i < iotune_stats_count(); i++) {
		*iotune_stats_field(s, i) = ((uint64_t)random() << 31) ^
					    (uint64_t)random();
	}
}

static void test_format_parse_roundtrip(void **state)
{
	struct iotune_stats a;
	struct iotune_stats b;
	size_t need;
	char *buf = NULL;

	(void)state;
	fill_random(&a, 1);
	a.wc.flushes[IOTUNE_FLUSH_BREAK] = UINT64_MAX;
	need = iotune_stats_format(&a, NULL, 0);
	assert_true(need > 0);
	buf = malloc(need + 1);
	assert_non_null(buf);
	assert_int_equal(iotune_stats_format(&a, buf, need + 1), need);
	assert_int_equal(strlen(buf), need);
	assert_non_null(strstr(buf, "wc_flushes_break 18446744073709551615\n"));
	assert_non_null(strstr(buf, "read_latency_us_bucket_23 "));
	assert_int_equal(iotune_stats_parse(buf, need, &b), 0);
	assert_memory_equal(&a, &b, sizeof(a));
	free(buf);
}

/* Lines in any order parse to the same counters (reversed here) */
static void test_parse_in_any_order(void **state)
{
	struct iotune_stats a;
	struct iotune_stats b;
	size_t need;
	char *buf = NULL;
	char *rev = NULL;
	size_t used = 0;
	size_t end;

	(void)state;
	fill_random(&a, 4);
	need = iotune_stats_format(&a, NULL, 0);
	buf = malloc(need + 1);
	rev = malloc(need + 1);
	assert_non_null(buf);
	assert_non_null(rev);
	iotune_stats_format(&a, buf, need + 1);
	for (end = need; end > 0;) {
		size_t start = end - 1;

		while (start > 0 && buf[start - 1] != '\n') {
			start--;
		}
		memcpy(rev + used, buf + start, end - start);
		used += end - start;
		end = start;
	}
	assert_int_equal(used, need);
	assert_memory_not_equal(rev, buf, need);
	assert_int_equal(iotune_stats_parse(rev, need, &b), 0);
	assert_memory_equal(&a, &b, sizeof(a));
	free(buf);
	free(rev);
}

static void test_format_truncates_safely(void **state)
{
	struct iotune_stats a = { 0 };
	char small[10];
	size_t need;

	(void)state;
	need = iotune_stats_format(&a, small, sizeof(small));
	assert_true(need > sizeof(small));
	assert_int_equal(strlen(small), sizeof(small) - 1);
}

static void test_parse_rejects_bad_text_and_skips_unknown(void **state)
{
	static const char *bad[] = {
		"read_ops\n", "read_ops 12", "read_ops -1\n", "read_ops 1x\n",
		" 5\n", "read_ops \n", "read_ops 99999999999999999999\n",
	};
	const char *good = "future_counter 7\nread_ops 42\nwrite_bytes 9\n";
	struct iotune_stats s;
	size_t i;

	(void)state;
	for (i = 0; i < sizeof(bad) / sizeof(bad[0]); i++) {
		assert_int_equal(iotune_stats_parse(bad[i], strlen(bad[i]), &s),
				 -EINVAL);
	}
	assert_int_equal(iotune_stats_parse(good, strlen(good), &s), 0);
	assert_true(s.read_ops == 42);
	assert_true(s.write_bytes == 9);
	assert_true(s.write_ops == 0);
}

static void test_merge_adds_every_counter(void **state)
{
	struct iotune_stats a;
	struct iotune_stats b;
	struct iotune_stats sum;
	size_t i;

	(void)state;
	fill_random(&a, 2);
	fill_random(&b, 3);
	sum = a;
	iotune_stats_merge(&sum, &b);
	for (i = 0; i < iotune_stats_count(); i++) {
		assert_true(*iotune_stats_field(&sum, i) ==
			    *iotune_stats_field(&a, i) +
			    *iotune_stats_field(&b, i));
	}
}

int main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(test_latency_buckets),
		cmocka_unit_test(test_latency_bucket_edges),
		cmocka_unit_test(test_table_covers_every_counter_once),
		cmocka_unit_test(test_format_parse_roundtrip),
		cmocka_unit_test(test_parse_in_any_order),
		cmocka_unit_test(test_format_truncates_safely),
		cmocka_unit_test(test_parse_rejects_bad_text_and_skips_unknown),
		cmocka_unit_test(test_merge_adds_every_counter),
	};

	return cmocka_run_group_tests_name("stats", tests, NULL, NULL);
}
