/*
 * Unit tests of the memory cgroup rules (include/iotune/memcg.h): lines
 * of /proc/self/cgroup on v2, v1 and hybrid hosts, malformed ones; limit
 * files ("max", numbers, v1's "unlimited", garbage); the walk from smbd's
 * cgroup to the hierarchy's root over a fake file system: the lowest
 * limit wins wherever it is, the root counts, nothing is read outside.
 *
 * Copyright (C) iotune authors 2026
 * SPDX-License-Identifier: GPL-3.0-or-later
 */

#include <setjmp.h>
#include <stdarg.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <string.h>
#include <cmocka.h>

#include "iotune/memcg.h"

#define MIB (1024ULL * 1024)
#define N(a) (sizeof(a) / sizeof((a)[0]))

/* each line in turn, and what the paths are after it */
static const struct {
	const char *line;
	const char *v2;
	const char *v1_memory;
} lines[] = {
	{ "0::/system.slice/smbd.service", "/system.slice/smbd.service", "" },
	{ "4:memory:/process_api/abc", NULL, "/process_api/abc" },
	{ "3:hugetlb,memory:/y", NULL, "/y" },
	{ "5:memory,hugetlb:/z", NULL, "/z" },
	/* not the memory controller, nor v2 */
	{ "12:cpu,cpuacct:/x", NULL, "/z" },
	{ "6:memoryx:/x", NULL, "/z" },
	{ "7:xmemory:/x", NULL, "/z" },
	{ "9:name=systemd:/x", NULL, "/z" },
	{ "10::/x", "/system.slice/smbd.service", "/z" },
	/* malformed: left alone */
	{ "", NULL, NULL },
	{ "0:", NULL, NULL },
	{ "0::", NULL, NULL },
	{ "0::relative", NULL, NULL },
	{ "4:memory", "/system.slice/smbd.service", "/z" },
	/* the root cgroup */
	{ "0::/", "/", "/z" },
};

static void test_cgroup_lines(void **state)
{
	struct iotune_cgroup_paths c = { "", "" };
	char v2[sizeof(c.v2)] = "";
	char v1[sizeof(c.v1_memory)] = "";
	size_t i;

	(void)state;
	for (i = 0; i < sizeof(lines) / sizeof(lines[0]); i++) {
		iotune_cgroup_line(lines[i].line, &c);
		/* NULL: as before the line */
		if (lines[i].v2 != NULL) {
			snprintf(v2, sizeof(v2), "%s", lines[i].v2);
		}
		if (lines[i].v1_memory != NULL) {
			snprintf(v1, sizeof(v1), "%s", lines[i].v1_memory);
		}
		assert_string_equal(c.v2, v2);
		assert_string_equal(c.v1_memory, v1);
	}
}

static void test_cgroup_v2_controllers(void **state)
{
	(void)state;
	assert_true(iotune_cgroup_v2_has_memory("cpuset cpu io memory pids\n"));
	assert_true(iotune_cgroup_v2_has_memory("memory"));
	assert_true(iotune_cgroup_v2_has_memory("memory hugetlb"));
	assert_false(iotune_cgroup_v2_has_memory("cpuset cpu io pids\n"));
	assert_false(iotune_cgroup_v2_has_memory("memoryx xmemory\n"));
	assert_false(iotune_cgroup_v2_has_memory(""));
	assert_false(iotune_cgroup_v2_has_memory("\nmemory"));
}

static void test_cgroup_numbers(void **state)
{
	uint64_t v = 7;

	(void)state;
	assert_true(iotune_cgroup_number("max\n", &v));
	assert_true(v == 0);
	assert_true(iotune_cgroup_number("201326592\n", &v));
	assert_true(v == 192 * MIB);
	assert_true(iotune_cgroup_number("4096", &v));
	assert_true(v == 4096);
	/* v1's "unlimited" (PAGE_COUNTER_MAX pages) and 2^62: none */
	assert_true(iotune_cgroup_number("9223372036854771712\n", &v));
	assert_true(v == 0);
	assert_true(iotune_cgroup_number("4611686018427387904\n", &v));
	assert_true(v == 0);
	assert_true(iotune_cgroup_number("4611686018427387903\n", &v));
	assert_true(v == 4611686018427387903ULL);
	v = 7;
	assert_false(iotune_cgroup_number("", &v));
	assert_false(iotune_cgroup_number("maximum\n", &v));
	assert_false(iotune_cgroup_number("-1\n", &v));
	assert_false(iotune_cgroup_number("12k\n", &v));
	assert_false(iotune_cgroup_number("99999999999999999999999\n", &v));
	assert_true(v == 7);
}

