/*
 * libFuzzer target: a sequence of write cache operations decoded from
 * the input (writes small and large, flush pieces of up to
 * IOTUNE_WC_MAX_FLUSHES windows and disk writes that complete late, in
 * any order, or fail, barriers, ticks, synchronous flushes, a lost
 * right to cache), driven like the adapter drives the core.  Every read
 * and, once everything is settled, the file must match a model of the
 * acknowledged writes; nothing may spin (a tick is never due at once).
 * With an input bit the cache takes its window buffers from a pool that
 * the caches of earlier inputs left, full of their bytes: none of those
 * may reach the disk or a read.
 *
 * Copyright (C) iotune authors 2026
 * SPDX-License-Identifier: GPL-3.0-or-later
 */

#include <errno.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "iotune/wcache.h"

#define CAP 4096
#define SPACE (8 * CAP)
#define MAX_OPS 32

static uint8_t disk[SPACE * 2];
static uint64_t disk_size;
static uint8_t model[SPACE * 2];
static uint64_t model_size;
static int fail_next;
static uint64_t now;
static struct iotune_ts disk_mtime;	/* moved by every write */
static struct iotune_ts set_mtime;	/* the last time set */

static struct iotune_ts ts_of(uint64_t ms)
{
	return (struct iotune_ts) { .sec = (int64_t)(ms / 1000),
				    .nsec = (int64_t)(ms % 1000) * 1000000 };
}

static ssize_t fake_pwrite(void *p, const void *buf, size_t n, uint64_t off)
{
	if (fail_next) {
		fail_next = 0;
		errno = ENOSPC;
		return -1;
	}
	if (off > disk_size) {
		memset(disk + disk_size, 0, off - disk_size);
	}
	memcpy(disk + off, buf, n);
	if (off + n > disk_size) {
		disk_size = off + n;
	}
	disk_mtime = ts_of(now);
	return (ssize_t)n;
}

/* a reservation: fails with ENOSPC when reserve_full, else moves the size */
static int reserve_full;

static int fake_reserve(void *p, uint64_t off, uint64_t len)
{
	if (reserve_full) {
		return ENOSPC;
	}
	if (off + len > disk_size) {
		memset(disk + disk_size, 0, off + len - disk_size);
		disk_size = off + len;
	}
	return 0;
}

static const struct iotune_wc_io_ops io = {
	.pwrite = fake_pwrite, .reserve = fake_reserve,
};

/* reserve_async: the calls of the batch on its way, answered or not */
static struct iotune_rsvq_calls rsv;
static unsigned rsv_answered;
static bool launch_at_once;	/* a batch starts as soon as it forms */
static struct iotune_wcache c;
static struct iotune_wc_pool pool;	/* kept from input to input */

/* the batch that waits starts: one batch on its way at a time */
static void launch(void)
{
	struct iotune_rsvq_calls calls;

	iotune_wc_reserve_launch(&c, &calls);
	if (calls.n == 0) {
		return;
	}
	if (rsv_answered != (1u << rsv.n) - 1) {
		abort();
	}
	rsv = calls;
	rsv_answered = 0;
}

struct slot {
	struct iotune_wc_op op;
	uint8_t buf[2 * CAP];
	int on_disk;
};

static struct slot slots[MAX_OPS];
static unsigned piece;	/* flush pieces in flight */
static struct iotune_wc_action pending[IOTUNE_WC_MAX_FLUSHES];
static int wb_on_way;	/* a write-back asked for has not ended */

static void model_write(uint64_t off, const uint8_t *buf, size_t n)
{
	if (n == 0) {
		return;
	}
	if (off > model_size) {
		memset(model + model_size, 0, off - model_size);
	}
	memcpy(model + off, buf, n);
	if (off + n > model_size) {
		model_size = off + n;
	}
}

