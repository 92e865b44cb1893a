/*
 * Unit tests of iotune's write cache core, against a fake disk.
 * malloc is wrapped (-Wl,--wrap=malloc) to inject allocation failures.
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

#include "iotune/wcache.h"

#define KIB 1024
#define CAP (64 * KIB)
#define DISK_MAX (4 * 1024 * KIB)

void *__real_malloc(size_t size);
static int fail_mallocs;

void *__wrap_malloc(size_t size)
{
	if (fail_mallocs > 0) {
		fail_mallocs--;
		return NULL;
	}
	return __real_malloc(size);
}

/* A file on a fake disk; pwrite can be told to fail or write short. */
struct fake_disk {
	uint8_t data[DISK_MAX];
	uint64_t size;
	unsigned writes;
	int fail_errno;		/* next pwrite fails with this */
	unsigned fail_count;	/* ... this many times */
	size_t short_by;	/* next pwrite writes this much less */
	unsigned eintr_count;	/* next pwrites fail with EINTR */
};

static ssize_t fake_pwrite(void *private_data, const void *buf, size_t n,
			   uint64_t off)
{
	struct fake_disk *d = private_data;

	if (d->eintr_count > 0) {
		d->eintr_count--;
		errno = EINTR;
		return -1;
	}
	if (d->fail_count > 0) {
		d->fail_count--;
		errno = d->fail_errno;
		return -1;
	}
	if (d->short_by > 0 && d->short_by < n) {
		n -= d->short_by;
		d->short_by = 0;
	}
	assert_true(off + n <= DISK_MAX);
	if (off > d->size) {
		memset(d->data + d->size, 0, off - d->size);
	}
	memcpy(d->data + off, buf, n);
	if (off + n > d->size) {
		d->size = off + n;
	}
	d->writes++;
	return (ssize_t)n;
}

struct fixture {
	struct fake_disk disk;
	struct iotune_wc_stats stats;
	struct iotune_wcache c;
	struct iotune_wc_io_ops ops;
	uint8_t model[DISK_MAX];
	uint64_t model_size;
};

static int setup(void **state)
{
	struct fixture *f = calloc(1, sizeof(*f));

	assert_non_null(f);
	assert_int_equal(iotune_wc_init(&f->c, CAP, 1000, 0, &f->stats), 0);
	f->ops.pwrite = fake_pwrite;
	f->ops.private_data = &f->disk;
	fail_mallocs = 0;
	*state = f;
	return 0;
}

static int teardown(void **state)
{
	struct fixture *f = *state;

	iotune_wc_destroy(&f->c);
	free(f);
	return 0;
}

static void fill(uint8_t *buf, size_t n, unsigned seed)
{
	size_t i;

	for (i = 0; i < n; i++) {
		buf[i] = (uint8_t)(seed * 31 + i * 7 + (i >> 8));
	}
}

static enum iotune_wc_verdict write_at(struct fixture *f, uint64_t off,
				       size_t n, unsigned seed,
				       enum iotune_flush_reason *reason)
{
	uint8_t *buf = malloc(n + 1);
	enum iotune_flush_reason r = IOTUNE_FLUSH_REASONS;
	enum iotune_wc_verdict v;
	int err = 0;

	assert_non_null(buf);
	fill(buf, n, seed);
	v = iotune_wc_write(&f->c, off, buf, n, 1, &r, &err);
	if (v == IOTUNE_WC_ABSORBED || v == IOTUNE_WC_BYPASS) {
		if (off > f->model_size && n > 0) {
			memset(f->model + f->model_size, 0,
			       off - f->model_size);
		}
		if (off + n > f->model_size && n > 0) {
			f->model_size = off + n;
		}
		memcpy(f->model + off, buf, n);
	}
	if (v == IOTUNE_WC_BYPASS) {
		assert_int_equal(fake_pwrite(&f->disk, buf, n, off), n);
		iotune_wc_bypass_done(&f->c, off, n, (ssize_t)n);
	}
	if (reason != NULL) {
		*reason = r;
	}
	free(buf);
	return v;
}

