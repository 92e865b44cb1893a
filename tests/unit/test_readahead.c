/*
 * Unit tests of iotune's read-ahead policy: stream detection on
 * sequential, reverse, strided, random, out-of-order and interleaved
 * reads; window growth and cap; the budget; drop-behind; fixed mode;
 * memory pressure (PSI samples) stopping and resuming prefetches;
 * adaptive leaving Linux's read-ahead on until memory pressure and
 * taking the file back only after calm intervals.
 *
 * Copyright (C) iotune authors 2026
 * SPDX-License-Identifier: GPL-3.0-or-later
 */

#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include <cmocka.h>

#include "iotune/readahead.h"

#define KIB 1024ULL
#define MIB (1024 * KIB)

struct fixture {
	struct iotune_ra_config cfg;
	struct iotune_ra_file file;
	struct iotune_ra_budget budget;
	struct iotune_ra_stats stats;
	uint64_t prefetched;	/* union end of prefetches so far */
	uint64_t prefetch_bytes;
};

static int setup(void **state)
{
	struct fixture *f = calloc(1, sizeof(*f));

	assert_non_null(f);
	f->cfg = (struct iotune_ra_config) {
		.mode = IOTUNE_RA_ADAPTIVE,
		.initial_window = 128 * KIB,
		.max_window = 4 * MIB,
	};
	f->budget.limit = 64 * MIB;
	*state = f;
	return 0;
}

static int teardown(void **state)
{
	free(*state);
	return 0;
}

static struct iotune_ra_action rd(struct fixture *f, uint64_t off,
				  uint64_t len)
{
	struct iotune_ra_action a;

	iotune_ra_read(&f->cfg, &f->file, &f->budget, &f->stats, off, len, &a);
	if (a.prefetch_len > 0) {
		f->prefetch_bytes += a.prefetch_len;
		if (a.prefetch_off + a.prefetch_len > f->prefetched) {
			f->prefetched = a.prefetch_off + a.prefetch_len;
		}
	}
	return a;
}

static void test_sequential_detected_and_window_grows(void **state)
{
	struct fixture *f = *state;
	uint64_t off;

	/* a read at offset 0 starts a stream at once */
	assert_true(rd(f, 0, 64 * KIB).prefetch_len > 0);
	for (off = 64 * KIB; off < 64 * MIB; off += 64 * KIB) {
		rd(f, off, 64 * KIB);
		/* always ahead of the reader, never wildly so */
		assert_true(f->prefetched >= off + 64 * KIB);
		assert_true(f->prefetched <= off + 64 * KIB + 4 * MIB);
	}
	assert_true(f->stats.streams_detected == 1);
	assert_true(f->stats.windows_grown >= 5);
	assert_true(f->file.stream[0].window == 4 * MIB);
	/* little waste: what was prefetched is what was read, plus a window */
	assert_true(f->prefetch_bytes <= 64 * MIB + 4 * MIB);
	assert_true(f->budget.outstanding <= 4 * MIB);
}

static void test_out_of_order_forward_reads_stay_sequential(void **state)
{
	struct fixture *f = *state;
	static const int order[] = { 0, 2, 1, 3, 5, 4, 7, 6, 8, 10, 9, 11 };
	size_t round;
	size_t i;

	for (round = 0; round < 8; round++) {
		for (i = 0; i < sizeof(order) / sizeof(order[0]); i++) {
			rd(f, (round * 12 + (uint64_t)order[i]) * MIB, MIB);
		}
	}
	assert_true(f->stats.streams_detected == 1);
	assert_true(f->stats.windows_shrunk == 0);
	assert_true(f->prefetched >= 96 * MIB);
}

static void test_reverse_reads_are_not_sequential(void **state)
{
	struct fixture *f = *state;
	uint64_t off;

	for (off = 64 * MIB; off >= 64 * KIB; off -= 64 * KIB) {
		assert_int_equal(rd(f, off, 64 * KIB).prefetch_len, 0);
	}
	assert_true(f->stats.prefetch_calls == 0);
}