static void apply(const struct iotune_wc_action *act)
{
	struct iotune_wc_op *op = NULL;
	struct iotune_ts t;

	if (iotune_wc_times_landed(&c, &t)) {
		disk_mtime = t;		/* what the Samba side does */
	}
	if (act->tick_ms != 0 && act->tick_ms <= now) {
		abort();	/* would spin */
	}
	if (act->reserve_due && launch_at_once) {
		launch();
	}
	if (act->writeback_len != 0) {
		uint64_t end = act->writeback_off + act->writeback_len;
		unsigned i;

		if (!c.p.writeback || wb_on_way) {
			abort();	/* not asked to, or a second at once */
		}
		wb_on_way = 1;
		for (i = 0; i < piece; i++) {
			if (pending[i].flush_off < end &&
			    pending[i].flush_off + pending[i].flush_len >
			    act->writeback_off) {
				abort();	/* a piece still on its way */
			}
		}
		/* not the window this action starts (asked after it) */
		for (i = 0; i < c.p.flushes; i++) {
			const struct iotune_wc_buffer *b = &c.fl[i].buf;
			size_t e;

			if (act->flush_io && i == act->flush_slot) {
				continue;
			}
			for (e = 0; e < b->n_ext; e++) {
				if (b->ext[e].off < end &&
				    b->ext[e].off + b->ext[e].len >
				    act->writeback_off) {
					abort();	/* on its way */
				}
			}
		}
	}
	if (act->flush_io) {
		unsigned i;

		for (i = 0; i < piece; i++) {
			if (pending[i].flush_slot == act->flush_slot) {
				abort();	/* one piece per slot at most */
			}
		}
		if (act->flush_slot >= c.p.flushes) {
			abort();
		}
		pending[piece++] = *act;
	}
	while ((op = iotune_wc_next_to_disk(&c)) != NULL) {
		((struct slot *)op->private_data)->on_disk = 1;
	}
	while ((op = iotune_wc_next_done(&c)) != NULL) {
		struct slot *s = op->private_data;

		if (op->kind == IOTUNE_WC_OP_WRITE && op->ret > 0) {
			model_write(op->off, s->buf, (size_t)op->ret);
		}
	}
}

/* writes piece i of those in flight: they may complete in any order */
static void do_piece(unsigned i, int fail)
{
	struct iotune_wc_action act;
	struct iotune_wc_action p = pending[i];
	ssize_t ret;

	piece--;
	memmove(&pending[i], &pending[i + 1], (piece - i) * sizeof(p));
	fail_next = fail;
	ret = fake_pwrite(NULL, p.flush_buf, p.flush_len, p.flush_off);
	iotune_wc_flush_done(&c, p.flush_slot, ret, ret < 0 ? errno : 0, now,
			     &act);
	apply(&act);
}

static void do_disk(struct slot *s)
{
	struct iotune_wc_action act;
	ssize_t ret = fake_pwrite(NULL, s->buf, s->op.n, s->op.off);

	s->on_disk = 0;
	iotune_wc_disk_done(&c, &s->op, ret, 0, now, &act);
	model_write(s->op.off, s->buf, s->op.n);
	apply(&act);
}

/* answers call i of the batch on its way, if it waits */
static void do_reserve(unsigned i, int full)
{
	struct iotune_wc_action act;
	int err;

	if (i >= rsv.n || (rsv_answered & (1u << i)) != 0) {
		return;
	}
	rsv_answered |= 1u << i;
	reserve_full = full;
	err = fake_reserve(NULL, rsv.run[i].off,
			   rsv.run[i].end - rsv.run[i].off);
	reserve_full = 0;
	iotune_wc_reserve_done(&c, i, err, now, &act);
	apply(&act);
}

static bool more_now;	/* requests of the client wait to be read */

static bool more_waiting_now(void *private_data)
{
	return more_now;
}

/*
 * the adapter's way: the core's pace says when (a launch sets how many
 * writes the next batch waits for, and while that is more than one a
 * write that arrives alone is queued too)
 */
static void pace_and_launch(bool more_waiting, bool waited)
{
	struct iotune_rsvq_wait w = {
		.waited_us = waited ? 100 : 0,
		.wait_us = 100,
		.max_wait_us = 2000,
		.more_waiting = more_waiting_now,
	};
	uint64_t after = 0;

	more_now = more_waiting;
	if (iotune_wc_reserve_pace(&c, &w, &after) == IOTUNE_RSVQ_GO) {
		launch();
	}
}