/* Flushes when asked to, then writes again: what an adapter does. */
static void write_flushing(struct fixture *f, uint64_t off, size_t n,
			   unsigned seed)
{
	enum iotune_wc_verdict v = write_at(f, off, n, seed, NULL);

	while (v == IOTUNE_WC_FLUSH_FIRST) {
		assert_int_equal(iotune_wc_flush_sync(&f->c,
						      IOTUNE_FLUSH_NONCONTIG,
						      &f->ops, 1), 0);
		v = write_at(f, off, n, seed, NULL);
	}
	assert_true(v == IOTUNE_WC_ABSORBED || v == IOTUNE_WC_BYPASS);
}

static void assert_reads_model(struct fixture *f, uint64_t off, size_t n)
{
	uint8_t *buf = malloc(n);
	size_t disk_got = 0;
	size_t got;
	size_t want = 0;

	assert_non_null(buf);
	memset(buf, 0xee, n);
	if (off < f->disk.size) {
		disk_got = (size_t)(f->disk.size - off < n ?
				    f->disk.size - off : n);
		memcpy(buf, f->disk.data + off, disk_got);
	}
	got = iotune_wc_read_overlay(&f->c, NULL, off, buf, n, disk_got);
	if (off < f->model_size) {
		want = f->model_size - off < n ? f->model_size - off : n;
	}
	assert_int_equal(got, want);
	assert_memory_equal(buf, f->model + off, want);
	free(buf);
}

static void test_sequential_writes_coalesce_into_one_flush(void **state)
{
	struct fixture *f = *state;
	enum iotune_flush_reason reason;
	uint64_t off;

	for (off = 0; off < CAP; off += 4 * KIB) {
		assert_int_equal(write_at(f, off, 4 * KIB, (unsigned)off, NULL),
				 IOTUNE_WC_ABSORBED);
	}
	assert_int_equal(f->disk.writes, 0);
	assert_true(iotune_wc_wants_flush(&f->c, 2, &reason));
	assert_int_equal(reason, IOTUNE_FLUSH_FULL);
	assert_int_equal(iotune_wc_flush_sync(&f->c, reason, &f->ops, 2), 0);
	assert_int_equal(f->disk.writes, 1);
	assert_int_equal(f->disk.size, CAP);
	assert_memory_equal(f->disk.data, f->model, CAP);
	assert_false(iotune_wc_is_dirty(&f->c));
	assert_true(f->stats.flushes[IOTUNE_FLUSH_FULL] == 1);
	assert_true(f->stats.writes_cached == CAP / (4 * KIB));
	assert_true(f->stats.bytes_absorbed == CAP);
	assert_true(f->stats.flush_size[iotune_flush_size_bucket(CAP)] == 1);
}

static void test_out_of_order_and_overlapping_writes(void **state)
{
	struct fixture *f = *state;

	assert_int_equal(write_at(f, 8 * KIB, 4 * KIB, 1, NULL),
			 IOTUNE_WC_ABSORBED);
	assert_int_equal(write_at(f, 0, 4 * KIB, 2, NULL), IOTUNE_WC_ABSORBED);
	assert_int_equal(write_at(f, 4 * KIB, 4 * KIB, 3, NULL),
			 IOTUNE_WC_ABSORBED);
	assert_int_equal(f->c.active.n_ext, 1);
	/* overwrite across two old writes, and a one-byte write */
	assert_int_equal(write_at(f, 3 * KIB, 2 * KIB, 4, NULL),
			 IOTUNE_WC_ABSORBED);
	assert_int_equal(write_at(f, 11 * KIB + 5, 1, 5, NULL),
			 IOTUNE_WC_ABSORBED);
	assert_int_equal(f->c.active.n_ext, 1);
	assert_reads_model(f, 0, 16 * KIB);
	assert_int_equal(iotune_wc_flush_sync(&f->c, IOTUNE_FLUSH_CLOSE,
					      &f->ops, 1), 0);
	assert_int_equal(f->disk.writes, 1);
	assert_memory_equal(f->disk.data, f->model, 12 * KIB);
}

static void test_write_outside_window_needs_flush(void **state)
{
	struct fixture *f = *state;
	enum iotune_flush_reason reason;

	assert_int_equal(write_at(f, 0, 4 * KIB, 1, NULL), IOTUNE_WC_ABSORBED);
	assert_int_equal(write_at(f, CAP, 4 * KIB, 2, &reason),
			 IOTUNE_WC_FLUSH_FIRST);
	assert_int_equal(reason, IOTUNE_FLUSH_NONCONTIG);
	assert_true(iotune_wc_flush_begin(&f->c, reason, false));
	/* the active buffer is free again while the flush is in flight */
	assert_int_equal(write_at(f, CAP, 4 * KIB, 2, NULL),
			 IOTUNE_WC_ABSORBED);
	assert_true(iotune_wc_flush_in_flight(&f->c));
	assert_false(iotune_wc_flush_begin(&f->c, reason, false));
	/* reads see both the flushing and the active data */
	assert_reads_model(f, 0, CAP + 8 * KIB);
}