static void test_strided_and_random_reads_prefetch_nothing(void **state)
{
	struct fixture *f = *state;
	unsigned i;

	for (i = 0; i < 1000; i++) {
		rd(f, (uint64_t)i * 10 * MIB, 4 * KIB);	/* far stride */
	}
	srandom(7);
	for (i = 0; i < 5000; i++) {
		rd(f, ((uint64_t)random() % (1 << 20)) * 4 * KIB, 4 * KIB);
	}
	/* a random read may land near another now and then */
	assert_true(f->prefetch_bytes <= 5000 * 4 * KIB / 10);
}

static void test_interleaved_streams_on_one_handle(void **state)
{
	struct fixture *f = *state;
	uint64_t i;

	for (i = 0; i < 256; i++) {
		rd(f, i * 64 * KIB, 64 * KIB);
		rd(f, 1024 * MIB + i * 64 * KIB, 64 * KIB);
		rd(f, 2048 * MIB + i * 64 * KIB, 64 * KIB);
	}
	assert_true(f->stats.streams_detected == 3);
	for (i = 0; i < 3; i++) {
		const struct iotune_ra_stream *s = &f->file.stream[i];

		assert_true(s->ahead >= s->pos);
		assert_true(s->window > f->cfg.initial_window);
	}
}

static void test_random_reads_shrink_windows(void **state)
{
	struct fixture *f = *state;
	uint64_t off;
	unsigned i;

	for (off = 0; off < 32 * MIB; off += MIB) {
		rd(f, off, MIB);
	}
	assert_true(f->file.stream[0].window > f->cfg.initial_window);
	for (i = 0; i < 10; i++) {
		rd(f, 4096 * MIB + i * 100 * MIB, 4 * KIB);
	}
	assert_true(f->stats.windows_shrunk > 0);
}

static void test_budget_bounds_outstanding_bytes(void **state)
{
	struct fixture *f = *state;
	struct iotune_ra_file files[50];
	uint64_t off;
	size_t i;

	memset(files, 0, sizeof(files));
	f->budget.limit = 8 * MIB;
	/* 50 readers each start a stream and stop */
	for (i = 0; i < 50; i++) {
		for (off = 0; off < 4 * MIB; off += 128 * KIB) {
			struct iotune_ra_action a;

			iotune_ra_read(&f->cfg, &files[i], &f->budget,
				       &f->stats, off, 128 * KIB, &a);
			assert_true(f->budget.outstanding <= 8 * MIB);
		}
	}
	assert_true(f->stats.budget_refusals > 0);
	/* closing hands the unread bytes back */
	for (i = 0; i < 50; i++) {
		iotune_ra_close(&files[i], &f->budget);
	}
	assert_true(f->budget.outstanding == 0);
}

static void test_drop_behind_never_ahead_of_reader(void **state)
{
	struct fixture *f = *state;
	uint64_t dropped_end = 0;
	uint64_t dropped = 0;
	uint64_t off;

	f->cfg.drop_behind = true;
	for (off = 0; off < 256 * MIB; off += MIB) {
		struct iotune_ra_action a = rd(f, off, MIB);

		if (a.drop_len == 0) {
			continue;
		}
		/* contiguous, behind every read that may still be in flight */
		assert_true(a.drop_off == dropped_end);
		assert_true(a.drop_off + a.drop_len + 8 * MIB <= off + MIB);
		dropped_end = a.drop_off + a.drop_len;
		dropped += a.drop_len;
	}
	assert_true(dropped >= 256 * MIB - IOTUNE_RA_DROP_CHUNK - 8 * MIB);
	assert_true(f->stats.drop_bytes == dropped);
	/* at close nothing is in flight: the rest goes too */
	{
		struct iotune_ra_action a;

		assert_true(iotune_ra_drop_rest(&f->cfg, &f->file, 0,
						&f->stats, &a));
		assert_true(a.drop_off == 0);
		assert_true(a.drop_len == 256 * MIB);
		assert_true(f->stats.drop_bytes == 256 * MIB);
		assert_false(iotune_ra_drop_rest(&f->cfg, &f->file, 0,
						 &f->stats, &a));
	}
}