/* a fake cgroup file system: (directory, file, value) */
struct fake_file {
	const char *dir;
	const char *name;
	uint64_t value;
};

struct fake_fs {
	const struct fake_file *files;
	size_t n;
	unsigned reads;
	bool outside;		/* a read above the root */
};

static bool fake_read(const char *dir, const char *name, uint64_t *value,
		      void *private_data)
{
	struct fake_fs *fs = private_data;
	size_t i;

	fs->reads++;
	if (strncmp(dir, "/cg", 3) != 0 || (dir[3] != '\0' && dir[3] != '/')) {
		fs->outside = true;
	}
	for (i = 0; i < fs->n; i++) {
		if (strcmp(fs->files[i].dir, dir) == 0 &&
		    strcmp(fs->files[i].name, name) == 0) {
			*value = fs->files[i].value;
			return true;
		}
	}
	return false;
}

static const char *const V2[] = { "memory.high", "memory.max", NULL };

static uint64_t walk(const struct fake_file *files, size_t n,
		     const char *dir)
{
	struct fake_fs fs = { files, n, 0, false };
	uint64_t limit = iotune_memcg_walk("/cg", dir, V2, fake_read, &fs);

	assert_false(fs.outside);
	assert_true(fs.reads > 0);
	return limit;
}

static void test_memcg_walk(void **state)
{
	/* 100G on smbd.service, 1G above it on system.slice */
	static const struct fake_file lower_above[] = {
		{ "/cg/system.slice/smbd.service", "memory.max", 100ULL << 30 },
		{ "/cg/system.slice/smbd.service", "memory.high", 0 },
		{ "/cg/system.slice", "memory.max", 1ULL << 30 },
	};
	/* the lower of high and max in one cgroup */
	static const struct fake_file high_and_max[] = {
		{ "/cg/a", "memory.max", 512 * MIB },
		{ "/cg/a", "memory.high", 192 * MIB },
		{ "/cg", "memory.max", 0 },
	};
	/* the root itself (a container's) */
	static const struct fake_file at_root[] = {
		{ "/cg", "memory.max", 256 * MIB },
	};
	static const struct fake_file none[] = {
		{ "/cg/a", "memory.max", 0 },
		{ "/cg/a", "memory.high", 0 },
	};

	(void)state;
	assert_true(walk(lower_above, N(lower_above),
			 "/cg/system.slice/smbd.service") == 1ULL << 30);
	assert_true(walk(high_and_max, N(high_and_max), "/cg/a") == 192 * MIB);
	assert_true(walk(at_root, N(at_root), "/cg/a/b") == 256 * MIB);
	assert_true(walk(at_root, N(at_root), "/cg") == 256 * MIB);
	assert_true(walk(at_root, N(at_root), "/cg/") == 256 * MIB);
	assert_true(walk(none, N(none), "/cg/a") == 0);
	/* a directory not under the root: nothing read, no limit */
	{
		struct fake_fs fs = { at_root, N(at_root), 0, false };

		assert_true(iotune_memcg_walk("/cg", "/other/a", V2,
					      fake_read, &fs) == 0);
		assert_true(iotune_memcg_walk("/cg", "/cgx/a", V2,
					      fake_read, &fs) == 0);
		assert_int_equal(fs.reads, 0);
	}
}

int main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(test_cgroup_lines),
		cmocka_unit_test(test_cgroup_v2_controllers),
		cmocka_unit_test(test_cgroup_numbers),
		cmocka_unit_test(test_memcg_walk),
	};

	return cmocka_run_group_tests(tests, NULL, NULL);
}