static void test_window_straddling_write_gets_own_window(void **state)
{
	struct fixture *f = *state;

	/* 48K at 40K does not fit the aligned window [0, 64K) */
	assert_int_equal(write_at(f, 40 * KIB, 48 * KIB, 1, NULL),
			 IOTUNE_WC_ABSORBED);
	assert_true(f->c.active.base == 40 * KIB);
	/* unaligned and as large as the window: base at the write */
	assert_int_equal(iotune_wc_flush_sync(&f->c, IOTUNE_FLUSH_CLOSE,
					      &f->ops, 1), 0);
	assert_int_equal(write_at(f, 100, CAP, 2, NULL), IOTUNE_WC_ABSORBED);
	assert_true(f->c.active.base == 100);
	assert_reads_model(f, 0, 2 * CAP);
}

static void test_large_write_bypasses_after_flushing_overlap(void **state)
{
	struct fixture *f = *state;
	enum iotune_flush_reason reason;

	assert_int_equal(write_at(f, 4 * KIB, 4 * KIB, 1, NULL),
			 IOTUNE_WC_ABSORBED);
	/* no overlap: straight to disk */
	assert_int_equal(write_at(f, CAP, CAP + 1, 2, NULL), IOTUNE_WC_BYPASS);
	assert_true(f->stats.writes_bypassed == 1);
	/* overlap: flush first, the newer large write then wins */
	assert_int_equal(write_at(f, 0, CAP + 1, 3, &reason),
			 IOTUNE_WC_FLUSH_FIRST);
	assert_int_equal(reason, IOTUNE_FLUSH_BYPASS);
	assert_int_equal(iotune_wc_flush_sync(&f->c, reason, &f->ops, 1), 0);
	assert_int_equal(write_at(f, 0, CAP + 1, 3, NULL), IOTUNE_WC_BYPASS);
	assert_memory_equal(f->disk.data, f->model, 2 * CAP + 1);
}

static void test_bypass_in_flight_orders_cached_writes(void **state)
{
	struct fixture *f = *state;
	enum iotune_flush_reason reason;
	uint8_t buf[4 * KIB];
	int err;

	fill(buf, sizeof(buf), 9);
	iotune_wc_bypass_start(&f->c, 0, CAP * 2);
	assert_int_equal(iotune_wc_write(&f->c, 4 * KIB, buf, sizeof(buf), 1,
					 &reason, &err),
			 IOTUNE_WC_FLUSH_FIRST);
	assert_int_equal(reason, IOTUNE_FLUSH_BYPASS);
	/*
	 * The core keeps the union of the bypass writes in flight (a safe
	 * over-estimate) until the last one is done.
	 */
	iotune_wc_bypass_start(&f->c, 4 * CAP, 4 * KIB);
	iotune_wc_bypass_done(&f->c, 0, CAP * 2, CAP * 2);
	assert_true(f->c.bypass_in_flight == 1);
	assert_int_equal(write_at(f, 3 * CAP, 4 * KIB, 3, NULL),
			 IOTUNE_WC_FLUSH_FIRST);
	/* outside it a write is absorbed, but cannot start a flush */
	assert_int_equal(iotune_wc_write(&f->c, 5 * CAP, buf, sizeof(buf), 1,
					 &reason, &err),
			 IOTUNE_WC_ABSORBED);
	iotune_wc_bypass_start(&f->c, 5 * CAP, 4 * KIB);
	assert_false(iotune_wc_flush_begin(&f->c, IOTUNE_FLUSH_CLOSE, false));
	/* a sync flush (close) may not wait: it forces */
	assert_true(iotune_wc_flush_begin(&f->c, IOTUNE_FLUSH_CLOSE, true));
	iotune_wc_flush_result(&f->c, -1, EIO, 1);
	assert_int_equal(iotune_wc_take_error(&f->c), EIO);
	iotune_wc_bypass_done(&f->c, 4 * CAP, 4 * KIB, 4 * KIB);
	iotune_wc_bypass_done(&f->c, 5 * CAP, 4 * KIB, 4 * KIB);
	assert_true(f->c.bypass_in_flight == 0);
	assert_true(iotune_wc_flush_begin(&f->c, IOTUNE_FLUSH_CLOSE, false));
	assert_true(f->c.disk_size == 5 * CAP + 4 * KIB);
}

