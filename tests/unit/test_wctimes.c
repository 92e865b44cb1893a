/*
 * Unit tests of iotune's write cache core: the modification time of a
 * file whose data is still cached (include/iotune/wctimes.h), against a
 * fake disk that moves its mtime on every write and every reservation
 * that moves the end of file, a fake clock, and a fake adapter that
 * does what smbd and iotune's Samba side do with each verdict.
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

struct fixture {
	struct iotune_wcache c;
	struct iotune_wc_io_ops io;
	struct iotune_wc_stats stats;
	uint64_t now;		/* ms */
	uint64_t size;		/* the fake disk's */
	struct iotune_ts mtime;	/* ... and its modification time */
	unsigned disk_writes;
	unsigned fail_writes;	/* the next ones fail with EIO */
	unsigned sets;		/* times set on the disk */
	struct iotune_wc_op op;
	uint8_t buf[CAP];
};

static struct iotune_ts ts_of(uint64_t ms)
{
	return (struct iotune_ts) {
		.sec = (int64_t)(ms / 1000),
		.nsec = (int64_t)(ms % 1000) * 1000000,
	};
}

static ssize_t fake_pwrite(void *private_data, const void *buf, size_t n,
			   uint64_t off)
{
	struct fixture *f = private_data;

	if (f->fail_writes > 0) {
		f->fail_writes--;
		errno = EIO;
		return -1;
	}
	f->disk_writes++;
	f->mtime = ts_of(f->now);
	if (off + n > f->size) {
		f->size = off + n;
	}
	return (ssize_t)n;
}

/* like fallocate without KEEP_SIZE: a size that moves moves the mtime */
static int fake_reserve(void *private_data, uint64_t off, uint64_t len)
{
	struct fixture *f = private_data;

	if (off + len > f->size) {
		f->size = off + len;
		f->mtime = ts_of(f->now);
	}
	return 0;
}

