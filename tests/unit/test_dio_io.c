/*
 * Unit tests of the direct I/O execution (modules/dio_io.c) against a
 * temporary file: O_DIRECT where the file system takes it, else the same
 * code path on a second buffered descriptor.  Short writes come from
 * RLIMIT_FSIZE.
 *
 * Copyright (C) iotune authors 2026
 * SPDX-License-Identifier: GPL-3.0-or-later
 */

#define _GNU_SOURCE
#include <errno.h>
#include <fcntl.h>
#include <setjmp.h>
#include <signal.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/resource.h>
#include <unistd.h>

#include <cmocka.h>

#include "iotune/dio.h"

#define KIB 1024
#define ALIGN 4096

struct fixture {
	char path[64];
	int fd;
	int direct_fd;
	bool direct;
	uint8_t *buf;		/* aligned, with room for offsets */
	uint8_t model[1024 * KIB];
	size_t model_size;
};

static int setup(void **state)
{
	struct fixture *f = calloc(1, sizeof(*f));

	assert_non_null(f);
	snprintf(f->path, sizeof(f->path), "test_dio_io.XXXXXX");
	f->fd = mkstemp(f->path);
	assert_true(f->fd != -1);
	f->direct_fd = open(f->path, O_RDWR | O_DIRECT);
	f->direct = f->direct_fd != -1;
	if (!f->direct) {
		/* the same code path, through the page cache */
		f->direct_fd = open(f->path, O_RDWR);
	}
	assert_true(f->direct_fd != -1);
	assert_int_equal(posix_memalign((void **)&f->buf, ALIGN, 512 * KIB),
			 0);
	*state = f;
	return 0;
}

static int teardown(void **state)
{
	struct fixture *f = *state;

	close(f->fd);
	close(f->direct_fd);
	unlink(f->path);
	free(f->buf);
	free(f);
	return 0;
}

static void fill(uint8_t *buf, size_t n, unsigned seed)
{
	size_t i;

	for (i = 0; i < n; i++) {
		buf[i] = (uint8_t)(seed + i * 13 + (i >> 9));
	}
}

static struct iotune_dio_io io_for(struct fixture *f, bool is_write,
				   void *buf, size_t len, uint64_t off)
{
	return (struct iotune_dio_io) {
		.buffered_fd = f->fd,
		.direct_fd = f->direct_fd,
		.align = { .offset = ALIGN, .memory = ALIGN },
		.is_write = is_write,
		.buf = buf,
		.len = len,
		.off = off,
	};
}

/* Writes through dio_io and the model; returns the io for its flags */
static struct iotune_dio_io do_write(struct fixture *f, size_t buf_skip,
				     size_t len, uint64_t off, unsigned seed)
{
	struct iotune_dio_io io;
	uint8_t *buf = f->buf + buf_skip;

	fill(buf, len, seed);
	io = io_for(f, true, buf, len, off);
	iotune_dio_io_run(&io);
	assert_int_equal(io.ret, (ssize_t)len);
	if (off > f->model_size) {
		memset(f->model + f->model_size, 0, off - f->model_size);
	}
	memcpy(f->model + off, buf, len);
	if (off + len > f->model_size) {
		f->model_size = off + len;
	}
	return io;
}

static void assert_reads(struct fixture *f, size_t buf_skip, size_t len,
			 uint64_t off)
{
	struct iotune_dio_io io;
	uint8_t *buf = f->buf + buf_skip;
	size_t want = 0;

	if (off < f->model_size) {
		want = f->model_size - off < len ? f->model_size - off : len;
	}
	memset(buf, 0xee, len);
	io = io_for(f, false, buf, len, off);
	iotune_dio_io_run(&io);
	assert_int_equal(io.ret, (ssize_t)want);
	assert_memory_equal(buf, f->model + off, want);
}

static void test_aligned_round_trip(void **state)
{
	struct fixture *f = *state;
	struct iotune_dio_io io = do_write(f, 0, 64 * KIB, 0, 1);

	assert_false(io.split);
	assert_false(io.bounced);
	assert_reads(f, 0, 64 * KIB, 0);
	print_message("O_DIRECT: %s\n", f->direct ? "yes" : "no (emulated)");
}

static void test_unaligned_write_splits(void **state)
{
	struct fixture *f = *state;
	struct iotune_dio_io io;

	do_write(f, 0, 64 * KIB, 0, 1);
	/* head and tail around an aligned middle */
	io = do_write(f, 100, 3 * ALIGN, 100, 2);
	assert_true(io.split);
	assert_reads(f, 0, 64 * KIB, 0);
	/* too small for a middle: all buffered */
	io = do_write(f, 7, 100, 5000, 3);
	assert_false(io.split);
	assert_reads(f, 0, 64 * KIB, 0);
}

static void test_unaligned_buffer_bounces(void **state)
{
	struct fixture *f = *state;
	struct iotune_dio_io io = do_write(f, 3, 8 * ALIGN, 0, 4);

	assert_true(io.bounced);
	assert_false(io.split);
	io = io_for(f, false, f->buf + 5, 8 * ALIGN, 0);
	memset(f->buf, 0, 9 * ALIGN);
	iotune_dio_io_run(&io);
	assert_int_equal(io.ret, 8 * ALIGN);
	assert_true(io.bounced);
	assert_memory_equal(f->buf + 5, f->model, 8 * ALIGN);
}