static void test_fixed_mode_prefetches_at_boundaries(void **state)
{
	struct fixture *f = *state;
	struct iotune_ra_action a;
	uint64_t off;

	f->cfg.mode = IOTUNE_RA_FIXED;
	f->cfg.fixed_offset = 1 * MIB;
	f->cfg.fixed_size = 2 * MIB;
	a = rd(f, 0, 64 * KIB);
	assert_true(a.prefetch_off == 0 && a.prefetch_len == 2 * MIB);
	for (off = 64 * KIB; off < MIB; off += 64 * KIB) {
		assert_int_equal(rd(f, off, 64 * KIB).prefetch_len, 0);
	}
	/* what the stream already prefetched is not asked for again */
	a = rd(f, 1 * MIB, 64 * KIB);
	assert_true(a.prefetch_off == 2 * MIB && a.prefetch_len == MIB);
	assert_int_equal(rd(f, 5 * MIB + 1, 10).prefetch_len, 0);
	/* a boundary read of a new stream gets its own */
	a = rd(f, 100 * MIB, 4 * KIB);
	assert_true(a.prefetch_off == 100 * MIB && a.prefetch_len == 2 * MIB);
}

static void test_off_and_kernel_modes_never_prefetch(void **state)
{
	struct fixture *f = *state;
	uint64_t off;

	f->cfg.mode = IOTUNE_RA_KERNEL;
	for (off = 0; off < 64 * MIB; off += MIB) {
		struct iotune_ra_action a = rd(f, off, MIB);

		assert_int_equal(a.prefetch_len, 0);
		assert_int_equal(a.drop_len, 0);
	}
	f->cfg.mode = IOTUNE_RA_OFF;
	assert_int_equal(rd(f, 64 * MIB, MIB).prefetch_len, 0);
	/* drop-behind works with the kernel's read-ahead too */
	memset(&f->file, 0, sizeof(f->file));
	f->cfg.mode = IOTUNE_RA_KERNEL;
	f->cfg.drop_behind = true;
	for (off = 0; off < 128 * MIB; off += MIB) {
		assert_int_equal(rd(f, off, MIB).prefetch_len, 0);
	}
	assert_true(f->stats.drop_bytes > 64 * MIB);
	assert_true(f->stats.prefetch_calls == 0);
}

static void test_client_hints(void **state)
{
	struct fixture *f = *state;

	f->file.hint = IOTUNE_RA_HINT_SEQUENTIAL;
	assert_true(rd(f, 10 * MIB, 64 * KIB).prefetch_len > 0);
	memset(&f->file, 0, sizeof(f->file));
	assert_int_equal(rd(f, 10 * MIB, 64 * KIB).prefetch_len, 0);
	memset(&f->file, 0, sizeof(f->file));
	f->file.hint = IOTUNE_RA_HINT_RANDOM;
	assert_int_equal(rd(f, 0, 64 * KIB).prefetch_len, 0);
	assert_int_equal(rd(f, 64 * KIB, 64 * KIB).prefetch_len, 0);
	assert_int_equal(rd(f, 128 * KIB, 64 * KIB).prefetch_len, 0);
}

static void test_pressure_samples(void **state)
{
	struct iotune_ra_pressure p = { 0 };

	(void)state;
	assert_true(iotune_ra_pressure_due(&p, 1));
	/* the first sample has no interval: Linux's 10 s average counts */
	iotune_ra_pressure_sample(&p, 1000, 5000000, 250);
	assert_int_equal(p.permille, 250);
	assert_false(iotune_ra_pressure_due(&p, 1000 +
					    IOTUNE_RA_PRESSURE_INTERVAL_MS - 1));
	assert_true(iotune_ra_pressure_due(&p, 1000 +
					   IOTUNE_RA_PRESSURE_INTERVAL_MS));
	/* 200 ms, stalled 20 ms: 100/1000 */
	iotune_ra_pressure_sample(&p, 1200, 5000000 + 20000, 999);
	assert_int_equal(p.permille, 100);	/* its own interval wins */
	/* stalled 19,999 us: 99 */
	iotune_ra_pressure_sample(&p, 1400, 5000000 + 20000 + 19999, 0);
	assert_int_equal(p.permille, 99);
	/* a quiet interval */
	iotune_ra_pressure_sample(&p, 1600, 5000000 + 20000 + 19999, 0);
	assert_int_equal(p.permille, 0);
	/* more stall than time (stalls overlap): all of it */
	iotune_ra_pressure_sample(&p, 1800,
				  5000000 + 20000 + 19999 + 999999, 0);
	assert_int_equal(p.permille, 1000);
	/* a counter that went back is another one: its average */
	iotune_ra_pressure_sample(&p, 2000, 10, 40);
	assert_int_equal(p.permille, 40);
	iotune_ra_pressure_sample(&p, 2000, 10, 0);
	assert_int_equal(p.permille, 0);
	assert_true(p.stall_us == 10);
	/* a clock that did not move: no interval, its average stands */
	iotune_ra_pressure_sample(&p, 2000, 1000000, 70);
	assert_int_equal(p.permille, 70);
	/* a long interval is averaged over its length: 10 s, 0.5 s */
	iotune_ra_pressure_sample(&p, 12000, 1000000 + 500000, 0);
	assert_int_equal(p.permille, 50);
}