static int setup(void **state)
{
	struct fixture *f = calloc(1, sizeof(*f));
	struct iotune_wc_params p = { .capacity = CAP, .timeout_ms = 1000 };

	assert_non_null(f);
	f->io = (struct iotune_wc_io_ops) {
		.pwrite = fake_pwrite,
		.reserve = fake_reserve,
		.private_data = f,
	};
	f->now = 5000;
	f->mtime = ts_of(1000);
	assert_int_equal(iotune_wc_init(&f->c, &p, 0, &f->io, &f->stats), 0);
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

/* smbd sets the modification time (the fntimes hook) */
static void set_disk_mtime(struct fixture *f, struct iotune_ts t)
{
	if (!iotune_ts_is_none(t)) {
		f->mtime = t;
		f->sets++;
	}
}

/*
 * The Samba side: flush pieces written at once, and after data landed
 * the pinned time set again (iotune_cache_apply()).
 */
static void apply(struct fixture *f, const struct iotune_wc_action *act)
{
	struct iotune_wc_action next = *act;
	struct iotune_wc_op *op = NULL;
	struct iotune_ts t;

	while (next.flush_io) {
		ssize_t ret = fake_pwrite(f, next.flush_buf, next.flush_len,
					  next.flush_off);

		iotune_wc_flush_done(&f->c, next.flush_slot, ret,
				     ret < 0 ? EIO : 0, f->now, &next);
	}
	while ((op = iotune_wc_next_done(&f->c)) != NULL) {
		assert_int_equal(op->ret, (ssize_t)op->n);
	}
	if (iotune_wc_times_landed(&f->c, &t)) {
		set_disk_mtime(f, t);
	}
}

static void cached_write(struct fixture *f, uint64_t off, size_t n)
{
	struct iotune_wc_action act;

	f->op = (struct iotune_wc_op) {
		.kind = IOTUNE_WC_OP_WRITE, .may_cache = true,
		.off = off, .data = f->buf, .n = n,
	};
	iotune_wc_submit(&f->c, &f->op, f->now, &act);
	iotune_wc_times_write(&f->c, ts_of(f->now));
	apply(f, &act);
}

/* The fntimes hook: the cache written out first when the core says so */
static enum iotune_times_verdict set_times(struct fixture *f,
					   struct iotune_ts mtime)
{
	enum iotune_times_verdict v = iotune_wc_times_set(&f->c, mtime,
							  f->mtime);
	struct iotune_wc_action act;

	if (v == IOTUNE_TIMES_FLUSH) {
		assert_int_equal(iotune_wc_flush_sync(&f->c, IOTUNE_FLUSH_TIMES,
						      f->now, &act), 0);
		apply(f, &act);
		assert_false(iotune_wc_is_dirty(&f->c));
	}
	set_disk_mtime(f, mtime);
	iotune_wc_times_pin(&f->c, mtime);	/* the set succeeded */
	return v;
}

static void flush_all(struct fixture *f)
{
	struct iotune_wc_action act;

	assert_int_equal(iotune_wc_flush_sync(&f->c, IOTUNE_FLUSH_CLOSE,
					      f->now, &act), 0);
	apply(f, &act);
	assert_false(iotune_wc_is_dirty(&f->c));
}

/* atime or creation time only: landing data cannot undo them */
static void test_no_mtime_never_flushes(void **state)
{
	struct fixture *f = *state;

	cached_write(f, 0, 4 * KIB);
	assert_int_equal(iotune_wc_times_set(&f->c, IOTUNE_TS_NONE, f->mtime),
			 IOTUNE_TIMES_PASS);
	assert_true(iotune_wc_is_dirty(&f->c));
	flush_all(f);
	assert_int_equal(f->sets, 0);
}

/* The disk's mtime is asked for only while cached data has not landed */
static void test_disk_mtime_needed_only_with_unlanded_data(void **state)
{
	struct fixture *f = *state;
	struct iotune_ts t = ts_of(5000);

	assert_false(iotune_wc_times_need_disk(&f->c, t));
	/* nothing cached: the verdict cannot depend on the disk */
	assert_int_equal(iotune_wc_times_set(&f->c, t, IOTUNE_TS_NONE),
			 IOTUNE_TIMES_PASS);
	cached_write(f, 0, 4 * KIB);
	assert_true(iotune_wc_times_need_disk(&f->c, t));
	assert_false(iotune_wc_times_need_disk(&f->c, IOTUNE_TS_NONE));
	flush_all(f);
	assert_false(iotune_wc_times_need_disk(&f->c, t));
}

/* smbd 4.23+ with a sticky write time: a set after every write */
static void test_sticky_time_restored_after_each_write_no_flush(void **state)
{
	struct fixture *f = *state;
	struct iotune_ts sticky = ts_of(2000);
	unsigned i;

	assert_int_equal(set_times(f, sticky), IOTUNE_TIMES_PASS);
	for (i = 0; i < 12; i++) {
		f->now += 10;
		/* extending writes: the reservation moved the mtime */
		cached_write(f, (uint64_t)i * 4 * KIB, 4 * KIB);
		assert_int_equal(set_times(f, sticky), IOTUNE_TIMES_PIN);
	}
	assert_int_equal(f->disk_writes, 0);
	assert_int_equal(f->stats.flushes[IOTUNE_FLUSH_TIMES], 0);
	f->now += 10;
	flush_all(f);
	assert_int_equal(f->disk_writes, 1);	/* coalesced */
	assert_int_equal(iotune_ts_cmp(f->mtime, sticky), 0);
}

/*
 * The first set of a cache: its first write's reservation moved the
 * mtime, smbd sets back the time the file had before it
 */
static void test_time_before_the_cache_pins(void **state)
{
	struct fixture *f = *state;
	struct iotune_ts before = f->mtime;

	iotune_wc_times_known(&f->c, before);
	f->now += 10;
	cached_write(f, 0, 4 * KIB);
	assert_int_not_equal(iotune_ts_cmp(f->mtime, before), 0);
	assert_int_equal(set_times(f, before), IOTUNE_TIMES_PIN);
	assert_int_equal(f->disk_writes, 0);
	flush_all(f);
	assert_int_equal(iotune_ts_cmp(f->mtime, before), 0);
	/* and without that knowledge the first set writes the cache out */
	iotune_wc_times_known(&f->c, IOTUNE_TS_NONE);
	f->c.times.pinned = IOTUNE_TS_NONE;
	f->now += 10;
	cached_write(f, 64 * KIB, 4 * KIB);
	assert_int_equal(set_times(f, before), IOTUNE_TIMES_FLUSH);
}

/* A set that restores the file's own mtime needs no flush either */
static void test_restoring_disk_mtime_pins(void **state)
{
	struct fixture *f = *state;
	struct iotune_ts before = f->mtime;

	cached_write(f, 0, 100);	/* moved the size: the mtime */
	f->mtime = before;		/* ... as a set before it would */
	f->now += 500;
	assert_int_equal(set_times(f, before), IOTUNE_TIMES_PIN);
	assert_true(iotune_wc_is_dirty(&f->c));
	flush_all(f);
	assert_int_equal(iotune_ts_cmp(f->mtime, before), 0);
}

/* A new time: the cached data lands first, then the time is set */
static void test_new_time_flushes_first(void **state)
{
	struct fixture *f = *state;
	struct iotune_ts t = ts_of(3000);

	cached_write(f, 0, 4 * KIB);
	f->now += 100;
	assert_int_equal(set_times(f, t), IOTUNE_TIMES_FLUSH);
	assert_int_equal(f->stats.flushes[IOTUNE_FLUSH_TIMES], 1);
	assert_int_equal(iotune_ts_cmp(f->mtime, t), 0);
	/* and it stays pinned: later cached data lands under it */
	f->now += 100;
	cached_write(f, 4 * KIB, 4 * KIB);
	assert_int_equal(set_times(f, t), IOTUNE_TIMES_PIN);
	flush_all(f);
	assert_int_equal(iotune_ts_cmp(f->mtime, t), 0);
}

/* A set whose flush fails pins nothing: the client got the error */
static void test_failed_set_pins_nothing(void **state)
{
	struct fixture *f = *state;
	struct iotune_ts before = f->mtime;
	struct iotune_wc_action act;

	cached_write(f, 0, 4 * KIB);
	f->mtime = before;
	f->fail_writes = 1;
	assert_int_equal(iotune_wc_times_set(&f->c, ts_of(3000), f->mtime),
			 IOTUNE_TIMES_FLUSH);
	assert_int_not_equal(iotune_wc_flush_sync(&f->c, IOTUNE_FLUSH_TIMES,
						  f->now, &act), 0);
	apply(f, &act);		/* the set fails: no pin */
	f->now += 60000;
	iotune_wc_tick(&f->c, f->now, &act);	/* the retry lands */
	apply(f, &act);
	assert_false(iotune_wc_is_dirty(&f->c));
	assert_int_equal(f->sets, 0);
	assert_int_equal(iotune_ts_cmp(f->mtime, ts_of(f->now)), 0);
}

/* The handle that set the time is gone: landings move the time again */
static void test_unpinned_time_moves(void **state)
{
	struct fixture *f = *state;

	assert_int_equal(set_times(f, ts_of(2000)), IOTUNE_TIMES_PASS);
	f->now += 10;
	cached_write(f, 0, 4 * KIB);
	iotune_wc_times_unpin(&f->c);
	f->now += 10;
	flush_all(f);
	assert_int_equal(f->sets, 1);
	assert_int_equal(iotune_ts_cmp(f->mtime, ts_of(f->now)), 0);
}

/* Set again once per landing, not on every call */
static void test_landed_once_per_landing(void **state)
{
	struct fixture *f = *state;
	struct iotune_ts t;

	assert_int_equal(set_times(f, ts_of(2000)), IOTUNE_TIMES_PASS);
	assert_false(iotune_wc_times_landed(&f->c, &t));
	cached_write(f, 0, 4 * KIB);
	assert_false(iotune_wc_times_landed(&f->c, &t));
	flush_all(f);
	assert_int_equal(f->sets, 2);
	assert_false(iotune_wc_times_landed(&f->c, &t));
}

/* A failed flush lands nothing; its retry does, and the time follows */
static void test_failed_flush_then_retry(void **state)
{
	struct fixture *f = *state;
	struct iotune_ts sticky = ts_of(2000);
	struct iotune_wc_action act;

	assert_int_equal(set_times(f, sticky), IOTUNE_TIMES_PASS);
	cached_write(f, 0, 4 * KIB);
	assert_int_equal(set_times(f, sticky), IOTUNE_TIMES_PIN);
	f->fail_writes = 1;
	f->now += 1000;		/* the timeout: an async flush, fails */
	iotune_wc_tick(&f->c, f->now, &act);
	apply(f, &act);
	assert_true(iotune_wc_failed(&f->c));
	assert_int_equal(f->sets, 2);
	f->now += 60000;
	iotune_wc_tick(&f->c, f->now, &act);
	apply(f, &act);
	assert_false(iotune_wc_is_dirty(&f->c));
	assert_int_equal(f->sets, 3);
	assert_int_equal(iotune_ts_cmp(f->mtime, sticky), 0);
}

/* What a stat reports on smbd 4.23+, where clients see the file's mtime */
static void test_reported_mtime(void **state)
{
	struct fixture *f = *state;
	struct iotune_ts disk = ts_of(1000);
	struct iotune_ts t = disk;

	f->size = 64 * KIB;	/* rewrites: no reservation, mtime stays */
	assert_false(iotune_wc_times_mtime(&f->c, &t));
	f->now = 7000;
	cached_write(f, 0, 4 * KIB);
	assert_int_equal(iotune_ts_cmp(f->mtime, disk), 0);
	t = f->mtime;
	assert_true(iotune_wc_times_mtime(&f->c, &t));
	assert_int_equal(iotune_ts_cmp(t, ts_of(7000)), 0);
	/* a newer mtime on disk (another writer) is not moved back */
	t = ts_of(9000);
	assert_false(iotune_wc_times_mtime(&f->c, &t));
	/* landed: the disk's own mtime */
	f->now = 8000;
	flush_all(f);
	t = f->mtime;
	assert_false(iotune_wc_times_mtime(&f->c, &t));
	assert_int_equal(iotune_ts_cmp(t, ts_of(8000)), 0);
	/* pinned: the pinned time, whatever the disk says */
	cached_write(f, 0, 4 * KIB);
	assert_int_equal(set_times(f, ts_of(1500)), IOTUNE_TIMES_FLUSH);
	t = ts_of(8000);
	assert_true(iotune_wc_times_mtime(&f->c, &t));
	assert_int_equal(iotune_ts_cmp(t, ts_of(1500)), 0);
}

static void test_ts_cmp(void **state)
{
	(void)state;
	assert_int_equal(iotune_ts_cmp(ts_of(1000), ts_of(1000)), 0);
	assert_true(iotune_ts_cmp(ts_of(1000), ts_of(1001)) < 0);
	assert_true(iotune_ts_cmp(ts_of(2000), ts_of(1999)) > 0);
	assert_true(iotune_ts_is_none(IOTUNE_TS_NONE));
	assert_false(iotune_ts_is_none(ts_of(0)));
}

int main(void)
{
	const struct CMUnitTest tests[] = {
#define T(name) cmocka_unit_test_setup_teardown(name, setup, teardown)
		T(test_no_mtime_never_flushes),
		T(test_disk_mtime_needed_only_with_unlanded_data),
		T(test_sticky_time_restored_after_each_write_no_flush),
		T(test_time_before_the_cache_pins),
		T(test_restoring_disk_mtime_pins),
		T(test_new_time_flushes_first),
		T(test_failed_set_pins_nothing),
		T(test_unpinned_time_moves),
		T(test_landed_once_per_landing),
		T(test_failed_flush_then_retry),
		T(test_reported_mtime),
		T(test_ts_cmp),
#undef T
	};

	return cmocka_run_group_tests(tests, NULL, NULL);
}