static void settle(void)
{
	int any = 1;

	while (any) {
		size_t i;

		any = 0;
		if (iotune_wc_reserve_due(&c) > 0) {
			launch();
			any = 1;
		}
		for (i = 0; i < rsv.n; i++) {
			if ((rsv_answered & (1u << i)) == 0) {
				do_reserve((unsigned)i, 0);
				any = 1;
			}
		}
		if (piece) {
			do_piece(0, 0);
			any = 1;
		}
		for (i = 0; i < MAX_OPS; i++) {
			if (slots[i].on_disk) {
				do_disk(&slots[i]);
				any = 1;
			}
		}
	}
}

static struct slot *free_slot(void)
{
	size_t i;

	for (i = 0; i < MAX_OPS; i++) {
		enum iotune_wc_op_state st = slots[i].op.state;

		if (st == IOTUNE_WC_OP_IDLE && !slots[i].on_disk) {
			return &slots[i];
		}
	}
	settle();
	return free_slot();
}

static void check_read(uint64_t off, size_t n)
{
	static uint8_t buf[SPACE * 2];
	size_t got_disk = 0;
	size_t got;
	size_t want = 0;
	size_t i;

	if (off < disk_size) {
		got_disk = disk_size - off < n ? disk_size - off : n;
		memcpy(buf, disk + off, got_disk);
	}
	got = iotune_wc_read_overlay(&c, NULL, off, buf, n, got_disk);
	if (off < model_size) {
		want = model_size - off < n ? model_size - off : n;
	}
	if (got < want || memcmp(buf, model + off, want) != 0) {
		abort();
	}
	/* past the model: zeros reserved for writes not acknowledged yet */
	if (got > want && (off + got > disk_size ||
			   !c.p.reserve_async)) {
		abort();
	}
	for (i = want; i < got; i++) {
		if (buf[i] != 0) {
			abort();
		}
	}
}

/* what the next write says of its handle and of reservations */
static bool op_busy;

static void submit(enum iotune_wc_op_kind kind, uint64_t off, size_t n,
		   uint8_t fill, int may_cache)
{
	struct slot *s = free_slot();
	struct iotune_wc_action act;

	memset(s->buf, fill, n);
	s->on_disk = 0;
	s->op = (struct iotune_wc_op) {
		.kind = kind, .may_cache = may_cache, .off = off,
		.data = s->buf, .n = n, .reason = IOTUNE_FLUSH_FSYNC,
		.busy = op_busy,
		.private_data = s,
	};
	iotune_wc_submit(&c, &s->op, now, &act);
	apply(&act);
}

/* smbd sets the mtime: the file's own, or another one */
static void set_times(uint8_t x)
{
	struct iotune_ts t = (x & 1) ? disk_mtime : ts_of(x * 1000ULL);
	struct iotune_wc_action act;

	switch (iotune_wc_times_set(&c, t, disk_mtime)) {
	case IOTUNE_TIMES_FLUSH:
		if (iotune_wc_flush_sync(&c, IOTUNE_FLUSH_TIMES, now,
					 &act) != 0) {
			apply(&act);
			return;		/* the set fails: nothing is set */
		}
		apply(&act);
		break;
	default:
		break;
	}
	disk_mtime = t;
	set_mtime = t;
	iotune_wc_times_pin(&c, t);
}

/* The write-back on its way ends: the core may ask for the next. */
static void wb_end(void)
{
	struct iotune_wc_action act;

	wb_on_way = 0;
	iotune_wc_writeback_done(&c, &act);
	apply(&act);
}