static void test_read_served_from_memory(void **state)
{
	struct fixture *f = *state;
	uint8_t buf[16 * KIB];
	size_t got = 0;

	assert_int_equal(write_at(f, 0, 8 * KIB, 1, NULL), IOTUNE_WC_ABSORBED);
	assert_true(iotune_wc_read_cached(&f->c, 1 * KIB, buf, 4 * KIB, &got));
	assert_int_equal(got, 4 * KIB);
	assert_memory_equal(buf, f->model + 1 * KIB, got);
	/* past the end of file: the rest is not there */
	assert_true(iotune_wc_read_cached(&f->c, 4 * KIB, buf, sizeof(buf),
					  &got));
	assert_int_equal(got, 4 * KIB);
	assert_true(f->stats.read_hits_full == 2);
	/* partly uncached: the disk must be read */
	assert_int_equal(write_at(f, 12 * KIB, 1 * KIB, 2, NULL),
			 IOTUNE_WC_ABSORBED);
	assert_false(iotune_wc_read_cached(&f->c, 0, buf, 13 * KIB, &got));
	assert_false(iotune_wc_read_cached(&f->c, 64 * KIB, buf, 1, &got));
}

static void test_read_overlays_disk_and_zero_fills_holes(void **state)
{
	struct fixture *f = *state;

	/* 10K on disk, then cached writes inside and far past it */
	fill(f->disk.data, 10 * KIB, 42);
	memcpy(f->model, f->disk.data, 10 * KIB);
	f->disk.size = f->model_size = 10 * KIB;
	iotune_wc_set_disk_size(&f->c, 10 * KIB);
	assert_int_equal(write_at(f, 2 * KIB, 100, 1, NULL),
			 IOTUNE_WC_ABSORBED);
	assert_int_equal(write_at(f, 30 * KIB, 1 * KIB, 2, NULL),
			 IOTUNE_WC_ABSORBED);
	assert_true(iotune_wc_logical_size(&f->c) == 31 * KIB);
	assert_reads_model(f, 0, 64 * KIB);
	assert_reads_model(f, 9 * KIB, 5 * KIB);	/* disk, then hole */
	assert_reads_model(f, 20 * KIB, 11 * KIB);	/* hole, then dirty */
	assert_true(f->stats.read_hits_overlay >= 2);
	assert_int_equal(iotune_wc_flush_sync(&f->c, IOTUNE_FLUSH_CLOSE,
					      &f->ops, 1), 0);
	assert_int_equal(f->disk.size, 31 * KIB);
	assert_memory_equal(f->disk.data, f->model, 10 * KIB);
	assert_memory_equal(f->disk.data + 30 * KIB, f->model + 30 * KIB,
			    1 * KIB);
}

static void test_snapshot_survives_flush_during_read(void **state)
{
	struct fixture *f = *state;
	struct iotune_wc_snapshot *snap = NULL;
	uint8_t stale[8 * KIB];
	uint8_t expect[8 * KIB];
	size_t got;

	assert_int_equal(write_at(f, 0, 8 * KIB, 5, NULL), IOTUNE_WC_ABSORBED);
	memcpy(expect, f->model, sizeof(expect));
	/* an async read is issued: the disk still has nothing */
	assert_int_equal(iotune_wc_snapshot_take(&f->c, 0, sizeof(stale), &snap),
			 0);
	assert_non_null(snap);
	memset(stale, 0, sizeof(stale));
	/* the data is flushed and leaves the cache before it returns */
	assert_int_equal(iotune_wc_flush_sync(&f->c, IOTUNE_FLUSH_TIMEOUT,
					      &f->ops, 1), 0);
	assert_false(iotune_wc_is_dirty(&f->c));
	got = iotune_wc_read_overlay(&f->c, snap, 0, stale, sizeof(stale), 0);
	assert_int_equal(got, sizeof(stale));
	assert_memory_equal(stale, expect, sizeof(expect));
	iotune_wc_snapshot_free(snap);
	assert_int_equal(iotune_wc_snapshot_take(&f->c, 0, 8 * KIB, &snap), 0);
	assert_null(snap);
}

