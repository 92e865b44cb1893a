/*
 * Unit tests of iotune's option parsers and configuration loader.
 *
 * Copyright (C) iotune authors 2026
 * SPDX-License-Identifier: GPL-3.0-or-later
 */

#include <errno.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <string.h>

#include <cmocka.h>

#include "iotune/config.h"

static void test_size_plain_and_suffixes(void **state)
{
	static const struct {
		const char *text;
		uint64_t expected;
	} cases[] = {
		{ "0", 0 },
		{ "4096", 4096 },
		{ "64K", 64 * 1024 },
		{ "64k", 64 * 1024 },
		{ "64KB", 64 * 1024 },
		{ "64 KiB", 64 * 1024 },
		{ "1M", 1024 * 1024 },
		{ " 1m ", 1024 * 1024 },
		{ "2G", 2ULL * 1024 * 1024 * 1024 },
		{ "3gib", 3ULL * 1024 * 1024 * 1024 },
		{ "7b", 7 },
		{ "18446744073709551615", UINT64_MAX },
	};
	size_t i;

	(void)state;
	for (i = 0; i < sizeof(cases) / sizeof(cases[0]); i++) {
		uint64_t v = 12345;

		assert_int_equal(iotune_parse_size(cases[i].text, &v), 0);
		assert_true(v == cases[i].expected);
	}
}

static void test_size_rejects_garbage(void **state)
{
	static const char *bad[] = {
		"", " ", "lots", "K", "1.5M", "-1", "+1", "1MM", "1 M B",
		"1T", "0x10", "12 34", "1M extra",
	};
	size_t i;

	(void)state;
	for (i = 0; i < sizeof(bad) / sizeof(bad[0]); i++) {
		uint64_t v = 99;

		assert_int_equal(iotune_parse_size(bad[i], &v), -EINVAL);
		assert_true(v == 99);
	}
	assert_int_equal(iotune_parse_size(NULL, &(uint64_t){0}), -EINVAL);
}

static void test_size_overflow(void **state)
{
	uint64_t v = 0;

	(void)state;
	assert_int_equal(iotune_parse_size("18446744073709551616", &v),
			 -ERANGE);
	assert_int_equal(iotune_parse_size("17179869184G", &v), -ERANGE);
	assert_int_equal(iotune_parse_size("17179869183G", &v), 0);
}

static void test_msec(void **state)
{
	uint64_t v = 0;

	(void)state;
	assert_int_equal(iotune_parse_msec("250", &v), 0);
	assert_true(v == 250);
	assert_int_equal(iotune_parse_msec("250ms", &v), 0);
	assert_true(v == 250);
	assert_int_equal(iotune_parse_msec("2s", &v), 0);
	assert_true(v == 2000);
	assert_int_equal(iotune_parse_msec("2 S", &v), 0);
	assert_true(v == 2000);
	assert_int_equal(iotune_parse_msec("2m", &v), -EINVAL);
	assert_int_equal(iotune_parse_msec("soon", &v), -EINVAL);
}

static void test_bool(void **state)
{
	static const char *yes[] = { "yes", "True", "ON", "1", " yes " };
	static const char *no[] = { "no", "FALSE", "off", "0" };
	bool v;
	size_t i;

	(void)state;
	for (i = 0; i < sizeof(yes) / sizeof(yes[0]); i++) {
		v = false;
		assert_int_equal(iotune_parse_bool(yes[i], &v), 0);
		assert_true(v);
	}
	for (i = 0; i < sizeof(no) / sizeof(no[0]); i++) {
		v = true;
		assert_int_equal(iotune_parse_bool(no[i], &v), 0);
		assert_false(v);
	}
	assert_int_equal(iotune_parse_bool("maybe", &v), -EINVAL);
	assert_int_equal(iotune_parse_bool("", &v), -EINVAL);
	assert_int_equal(iotune_parse_bool("yess", &v), -EINVAL);
}

static void test_enum(void **state)
{
	static const struct iotune_enum_value modes[] = {
		{ "off", 0 }, { "fixed", 1 }, { "adaptive", 2 },
		{ NULL, 0 },
	};
	int v = -1;

	(void)state;
	assert_int_equal(iotune_parse_enum("Adaptive", modes, &v), 0);
	assert_int_equal(v, 2);
	assert_int_equal(iotune_parse_enum(" off\t", modes, &v), 0);
	assert_int_equal(v, 0);
	assert_int_equal(iotune_parse_enum("adapt", modes, &v), -EINVAL);
	assert_int_equal(iotune_parse_enum("fixedx", modes, &v), -EINVAL);
	assert_int_equal(v, 0);
}