/*
 * Samples come with reads: after an idle gap longer than avg10's window
 * the earlier intervals are forgotten, and the sample is the larger of
 * the gap's average and avg10.
 */
static void test_pressure_after_idle_gap(void **state)
{
	struct iotune_ra_pressure p = { 0 };
	uint64_t t = 1000;
	uint64_t stall = 0;

	(void)state;
	iotune_ra_pressure_sample(&p, t, stall, 0);
	t += 200;
	stall += 100000;		/* 500/1000 */
	iotune_ra_pressure_sample(&p, t, stall, 0);
	assert_int_equal(p.peak, 500);
	/* exactly the window: still one of the recent intervals */
	t += IOTUNE_RA_PRESSURE_STALE_MS;
	iotune_ra_pressure_sample(&p, t, stall, 0);
	assert_int_equal(p.peak, 500);
	/* ten minutes idle, then memory is plentiful: the spike is gone */
	t += 600000;
	iotune_ra_pressure_sample(&p, t, stall, 0);
	assert_int_equal(p.permille, 0);
	assert_int_equal(p.peak, 0);
	/* idle again, and now short: avg10 beats the diluted gap */
	t += 60000;
	stall += 60000;			/* 1/1000 of the gap */
	iotune_ra_pressure_sample(&p, t, stall, 300);
	assert_int_equal(p.permille, 300);
	assert_int_equal(p.peak, 300);
	/* the gap's own share when that is the larger */
	t += 20000;
	stall += 10000000;		/* 500/1000 */
	iotune_ra_pressure_sample(&p, t, stall, 100);
	assert_int_equal(p.permille, 500);
}

/*
 * The adapter opens the counter again (its cgroup went away): the next
 * sample is due after an interval, and takes avg10 even where the new
 * counter's total is higher than the old one's.
 */
static void test_pressure_restart(void **state)
{
	struct iotune_ra_pressure p = { 0 };

	(void)state;
	iotune_ra_pressure_sample(&p, 1000, 1000, 0);
	iotune_ra_pressure_sample(&p, 1200, 1000, 0);
	assert_int_equal(p.peak, 0);
	iotune_ra_pressure_restart(&p, 1300);
	assert_false(iotune_ra_pressure_due(&p, 1300));
	assert_false(iotune_ra_pressure_due(&p, 1499));
	assert_true(iotune_ra_pressure_due(&p, 1500));
	/* 90 s of stall more in 200 ms: another counter, not a verdict */
	iotune_ra_pressure_sample(&p, 1500, 90000000, 20);
	assert_int_equal(p.permille, 20);
	assert_false(p.restart);
	/* from here on, intervals of the new counter */
	iotune_ra_pressure_sample(&p, 1700, 90000000 + 20000, 0);
	assert_int_equal(p.permille, 100);
}

