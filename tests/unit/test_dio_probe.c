/*
 * Unit tests of iotune's direct I/O alignment probe: statx first, then
 * the logical block size of the device (a fake sysfs tree), then 4096.
 * statx is wrapped (-Wl,--wrap=statx) to play kernels with and without
 * STATX_DIOALIGN.
 *
 * Copyright (C) iotune authors 2026
 * SPDX-License-Identifier: GPL-3.0-or-later
 */

#define _GNU_SOURCE

#include <errno.h>
#include <fcntl.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/sysmacros.h>
#include <unistd.h>

#include <cmocka.h>

#include "iotune/dio.h"

enum fake_statx { STATX_REAL, STATX_NO_DIOALIGN, STATX_ENOSYS, STATX_512_8 };
static enum fake_statx fake_statx = STATX_REAL;

int __real_statx(int dirfd, const char *path, int flags, unsigned int mask,
		 struct statx *stx);

int __wrap_statx(int dirfd, const char *path, int flags, unsigned int mask,
		 struct statx *stx)
{
	int ret;

	switch (fake_statx) {
	case STATX_REAL:
		break;
	case STATX_ENOSYS:
		errno = ENOSYS;
		return -1;
	case STATX_NO_DIOALIGN:
		ret = __real_statx(dirfd, path, flags, mask, stx);
		stx->stx_mask &= ~STATX_DIOALIGN;
		stx->stx_dio_offset_align = 0;
		stx->stx_dio_mem_align = 0;
		return ret;
	case STATX_512_8:
		ret = __real_statx(dirfd, path, flags, mask, stx);
		stx->stx_mask |= STATX_DIOALIGN;
		stx->stx_dio_offset_align = 512;
		stx->stx_dio_mem_align = 8;
		return ret;
	}
	return __real_statx(dirfd, path, flags, mask, stx);
}

struct fixture {
	char root[64];		/* the fake sysfs */
	char file[96];
	int fd;
	unsigned int maj, min;
};

static void write_file(const char *path, const char *text)
{
	FILE *f = fopen(path, "w");

	assert_non_null(f);
	fputs(text, f);
	fclose(f);
}

static void mkdirs(const char *root, const char *rel)
{
	char cmd[512];

	snprintf(cmd, sizeof(cmd), "mkdir -p '%s/%s'", root, rel);
	assert_int_equal(system(cmd), 0);
}

static int setup(void **state)
{
	struct fixture *f = calloc(1, sizeof(*f));
	struct stat st;

	assert_non_null(f);
	strcpy(f->root, "/tmp/iotune-sysfs-XXXXXX");
	assert_non_null(mkdtemp(f->root));
	snprintf(f->file, sizeof(f->file), "%s/data", f->root);
	f->fd = open(f->file, O_RDWR | O_CREAT, 0600);
	assert_true(f->fd >= 0);
	assert_int_equal(fstat(f->fd, &st), 0);
	f->maj = major(st.st_dev);
	f->min = minor(st.st_dev);
	fake_statx = STATX_REAL;
	*state = f;
	return 0;
}

static int teardown(void **state)
{
	struct fixture *f = *state;
	char cmd[128];

	close(f->fd);
	snprintf(cmd, sizeof(cmd), "rm -rf '%s'", f->root);
	assert_int_equal(system(cmd), 0);
	free(f);
	return 0;
}

static void fake_whole_disk(struct fixture *f, unsigned int maj,
			    unsigned int min, const char *lbs)
{
	char rel[128], path[256];

	snprintf(rel, sizeof(rel), "dev/block/%u:%u/queue", maj, min);
	mkdirs(f->root, rel);
	snprintf(path, sizeof(path), "%s/%s/logical_block_size", f->root, rel);
	write_file(path, lbs);
}

/* /sys/dev/block/M:m -> ../../devices/vda/vda1: queue/ is vda's */
static void fake_partition(struct fixture *f, unsigned int maj,
			   unsigned int min, const char *lbs)
{
	char path[256];

	mkdirs(f->root, "devices/vda/vda1");
	mkdirs(f->root, "devices/vda/queue");
	snprintf(path, sizeof(path), "%s/devices/vda/queue/logical_block_size",
		 f->root);
	write_file(path, lbs);
	mkdirs(f->root, "dev/block");
	snprintf(path, sizeof(path), "%s/dev/block/%u:%u", f->root, maj, min);
	assert_int_equal(symlink("../../devices/vda/vda1", path), 0);
}