static void test_flush_error_is_reported_once_and_data_kept(void **state)
{
	struct fixture *f = *state;
	enum iotune_flush_reason reason;
	uint8_t buf[KIB];
	int err = 0;

	assert_int_equal(write_at(f, 0, 8 * KIB, 1, NULL), IOTUNE_WC_ABSORBED);
	f->disk.fail_errno = ENOSPC;
	f->disk.fail_count = 1;
	assert_int_equal(iotune_wc_flush_sync(&f->c, IOTUNE_FLUSH_FSYNC,
					      &f->ops, 5), ENOSPC);
	assert_true(f->stats.flush_errors == 1);
	assert_true(iotune_wc_is_dirty(&f->c));
	/* the data is still readable, and retried later */
	assert_reads_model(f, 0, 8 * KIB);
	assert_true(iotune_wc_deadline(&f->c) == 5 + 1000);
	assert_int_equal(iotune_wc_flush_sync(&f->c, IOTUNE_FLUSH_CLOSE,
					      &f->ops, 6), 0);
	assert_memory_equal(f->disk.data, f->model, 8 * KIB);

	/* an async flush fails: the next write gets the error, once */
	assert_int_equal(write_at(f, 0, KIB, 2, NULL), IOTUNE_WC_ABSORBED);
	assert_true(iotune_wc_flush_begin(&f->c, IOTUNE_FLUSH_TIMEOUT, false));
	iotune_wc_flush_result(&f->c, -1, EIO, 7);
	assert_false(iotune_wc_flush_in_flight(&f->c));
	fill(buf, sizeof(buf), 3);
	assert_int_equal(iotune_wc_write(&f->c, 0, buf, sizeof(buf), 8,
					 &reason, &err),
			 IOTUNE_WC_ERROR);
	assert_int_equal(err, EIO);
	assert_int_equal(write_at(f, 2 * KIB, KIB, 4, NULL),
			 IOTUNE_WC_ABSORBED);
	assert_int_equal(iotune_wc_flush_sync(&f->c, IOTUNE_FLUSH_CLOSE,
					      &f->ops, 9), 0);
	assert_memory_equal(f->disk.data, f->model, 8 * KIB);
}

static void test_short_write_and_eintr_are_continued(void **state)
{
	struct fixture *f = *state;

	assert_int_equal(write_at(f, 0, 32 * KIB, 1, NULL), IOTUNE_WC_ABSORBED);
	f->disk.short_by = 20 * KIB;
	f->disk.eintr_count = 3;
	assert_int_equal(iotune_wc_flush_sync(&f->c, IOTUNE_FLUSH_CLOSE,
					      &f->ops, 1), 0);
	assert_int_equal(f->disk.writes, 2);
	assert_true(f->stats.flush_short_writes == 1);
	assert_memory_equal(f->disk.data, f->model, 32 * KIB);

	/* EINTR forever is an error, not a hang */
	assert_int_equal(write_at(f, 0, KIB, 2, NULL), IOTUNE_WC_ABSORBED);
	f->disk.eintr_count = 1000;
	assert_int_equal(iotune_wc_flush_sync(&f->c, IOTUNE_FLUSH_CLOSE,
					      &f->ops, 1), EINTR);
	f->disk.eintr_count = 0;
	assert_int_equal(iotune_wc_flush_sync(&f->c, IOTUNE_FLUSH_CLOSE,
					      &f->ops, 1), 0);
	assert_memory_equal(f->disk.data, f->model, 32 * KIB);
}