/* peak: the highest of the last IOTUNE_RA_CALM_SAMPLES intervals */
static void test_pressure_peak_of_recent_samples(void **state)
{
	struct iotune_ra_pressure p = { 0 };
	uint64_t t = 1000;
	uint64_t stall = 0;
	int i;

	(void)state;
	iotune_ra_pressure_sample(&p, t, stall, 0);
	t += 200;
	stall += 40000;			/* 200/1000 */
	iotune_ra_pressure_sample(&p, t, stall, 0);
	assert_int_equal(p.peak, 200);
	for (i = 1; i < IOTUNE_RA_CALM_SAMPLES; i++) {
		t += 200;
		stall += 2000;		/* 10/1000 */
		iotune_ra_pressure_sample(&p, t, stall, 0);
		assert_int_equal(p.permille, 10);
		assert_int_equal(p.peak, 200);
	}
	t += 200;
	iotune_ra_pressure_sample(&p, t, stall, 0);
	assert_int_equal(p.peak, 10);	/* the 200 left the window */
}

/* n intervals of 200 ms stalled permille/1000 each */
static void pressure(struct fixture *f, unsigned permille, int n)
{
	struct iotune_ra_pressure *p = &f->budget.pressure;
	uint64_t now = p->sampled_ms;
	int i;

	if (now == 0) {
		now = 1000;
		iotune_ra_pressure_sample(p, now, 0, 0);
	}
	for (i = 0; i < n; i++) {
		now += 200;
		iotune_ra_pressure_sample(p, now,
					  p->stall_us + 200 * permille, 0);
	}
}

static void kernel_first(struct fixture *f)
{
	f->cfg.pressure_permille = 100;
	f->cfg.kernel_first = true;
}

/* a stream read through the fixture; the next offset */
static uint64_t read_on(struct fixture *f, uint64_t off, int n,
			enum iotune_ra_kernel kernel, bool prefetches)
{
	int i;

	for (i = 0; i < n; i++, off += MIB) {
		struct iotune_ra_action a = rd(f, off, MIB);

		assert_int_equal(a.kernel, kernel);
		assert_true((a.prefetch_len > 0) == prefetches ||
			    (prefetches && f->prefetched >= off + MIB));
	}
	return off;
}

static void test_kernel_first_until_pressure(void **state)
{
	struct fixture *f = *state;
	struct iotune_ra_action a;
	uint64_t off = 0;

	kernel_first(f);
	pressure(f, 49, 3);
	assert_false(iotune_ra_open(&f->cfg, &f->file, &f->budget));
	/* memory is plentiful: Linux's read-ahead serves the file */
	off = read_on(f, off, 16, IOTUNE_RA_KERNEL_KEEP, false);
	assert_true(f->budget.outstanding == 0);
	/* under the threshold, in the band: Linux's keeps the file */
	pressure(f, 99, 1);
	off = read_on(f, off, 1, IOTUNE_RA_KERNEL_KEEP, false);
	/* an interval at the threshold: iotune takes over, once */
	pressure(f, 100, 1);
	a = rd(f, off, MIB);
	off += MIB;
	assert_int_equal(a.kernel, IOTUNE_RA_KERNEL_OFF);
	assert_true(a.prefetch_len > 0);
	assert_true(a.prefetch_off == off);
	/* under pressure the window does not grow: two reads */
	assert_true(f->file.stream[0].window == 2 * MIB);
	assert_true(f->stats.takeovers == 1);
	(void)read_on(f, off, 4, IOTUNE_RA_KERNEL_KEEP, true);
	assert_true(f->stats.takeovers == 1 && f->stats.handbacks == 0);
}

