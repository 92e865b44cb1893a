/*
 * Unit tests of iotune's direct I/O alignment planner: every combination
 * of offset, length and alignment in a small range, zero-length,
 * single-byte and end-of-file-crossing requests.
 *
 * Copyright (C) iotune authors 2026
 * SPDX-License-Identifier: GPL-3.0-or-later
 */

#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>

#include <cmocka.h>

#include "iotune/dio.h"

static const uint64_t aligns[] = { 512, 4096 };

static void test_align_choice(void **state)
{
	struct iotune_dio_align a;

	(void)state;
	a = iotune_dio_align_choose(512, 8, 4096);
	assert_true(a.offset == 512 && a.memory == 8);
	a = iotune_dio_align_choose(512, 0, 4096);
	assert_true(a.offset == 512 && a.memory == 512);
	a = iotune_dio_align_choose(0, 0, 512);
	assert_true(a.offset == 512 && a.memory == 512);
	a = iotune_dio_align_choose(0, 0, 0);
	assert_true(a.offset == 4096 && a.memory == 4096);
	a = iotune_dio_align_choose(3000, 0, 1000);	/* nonsense */
	assert_true(a.offset == 4096 && a.memory == 4096);
}

static void test_read_plans_cover_every_request(void **state)
{
	size_t i;

	(void)state;
	for (i = 0; i < sizeof(aligns) / sizeof(aligns[0]); i++) {
		struct iotune_dio_align a = { aligns[i], aligns[i] };
		uint64_t off;
		uint64_t len;

		for (off = 0; off < 3 * a.offset; off += a.offset / 8 + 1) {
			for (len = 0; len < 3 * a.offset;
			     len += a.offset / 16 + 1) {
				struct iotune_dio_read_plan p;

				iotune_dio_plan_read(&a, 0, off, len, 0, &p);
				if (len == 0) {
					assert_false(p.direct);
					continue;
				}
				assert_true(p.direct);
				assert_true(p.off % a.offset == 0);
				assert_true(p.len % a.offset == 0);
				assert_true(p.off <= off);
				assert_true(p.off + p.len >= off + len);
				assert_true(p.off + p.len < off + len + a.offset);
				assert_true(p.skip == off - p.off);
				assert_true(p.bounce ==
					    (off % a.offset != 0 ||
					     len % a.offset != 0));
			}
		}
	}
}

static void test_read_result_trims_and_handles_eof(void **state)
{
	struct iotune_dio_align a = { 4096, 4096 };
	struct iotune_dio_read_plan p;

	(void)state;
	/* one byte in the middle of a block */
	iotune_dio_plan_read(&a, 0, 5000, 1, 0, &p);
	assert_true(p.off == 4096 && p.len == 4096 && p.skip == 904);
	assert_true(iotune_dio_read_result(&p, 1, 4096) == 1);
	/* the file ends inside the request */
	iotune_dio_plan_read(&a, 0, 5000, 10000, 0, &p);
	assert_true(p.off == 4096 && p.len == 12288);
	assert_true(iotune_dio_read_result(&p, 10000, 6000) == 5096);
	/* the file ends before it */
	assert_true(iotune_dio_read_result(&p, 10000, 500) == 0);
	assert_true(iotune_dio_read_result(&p, 10000, 0) == 0);
	/* aligned request into an aligned buffer: no bounce */
	iotune_dio_plan_read(&a, 0, 8192, 65536, 0x10000, &p);
	assert_false(p.bounce);
	iotune_dio_plan_read(&a, 0, 8192, 65536, 0x10008, &p);
	assert_true(p.bounce);
	/* near the largest offset: page cache, which answers end of file */
	iotune_dio_plan_read(&a, 0, INT64_MAX - 1, 10, 0, &p);
	assert_false(p.direct);
	iotune_dio_plan_read(&a, 0, INT64_MAX, 1, 0, &p);
	assert_false(p.direct);
	iotune_dio_plan_read(&a, 0, UINT64_MAX - 5, 4, 0, &p);
	assert_false(p.direct);
	/* below the minimum size: page cache */
	iotune_dio_plan_read(&a, 65536, 0, 4096, 0, &p);
	assert_false(p.direct);
	assert_true(iotune_dio_read_result(&p, 4096, 100) == 100);
}

static void test_write_plans_split_exactly(void **state)
{
	size_t i;

	(void)state;
	for (i = 0; i < sizeof(aligns) / sizeof(aligns[0]); i++) {
		struct iotune_dio_align a = { aligns[i], aligns[i] };
		uint64_t off;
		uint64_t len;

		for (off = 0; off < 3 * a.offset; off += a.offset / 8 + 1) {
			for (len = 0; len < 4 * a.offset;
			     len += a.offset / 16 + 1) {
				struct iotune_dio_write_plan p;

				iotune_dio_plan_write(&a, 0, off, len, 0, &p);
				assert_true(p.head_len + p.mid_len +
					    p.tail_len == len);
				if (p.mid_len == 0) {
					assert_true(p.head_len == len);
					continue;
				}
				assert_true(p.mid_off == off + p.head_len);
				assert_true(p.tail_off ==
					    p.mid_off + p.mid_len);
				assert_true(p.mid_off % a.offset == 0);
				assert_true(p.mid_len % a.offset == 0);
				assert_true(p.head_len < a.offset);
				assert_true(p.tail_len < a.offset);
			}
		}
	}
}

static void test_write_edge_cases(void **state)
{
	struct iotune_dio_align a = { 4096, 4096 };
	struct iotune_dio_write_plan p;

	(void)state;
	iotune_dio_plan_write(&a, 0, 100, 1, 0, &p);	/* single byte */
	assert_true(p.head_len == 1 && p.mid_len == 0);
	iotune_dio_plan_write(&a, 0, 0, 0, 0, &p);	/* nothing */
	assert_true(p.head_len == 0 && p.mid_len == 0);
	iotune_dio_plan_write(&a, 0, 100, 8000, 0, &p);	/* no whole block */
	assert_true(p.head_len == 8000 && p.mid_len == 0);
	iotune_dio_plan_write(&a, 0, 4096, 1 << 20, 0x1000, &p);
	assert_true(p.head_len == 0 && p.mid_len == 1 << 20 &&
		    p.tail_len == 0 && !p.bounce);
	iotune_dio_plan_write(&a, 0, 4000, 10000, 0x1000, &p);
	assert_true(p.head_len == 96 && p.mid_off == 4096 &&
		    p.mid_len == 8192 && p.tail_len == 1712);
	assert_true(p.bounce);	/* 0x1000 + 96 is not aligned */
	iotune_dio_plan_write(&a, 65536, 0, 8192, 0, &p);	/* small */
	assert_true(p.head_len == 8192 && p.mid_len == 0);
	iotune_dio_plan_write(&a, 0, UINT64_MAX - 10, 100, 0, &p);
	assert_true(p.head_len == 100 && p.mid_len == 0);
	iotune_dio_plan_write(&a, 0, INT64_MAX - 8191, 8192, 0, &p);
	assert_true(p.head_len == 8192 && p.mid_len == 0);
}

int main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(test_align_choice),
		cmocka_unit_test(test_read_plans_cover_every_request),
		cmocka_unit_test(test_read_result_trims_and_handles_eof),
		cmocka_unit_test(test_write_plans_split_exactly),
		cmocka_unit_test(test_write_edge_cases),
	};

	return cmocka_run_group_tests_name("dio", tests, NULL, NULL);
}