static void test_failed_flush_retried_before_newer_data(void **state)
{
	struct fixture *f = *state;

	/* old data fails to flush; newer data for the same bytes arrives */
	assert_int_equal(write_at(f, 0, 4 * KIB, 1, NULL), IOTUNE_WC_ABSORBED);
	assert_true(iotune_wc_flush_begin(&f->c, IOTUNE_FLUSH_TIMEOUT, false));
	iotune_wc_flush_result(&f->c, -1, ENOSPC, 2);
	assert_int_equal(iotune_wc_take_error(&f->c), ENOSPC);
	assert_int_equal(write_at(f, 1 * KIB, 1 * KIB, 2, NULL),
			 IOTUNE_WC_ABSORBED);
	assert_reads_model(f, 0, 4 * KIB);
	/* the retry writes the old data first, the newer data after it */
	assert_int_equal(iotune_wc_flush_sync(&f->c, IOTUNE_FLUSH_CLOSE,
					      &f->ops, 3), 0);
	assert_int_equal(f->disk.writes, 2);
	assert_memory_equal(f->disk.data, f->model, 4 * KIB);
}

static void test_timeout(void **state)
{
	struct fixture *f = *state;
	enum iotune_flush_reason reason;
	uint8_t b = 1;
	int err;

	assert_true(iotune_wc_deadline(&f->c) == 0);
	assert_int_equal(iotune_wc_write(&f->c, 0, &b, 1, 5000, &reason, &err),
			 IOTUNE_WC_ABSORBED);
	assert_int_equal(iotune_wc_write(&f->c, 1, &b, 1, 5500, &reason, &err),
			 IOTUNE_WC_ABSORBED);
	assert_true(iotune_wc_deadline(&f->c) == 6000);
	assert_false(iotune_wc_wants_flush(&f->c, 5999, &reason));
	assert_true(iotune_wc_wants_flush(&f->c, 6000, &reason));
	assert_int_equal(reason, IOTUNE_FLUSH_TIMEOUT);
	assert_true(iotune_wc_flush_begin(&f->c, reason, false));
	assert_true(iotune_wc_deadline(&f->c) == 0);
	assert_false(iotune_wc_wants_flush(&f->c, 9000, &reason));
}

static void test_too_many_extents_is_noncontiguous(void **state)
{
	struct fixture *f = *state;
	enum iotune_flush_reason reason;
	unsigned i;

	for (i = 0; i < IOTUNE_WC_MAX_EXTENTS; i++) {
		assert_int_equal(write_at(f, i * 2 * 512, 512, i, NULL),
				 IOTUNE_WC_ABSORBED);
	}
	assert_int_equal(write_at(f, i * 2 * 512, 512, i, &reason),
			 IOTUNE_WC_FLUSH_FIRST);
	assert_int_equal(reason, IOTUNE_FLUSH_NONCONTIG);
	/* filling a gap merges and is still fine */
	assert_int_equal(write_at(f, 512, 512, 99, NULL), IOTUNE_WC_ABSORBED);
	assert_reads_model(f, 0, CAP);
}

static void test_truncate_after_flush(void **state)
{
	struct fixture *f = *state;

	assert_int_equal(write_at(f, 0, 20 * KIB, 1, NULL), IOTUNE_WC_ABSORBED);
	/* the adapter flushes before any size change ... */
	assert_int_equal(iotune_wc_flush_sync(&f->c, IOTUNE_FLUSH_SIZE_CHANGE,
					      &f->ops, 1), 0);
	/* ... then tells the core the new size */
	f->disk.size = 5 * KIB;
	f->model_size = 5 * KIB;
	iotune_wc_set_disk_size(&f->c, 5 * KIB);
	assert_true(iotune_wc_logical_size(&f->c) == 5 * KIB);
	assert_reads_model(f, 0, 20 * KIB);
	assert_true(f->stats.flushes[IOTUNE_FLUSH_SIZE_CHANGE] == 1);
}

static void test_out_of_memory_is_an_error(void **state)
{
	struct fixture *f = *state;
	struct iotune_wc_snapshot *snap = NULL;
	enum iotune_flush_reason reason;
	uint8_t b = 7;
	int err = 0;

	fail_mallocs = 1;
	assert_int_equal(iotune_wc_write(&f->c, 0, &b, 1, 1, &reason, &err),
			 IOTUNE_WC_ERROR);
	assert_int_equal(err, ENOMEM);
	assert_int_equal(iotune_wc_write(&f->c, 0, &b, 1, 1, &reason, &err),
			 IOTUNE_WC_ABSORBED);
	fail_mallocs = 1;
	assert_int_equal(iotune_wc_snapshot_take(&f->c, 0, 1, &snap), ENOMEM);
	assert_null(snap);
}