static void test_kernel_first_hands_back_after_calm(void **state)
{
	struct fixture *f = *state;
	uint64_t off = 0;
	int i;

	kernel_first(f);
	pressure(f, 100, 1);
	assert_true(iotune_ra_open(&f->cfg, &f->file, &f->budget));
	/* in the band (half the threshold or more): iotune keeps it */
	for (i = 0; i < 3 * IOTUNE_RA_CALM_SAMPLES; i++) {
		pressure(f, 50, 1);
		off = read_on(f, off, 1, IOTUNE_RA_KERNEL_KEEP, true);
	}
	/* under half, but not long enough: iotune keeps the file */
	for (i = 1; i < IOTUNE_RA_CALM_SAMPLES; i++) {
		pressure(f, 49, 1);
		off = read_on(f, off, 1, IOTUNE_RA_KERNEL_KEEP, true);
	}
	/* the last interval in the band leaves: Linux's again, once */
	pressure(f, 0, 1);
	off = read_on(f, off, 1, IOTUNE_RA_KERNEL_ON, false);
	(void)read_on(f, off, 4, IOTUNE_RA_KERNEL_KEEP, false);
	assert_true(f->stats.takeovers == 0 && f->stats.handbacks == 1);
	/* a handle opened now starts with Linux's too */
	memset(&f->file, 0, sizeof(f->file));
	assert_false(iotune_ra_open(&f->cfg, &f->file, &f->budget));
	/* one opened after an interval in the band, with iotune's */
	pressure(f, 50, 1);
	memset(&f->file, 0, sizeof(f->file));
	assert_true(iotune_ra_open(&f->cfg, &f->file, &f->budget));
}

/*
 * In a memory cgroup with a limit below the RAM iotune's windows serve
 * every file from its open, and are never handed back; a limit at or
 * above the RAM, or none, leaves it to the stall.
 */
static void test_kernel_first_not_in_a_limited_cgroup(void **state)
{
	struct fixture *f = *state;
	struct iotune_ra_pressure *p = &f->budget.pressure;
	uint64_t off = 0;

	kernel_first(f);
	pressure(f, 0, IOTUNE_RA_CALM_SAMPLES);
	iotune_ra_pressure_limit(p, 192 * MIB, 24 * 1024 * MIB);
	assert_true(iotune_ra_open(&f->cfg, &f->file, &f->budget));
	off = read_on(f, off, 4, IOTUNE_RA_KERNEL_KEEP, true);
	/* a stall that comes and goes changes nothing */
	pressure(f, 500, 1);
	off = read_on(f, off, 2, IOTUNE_RA_KERNEL_KEEP, true);
	pressure(f, 0, 3 * IOTUNE_RA_CALM_SAMPLES);
	off = read_on(f, off, 4, IOTUNE_RA_KERNEL_KEEP, true);
	assert_true(f->stats.takeovers == 0 && f->stats.handbacks == 0);
	/* the limit lifted (or as high as the RAM): Linux's, once */
	iotune_ra_pressure_limit(p, 24 * 1024 * MIB, 24 * 1024 * MIB);
	off = read_on(f, off, 1, IOTUNE_RA_KERNEL_ON, false);
	iotune_ra_pressure_limit(p, 0, 24 * 1024 * MIB);
	(void)read_on(f, off, 2, IOTUNE_RA_KERNEL_KEEP, false);
	assert_true(f->stats.handbacks == 1);
	memset(&f->file, 0, sizeof(f->file));
	assert_false(iotune_ra_open(&f->cfg, &f->file, &f->budget));
	/* a limit a byte under the RAM is one */
	iotune_ra_pressure_limit(p, 24 * 1024 * MIB - 1, 24 * 1024 * MIB);
	assert_true(iotune_ra_open(&f->cfg, &f->file, &f->budget));
}

/* the open again (a hint that came later, a reopen): the state follows */
static void test_kernel_first_open_again(void **state)
{
	struct fixture *f = *state;

	kernel_first(f);
	pressure(f, 100, 1);
	/* opened before the pressure, taken over at a read */
	(void)read_on(f, 0, 1, IOTUNE_RA_KERNEL_OFF, true);
	/* opened again while it lasts: still iotune's, nothing to switch */
	assert_true(iotune_ra_open(&f->cfg, &f->file, &f->budget));
	(void)read_on(f, MIB, 1, IOTUNE_RA_KERNEL_KEEP, true);
	/* opened again after the calm: Linux's from the open */
	pressure(f, 0, IOTUNE_RA_CALM_SAMPLES);
	assert_false(iotune_ra_open(&f->cfg, &f->file, &f->budget));
	(void)read_on(f, 2 * MIB, 1, IOTUNE_RA_KERNEL_KEEP, false);
	assert_true(f->stats.takeovers == 1 && f->stats.handbacks == 0);
}