static void step(const uint8_t *d, int *lost)
{
	uint64_t off = ((uint64_t)d[1] << 8 | d[2]) % SPACE;
	size_t n = 1 + (size_t)d[3] * 37 % (CAP + CAP / 2);
	struct iotune_wc_action act;
	size_t i;

	switch (d[0] % 11) {
	case 0: case 1: case 2: case 3:
		op_busy = (d[3] & 0x80) != 0;
		launch_at_once = (d[1] & 0x80) != 0;
		submit(IOTUNE_WC_OP_WRITE, off, n, d[0] ^ d[3], !*lost);
		break;
	case 4:
		if (piece && !(c.p.reserve_async && (d[2] & 1))) {
			do_piece((d[3] >> 1) % piece, d[3] & 1);
		} else if (d[3] & 0x40) {
			pace_and_launch((d[2] & 2) != 0, (d[2] & 4) != 0);
		} else if (rsv.n > 0) {
			do_reserve(d[3] % rsv.n, (d[3] & 0x30) == 0x30);
		}
		break;
	case 5:
		for (i = 0; i < MAX_OPS; i++) {
			if (slots[(d[3] + i) % MAX_OPS].on_disk) {
				do_disk(&slots[(d[3] + i) % MAX_OPS]);
				break;
			}
		}
		break;
	case 6:
		check_read(off, n);
		break;
	case 7:
		submit(IOTUNE_WC_OP_BARRIER, 0, 0, 0, !*lost);
		break;
	case 8:
		if ((d[2] & 1) && wb_on_way) {
			wb_end();
		}
		now += d[3] * 20;
		iotune_wc_tick(&c, now, &act);
		apply(&act);
		break;
	case 10:
		set_times(d[3]);
		break;
	case 9:
		if (piece || *lost || iotune_wc_failed(&c)) {
			break;
		}
		*lost = 1;
		iotune_wc_lose_right(&c, now, &act);
		apply(&act);
		if (iotune_wc_flush_sync(&c, IOTUNE_FLUSH_BREAK, now,
					 &act) != 0) {
			abort();
		}
		apply(&act);
		break;
	}
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
	struct iotune_wc_stats stats = { 0 };
	struct iotune_wc_params params = {
		.capacity = CAP, .timeout_ms = 1000,
		/* windows on their way to disk at once, from the input */
		.flushes = size > 0 ? 1 + data[0] % IOTUNE_WC_MAX_FLUSHES : 1,
		/* reservations in batches or inline */
		.reserve_async = size > 0 && (data[0] & 0x10) != 0,
		/* write-backs asked for the windows written, or not */
		.writeback = size > 0 && (data[0] & 0x20) != 0,
		/* buffers earlier inputs' caches left, or fresh ones */
		.pool = size > 0 && (data[0] & 0x40) != 0 ? &pool : NULL,
	};
	struct iotune_wc_action act;
	int lost = 0;
	size_t i;

	disk_size = model_size = 0;
	disk_mtime = set_mtime = IOTUNE_TS_NONE;
	fail_next = 0;
	piece = 0;
	wb_on_way = 0;
	rsv.n = 0;
	rsv_answered = 0;
	now = 1;
	memset(slots, 0, sizeof(slots));
	iotune_wc_init(&c, &params, 0, &io, &stats);
	for (i = 0; i + 4 <= size; i += 4) {
		step(data + i, &lost);
	}
	settle();
	while (iotune_wc_is_dirty(&c)) {
		now += 100000;
		iotune_wc_tick(&c, now, &act);
		apply(&act);
		settle();
	}
	(void)iotune_wc_take_error(&c);
	if (!iotune_wc_idle(&c)) {
		abort();
	}
	if (disk_size < model_size || memcmp(disk, model, model_size) != 0) {
		abort();
	}
	/*
	 * Past the model only zeros reserved for writes that then failed
	 * (an earlier flush's error went to them while their batch was on
	 * its way): a batch's calls cannot be taken back.
	 */
	for (i = model_size; i < disk_size; i++) {
		if (disk[i] != 0 || !params.reserve_async) {
			abort();
		}
	}
	/* every time set is the file's time once all data landed */
	if (!iotune_ts_is_none(set_mtime) &&
	    iotune_ts_cmp(disk_mtime, set_mtime) != 0) {
		abort();
	}
	iotune_wc_destroy(&c);
	return 0;
}