static void test_reads_at_the_end_of_file(void **state)
{
	struct fixture *f = *state;

	do_write(f, 0, 10 * KIB + 123, 0, 5);
	assert_reads(f, 0, 64 * KIB, 0);	/* unaligned end of file */
	assert_reads(f, 0, 8 * KIB, 6 * KIB);	/* straddles it */
	assert_reads(f, 17, 5000, 7000);	/* unaligned everything */
	assert_reads(f, 0, 4 * KIB, 64 * KIB);	/* past it: 0 bytes */
}

/* A write stopped by RLIMIT_FSIZE reports what it wrote */
static void test_short_write_reports_progress(void **state)
{
	struct fixture *f = *state;
	struct rlimit old;
	struct rlimit lim = { .rlim_cur = 40 * KIB, .rlim_max = RLIM_INFINITY };
	struct iotune_dio_io io;
	uint8_t check[64 * KIB];

	assert_int_equal(getrlimit(RLIMIT_FSIZE, &old), 0);
	lim.rlim_max = old.rlim_max;
	signal(SIGXFSZ, SIG_IGN);
	assert_int_equal(setrlimit(RLIMIT_FSIZE, &lim), 0);
	fill(f->buf + 100, 64 * KIB, 6);
	io = io_for(f, true, f->buf + 100, 64 * KIB, 100);
	iotune_dio_io_run(&io);
	assert_int_equal(setrlimit(RLIMIT_FSIZE, &old), 0);
	/* up to the limit, not -1 and not everything */
	assert_true(io.ret > 0);
	assert_true(io.ret <= 40 * KIB - 100);
	assert_int_equal(pread(f->fd, check, (size_t)io.ret, 100), io.ret);
	assert_memory_equal(check, f->buf + 100, (size_t)io.ret);
	/* nothing written at all: -1 and the errno */
	assert_int_equal(setrlimit(RLIMIT_FSIZE, &lim), 0);
	io = io_for(f, true, f->buf, 8 * KIB, 48 * KIB);
	iotune_dio_io_run(&io);
	assert_int_equal(setrlimit(RLIMIT_FSIZE, &old), 0);
	assert_int_equal(io.ret, -1);
	assert_int_equal(io.err, EFBIG);
}

/*
 * A write larger than the bounce buffers kept (4 MiB) bounces in pieces:
 * all of it lands, and a limit in the middle of a later piece reports
 * the progress up to it.
 */
static void test_large_unaligned_write_bounces_in_pieces(void **state)
{
	struct fixture *f = *state;
	size_t len = 9 * 1024 * KIB;
	uint8_t *big = malloc(len + 3);
	uint8_t *check = malloc(len);
	struct rlimit old;
	struct rlimit lim = { .rlim_cur = 6 * 1024 * KIB };
	struct iotune_dio_io io;

	assert_non_null(big);
	assert_non_null(check);
	fill(big + 3, len, 8);
	io = io_for(f, true, big + 3, len, 0);
	iotune_dio_io_run(&io);
	assert_int_equal(io.ret, (ssize_t)len);
	assert_true(io.bounced);
	assert_int_equal(pread(f->fd, check, len, 0), (ssize_t)len);
	assert_memory_equal(check, big + 3, len);

	assert_int_equal(ftruncate(f->fd, 0), 0);
	assert_int_equal(getrlimit(RLIMIT_FSIZE, &old), 0);
	lim.rlim_max = old.rlim_max;
	signal(SIGXFSZ, SIG_IGN);
	assert_int_equal(setrlimit(RLIMIT_FSIZE, &lim), 0);
	io = io_for(f, true, big + 3, len, 0);
	iotune_dio_io_run(&io);
	assert_int_equal(setrlimit(RLIMIT_FSIZE, &old), 0);
	assert_int_equal(io.ret, 6 * 1024 * KIB);
	free(big);
	free(check);
}

static void test_bad_descriptor_is_an_error(void **state)
{
	struct fixture *f = *state;
	struct iotune_dio_io io = io_for(f, false, f->buf, ALIGN, 0);

	io.direct_fd = -1;
	iotune_dio_io_run(&io);
	assert_int_equal(io.ret, -1);
	assert_int_equal(io.err, EBADF);
}

int main(void)
{
	const struct CMUnitTest tests[] = {
#define T(name) cmocka_unit_test_setup_teardown(name, setup, teardown)
		T(test_aligned_round_trip),
		T(test_unaligned_write_splits),
		T(test_unaligned_buffer_bounces),
		T(test_reads_at_the_end_of_file),
		T(test_short_write_reports_progress),
		T(test_large_unaligned_write_bounces_in_pieces),
		T(test_bad_descriptor_is_an_error),
#undef T
	};

	return cmocka_run_group_tests_name("dio_io", tests, NULL, NULL);
}