static void test_kernel_first_open_under_pressure(void **state)
{
	struct fixture *f = *state;
	struct iotune_ra_action a;

	kernel_first(f);
	pressure(f, 500, 2);
	/* the open switches Linux's off: the reads need not */
	assert_true(iotune_ra_open(&f->cfg, &f->file, &f->budget));
	a = rd(f, 0, MIB);
	assert_int_equal(a.kernel, IOTUNE_RA_KERNEL_KEEP);
	assert_true(a.prefetch_len > 0);
	assert_true(f->stats.takeovers == 0);
	/* a new process: Linux's 10 s average decides at its first open */
	memset(&f->budget.pressure, 0, sizeof(f->budget.pressure));
	memset(&f->file, 0, sizeof(f->file));
	iotune_ra_pressure_sample(&f->budget.pressure, 1000, 123456, 150);
	assert_true(iotune_ra_open(&f->cfg, &f->file, &f->budget));
	memset(&f->budget.pressure, 0, sizeof(f->budget.pressure));
	memset(&f->file, 0, sizeof(f->file));
	iotune_ra_pressure_sample(&f->budget.pressure, 1000, 123456, 49);
	assert_false(iotune_ra_open(&f->cfg, &f->file, &f->budget));
}

static void test_kernel_first_needs_a_threshold(void **state)
{
	struct fixture *f = *state;

	/* no threshold, or not kernel first: iotune's windows from the open */
	f->cfg.kernel_first = true;
	assert_true(iotune_ra_open(&f->cfg, &f->file, &f->budget));
	kernel_first(f);
	f->cfg.kernel_first = false;
	assert_true(iotune_ra_open(&f->cfg, &f->file, &f->budget));
	assert_true(rd(f, 0, MIB).kernel == IOTUNE_RA_KERNEL_KEEP);
	/* a process without PSI cannot see pressure: its own windows */
	f->cfg.kernel_first = true;
	memset(&f->file, 0, sizeof(f->file));
	f->budget.pressure.blind = true;
	assert_true(iotune_ra_open(&f->cfg, &f->file, &f->budget));
	f->budget.pressure.blind = false;
	assert_false(iotune_ra_open(&f->cfg, &f->file, &f->budget));
	/* other modes leave Linux's read-ahead to the adapter */
	f->cfg.mode = IOTUNE_RA_FIXED;
	assert_false(iotune_ra_open(&f->cfg, &f->file, &f->budget));
	f->cfg.mode = IOTUNE_RA_KERNEL;
	assert_false(iotune_ra_open(&f->cfg, &f->file, &f->budget));
}

static void test_kernel_first_keeps_random_hint(void **state)
{
	struct fixture *f = *state;
	uint64_t off;

	kernel_first(f);
	f->file.hint = IOTUNE_RA_HINT_RANDOM;
	assert_false(iotune_ra_open(&f->cfg, &f->file, &f->budget));
	pressure(f, 1000, 1);
	for (off = 0; off < 8 * MIB; off += MIB) {
		struct iotune_ra_action a = rd(f, off, MIB);

		/* the client's RANDOM stays: never switched back on */
		assert_int_equal(a.kernel, IOTUNE_RA_KERNEL_KEEP);
		assert_true(a.prefetch_len == 0);
	}
}