static void test_uint(void **state)
{
	uint64_t v = 0;

	(void)state;
	assert_int_equal(iotune_parse_uint("10", &v), 0);
	assert_true(v == 10);
	assert_int_equal(iotune_parse_uint("10K", &v), -EINVAL);
	assert_int_equal(iotune_parse_uint("-3", &v), -EINVAL);
}

static void test_format_size(void **state)
{
	char buf[32];

	(void)state;
	iotune_format_size(0, buf, sizeof(buf));
	assert_string_equal(buf, "0");
	iotune_format_size(1000, buf, sizeof(buf));
	assert_string_equal(buf, "1000");
	iotune_format_size(65536, buf, sizeof(buf));
	assert_string_equal(buf, "64K");
	iotune_format_size(3 * 1024 * 1024, buf, sizeof(buf));
	assert_string_equal(buf, "3M");
	iotune_format_size(1024ULL * 1024 * 1024, buf, sizeof(buf));
	assert_string_equal(buf, "1G");
}

/* A fake smb.conf: NULL-terminated pairs of option name and value */
static const char *fake_lookup(void *private_data, const char *name)
{
	const char **pairs = private_data;
	size_t i;

	for (i = 0; pairs[i] != NULL; i += 2) {
		if (strcmp(pairs[i], name) == 0) {
			return pairs[i + 1];
		}
	}
	return NULL;
}

static void test_config_defaults(void **state)
{
	const char *conf[] = { NULL };
	struct iotune_config c;
	char err[256] = "";

	(void)state;
	assert_int_equal(iotune_config_load(&c, fake_lookup, conf,
					    err, sizeof(err)), 0);
	assert_true(c.write_cache_size == 1024 * 1024);
	assert_true(c.write_cache_bypass_size == IOTUNE_SIZE_AUTO);
	assert_true(c.write_cache_max_files == 10);
	assert_true(c.write_cache_flush_timeout_ms == 1000);
	assert_true(c.stats);
	assert_int_equal(c.readahead, 1);	/* kernel */
	assert_true(c.readahead_max == 2 * 1024 * 1024);
	assert_true(c.readahead_budget == 64 * 1024 * 1024);
	assert_int_equal(c.fadvise, 0);
	assert_false(c.drop_behind);
	assert_false(c.write_cache_batch_reservations);
	assert_true(c.write_cache_start_writeback);
	assert_string_equal(err, "");
}

static void test_config_values(void **state)
{
	const char *conf[] = {
		"write cache size", "8K",
		"write cache bypass size", "32K",
		"write cache max files", "3",
		"write cache flush timeout", "2s",
		"stats", "no",
		"write cache start writeback", "no",
		NULL,
	};
	struct iotune_config c;
	char err[256];
	char desc[512];

	(void)state;
	assert_int_equal(iotune_config_load(&c, fake_lookup, conf,
					    err, sizeof(err)), 0);
	assert_true(c.write_cache_size == 8192);
	assert_true(c.write_cache_bypass_size == 32768);
	assert_true(c.write_cache_max_files == 3);
	assert_true(c.write_cache_flush_timeout_ms == 2000);
	assert_false(c.stats);
	assert_false(c.write_cache_start_writeback);

	iotune_config_describe(&c, desc, sizeof(desc));
	assert_non_null(strstr(desc, "write cache start writeback = no"));
	assert_non_null(strstr(desc, "write cache size = 8K"));
	assert_non_null(strstr(desc, "write cache bypass size = 32K"));
	assert_non_null(strstr(desc, "write cache max files = 3"));
	assert_non_null(strstr(desc, "flush timeout = 2000ms"));
	assert_non_null(strstr(desc, "stats = no"));
}

/* "auto" or a size; anything else names what is accepted */
static void test_config_size_or_auto(void **state)
{
	const char *autos[] = { "write cache bypass size", " AUTO ", NULL };
	const char *bad[] = { "write cache bypass size", "sometimes", NULL };
	const char *small[] = { "write cache bypass size", "1K", NULL };
	struct iotune_config c;
	char err[256];

	(void)state;
	assert_int_equal(iotune_config_load(&c, fake_lookup, autos, err,
					    sizeof(err)), 0);
	assert_true(c.write_cache_bypass_size == IOTUNE_SIZE_AUTO);
	assert_int_equal(iotune_config_load(&c, fake_lookup, bad, err,
					    sizeof(err)), -EINVAL);
	assert_non_null(strstr(err, "expected auto, or a size"));
	assert_int_equal(iotune_config_load(&c, fake_lookup, small, err,
					    sizeof(err)), -EINVAL);
	assert_non_null(strstr(err, "out of range"));
}