static void test_zero_length_write(void **state)
{
	struct fixture *f = *state;

	assert_int_equal(write_at(f, 100, 0, 1, NULL), IOTUNE_WC_ABSORBED);
	assert_false(iotune_wc_is_dirty(&f->c));
	assert_true(iotune_wc_logical_size(&f->c) == 0);
}

static void test_flush_size_buckets(void **state)
{
	(void)state;
	assert_int_equal(iotune_flush_size_bucket(1), 0);
	assert_int_equal(iotune_flush_size_bucket(4095), 0);
	assert_int_equal(iotune_flush_size_bucket(4096), 1);
	assert_int_equal(iotune_flush_size_bucket(1024 * 1024 - 1), 8);
	assert_int_equal(iotune_flush_size_bucket(1024 * 1024), 9);
	assert_int_equal(iotune_flush_size_bucket(UINT64_MAX),
			 IOTUNE_FLUSH_SIZE_BUCKETS - 1);
	assert_string_equal(iotune_flush_reason_name(IOTUNE_FLUSH_BREAK),
			    "break");
	assert_string_equal(iotune_flush_reason_name(IOTUNE_FLUSH_REASONS),
			    "unknown");
}

/*
 * Random writes, reads, flushes (some failing) and size changes against a
 * model of the file: every read and the final disk match the model.
 */
static void test_randomized_against_model(void **state)
{
	struct fixture *f = *state;
	unsigned seed;

	for (seed = 1; seed <= 20; seed++) {
		unsigned step;

		srandom(seed);
		for (step = 0; step < 3000; step++) {
			unsigned op = (unsigned)random() % 100;
			uint64_t off = (uint64_t)random() % (512 * KIB);
			size_t n = 1 + (size_t)random() %
				   (op < 5 ? 2 * CAP : 9 * KIB);

			if (op < 70) {
				write_flushing(f, off, n, step);
			} else if (op < 90) {
				assert_reads_model(f, off, n);
			} else if (op < 95) {
				f->disk.fail_errno = ENOSPC;
				f->disk.fail_count = (unsigned)random() % 2;
				(void)iotune_wc_flush_sync(
					&f->c, IOTUNE_FLUSH_TIMEOUT,
					&f->ops, 1);
				f->disk.fail_count = 0;
				(void)iotune_wc_take_error(&f->c);
			} else {
				uint64_t size = (uint64_t)random() %
						(600 * KIB);

				assert_int_equal(iotune_wc_flush_sync(
					&f->c, IOTUNE_FLUSH_SIZE_CHANGE,
					&f->ops, 1), 0);
				if (size > f->disk.size) {
					memset(f->disk.data + f->disk.size, 0,
					       size - f->disk.size);
				}
				if (size > f->model_size) {
					memset(f->model + f->model_size, 0,
					       size - f->model_size);
				}
				f->disk.size = size;
				f->model_size = size;
				iotune_wc_set_disk_size(&f->c, size);
			}
		}
		assert_int_equal(iotune_wc_flush_sync(&f->c, IOTUNE_FLUSH_CLOSE,
						      &f->ops, 1), 0);
		assert_true(f->disk.size == f->model_size);
		assert_memory_equal(f->disk.data, f->model, f->model_size);
	}
}

int main(void)
{
	const struct CMUnitTest tests[] = {
#define T(name) cmocka_unit_test_setup_teardown(name, setup, teardown)
		T(test_sequential_writes_coalesce_into_one_flush),
		T(test_out_of_order_and_overlapping_writes),
		T(test_write_outside_window_needs_flush),
		T(test_window_straddling_write_gets_own_window),
		T(test_large_write_bypasses_after_flushing_overlap),
		T(test_bypass_in_flight_orders_cached_writes),
		T(test_read_served_from_memory),
		T(test_read_overlays_disk_and_zero_fills_holes),
		T(test_snapshot_survives_flush_during_read),
		T(test_flush_error_is_reported_once_and_data_kept),
		T(test_short_write_and_eintr_are_continued),
		T(test_failed_flush_retried_before_newer_data),
		T(test_timeout),
		T(test_too_many_extents_is_noncontiguous),
		T(test_truncate_after_flush),
		T(test_out_of_memory_is_an_error),
		T(test_zero_length_write),
		T(test_flush_size_buckets),
		T(test_randomized_against_model),
#undef T
	};

	return cmocka_run_group_tests_name("wcache", tests, NULL, NULL);
}