static void test_pressure_shrinks_and_regrows_windows(void **state)
{
	struct fixture *f = *state;
	uint64_t off;
	uint64_t grown;

	f->cfg.pressure_permille = 100;
	for (off = 0; off < 32 * MIB; off += MIB) {
		rd(f, off, MIB);
	}
	assert_true(f->file.stream[0].window == 4 * MIB);
	/* below the threshold: nothing changes */
	f->budget.pressure.permille = 99;
	for (; off < 48 * MIB; off += MIB) {
		rd(f, off, MIB);
	}
	assert_true(f->file.stream[0].window == 4 * MIB);
	assert_true(f->stats.pressure_shrinks == 0);
	grown = f->stats.windows_grown;
	/* at it: the window halves at each prefetch, down to two reads */
	f->budget.pressure.permille = 100;
	for (; off < 96 * MIB; off += MIB) {
		rd(f, off, MIB);
		/* still ahead of the reader: a stream is never starved */
		assert_true(f->prefetched >= off + MIB);
		assert_true(f->prefetched <= off + MIB + 4 * MIB);
	}
	assert_true(f->file.stream[0].window == 2 * MIB);
	assert_true(f->stats.pressure_shrinks == 1);	/* 4M .. 2M */
	assert_true(f->stats.windows_grown == grown);
	/* what is prefetched and unread is down to about two reads */
	assert_true(f->budget.outstanding <= 2 * MIB);
	/* smaller reads of the same stream: down to the initial window */
	for (; off < 128 * MIB; off += 64 * KIB) {
		rd(f, off, 64 * KIB);
		assert_true(f->prefetched >= off + 64 * KIB);
	}
	assert_true(f->file.stream[0].window == f->cfg.initial_window);
	assert_true(f->stats.pressure_shrinks == 5);	/* 4M .. 128K */
	assert_true(f->budget.outstanding <= 2 * f->cfg.initial_window);
	/* the pressure ends: the window grows again */
	f->budget.pressure.permille = 20;
	for (; off < 160 * MIB; off += MIB) {
		rd(f, off, MIB);
	}
	assert_true(f->file.stream[0].window == 4 * MIB);
}

static void test_pressure_ignored_when_off(void **state)
{
	struct fixture *f = *state;
	uint64_t off;

	/* a threshold of 0: the share ignores memory pressure */
	f->budget.pressure.permille = 1000;
	for (off = 0; off < 64 * MIB; off += MIB) {
		rd(f, off, MIB);
	}
	assert_true(f->file.stream[0].window == 4 * MIB);
	assert_true(f->stats.pressure_shrinks == 0);
}

static void test_pressure_leaves_other_modes_alone(void **state)
{
	struct fixture *f = *state;
	uint64_t off;

	f->cfg.pressure_permille = 100;
	f->budget.pressure.permille = 1000;
	f->cfg.mode = IOTUNE_RA_FIXED;
	f->cfg.fixed_offset = MIB;
	f->cfg.fixed_size = 2 * MIB;
	assert_true(rd(f, MIB, 64 * KIB).prefetch_len == 2 * MIB);
	memset(&f->file, 0, sizeof(f->file));
	f->cfg.mode = IOTUNE_RA_KERNEL;
	f->cfg.drop_behind = true;
	for (off = 0; off < 128 * MIB; off += MIB) {
		rd(f, off, MIB);
	}
	/* drop-behind is no read-ahead: it goes on */
	assert_true(f->stats.drop_bytes > 64 * MIB);
	assert_true(f->stats.pressure_shrinks == 0);
}

int main(void)
{
	const struct CMUnitTest tests[] = {
#define T(name) cmocka_unit_test_setup_teardown(name, setup, teardown)
		T(test_sequential_detected_and_window_grows),
		T(test_out_of_order_forward_reads_stay_sequential),
		T(test_reverse_reads_are_not_sequential),
		T(test_strided_and_random_reads_prefetch_nothing),
		T(test_interleaved_streams_on_one_handle),
		T(test_random_reads_shrink_windows),
		T(test_budget_bounds_outstanding_bytes),
		T(test_drop_behind_never_ahead_of_reader),
		T(test_fixed_mode_prefetches_at_boundaries),
		T(test_off_and_kernel_modes_never_prefetch),
		T(test_client_hints),
		T(test_pressure_samples),
		T(test_pressure_after_idle_gap),
		T(test_pressure_restart),
		T(test_pressure_shrinks_and_regrows_windows),
		T(test_pressure_ignored_when_off),
		T(test_pressure_leaves_other_modes_alone),
		T(test_pressure_peak_of_recent_samples),
		T(test_kernel_first_until_pressure),
		T(test_kernel_first_hands_back_after_calm),
		T(test_kernel_first_not_in_a_limited_cgroup),
		T(test_kernel_first_open_again),
		T(test_kernel_first_open_under_pressure),
		T(test_kernel_first_needs_a_threshold),
		T(test_kernel_first_keeps_random_hint),
#undef T
	};

	return cmocka_run_group_tests_name("readahead", tests, NULL, NULL);
}