static void test_statx_dioalign_wins(void **state)
{
	struct fixture *f = *state;
	struct iotune_dio_align a;

	fake_statx = STATX_512_8;
	fake_whole_disk(f, f->maj, f->min, "4096\n");
	a = iotune_dio_align_probe(f->fd, f->root);
	assert_int_equal(a.offset, 512);
	assert_int_equal(a.memory, 8);
}

static void test_without_statx_the_device_decides(void **state)
{
	struct fixture *f = *state;
	struct iotune_dio_align a;
	uint64_t expected = f->maj != 0 ? 512 : 4096;

	fake_statx = STATX_NO_DIOALIGN;
	fake_whole_disk(f, f->maj, f->min, "512\n");
	a = iotune_dio_align_probe(f->fd, f->root);
	assert_int_equal(a.offset, expected);
	assert_int_equal(a.memory, expected);

	fake_statx = STATX_ENOSYS;
	a = iotune_dio_align_probe(f->fd, f->root);
	assert_int_equal(a.offset, expected);
}

static void test_block_size_of_a_whole_disk(void **state)
{
	struct fixture *f = *state;

	fake_whole_disk(f, 254, 0, "512\n");
	fake_whole_disk(f, 259, 1, "4096");
	assert_int_equal(iotune_dio_device_block_size(254, 0, f->root), 512);
	assert_int_equal(iotune_dio_device_block_size(259, 1, f->root), 4096);
}

static void test_block_size_of_a_partition(void **state)
{
	struct fixture *f = *state;

	fake_partition(f, 254, 1, "1024\n");
	assert_int_equal(iotune_dio_device_block_size(254, 1, f->root), 1024);
}

static void test_no_device_means_4096(void **state)
{
	struct fixture *f = *state;
	struct iotune_dio_align a;

	/* major 0: tmpfs, btrfs subvolumes, NFS */
	fake_whole_disk(f, 0, 42, "512\n");
	assert_int_equal(iotune_dio_device_block_size(0, 42, f->root), 0);
	/* a device sysfs does not know */
	assert_int_equal(iotune_dio_device_block_size(8, 3, f->root), 0);

	fake_statx = STATX_NO_DIOALIGN;
	a = iotune_dio_align_probe(f->fd, f->root);	/* empty sysfs */
	assert_int_equal(a.offset, 4096);
	assert_int_equal(a.memory, 4096);
}

static void test_garbage_in_sysfs_is_ignored(void **state)
{
	struct fixture *f = *state;
	static const char *bad[] = { "abc\n", "512 bytes\n", "", "-512\n",
				     "99999999999999999999\n" };
	struct iotune_dio_align a;
	size_t i;

	fake_statx = STATX_NO_DIOALIGN;
	for (i = 0; i < sizeof(bad) / sizeof(bad[0]); i++) {
		fake_whole_disk(f, 254, 0, bad[i]);
		assert_int_equal(
			iotune_dio_device_block_size(254, 0, f->root), 0);
		fake_whole_disk(f, f->maj, f->min, bad[i]);
		a = iotune_dio_align_probe(f->fd, f->root);
		assert_int_equal(a.offset, 4096);
		assert_int_equal(a.memory, 4096);
	}
	/* not a power of two: the chooser refuses it */
	fake_whole_disk(f, f->maj, f->min, "768\n");
	a = iotune_dio_align_probe(f->fd, f->root);
	assert_int_equal(a.offset, 4096);
}

static void test_real_system_gives_a_power_of_two(void **state)
{
	struct fixture *f = *state;
	struct iotune_dio_align a;

	a = iotune_dio_align_probe(f->fd, "/sys");
	assert_true(a.offset >= 512 && (a.offset & (a.offset - 1)) == 0);
	assert_true(a.memory != 0 && (a.memory & (a.memory - 1)) == 0);
}

#define T(fn) cmocka_unit_test_setup_teardown(fn, setup, teardown)

int main(void)
{
	const struct CMUnitTest tests[] = {
		T(test_statx_dioalign_wins),
		T(test_without_statx_the_device_decides),
		T(test_block_size_of_a_whole_disk),
		T(test_block_size_of_a_partition),
		T(test_no_device_means_4096),
		T(test_garbage_in_sysfs_is_ignored),
		T(test_real_system_gives_a_power_of_two),
	};

	return cmocka_run_group_tests(tests, NULL, NULL);
}