static void test_config_invalid_names_option_value_and_accepted(void **s)
{
	const char *conf[] = { "write cache size", "lots", NULL };
	struct iotune_config c;
	char err[256] = "";

	(void)s;
	assert_int_equal(iotune_config_load(&c, fake_lookup, conf,
					    err, sizeof(err)), -EINVAL);
	assert_non_null(strstr(err, "'lots'"));
	assert_non_null(strstr(err, "'iotune:write cache size'"));
	assert_non_null(strstr(err, "K, M or G"));
	assert_non_null(strstr(err, "from 0 to 1G"));
	assert_null(strstr(err, "out of range"));
}

static void test_config_out_of_range(void **state)
{
	const char *conf[] = { "write cache size", "2G", NULL };
	const char *conf2[] = { "write cache flush timeout", "0", NULL };
	struct iotune_config c;
	char err[256] = "";

	(void)state;
	assert_int_equal(iotune_config_load(&c, fake_lookup, conf,
					    err, sizeof(err)), -EINVAL);
	assert_non_null(strstr(err, "out of range"));
	assert_non_null(strstr(err, "'2G'"));

	assert_int_equal(iotune_config_load(&c, fake_lookup, conf2,
					    err, sizeof(err)), -EINVAL);
	assert_non_null(strstr(err, "'iotune:write cache flush timeout'"));
	assert_non_null(strstr(err, "from 1 to 3600000"));
}

static void test_config_bool_option(void **state)
{
	const char *conf[] = { "stats", "perhaps", NULL };
	struct iotune_config c;
	char err[256] = "";

	(void)state;
	assert_int_equal(iotune_config_load(&c, fake_lookup, conf,
					    err, sizeof(err)), -EINVAL);
	assert_non_null(strstr(err, "'perhaps' for 'iotune:stats'"));
	assert_non_null(strstr(err, "expected yes or no"));
}

static void test_config_enum_option(void **state)
{
	const char *good[] = { "readahead", "Adaptive", "fadvise", "random",
			       "drop behind", "yes", NULL };
	const char *bad[] = { "readahead", "smart", NULL };
	struct iotune_config c;
	char err[256] = "";
	char desc[512];

	(void)state;
	assert_int_equal(iotune_config_load(&c, fake_lookup, good,
					    err, sizeof(err)), 0);
	assert_int_equal(c.readahead, 3);
	assert_int_equal(c.fadvise, 3);
	assert_true(c.drop_behind);
	iotune_config_describe(&c, desc, sizeof(desc));
	assert_non_null(strstr(desc, "readahead = adaptive"));
	assert_non_null(strstr(desc, "fadvise = random"));
	assert_int_equal(iotune_config_load(&c, fake_lookup, bad,
					    err, sizeof(err)), -EINVAL);
	assert_non_null(strstr(err, "'smart' for 'iotune:readahead'"));
	assert_non_null(strstr(err, "one of: off, kernel, fixed, adaptive"));
}

static void test_config_error_truncates_safely(void **state)
{
	const char *conf[] = { "write cache max files", "many", NULL };
	struct iotune_config c;
	char err[16];

	(void)state;
	memset(err, 'x', sizeof(err));
	assert_int_equal(iotune_config_load(&c, fake_lookup, conf,
					    err, sizeof(err)), -EINVAL);
	assert_int_equal(strlen(err), sizeof(err) - 1);
}

int main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(test_size_plain_and_suffixes),
		cmocka_unit_test(test_size_rejects_garbage),
		cmocka_unit_test(test_size_overflow),
		cmocka_unit_test(test_msec),
		cmocka_unit_test(test_bool),
		cmocka_unit_test(test_enum),
		cmocka_unit_test(test_uint),
		cmocka_unit_test(test_format_size),
		cmocka_unit_test(test_config_defaults),
		cmocka_unit_test(test_config_values),
		cmocka_unit_test(test_config_size_or_auto),
		cmocka_unit_test(
			test_config_invalid_names_option_value_and_accepted),
		cmocka_unit_test(test_config_out_of_range),
		cmocka_unit_test(test_config_bool_option),
		cmocka_unit_test(test_config_enum_option),
		cmocka_unit_test(test_config_error_truncates_safely),
	};

	return cmocka_run_group_tests_name("config", tests, NULL, NULL);
}
