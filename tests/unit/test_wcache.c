/*
 * Unit tests of iotune's write cache core: its queue, flushes, errors,
 * lost right to cache and reservations, against a fake disk, a fake clock
 * and a fake adapter that performs the actions the core asks for, when
 * the test says so.  malloc and mmap are wrapped (-Wl,--wrap)
 * to inject allocation failures.
 *
 * Copyright (C) iotune authors 2026
 * SPDX-License-Identifier: GPL-3.0-or-later
 */

#include <errno.h>
#include <sys/mman.h>
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
#define BLOCK (4 * KIB)		/* the fake disk's allocation unit */
#define MAX_OPS 64

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

void *__real_mmap(void *addr, size_t len, int prot, int flags, int fd,
		  off_t off);

/* the windows' buffers (mapped pages) fail like malloc (fail_mallocs) */
void *__wrap_mmap(void *addr, size_t len, int prot, int flags, int fd,
		  off_t off)
{
	if (fail_mallocs > 0) {
		fail_mallocs--;
		errno = ENOMEM;
		return MAP_FAILED;
	}
	return __real_mmap(addr, len, prot, flags, fd, off);
}

/*
 * A file on a fake disk of `limit` bytes: writes past it are short or
 * fail with ENOSPC, and so do reservations; pwrite can be told to fail.
 */
struct fake_disk {
	uint8_t data[DISK_MAX];
	uint64_t size;
	uint64_t limit;
	unsigned writes;
	int fail_errno;		/* next pwrites fail with this */
	unsigned fail_count;	/* ... this many times */
	size_t short_by;	/* next pwrite writes this much less */
	unsigned eintr_count;	/* next pwrites fail with EINTR */
	int reserve_errno;	/* reservations fail with this */
	unsigned reserves;
	uint64_t reserved_lo;	/* the last reservation */
	uint64_t reserved_hi;
	uint8_t alloc[DISK_MAX / BLOCK];	/* blocks reserved */
	uint8_t written[DISK_MAX / BLOCK];	/* blocks written to */
};

static void mark_blocks(uint8_t *map, uint64_t off, uint64_t end)
{
	uint64_t b;

	for (b = off / BLOCK; b * BLOCK < end; b++) {
		map[b] = 1;
	}
}

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
	if (off + n > d->limit) {
		if (off >= d->limit) {
			errno = ENOSPC;
			return -1;
		}
		n = d->limit - off;
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
	mark_blocks(d->written, off, off + n);
	if (off + n > d->size) {
		d->size = off + n;
	}
	d->writes++;
	return (ssize_t)n;
}

static int fake_reserve(void *private_data, uint64_t off, uint64_t len)
{
	struct fake_disk *d = private_data;

	d->reserves++;
	if (d->reserve_errno != 0) {
		return d->reserve_errno;
	}
	if (off + len > d->limit) {
		return ENOSPC;
	}
	d->reserved_lo = off;
	d->reserved_hi = off + len;
	mark_blocks(d->alloc, off, off + len);
	if (off + len > d->size) {
		/* like fallocate without KEEP_SIZE: the size moves, zeros */
		memset(d->data + d->size, 0, off + len - d->size);
		d->size = off + len;
	}
	return 0;
}

/* No block was reserved that the data written does not cover */
static void assert_reserved_only_written(const struct fake_disk *d)
{
	size_t b;

	for (b = 0; b < DISK_MAX / BLOCK; b++) {
		if (d->alloc[b] && !d->written[b]) {
			fail_msg("block %zu reserved, never written", b);
		}
	}
}

/* A client request and its data */
struct w {
	struct iotune_wc_op op;
	uint8_t buf[2 * CAP];
	bool done;		/* completed: op.ret / op.err */
	bool on_disk;		/* the core sent it to disk; the test writes */
	bool copying;		/* the core left its copy to the test */
};

struct fixture {
	struct fake_disk disk;
	struct iotune_wc_stats stats;
	struct iotune_wcache c;
	struct iotune_wc_io_ops io;
	uint64_t now;
	unsigned piece;		/* flush pieces waiting to be written */
	struct {
		unsigned slot;
		uint64_t off;
		const uint8_t *buf;
		size_t len;
	} pieces[IOTUNE_WC_MAX_FLUSHES];	/* oldest first */
	uint64_t tick;		/* the last tick asked for */
	unsigned logged;
	unsigned log_repeats;
	uint64_t dropped;
	bool cannot_reserve;
	bool busy;		/* writes say other requests are in flight */
	unsigned n_rsv;		/* reserve_async: the calls of a batch */
	struct iotune_rsvq_range rsv[IOTUNE_RSVQ_RUNS];
	bool rsv_done[IOTUNE_RSVQ_RUNS];	/* ... answered */
	unsigned batches;	/* batches started */
	bool auto_launch;	/* a batch starts as soon as it forms */
	unsigned writebacks;	/* write-backs asked for */
	bool wb_on_way;		/* ... one is, not ended yet */
	bool wb_hold;		/* ... stays so until wb_end() */
	uint64_t wb_off;	/* ... the last one's range */
	uint64_t wb_len;
	struct iotune_wc_pool pool;	/* for caches made with one */
	struct w w[MAX_OPS];
	uint8_t model[DISK_MAX];
	uint64_t model_size;
};

/* every fixture asks for write-backs but one (setup_no_writeback) */
static int setup_wb(void **state, uint64_t copy_size, unsigned flushes,
		    bool reserve_async, bool writeback)
{
	struct fixture *f = calloc(1, sizeof(*f));
	struct iotune_wc_params p = {
		.capacity = CAP, .timeout_ms = 1000,
		.copy_size = copy_size, .flushes = flushes,
		.reserve_async = reserve_async, .writeback = writeback,
	};

	assert_non_null(f);
	f->busy = copy_size != 0;
	f->disk.limit = DISK_MAX;
	f->io = (struct iotune_wc_io_ops) {
		.pwrite = fake_pwrite,
		.reserve = fake_reserve,
		.private_data = &f->disk,
	};
	f->now = 1000;
	assert_int_equal(iotune_wc_init(&f->c, &p, 0, &f->io, &f->stats), 0);
	fail_mallocs = 0;
	*state = f;
	return 0;
}

static int setup_all(void **state, uint64_t copy_size, unsigned flushes,
		     bool reserve_async)
{
	return setup_wb(state, copy_size, flushes, reserve_async, true);
}

static int setup_no_writeback(void **state)
{
	return setup_wb(state, 0, 1, false, false);
}

static int setup_params(void **state, uint64_t copy_size, unsigned flushes)
{
	return setup_all(state, copy_size, flushes, false);
}

static int setup(void **state)
{
	return setup_params(state, 0, 1);
}

/* reservations in batches; writes say other requests are in flight */
static int setup_async(void **state)
{
	int ret = setup_all(state, 0, 2, true);

	((struct fixture *)*state)->busy = true;
	((struct fixture *)*state)->auto_launch = true;
	return ret;
}

/* writes of 16 KiB and more are copied by the caller (the thread pool) */
static int setup_copies(void **state)
{
	return setup_params(state, 16 * KIB, 1);
}

/* three windows may be on their way to disk at once */
static int setup_flushes(void **state)
{
	return setup_params(state, 0, 3);
}

static int teardown(void **state)
{
	struct fixture *f = *state;

	iotune_wc_destroy(&f->c);
	iotune_wc_pool_free(&f->pool);
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

static void model_write(struct fixture *f, uint64_t off, const void *buf,
			size_t n)
{
	if (n == 0) {
		return;
	}
	if (off > f->model_size) {
		memset(f->model + f->model_size, 0, off - f->model_size);
	}
	memcpy(f->model + off, buf, n);
	if (off + n > f->model_size) {
		f->model_size = off + n;
	}
}

/* every byte acknowledged was reserved for the cache, or is on disk */
static void assert_reserved_or_written(const struct fake_disk *d,
				       uint64_t off, uint64_t end)
{
	uint64_t b;

	for (b = off / BLOCK; b * BLOCK < end; b++) {
		if (!d->alloc[b] && !d->written[b]) {
			fail_msg("block %llu acknowledged, not reserved",
				 (unsigned long long)b);
		}
	}
}

static void op_finished(struct fixture *f, struct w *w)
{
	w->done = true;
	if (w->op.kind == IOTUNE_WC_OP_WRITE && w->op.ret > 0) {
		assert_reserved_or_written(&f->disk, w->op.off,
					   w->op.off + (uint64_t)w->op.ret);
		model_write(f, w->op.off, w->op.data, (size_t)w->op.ret);
	}
}

/* a batch's calls start: one batch on its way at a time */
static void take_reservations(struct fixture *f,
			      const struct iotune_rsvq_calls *calls);

/* the batch that waits starts */
static void launch(struct fixture *f)
{
	struct iotune_rsvq_calls calls;

	iotune_wc_reserve_launch(&f->c, &calls);
	take_reservations(f, &calls);
}

static void take_reservations(struct fixture *f,
			      const struct iotune_rsvq_calls *calls)
{
	unsigned i;

	if (calls->n == 0) {
		return;
	}
	for (i = 0; i < f->n_rsv; i++) {
		assert_true(f->rsv_done[i]);
	}
	assert_true(f->c.p.reserve_async);
	f->n_rsv = calls->n;
	for (i = 0; i < calls->n; i++) {
		f->rsv[i] = calls->run[i];
		f->rsv_done[i] = false;
	}
	f->batches++;
}

/*
 * A write-back is asked for bytes that are written (the range's first
 * and last, unless a lost right dropped some), never for a piece still
 * on its way, never while another is on its way, and never when the
 * cache was not asked to.
 */
static void take_writeback(struct fixture *f,
			   const struct iotune_wc_action *act)
{
	uint64_t end = act->writeback_off + act->writeback_len;
	unsigned i;

	if (act->writeback_len == 0) {
		return;
	}
	assert_true(f->c.p.writeback);
	if (act->dropped == 0) {
		assert_true(f->disk.written[act->writeback_off / BLOCK]);
		assert_true(f->disk.written[(end - 1) / BLOCK]);
	}
	for (i = 0; i < f->piece; i++) {
		assert_true(f->pieces[i].off + f->pieces[i].len <=
			    act->writeback_off || f->pieces[i].off >= end);
	}
	assert_false(f->wb_on_way);
	f->wb_on_way = true;
	f->writebacks++;
	f->wb_off = act->writeback_off;
	f->wb_len = act->writeback_len;
}

static void apply(struct fixture *f, const struct iotune_wc_action *act);

/* The write-back on its way has ended: the next may be asked for. */
static void wb_end(struct fixture *f)
{
	struct iotune_wc_action act;

	assert_true(f->wb_on_way);
	f->wb_on_way = false;
	iotune_wc_writeback_done(&f->c, &act);
	apply(f, &act);
}

/* The fake adapter: does what the core asks, or keeps it for later. */
static void apply(struct fixture *f, const struct iotune_wc_action *act)
{
	struct iotune_wc_op *op = NULL;

	take_writeback(f, act);
	f->tick = act->tick_ms;
	if (act->tick_ms != 0) {
		assert_true(act->tick_ms > f->now);	/* never spins */
	}
	if (act->log_err != 0) {
		f->logged++;
		f->log_repeats += act->log_repeats;
	}
	f->dropped += act->dropped;
	f->cannot_reserve |= act->cannot_reserve;
	if (act->reserve_due && f->auto_launch) {
		launch(f);
	}
	if (act->flush_io) {
		unsigned i;

		/* one piece in flight per slot at most */
		assert_true(act->flush_slot < f->c.p.flushes);
		for (i = 0; i < f->piece; i++) {
			assert_int_not_equal(f->pieces[i].slot,
					     act->flush_slot);
		}
		f->pieces[f->piece].slot = act->flush_slot;
		f->pieces[f->piece].off = act->flush_off;
		f->pieces[f->piece].buf = act->flush_buf;
		f->pieces[f->piece].len = act->flush_len;
		f->piece++;
	}
	while ((op = iotune_wc_next_to_disk(&f->c)) != NULL) {
		assert_int_equal(op->state, IOTUNE_WC_OP_ON_DISK);
		((struct w *)op->private_data)->on_disk = true;
	}
	while ((op = iotune_wc_next_to_copy(&f->c)) != NULL) {
		assert_int_equal(op->state, IOTUNE_WC_OP_COPYING);
		((struct w *)op->private_data)->copying = true;
	}
	while ((op = iotune_wc_next_done(&f->c)) != NULL) {
		assert_int_equal(op->state, IOTUNE_WC_OP_IDLE);
		op_finished(f, op->private_data);
	}
	if (f->wb_on_way && !f->wb_hold) {
		wb_end(f);		/* at once, unless a test holds it */
	}
}

static struct w *new_write(struct fixture *f, uint64_t off, size_t n,
			   unsigned seed, bool may_cache)
{
	struct w *w = NULL;
	size_t i;

	for (i = 0; i < MAX_OPS; i++) {
		enum iotune_wc_op_state st = f->w[i].op.state;

		if (st == IOTUNE_WC_OP_IDLE && !f->w[i].on_disk &&
		    !f->w[i].copying) {
			w = &f->w[i];
			break;
		}
	}
	assert_non_null(w);
	assert_true(n <= sizeof(w->buf));
	*w = (struct w) { 0 };
	fill(w->buf, n, seed);
	w->op = (struct iotune_wc_op) {
		.kind = IOTUNE_WC_OP_WRITE, .may_cache = may_cache,
		.busy = f->busy,
		.off = off, .data = w->buf, .n = n, .private_data = w,
	};
	return w;
}

static struct w *submit(struct fixture *f, struct w *w)
{
	struct iotune_wc_action act;

	iotune_wc_submit(&f->c, &w->op, f->now, &act);
	apply(f, &act);
	return w;
}

static struct w *write_at(struct fixture *f, uint64_t off, size_t n,
			  unsigned seed)
{
	return submit(f, new_write(f, off, n, seed, true));
}

static struct w *barrier(struct fixture *f, enum iotune_flush_reason reason)
{
	struct w *w = new_write(f, 0, 0, 0, true);

	w->op.kind = IOTUNE_WC_OP_BARRIER;
	w->op.reason = reason;
	return submit(f, w);
}

/* Writes waiting flush piece i on the fake disk. */
static void do_piece_at(struct fixture *f, unsigned i)
{
	struct iotune_wc_action act;
	unsigned slot = f->pieces[i].slot;
	ssize_t ret;

	assert_true(i < f->piece);
	errno = 0;
	ret = fake_pwrite(&f->disk, f->pieces[i].buf, f->pieces[i].len,
			  f->pieces[i].off);
	f->piece--;
	memmove(&f->pieces[i], &f->pieces[i + 1],
		(f->piece - i) * sizeof(f->pieces[0]));
	iotune_wc_flush_done(&f->c, slot, ret, ret < 0 ? errno : 0, f->now,
			     &act);
	apply(f, &act);
}

/* Makes reservation call i of the batch on its way (err: it fails so) */
static void do_reserve_err(struct fixture *f, unsigned i, int err)
{
	struct iotune_wc_action act;
	int ret = err;

	assert_true(i < f->n_rsv && !f->rsv_done[i]);
	f->rsv_done[i] = true;
	if (ret == 0) {
		ret = fake_reserve(&f->disk, f->rsv[i].off,
				   f->rsv[i].end - f->rsv[i].off);
	}
	iotune_wc_reserve_done(&f->c, i, ret, f->now, &act);
	apply(f, &act);
}

/* a call waits for its answer: its number, or -1 */
static int reserve_waiting(const struct fixture *f)
{
	unsigned i;

	for (i = 0; i < f->n_rsv; i++) {
		if (!f->rsv_done[i]) {
			return (int)i;
		}
	}
	return -1;
}

/* Answers the reservations on their way, batch after batch */
static void do_reserves(struct fixture *f)
{
	int i;

	while ((i = reserve_waiting(f)) >= 0) {
		do_reserve_err(f, (unsigned)i, 0);
	}
}

/* Writes the oldest waiting flush piece on the fake disk. */
static void do_piece(struct fixture *f)
{
	do_piece_at(f, 0);
}

/* Writes an op the core sent to disk. */
static void do_disk(struct fixture *f, struct w *w)
{
	struct iotune_wc_action act;
	ssize_t ret;

	assert_true(w->on_disk);
	w->on_disk = false;
	errno = 0;
	ret = fake_pwrite(&f->disk, w->op.data, w->op.n, w->op.off);
	iotune_wc_disk_done(&f->c, &w->op, ret, ret < 0 ? errno : 0, f->now,
			    &act);
	op_finished(f, w);
	apply(f, &act);
}

/* Does the copy of an op the core left to the caller. */
static void do_copy(struct fixture *f, struct w *w)
{
	struct iotune_wc_action act;

	assert_true(w->copying);
	w->copying = false;
	memcpy(w->op.copy_dst, w->op.data, w->op.n);
	iotune_wc_copy_done(&f->c, &w->op, f->now, &act);
	apply(f, &act);
}

/* Does everything that waits, oldest first, until nothing is left. */
static void settle(struct fixture *f)
{
	bool any = true;

	while (any) {
		size_t i;

		any = false;
		if (iotune_wc_reserve_due(&f->c) > 0) {
			launch(f);
			any = true;
		}
		if (reserve_waiting(f) >= 0) {
			do_reserves(f);
			any = true;
		}
		if (f->piece) {
			do_piece(f);
			any = true;
		}
		for (i = 0; i < MAX_OPS; i++) {
			if (f->w[i].copying) {
				do_copy(f, &f->w[i]);
				any = true;
			}
			if (f->w[i].on_disk) {
				do_disk(f, &f->w[i]);
				any = true;
			}
		}
	}
}

static void tick_at(struct fixture *f, uint64_t now)
{
	struct iotune_wc_action act;

	f->now = now;
	iotune_wc_tick(&f->c, now, &act);
	apply(f, &act);
}

static int flush_sync(struct fixture *f, enum iotune_flush_reason reason)
{
	struct iotune_wc_action act;
	int err;

	err = iotune_wc_flush_sync(&f->c, reason, f->now, &act);
	apply(f, &act);
	return err;
}

/* macros, so that a failure names the line of the test */
#define assert_done(x, want)						\
	do {								\
		const struct w *w_ = (x);				\
									\
		assert_true(w_->done);					\
		assert_int_equal(w_->op.ret, (want));			\
	} while (0)

#define assert_failed(x, want)						\
	do {								\
		const struct w *w_ = (x);				\
									\
		assert_true(w_->done);					\
		assert_int_equal(w_->op.ret, -1);			\
		assert_int_equal(w_->op.err, (want));			\
	} while (0)

static void assert_disk_is_model(struct fixture *f)
{
	assert_int_equal(f->disk.size, f->model_size);
	assert_memory_equal(f->disk.data, f->model, f->model_size);
}

/* a close writes everything, and the file is the model */
#define assert_closes_to_model(f)					\
	do {								\
		assert_int_equal(flush_sync((f), IOTUNE_FLUSH_CLOSE), 0); \
		assert_disk_is_model(f);				\
	} while (0)

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
	/* past the model: what writes not yet acknowledged reserved */
	assert_true(got >= want && (got == want || off + got <= f->disk.size));
	assert_memory_equal(buf, f->model + off, want);
	free(buf);
}

/* Fills the window at base with two writes of half its size */
static void fill_window(struct fixture *f, uint64_t base, unsigned seed)
{
	assert_done(write_at(f, base, CAP / 2, 2 * seed), CAP / 2);
	assert_done(write_at(f, base + CAP / 2, CAP / 2, 2 * seed + 1),
		    CAP / 2);
}

static void test_sequential_writes_coalesce_into_one_flush(void **state)
{
	struct fixture *f = *state;
	uint64_t off;

	for (off = 0; off < CAP; off += 4 * KIB) {
		assert_done(write_at(f, off, 4 * KIB, (unsigned)off), 4 * KIB);
	}
	/* the window is full: its flush starts at once, in one piece */
	assert_true(f->piece);
	assert_int_equal(f->pieces[0].off, 0);
	assert_int_equal(f->pieces[0].len, CAP);
	assert_int_equal(f->stats.flushes[IOTUNE_FLUSH_FULL], 1);
	settle(f);
	assert_int_equal(f->disk.writes, 1);
	assert_disk_is_model(f);
	assert_int_equal(f->stats.writes_cached, 16);
	assert_int_equal(f->stats.bytes_absorbed, CAP);
	assert_true(iotune_wc_idle(&f->c));
}

static void test_out_of_order_and_overlapping_writes(void **state)
{
	struct fixture *f = *state;

	write_at(f, 8 * KIB, 4 * KIB, 1);
	write_at(f, 0, 4 * KIB, 2);
	write_at(f, 2 * KIB, 8 * KIB, 3);	/* overlaps both */
	write_at(f, 40 * KIB, 100, 4);
	assert_int_equal(f->c.active.n_ext, 2);
	assert_reads_model(f, 0, 64 * KIB);
	assert_int_equal(flush_sync(f, IOTUNE_FLUSH_CLOSE), 0);
	assert_int_equal(f->disk.writes, 2);
	assert_disk_is_model(f);
}

static void test_writes_wait_behind_a_flush_in_order(void **state)
{
	struct fixture *f = *state;
	struct w *a = NULL;
	struct w *b = NULL;

	write_at(f, 0, 4 * KIB, 1);
	/* outside the window: the active buffer goes to flush first */
	a = write_at(f, 10 * CAP, 4 * KIB, 2);
	assert_done(a, 4 * KIB);
	assert_true(f->piece);
	assert_int_equal(f->stats.flushes[IOTUNE_FLUSH_NONCONTIG], 1);
	/* another window while that flush is in flight: it waits */
	b = write_at(f, 20 * CAP, 4 * KIB, 3);
	assert_false(b->done);
	/* and so does everything behind it, even what would fit */
	a = write_at(f, 10 * CAP + 4 * KIB, 4 * KIB, 4);
	assert_false(a->done);
	do_piece(f);
	assert_done(b, 4 * KIB);
	/* its window went to flush for b's: it waits for that one */
	assert_false(a->done);
	do_piece(f);
	assert_done(a, 4 * KIB);
	settle(f);
	assert_closes_to_model(f);
}

static void test_window_sized_writes_pass_straight_through(void **state)
{
	struct fixture *f = *state;
	struct w *a = NULL;
	struct w *b = NULL;

	/* a write of the window's size is not copied */
	a = write_at(f, 0, CAP, 1);
	assert_true(a->on_disk);
	assert_false(a->done);
	/* a second one is sent too: a stream is not serialized */
	b = write_at(f, CAP, CAP, 2);
	assert_true(b->on_disk);
	do_disk(f, b);
	do_disk(f, a);
	assert_done(a, CAP);
	assert_int_equal(f->stats.writes_bypassed, 2);
	assert_int_equal(f->stats.bytes_absorbed, 0);
	assert_disk_is_model(f);
}

/* The caller makes no cache for a write that a cache would not keep */
static void test_would_keep_below_the_bypass_size(void **state)
{
	struct iotune_wc_params p = { .capacity = CAP, .bypass_size = 0 };

	(void)state;
	/* no bypass size, or one past the window: the window's size */
	assert_true(iotune_wc_would_keep(&p, 0, CAP - 1));
	assert_false(iotune_wc_would_keep(&p, 0, CAP));
	p.bypass_size = 2 * CAP;
	assert_false(iotune_wc_would_keep(&p, 0, CAP));
	p.bypass_size = 16 * KIB;
	assert_true(iotune_wc_would_keep(&p, 8 * CAP, 16 * KIB - 1));
	assert_false(iotune_wc_would_keep(&p, 8 * CAP, 16 * KIB));
	/* an end past the largest offset is for the disk to refuse */
	assert_false(iotune_wc_would_keep(&p, UINT64_MAX - 10, 4 * KIB));
}

static void test_large_write_goes_after_the_dirty_data_it_overlaps(
	void **state)
{
	struct fixture *f = *state;
	struct w *big = NULL;

	write_at(f, 100, 4 * KIB, 1);
	big = write_at(f, 0, CAP + 1, 2);
	assert_false(big->on_disk);
	assert_true(f->piece);	/* the overlapped data goes first */
	assert_int_equal(f->stats.flushes[IOTUNE_FLUSH_BYPASS], 1);
	do_piece(f);
	assert_true(big->on_disk);
	do_disk(f, big);
	assert_done(big, CAP + 1);
	assert_disk_is_model(f);
}

static void test_small_write_waits_for_overlapping_disk_write(void **state)
{
	struct fixture *f = *state;
	struct w *big = NULL;
	struct w *small = NULL;

	big = write_at(f, 0, CAP, 1);
	assert_true(big->on_disk);
	small = write_at(f, 10, 10, 2);
	assert_false(small->done);	/* it must land after the big one */
	do_disk(f, big);
	assert_done(small, 10);
	assert_closes_to_model(f);
}

static void test_barrier_waits_for_older_data(void **state)
{
	struct fixture *f = *state;
	struct w *b = NULL;
	struct w *later = NULL;

	write_at(f, 0, 100, 1);
	b = barrier(f, IOTUNE_FLUSH_FSYNC);
	assert_false(b->done);
	assert_int_equal(f->stats.flushes[IOTUNE_FLUSH_FSYNC], 1);
	later = write_at(f, 200, 100, 2);
	assert_false(later->done);	/* behind the barrier */
	assert_int_equal(f->disk.writes, 0);
	do_piece(f);
	assert_done(b, 0);
	assert_done(later, 100);
	assert_int_equal(f->disk.writes, 1);	/* later is cached */
	/* nothing dirty: at once */
	b = barrier(f, IOTUNE_FLUSH_OFFLOAD);
	assert_false(b->done);
	settle(f);
	assert_done(b, 0);
	b = barrier(f, IOTUNE_FLUSH_OFFLOAD);
	assert_done(b, 0);
}

/*
 * A failing disk: the flush fails and its data stays; every later write
 * first retries the old data and fails with the error when the retry
 * fails, so nothing more is acknowledged and nothing spins; once the
 * disk works again, everything is written in order.
 */
static void test_failing_disk_fails_writes_without_spinning(void **state)
{
	struct fixture *f = *state;
	struct w *w = NULL;
	uint64_t off;
	unsigned i;

	for (off = 0; off < CAP; off += 4 * KIB) {
		write_at(f, off, 4 * KIB, (unsigned)off);
	}
	f->disk.fail_errno = ENOSPC;
	f->disk.fail_count = 1000;
	do_piece(f);
	assert_int_equal(f->stats.flush_errors, 1);
	assert_int_equal(f->logged, 1);
	assert_int_equal(f->tick, f->now + 100);	/* backoff */
	for (i = 0; i < 20; i++) {
		w = write_at(f, CAP + i * 4 * KIB, 4 * KIB, i);
		assert_false(w->done);	/* the old data is retried first */
		assert_true(f->piece);
		do_piece(f);
		assert_failed(w, ENOSPC);
	}
	assert_int_equal(f->stats.flushes[IOTUNE_FLUSH_RETRY], 20);
	assert_int_equal(f->stats.writes_failed, 20);
	assert_int_equal(f->logged, 1);	/* rate-limited */
	assert_int_equal(f->stats.bytes_absorbed, CAP);
	/* the retry timer backs off, up to its maximum */
	assert_int_equal(f->tick, f->now + 10000);
	/* a barrier fails the same way; the data is still kept */
	w = barrier(f, IOTUNE_FLUSH_FSYNC);
	do_piece(f);
	assert_failed(w, ENOSPC);
	assert_true(iotune_wc_is_dirty(&f->c));
	/* the disk works again: a timed retry writes it, writes go on */
	f->disk.fail_count = 0;
	f->now += 20000;
	tick_at(f, f->now);
	assert_true(f->piece);
	do_piece(f);
	assert_false(iotune_wc_is_dirty(&f->c));
	w = write_at(f, CAP, 4 * KIB, 7);
	assert_done(w, 4 * KIB);
	assert_closes_to_model(f);
	/* nothing was dropped, so there is nothing to report */
	assert_int_equal(iotune_wc_take_error(&f->c), 0);
	/* a line says how many failures were not logged */
	f->disk.fail_errno = EIO;
	f->disk.fail_count = 1;
	write_at(f, 0, 1, 1);
	assert_int_equal(flush_sync(f, IOTUNE_FLUSH_FSYNC), EIO);
	assert_int_equal(f->logged, 2);
	assert_int_equal(f->log_repeats, 21);
}

/*
 * A synchronous flush fails while a write waits for a write on its way
 * to disk: it returns with no piece in flight (a close ends the cache
 * next), and the waiting write retries when the disk write lands.
 */
static void test_failed_sync_flush_leaves_nothing_in_flight(void **state)
{
	struct fixture *f = *state;
	struct w *big = NULL;
	struct w *small = NULL;

	write_at(f, 0, 100, 1);
	big = write_at(f, 2 * CAP, CAP, 2);
	assert_true(big->on_disk);
	small = write_at(f, 2 * CAP + 10, 10, 3);
	assert_false(small->done);		/* behind the big one */
	f->disk.fail_errno = EIO;
	f->disk.fail_count = 1;
	assert_int_equal(flush_sync(f, IOTUNE_FLUSH_CLOSE), EIO);
	assert_int_equal(f->piece, 0);
	assert_false(iotune_wc_flush_in_flight(&f->c));
	assert_true(f->tick > f->now);		/* the retry's time */
	do_disk(f, big);
	assert_int_equal(f->piece, 1);		/* the small write retries */
	settle(f);
	assert_done(small, 10);
	assert_closes_to_model(f);
}

/*
 * A flush fails while the next window is full: the full window does not
 * retry the failed data at once (that would spin while the disk keeps
 * failing); the write that waited fails, and the retry comes at its time.
 */
static void test_failure_with_full_window_waits_for_its_retry(void **state)
{
	struct fixture *f = *state;
	struct w *w = NULL;

	fill_window(f, 0, 1);			/* goes to disk */
	fill_window(f, CAP, 2);			/* full, behind it */
	w = write_at(f, 2 * CAP, 100, 3);	/* waits */
	assert_false(w->done);
	f->disk.fail_errno = EIO;
	f->disk.fail_count = 1;
	do_piece(f);
	assert_int_equal(f->piece, 0);		/* no retry at once */
	assert_failed(w, EIO);
	assert_true(f->tick > f->now);
	tick_at(f, f->tick);
	assert_int_equal(f->piece, 1);		/* the retry, at its time */
	settle(f);
	assert_closes_to_model(f);
}

/* 100 bytes are cached, and their timed flush fails with err */
static void fail_timed_flush(struct fixture *f, int err, unsigned count)
{
	write_at(f, 0, 100, 1);
	f->disk.fail_errno = err;
	f->disk.fail_count = count;
	tick_at(f, f->now + 1000);
	do_piece(f);
}

/*
 * Write-back: once all of a window is written, and only then, the core
 * asks once for the write-back of the window's bytes (its first extent
 * to its last); take_writeback() checks that they are written.
 */
static void test_written_window_asks_for_its_writeback(void **state)
{
	struct fixture *f = *state;
	struct w *w = NULL;

	write_at(f, 4 * KIB, 4 * KIB, 1);
	write_at(f, 40 * KIB, 100, 2);
	w = barrier(f, IOTUNE_FLUSH_FSYNC);
	assert_int_equal(f->piece, 1);
	do_piece(f);			/* the first extent lands */
	assert_int_equal(f->piece, 1);
	assert_int_equal(f->writebacks, 0);
	do_piece(f);			/* the last one */
	assert_done(w, 0);
	assert_int_equal(f->writebacks, 1);
	assert_int_equal(f->wb_off, 4 * KIB);
	assert_int_equal(f->wb_len, 36 * KIB + 100);
	settle(f);
	assert_closes_to_model(f);
	assert_int_equal(f->writebacks, 1);	/* nothing more was written */
}

/* A failed flush asks for nothing; its retry, once written, does. */
static void test_failed_window_asks_after_its_retry(void **state)
{
	struct fixture *f = *state;

	fail_timed_flush(f, EIO, 1);
	assert_int_equal(f->stats.flush_errors, 1);
	assert_int_equal(f->writebacks, 0);
	tick_at(f, f->tick);		/* the retry, at its time */
	assert_int_equal(f->piece, 1);
	assert_int_equal(f->writebacks, 0);
	do_piece(f);
	assert_int_equal(f->writebacks, 1);
	assert_int_equal(f->wb_off, 0);
	assert_int_equal(f->wb_len, 100);
	assert_disk_is_model(f);
}

/* A synchronous flush (a close) asks too, for what it wrote. */
static void test_sync_flush_asks_for_what_it_wrote(void **state)
{
	struct fixture *f = *state;

	write_at(f, CAP + 8 * KIB, 4 * KIB, 1);
	assert_closes_to_model(f);
	assert_int_equal(f->writebacks, 1);
	assert_int_equal(f->wb_off, CAP + 8 * KIB);
	assert_int_equal(f->wb_len, 4 * KIB);
}

/* Nothing is asked of a cache that was not asked to. */
static void test_no_writeback_unless_asked(void **state)
{
	struct fixture *f = *state;

	fill_window(f, 0, 1);
	settle(f);
	write_at(f, CAP, 100, 2);
	assert_closes_to_model(f);
	assert_int_equal(f->stats.flush_writes, 2);
	assert_int_equal(f->writebacks, 0);
}

/*
 * A write that arrives while a retry started by the timer is in flight
 * waits for that retry, and fails with it: on a failing disk nothing
 * more is acknowledged.
 */
static void test_write_during_a_timed_retry_waits_for_it(void **state)
{
	struct fixture *f = *state;
	struct w *w = NULL;

	fail_timed_flush(f, EIO, 2);
	tick_at(f, f->tick);		/* the retry, at its time */
	assert_int_equal(f->piece, 1);
	w = write_at(f, CAP, 100, 2);
	assert_false(w->done);
	do_piece(f);			/* the retry fails */
	assert_failed(w, EIO);
	settle(f);
	assert_closes_to_model(f);
}

/* A retry that works: the write waiting for it goes on, no error */
static void test_retry_that_works_reports_nothing(void **state)
{
	struct fixture *f = *state;
	struct w *w = NULL;

	fail_timed_flush(f, ENOSPC, 1);
	assert_true(iotune_wc_is_dirty(&f->c));
	w = barrier(f, IOTUNE_FLUSH_FSYNC);	/* SMB2 FLUSH: retried */
	do_piece(f);
	assert_done(w, 0);
	assert_disk_is_model(f);
}

/*
 * Writes [from, to) in 4 KiB writes, each settled; returns the end of the
 * last one acknowledged (or acked, if none was).
 */
static uint64_t stream_4k(struct fixture *f, uint64_t from, uint64_t to,
			  uint64_t acked)
{
	uint64_t off;

	for (off = from; off < to; off += 4 * KIB) {
		struct w *w = write_at(f, off, 4 * KIB, (unsigned)off);

		settle(f);
		if (w->op.ret > 0) {
			acked = off + 4 * KIB;
		}
	}
	return acked;
}

/*
 * A stream that filled the disk (its limit): a window that could not be
 * reserved was written through, and exactly what fits was acknowledged
 * and is on disk after the close.
 */
static void assert_full_disk_written_through(struct fixture *f,
					     uint64_t acked)
{
	assert_true(f->stats.reserve_full > 0);
	assert_int_equal(acked, f->disk.limit);
	assert_int_equal(flush_sync(f, IOTUNE_FLUSH_CLOSE), 0);
	assert_int_equal(f->stats.flush_errors, 0);
	assert_disk_is_model(f);
	assert_int_equal(f->disk.size, f->disk.limit);
}

/* Reservations: what is acknowledged always fits on the disk. */
static void test_never_acknowledges_more_than_fits(void **state)
{
	struct fixture *f = *state;
	uint64_t acked = 0;

	f->disk.limit = 5 * CAP / 2;	/* room for 2.5 windows */
	acked = stream_4k(f, 0, 4 * CAP, 0);
	/* the write past the limit could not be reserved: written through */
	assert_full_disk_written_through(f, acked);
	assert_reserved_only_written(&f->disk);
}

/*
 * Each write reserves its own bytes, nothing ahead and nothing around
 * them: a stream makes one call per write, and after the close every
 * block reserved holds written data (nothing to give back).
 */
static void test_reserves_exactly_what_writes_cover(void **state)
{
	struct fixture *f = *state;

	stream_4k(f, 0, 2 * CAP, 0);
	assert_int_equal(f->disk.reserves, 2 * CAP / (4 * KIB));
	assert_int_equal(f->stats.reserve_calls, f->disk.reserves);
	assert_int_equal(f->disk.reserved_lo, 2 * CAP - 4 * KIB);
	assert_int_equal(f->disk.reserved_hi, 2 * CAP);
	settle(f);
	assert_closes_to_model(f);
	assert_reserved_only_written(&f->disk);
}

/* Holes stay holes: writes far apart in a file reserve only themselves */
static void test_holes_stay_holes(void **state)
{
	struct fixture *f = *state;
	static const uint64_t offs[] = {
		40 * CAP + 5, 3 * CAP + 4000, 17 * CAP, 60 * CAP - 100, 9 * CAP,
	};
	size_t i;
	size_t b;
	size_t n = 0;

	iotune_wc_set_disk_size(&f->c, 62 * CAP);
	f->disk.size = 62 * CAP;
	f->model_size = 62 * CAP;
	for (i = 0; i < sizeof(offs) / sizeof(offs[0]); i++) {
		write_at(f, offs[i], 100, (unsigned)i + 1);
		settle(f);
		assert_int_equal(f->disk.reserved_lo, offs[i]);
		assert_int_equal(f->disk.reserved_hi, offs[i] + 100);
	}
	assert_closes_to_model(f);
	assert_reserved_only_written(&f->disk);
	for (b = 0; b < DISK_MAX / BLOCK; b++) {
		n += f->disk.alloc[b];
	}
	assert_int_equal(n, 6);	/* one write straddles two blocks */
}

/*
 * The reservation moves the end of file as the write will, before the
 * write is acknowledged: every size anyone reads is true, and nothing
 * the core does ever makes a file shorter.
 */
static void test_reservation_moves_the_end_of_file(void **state)
{
	struct fixture *f = *state;
	struct w *w = NULL;

	w = write_at(f, 3 * CAP + 100, 10, 1);
	assert_done(w, 10);
	assert_int_equal(f->disk.writes, 0);	/* cached */
	assert_int_equal(f->disk.size, 3 * CAP + 110);
	assert_int_equal(iotune_wc_logical_size(&f->c), 3 * CAP + 110);
	w = write_at(f, 50, 10, 2);		/* inside: the size stays */
	assert_done(w, 10);
	assert_int_equal(f->disk.size, 3 * CAP + 110);
	settle(f);
	assert_closes_to_model(f);
}

/* A rewrite of reserved bytes makes no call; a write beyond them does */
static void test_rewrite_of_reserved_bytes_makes_no_call(void **state)
{
	struct fixture *f = *state;

	write_at(f, 0, 4 * KIB, 1);
	write_at(f, 0, 4 * KIB, 2);
	write_at(f, 100, 1000, 3);
	assert_int_equal(f->disk.reserves, 1);
	write_at(f, 2 * KIB, 4 * KIB, 4);	/* past what is known */
	assert_int_equal(f->disk.reserves, 2);
	assert_int_equal(f->disk.reserved_lo, 2 * KIB);
	write_at(f, 1 * KIB, 4 * KIB, 5);	/* [0, 6 KiB) is known */
	assert_int_equal(f->disk.reserves, 2);
	settle(f);
	assert_closes_to_model(f);
}

/* Writes with others in flight are cached, one reservation each */
static void test_pipelined_writes_are_cached(void **state)
{
	struct fixture *f = *state;
	struct w *w = NULL;
	unsigned i;

	f->busy = true;
	for (i = 0; i < 8; i++) {
		w = write_at(f, i * 4 * KIB, 4 * KIB, i + 1);
		assert_done(w, 4 * KIB);
	}
	assert_int_equal(f->stats.writes_cached, 8);
	assert_int_equal(f->disk.reserves, 8);
	settle(f);
	assert_closes_to_model(f);
}

/* A client's fallocate, punched hole or truncate: reserved again */
static void test_allocation_change_forgets_reservations(void **state)
{
	struct fixture *f = *state;

	write_at(f, 0, 4 * KIB, 1);
	iotune_wc_forget_reservations(&f->c);
	write_at(f, 0, 4 * KIB, 2);
	assert_int_equal(f->disk.reserves, 2);
	settle(f);
	assert_int_equal(flush_sync(f, IOTUNE_FLUSH_SIZE_CHANGE), 0);
	iotune_wc_set_disk_size(&f->c, 4 * KIB);
	write_at(f, 0, 4 * KIB, 3);
	assert_int_equal(f->disk.reserves, 3);
	settle(f);
	assert_closes_to_model(f);
}

/*
 * A write whose bytes cannot be reserved goes to disk, after the older
 * cached data it overlaps (which can never land over it), and fails or
 * falls short there as it would without the cache; later writes that
 * fit are cached again.
 */
static void test_no_space_writes_through_after_older_data(void **state)
{
	struct fixture *f = *state;
	struct w *a = NULL;
	struct w *b = NULL;
	struct w *c = NULL;

	f->disk.limit = 6 * KIB;
	a = write_at(f, 0, 4 * KIB, 1);
	assert_done(a, 4 * KIB);
	b = write_at(f, 0, 8 * KIB, 2);		/* does not fit */
	settle(f);
	assert_done(b, 6 * KIB);		/* short, as on the disk */
	assert_true(f->stats.reserve_full >= 1);
	assert_memory_equal(f->disk.data, b->buf, 6 * KIB);
	c = write_at(f, 100, 100, 3);
	assert_done(c, 100);
	assert_false(c->on_disk);		/* cached again */
	settle(f);
	assert_int_equal(flush_sync(f, IOTUNE_FLUSH_CLOSE), 0);
	assert_memory_equal(f->disk.data + 100, c->buf, 100);
}

static void test_file_system_that_cannot_reserve(void **state)
{
	struct fixture *f = *state;
	struct w *w = NULL;

	write_at(f, 0, 10, 1);
	f->disk.reserve_errno = EOPNOTSUPP;
	w = write_at(f, 5, 5, 2);	/* reserved already: absorbed */
	assert_done(w, 5);
	w = write_at(f, 5 * CAP, 10, 3);
	assert_true(f->cannot_reserve);
	assert_true(w->on_disk);	/* written through, after older data */
	settle(f);
	w = write_at(f, 6 * CAP, 10, 4);
	assert_true(w->on_disk);	/* for good */
	assert_int_equal(f->disk.reserves, 2);
	settle(f);
	assert_closes_to_model(f);
}

/*
 * The right to cache is lost (a break): a failed flush then drops its
 * data instead of keeping it, never writes it later over what another
 * opener wrote, and the error goes to the next write.
 */
static void test_lost_right_drops_what_fails_and_never_retries(void **state)
{
	struct fixture *f = *state;
	struct iotune_wc_action act;
	struct w *w = NULL;
	unsigned writes;

	write_at(f, 0, 8 * KIB, 1);
	write_at(f, 20 * KIB, 8 * KIB, 2);
	iotune_wc_lose_right(&f->c, f->now, &act);
	apply(f, &act);
	f->disk.fail_errno = ENOSPC;
	f->disk.fail_count = 1;
	assert_int_equal(flush_sync(f, IOTUNE_FLUSH_BREAK), ENOSPC);
	/* the first extent failed and is dropped; the second was written */
	assert_int_equal(f->dropped, 8 * KIB);
	assert_int_equal(f->stats.bytes_dropped, 8 * KIB);
	assert_false(iotune_wc_is_dirty(&f->c));
	assert_int_equal(f->tick, 0);	/* no retry */
	/* another opener writes where the dropped data was */
	writes = f->disk.writes;
	memset(f->disk.data, 'B', 16);
	/* the next write of the handle gets the error */
	w = write_at(f, 100, 4, 3);
	assert_failed(w, ENOSPC);
	/* later writes go to disk: nothing is cached any more */
	w = write_at(f, 200, 4, 4);
	assert_true(w->on_disk);
	do_disk(f, w);
	assert_done(w, 4);
	assert_int_equal(f->disk.writes, writes + 1);
	assert_memory_equal(f->disk.data, "BBBBBBBBBBBBBBBB", 16);
	assert_int_equal(flush_sync(f, IOTUNE_FLUSH_CLOSE), 0);
	assert_true(iotune_wc_idle(&f->c));
}

static void test_lost_right_drops_kept_remains(void **state)
{
	struct fixture *f = *state;
	struct iotune_wc_action act;
	struct w *w = NULL;

	write_at(f, 0, 8 * KIB, 1);
	f->disk.fail_errno = EIO;
	f->disk.fail_count = 1;
	assert_int_equal(flush_sync(f, IOTUNE_FLUSH_TIMEOUT), EIO);
	assert_true(iotune_wc_is_dirty(&f->c));	/* kept for a retry */
	iotune_wc_lose_right(&f->c, f->now, &act);
	apply(f, &act);
	assert_int_equal(f->dropped, 8 * KIB);
	assert_false(iotune_wc_is_dirty(&f->c));
	w = barrier(f, IOTUNE_FLUSH_FSYNC);
	assert_failed(w, EIO);
}

static void test_write_of_a_handle_without_the_right(void **state)
{
	struct fixture *f = *state;
	struct w *w = NULL;

	write_at(f, 0, 100, 1);
	w = submit(f, new_write(f, 50, 10, 2, false));
	assert_false(w->on_disk);	/* the older data it overlaps first */
	do_piece(f);
	assert_true(w->on_disk);
	do_disk(f, w);
	w = write_at(f, 1000, 10, 3);	/* the cache stays off */
	assert_true(w->on_disk);
	settle(f);
	assert_disk_is_model(f);
}

static void test_short_write_and_eintr_are_continued(void **state)
{
	struct fixture *f = *state;

	write_at(f, 0, 16 * KIB, 1);
	f->disk.short_by = 1000;
	f->disk.eintr_count = 3;
	assert_int_equal(flush_sync(f, IOTUNE_FLUSH_CLOSE), 0);
	assert_int_equal(f->stats.flush_short_writes, 1);
	assert_disk_is_model(f);
}

static void test_timeout(void **state)
{
	struct fixture *f = *state;

	write_at(f, 0, 100, 1);
	assert_int_equal(f->tick, f->now + 1000);
	tick_at(f, f->now + 999);
	assert_false(f->piece);
	tick_at(f, f->now + 1);
	assert_true(f->piece);
	assert_int_equal(f->tick, 0);	/* in flight: nothing to wait for */
	do_piece(f);
	assert_int_equal(f->stats.flushes[IOTUNE_FLUSH_TIMEOUT], 1);
	assert_int_equal(f->tick, 0);
	assert_disk_is_model(f);
}

static void test_too_many_extents_is_noncontiguous(void **state)
{
	struct fixture *f = *state;
	unsigned i;

	for (i = 0; i < IOTUNE_WC_MAX_EXTENTS; i++) {
		write_at(f, i * 2 * 100, 100, i);
	}
	assert_false(f->piece);
	write_at(f, IOTUNE_WC_MAX_EXTENTS * 2 * 100, 100, 99);
	assert_int_equal(f->stats.flushes[IOTUNE_FLUSH_NONCONTIG], 1);
	settle(f);
	assert_closes_to_model(f);
}

static void test_end_drops_and_fails_queued(void **state)
{
	struct fixture *f = *state;
	struct iotune_wc_action act;
	struct w *queued = NULL;

	write_at(f, 0, 4 * KIB, 1);
	write_at(f, 3 * CAP, 4 * KIB, 2);	/* a flush in flight */
	queued = write_at(f, 6 * CAP, 4 * KIB, 3);
	assert_false(queued->done);
	f->piece = 0;	/* its result never comes */
	iotune_wc_end(&f->c, &act);
	apply(f, &act);
	assert_failed(queued, EBADF);
	assert_int_equal(f->dropped, 8 * KIB);
}

static void test_cancel_leaves_the_queue(void **state)
{
	struct fixture *f = *state;
	struct w *a = NULL;
	struct w *b = NULL;

	write_at(f, 0, 100, 1);
	write_at(f, 5 * CAP, 100, 2);
	a = write_at(f, 10 * CAP, 100, 3);
	b = write_at(f, 10 * CAP + 100, 100, 4);
	assert_false(a->done);
	iotune_wc_cancel(&f->c, &a->op);
	assert_int_equal(a->op.state, IOTUNE_WC_OP_IDLE);
	do_piece(f);
	assert_done(b, 100);
	assert_false(a->done);
}

static void test_out_of_memory_is_an_error(void **state)
{
	struct fixture *f = *state;

	fail_mallocs = 1;
	assert_failed(write_at(f, 0, 100, 1), ENOMEM);
	assert_done(write_at(f, 0, 100, 1), 100);
}

static void test_zero_length_write(void **state)
{
	struct fixture *f = *state;

	assert_done(write_at(f, 100, 0, 1), 0);
	assert_false(iotune_wc_is_dirty(&f->c));
	assert_true(iotune_wc_logical_size(&f->c) == 0);
}

/*
 * A large write is copied by the caller: until its copy is done it is
 * not acknowledged, reads do not see the bytes being copied, writes over
 * them wait, and the window is not flushed.
 */
static void test_large_writes_are_copied_by_the_caller(void **state)
{
	struct fixture *f = *state;
	struct iotune_wc_snapshot *snap = NULL;
	struct w *big = NULL;
	struct w *small = NULL;
	struct w *over = NULL;
	struct w *far = NULL;
	uint8_t buf[64 * KIB];
	size_t got;

	small = write_at(f, 0, 4 * KIB, 1);
	assert_done(small, 4 * KIB);		/* small: copied by the core */
	big = write_at(f, 8 * KIB, 32 * KIB, 2);
	assert_true(big->copying);
	assert_false(big->done);
	assert_true(iotune_wc_copies_in_flight(&f->c));
	/* reads: the copied-to bytes are not there yet */
	memset(buf, 0xee, sizeof(buf));
	assert_false(iotune_wc_read_cached(&f->c, 8 * KIB, buf, 4 * KIB,
					   &got));
	/* its bytes do not count before the copy is done; its size was
	 * made on disk by the reservation (zeros, as a write in flight) */
	assert_int_equal(f->disk.size, 40 * KIB);
	assert_int_equal(iotune_wc_logical_size(&f->c), 40 * KIB);
	assert_int_equal(iotune_wc_read_overlay(&f->c, NULL, 0, buf,
						sizeof(buf), 0), 40 * KIB);
	assert_memory_equal(buf, f->model, 4 * KIB);
	for (got = 4 * KIB; got < 40 * KIB; got++) {
		assert_int_equal(buf[got], 0);
	}
	assert_int_equal(iotune_wc_snapshot_take(&f->c, 8 * KIB, 4 * KIB,
						 &snap), 0);
	assert_null(snap);
	/* a write over it waits; one elsewhere too (it needs a flush) */
	over = write_at(f, 10 * KIB, 100, 3);
	assert_false(over->done);
	far = write_at(f, 5 * CAP, 100, 4);
	assert_false(far->done);
	assert_false(f->piece);
	assert_int_equal(flush_sync(f, IOTUNE_FLUSH_CLOSE), EBUSY);
	do_copy(f, big);
	assert_done(big, 32 * KIB);
	assert_done(over, 100);
	assert_true(f->piece);		/* now the window can go */
	settle(f);
	assert_done(far, 100);
	assert_reads_model(f, 0, 64 * KIB);
	assert_closes_to_model(f);
	/* an op being copied cannot leave; a queued one can */
	big = write_at(f, 6 * CAP, 16 * KIB, 5);
	assert_false(iotune_wc_cancel(&f->c, &big->op));
	do_copy(f, big);
	assert_closes_to_model(f);
	/* nothing else in flight: the core copies it at once */
	f->busy = false;
	assert_done(write_at(f, 7 * CAP, 32 * KIB, 6), 32 * KIB);
}

static void test_not_counting(void **state)
{
	struct fixture *f = *state;
	struct iotune_wc_stats zero = { 0 };

	f->c.stats = NULL;
	write_at(f, 0, 100, 1);
	assert_int_equal(flush_sync(f, IOTUNE_FLUSH_CLOSE), 0);
	assert_memory_equal(&f->stats, &zero, sizeof(zero));
	iotune_wc_count_uncached(NULL);
	iotune_wc_count_uncached(&f->stats);
	assert_int_equal(f->stats.writes_bypassed, 1);
}

static void test_read_served_from_memory(void **state)
{
	struct fixture *f = *state;
	uint8_t buf[16 * KIB];
	size_t got = 0;

	write_at(f, 0, 8 * KIB, 1);
	assert_true(iotune_wc_read_cached(&f->c, 1 * KIB, buf, 4 * KIB, &got));
	assert_int_equal(got, 4 * KIB);
	assert_memory_equal(buf, f->model + 1 * KIB, got);
	/* past the end of file: the rest is not there */
	assert_true(iotune_wc_read_cached(&f->c, 4 * KIB, buf, sizeof(buf),
					  &got));
	assert_int_equal(got, 4 * KIB);
	assert_true(f->stats.read_hits_full == 2);
	/* partly uncached: the disk must be read */
	write_at(f, 12 * KIB, 1 * KIB, 2);
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
	write_at(f, 2 * KIB, 100, 1);
	write_at(f, 30 * KIB, 1 * KIB, 2);
	assert_true(iotune_wc_logical_size(&f->c) == 31 * KIB);
	assert_reads_model(f, 0, 64 * KIB);
	assert_reads_model(f, 9 * KIB, 5 * KIB);	/* disk, then hole */
	assert_reads_model(f, 20 * KIB, 11 * KIB);	/* hole, then dirty */
	assert_true(f->stats.read_hits_overlay >= 2);
	assert_closes_to_model(f);
}

static void test_snapshot_survives_flush_during_read(void **state)
{
	struct fixture *f = *state;
	struct iotune_wc_snapshot *snap = NULL;
	uint8_t stale[8 * KIB];
	uint8_t expect[8 * KIB];
	size_t got;

	write_at(f, 0, 8 * KIB, 5);
	memcpy(expect, f->model, sizeof(expect));
	/* an async read is issued: the disk still has nothing */
	assert_int_equal(iotune_wc_snapshot_take(&f->c, 0, sizeof(stale),
						 &snap), 0);
	assert_non_null(snap);
	memset(stale, 0, sizeof(stale));
	/* the data is flushed and leaves the cache before it returns */
	assert_int_equal(flush_sync(f, IOTUNE_FLUSH_TIMEOUT), 0);
	assert_false(iotune_wc_is_dirty(&f->c));
	got = iotune_wc_read_overlay(&f->c, snap, 0, stale, sizeof(stale), 0);
	assert_int_equal(got, sizeof(stale));
	assert_memory_equal(stale, expect, sizeof(expect));
	iotune_wc_snapshot_free(snap);
	assert_int_equal(iotune_wc_snapshot_take(&f->c, 0, 8 * KIB, &snap), 0);
	assert_null(snap);
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
 * Several windows on their way to disk at once: a stream does not wait
 * for each flush; when all slots are busy, writes wait in order; pieces
 * complete in any order and the file ends up right.
 */
static void test_windows_flush_in_parallel(void **state)
{
	struct fixture *f = *state;
	struct w *waits = NULL;
	uint8_t buf[100];
	size_t got = 0;
	unsigned i;

	for (i = 0; i < 3; i++) {
		fill_window(f, i * CAP, i);
		assert_int_equal(f->piece, i + 1);	/* each window goes */
	}
	assert_int_equal(f->stats.flushes[IOTUNE_FLUSH_FULL], 3);
	/* all three slots busy: the fourth window fills and stays */
	fill_window(f, 3 * CAP, 7);
	assert_int_equal(f->piece, 3);
	waits = write_at(f, 4 * CAP, 100, 8);
	assert_false(waits->done);
	/* reads see the data of every window in flight */
	assert_true(iotune_wc_read_cached(&f->c, CAP + 10, buf, sizeof(buf),
					  &got));
	assert_int_equal(got, sizeof(buf));
	assert_reads_model(f, 0, 4 * CAP + 100);
	/* the newest piece lands first: its slot takes the fourth window */
	do_piece_at(f, 2);
	assert_int_equal(f->piece, 3);
	assert_done(waits, 100);
	do_piece_at(f, 1);
	do_piece_at(f, 0);
	assert_int_equal(f->piece, 1);		/* the fourth window */
	assert_int_equal(flush_sync(f, IOTUNE_FLUSH_CLOSE), EBUSY);
	settle(f);
	assert_closes_to_model(f);
	assert_int_equal(f->stats.flush_writes, 5);
}

/*
 * A window that overlaps a window still on its way to disk waits for
 * it: the older data can never land over the newer.
 */
static void test_overlapping_window_waits_for_older_flush(void **state)
{
	struct fixture *f = *state;

	fill_window(f, 0, 1);
	assert_int_equal(f->piece, 1);
	fill_window(f, 0, 2);			/* full again, same range */
	write_at(f, CAP, 100, 3);		/* not absorbed: waits */
	assert_int_equal(f->piece, 1);		/* not beside the first */
	assert_reads_model(f, 0, 2 * CAP);
	do_piece(f);
	assert_int_equal(f->piece, 1);		/* now it goes */
	settle(f);
	assert_closes_to_model(f);
}

/*
 * One window fails while another lands: the failed one keeps its data,
 * the next write retries it first, and nothing is lost.
 */
static void test_one_failed_window_among_several(void **state)
{
	struct fixture *f = *state;
	struct w *w = NULL;

	fill_window(f, 0, 1);
	fill_window(f, CAP, 2);
	assert_int_equal(f->piece, 2);
	f->disk.fail_errno = EIO;
	f->disk.fail_count = 1;
	do_piece_at(f, 0);			/* the first window fails */
	assert_true(iotune_wc_failed(&f->c));
	do_piece(f);				/* the second lands */
	assert_true(iotune_wc_failed(&f->c));
	assert_int_not_equal(f->tick, 0);	/* a retry is due later */
	w = write_at(f, 2 * CAP, 100, 3);	/* retries the first */
	assert_int_equal(f->piece, 1);
	assert_int_equal(f->stats.flushes[IOTUNE_FLUSH_RETRY], 1);
	do_piece(f);				/* the retry works */
	assert_false(iotune_wc_failed(&f->c));
	settle(f);
	assert_done(w, 100);
	assert_closes_to_model(f);
	assert_int_equal(f->stats.bytes_dropped, 0);
}

/* Two windows go to disk, and both fail with EIO; the disk recovers. */
static void fail_two_windows(struct fixture *f)
{
	fill_window(f, 0, 1);
	fill_window(f, CAP, 2);
	f->disk.fail_errno = EIO;
	f->disk.fail_count = 2;
	do_piece(f);
	do_piece(f);
}

/*
 * Two windows fail; the disk recovers.  A write retries them one by one
 * and succeeds: it fails only when a retry it waited for fails.
 */
static void test_write_waits_for_each_failed_window(void **state)
{
	struct fixture *f = *state;
	struct w *w = NULL;

	fail_two_windows(f);
	assert_true(iotune_wc_failed(&f->c));
	w = write_at(f, 2 * CAP, 100, 3);	/* retries the first */
	assert_int_equal(f->piece, 1);
	do_piece(f);				/* works: the second next */
	assert_false(w->done);
	assert_int_equal(f->piece, 1);
	do_piece(f);
	assert_done(w, 100);
	assert_int_equal(f->stats.writes_failed, 0);
	assert_int_equal(f->stats.flushes[IOTUNE_FLUSH_RETRY], 2);
	settle(f);
	assert_closes_to_model(f);
}

/*
 * The same, with another write and a tick while the first retry is in
 * flight: the waiting write does not fail on the older failure.
 */
static void test_waiting_write_ignores_older_failures(void **state)
{
	struct fixture *f = *state;
	struct w *w1 = NULL;
	struct w *w2 = NULL;

	fail_two_windows(f);
	w1 = write_at(f, 2 * CAP, 100, 3);	/* retries the first */
	w2 = write_at(f, 2 * CAP + 100, 100, 4);
	tick_at(f, f->now + 1);
	settle(f);
	assert_done(w1, 100);
	assert_done(w2, 100);
	assert_int_equal(f->stats.writes_failed, 0);
	assert_closes_to_model(f);
}

/*
 * A write that started a retry is not acknowledged while that retry is
 * in flight, even when another write runs the queue; when the retry
 * fails, the write fails, and the next one retries again.
 */
static void test_write_waits_for_the_result_of_its_retry(void **state)
{
	struct fixture *f = *state;
	struct w *w1 = NULL;
	struct w *w2 = NULL;

	fill_window(f, 0, 1);
	f->disk.fail_errno = EIO;
	f->disk.fail_count = 2;
	do_piece(f);				/* fails */
	w1 = write_at(f, CAP, 100, 2);		/* retries it */
	assert_int_equal(f->piece, 1);
	w2 = write_at(f, CAP + 100, 100, 3);
	assert_false(w1->done);
	assert_false(w2->done);
	do_piece(f);				/* the retry fails */
	assert_failed(w1, EIO);
	assert_false(w2->done);			/* it retries again */
	assert_int_equal(f->piece, 1);
	do_piece(f);
	assert_done(w2, 100);
	assert_int_equal(f->stats.writes_failed, 1);
	settle(f);
	assert_closes_to_model(f);
}

/* Two failed windows: a due retry never starts beside one in flight */
static void test_one_retry_at_a_time(void **state)
{
	struct fixture *f = *state;

	fail_two_windows(f);
	write_at(f, 4 * CAP, 100, 3);		/* retries one */
	assert_int_equal(f->piece, 1);
	f->now += 10000;			/* past the retry's time */
	write_at(f, 4 * CAP + 100, 100, 4);	/* runs the queue */
	assert_int_equal(f->piece, 1);
	settle(f);
	assert_closes_to_model(f);
}

/*
 * Windows in flight at once: each asks for its own write-back as its
 * own last piece lands, in whatever order they land.
 */
static void test_parallel_windows_ask_each_for_their_own(void **state)
{
	struct fixture *f = *state;
	unsigned i;

	for (i = 0; i < 3; i++) {
		fill_window(f, i * CAP, i);
	}
	assert_int_equal(f->piece, 3);
	do_piece_at(f, 2);
	assert_int_equal(f->writebacks, 1);
	assert_int_equal(f->wb_off, 2 * CAP);
	assert_int_equal(f->wb_len, CAP);
	do_piece_at(f, 0);
	assert_int_equal(f->writebacks, 2);
	assert_int_equal(f->wb_off, 0);
	assert_int_equal(f->wb_len, CAP);
	do_piece(f);
	assert_int_equal(f->writebacks, 3);
	assert_int_equal(f->wb_off, CAP);
	assert_closes_to_model(f);
}

/*
 * A synchronous flush that retries a failed window and writes the active
 * one asks once, over both: nothing for the failure, one range after.
 */
static void test_sync_flush_merges_retried_and_active_writeback(void **state)
{
	struct fixture *f = *state;

	write_at(f, 0, 100, 1);
	write_at(f, CAP + 8 * KIB, 4 * KIB, 2);	/* the first window goes */
	assert_int_equal(f->piece, 1);
	f->disk.fail_errno = EIO;
	f->disk.fail_count = 1;
	do_piece(f);
	assert_int_equal(f->stats.flush_errors, 1);
	assert_int_equal(f->piece, 0);
	assert_int_equal(f->writebacks, 0);
	assert_closes_to_model(f);		/* the retry, then the rest */
	assert_int_equal(f->writebacks, 1);
	assert_int_equal(f->wb_off, 0);
	assert_int_equal(f->wb_len, CAP + 12 * KIB);
}

/*
 * One write-back on its way per cache: windows written meanwhile wait,
 * and go as one range when it ends; when nothing waits, nothing more.
 */
static void test_one_writeback_on_its_way(void **state)
{
	struct fixture *f = *state;
	unsigned i;

	f->wb_hold = true;
	for (i = 0; i < 3; i++) {
		fill_window(f, i * CAP, i);
	}
	do_piece_at(f, 1);
	assert_int_equal(f->writebacks, 1);
	assert_int_equal(f->wb_off, CAP);
	assert_int_equal(f->wb_len, CAP);
	do_piece(f);
	do_piece(f);
	assert_int_equal(f->writebacks, 1);	/* the others wait */
	wb_end(f);
	assert_int_equal(f->writebacks, 2);	/* both, one range */
	assert_int_equal(f->wb_off, 0);
	assert_int_equal(f->wb_len, 3 * CAP);
	wb_end(f);
	assert_false(f->wb_on_way);		/* nothing waited */
	assert_int_equal(f->writebacks, 2);
	f->wb_hold = false;
	assert_closes_to_model(f);
}

/*
 * Windows written on both sides of one still on its way: their range
 * would cover it, so it waits for that window too, even with no
 * write-back on its way; then one range over all of them.
 */
static void test_writeback_range_waits_for_the_window_it_spans(void **state)
{
	struct fixture *f = *state;
	unsigned i;

	f->wb_hold = true;
	for (i = 0; i < 3; i++) {
		fill_window(f, i * CAP, i);
	}
	do_piece_at(f, 2);
	assert_int_equal(f->writebacks, 1);
	assert_int_equal(f->wb_off, 2 * CAP);
	do_piece(f);				/* window 0: waits */
	fill_window(f, 3 * CAP, 3);		/* into the free slot */
	assert_int_equal(f->piece, 2);
	do_piece_at(f, 1);			/* window 3: waits */
	wb_end(f);
	assert_false(f->wb_on_way);		/* window 1 is on its way */
	assert_int_equal(f->writebacks, 1);
	do_piece(f);				/* window 1 */
	assert_int_equal(f->writebacks, 2);
	assert_int_equal(f->wb_off, 0);
	assert_int_equal(f->wb_len, 4 * CAP);
	wb_end(f);
	f->wb_hold = false;
	assert_closes_to_model(f);
}

/*
 * A synchronous flush while a write-back is on its way asks nothing:
 * what it wrote goes when that one ends, and a cache that ends first
 * forgets it (the kernel writes it back).
 */
static void test_sync_flush_behind_a_writeback_on_its_way(void **state)
{
	struct fixture *f = *state;

	f->wb_hold = true;
	fill_window(f, 0, 1);
	do_piece(f);
	assert_int_equal(f->writebacks, 1);
	write_at(f, CAP + 8 * KIB, 4 * KIB, 2);
	assert_closes_to_model(f);
	assert_int_equal(f->writebacks, 1);
	wb_end(f);
	assert_int_equal(f->writebacks, 2);
	assert_int_equal(f->wb_off, CAP + 8 * KIB);
	assert_int_equal(f->wb_len, 4 * KIB);
	wb_end(f);
	write_at(f, 2 * CAP, 4 * KIB, 3);
	fill_window(f, 3 * CAP, 4);
	do_piece(f);				/* on its way again */
	write_at(f, 4 * CAP, 4 * KIB, 5);
	settle(f);				/* window 3 lands: waits */
	assert_closes_to_model(f);		/* waits; the cache ends */
	assert_int_equal(f->writebacks, 3);
}

/* A new cache of f's params with a pool, on f's disk */
static void recreate_with_pool(struct fixture *f, struct iotune_wc_pool *pool,
			       uint64_t capacity)
{
	struct iotune_wc_params p = f->c.p;

	iotune_wc_destroy(&f->c);
	p.pool = pool;
	p.capacity = capacity;
	assert_int_equal(iotune_wc_init(&f->c, &p, f->disk.size, &f->io,
					&f->stats), 0);
}

/*
 * A cache that ends leaves its buffers to the process's pool, and the
 * next cache (a new file) takes them instead of mapping new ones.  What
 * the last file left in them is never written: the new file's disk is
 * its model, zeros around its bytes.
 */
static void test_ended_cache_leaves_its_buffers_to_the_next(void **state)
{
	struct fixture *f = *state;
	struct iotune_wc_pool *pool = &f->pool;
	uint8_t *kept[2];

	recreate_with_pool(f, pool, CAP);
	fill_window(f, 0, 1);
	write_at(f, CAP, 100, 2);	/* a second buffer, the active */
	settle(f);
	assert_closes_to_model(f);
	recreate_with_pool(f, pool, CAP);
	assert_int_equal(pool->n, 2);
	kept[0] = pool->buf[0];
	kept[1] = pool->buf[1];
	/* what the last file left is still there (no memory pressure) */
	assert_true(kept[0][0] != 0 && kept[1][0] != 0);
	write_at(f, 2 * CAP + 10, 100, 3);
	assert_int_equal(pool->taken, 1);
	assert_int_equal(pool->n, 1);
	assert_true(f->c.active.data == kept[0] ||
		    f->c.active.data == kept[1]);
	assert_closes_to_model(f);	/* not the 10 bytes before it */
	assert_reads_model(f, 0, 3 * CAP);
	iotune_wc_destroy(&f->c);
	assert_int_equal(pool->n, 2);
	iotune_wc_pool_free(pool);
	assert_int_equal(pool->n, 0);
}

/* A second cache (on a disk of its own) holding two buffers */
static void second_cache_with_two_buffers(struct fixture *f,
					  struct iotune_wcache *b,
					  struct fake_disk *d,
					  struct iotune_wc_io_ops *io)
{
	static uint8_t data[CAP];
	static const uint64_t off[3] = { 0, CAP / 2, CAP };
	static const size_t n[3] = { CAP / 2, CAP / 2, 100 };
	struct iotune_wc_op op[3];
	struct iotune_wc_action act;
	unsigned i;

	d->limit = DISK_MAX;
	*io = (struct iotune_wc_io_ops) {
		.pwrite = fake_pwrite, .reserve = fake_reserve,
		.private_data = d,
	};
	assert_int_equal(iotune_wc_init(b, &f->c.p, 0, io, NULL), 0);
	for (i = 0; i < 3; i++) {	/* a full window, then the active */
		op[i] = (struct iotune_wc_op) {
			.kind = IOTUNE_WC_OP_WRITE, .may_cache = true,
			.off = off[i], .data = data, .n = n[i],
		};
		iotune_wc_submit(b, &op[i], f->now, &act);
		assert_true(iotune_wc_next_done(b) == &op[i]);
		assert_int_equal(op[i].ret, (ssize_t)op[i].n);
	}
}

/*
 * The pool keeps at most IOTUNE_WC_POOL_MAX buffers (the rest are
 * unmapped), and gives a cache only buffers of its own capacity.
 */
static void test_pool_keeps_a_bounded_number_of_buffers(void **state)
{
	struct fixture *f = *state;
	struct iotune_wc_pool *pool = &f->pool;
	struct fake_disk *d = calloc(1, sizeof(*d));
	struct iotune_wc_io_ops io;
	struct iotune_wcache b;
	unsigned i;

	assert_non_null(d);
	recreate_with_pool(f, pool, CAP);
	for (i = 0; i < 3; i++) {	/* three slots in flight */
		fill_window(f, i * CAP, i);
	}
	write_at(f, 3 * CAP, 100, 4);	/* and the active: four buffers */
	second_cache_with_two_buffers(f, &b, d, &io);
	settle(f);
	assert_closes_to_model(f);
	recreate_with_pool(f, pool, 2 * CAP);
	assert_int_equal(pool->n, 4);
	iotune_wc_destroy(&b);		/* one more than the pool keeps */
	assert_int_equal(pool->n, IOTUNE_WC_POOL_MAX);
	write_at(f, 0, 100, 5);		/* another capacity: maps one */
	assert_int_equal(pool->taken, 0);
	assert_int_equal(pool->n, IOTUNE_WC_POOL_MAX);
	assert_closes_to_model(f);
	iotune_wc_destroy(&f->c);	/* the pool is full: unmapped */
	assert_int_equal(pool->n, IOTUNE_WC_POOL_MAX);
	for (i = 0; i < pool->n; i++) {
		assert_int_equal(pool->len[i], CAP);
	}
	iotune_wc_pool_free(pool);
	free(d);
}

/* The pool keeps at most max_bytes in all; the rest are unmapped. */
static void test_pool_keeps_a_bounded_number_of_bytes(void **state)
{
	struct fixture *f = *state;
	unsigned i;

	f->pool.max_bytes = 2 * CAP + CAP / 2;
	recreate_with_pool(f, &f->pool, CAP);
	for (i = 0; i < 3; i++) {	/* three slots in flight */
		fill_window(f, i * CAP, i);
	}
	write_at(f, 3 * CAP, 100, 4);	/* and the active: four buffers */
	settle(f);
	assert_closes_to_model(f);
	iotune_wc_destroy(&f->c);
	assert_int_equal(f->pool.n, 2);
	assert_int_equal(f->pool.bytes, 2 * CAP);
	recreate_with_pool(f, &f->pool, CAP);
	write_at(f, 4 * CAP, 100, 5);
	assert_int_equal(f->pool.taken, 1);
	assert_int_equal(f->pool.bytes, CAP);
	assert_closes_to_model(f);
}

/* The slots' count is clamped; a buffer is page aligned for O_DIRECT */
static void test_flush_slots_and_alignment(void **state)
{
	struct fixture *f = *state;
	struct iotune_wc_params p = { .capacity = CAP, .flushes = 99 };
	struct iotune_wcache c;

	assert_int_equal(iotune_wc_init(&c, &p, 0, &f->io, NULL), 0);
	assert_int_equal(c.p.flushes, IOTUNE_WC_MAX_FLUSHES);
	p.flushes = 0;
	assert_int_equal(iotune_wc_init(&c, &p, 0, &f->io, NULL), 0);
	assert_int_equal(c.p.flushes, 1);
	fill_window(f, 0, 1);
	assert_int_equal(f->piece, 1);
	assert_int_equal((uintptr_t)f->pieces[0].buf % 4096, 0);
	settle(f);
}

/*
 * Reservations in batches: a pipelined stream's writes wait for their
 * verdicts in order; the writes that arrive while one batch is on its
 * way are reserved by the next, with one call, and only their bytes.
 */
static void test_async_writes_wait_for_their_batch(void **state)
{
	struct fixture *f = *state;
	struct w *w[4];
	unsigned i;

	for (i = 0; i < 4; i++) {
		w[i] = write_at(f, i * 4 * KIB, 4 * KIB, i);
		assert_false(w[i]->done);	/* nothing reserved yet */
	}
	assert_int_equal(f->batches, 1);
	assert_int_equal(f->n_rsv, 1);
	assert_int_equal(f->rsv[0].end, 4 * KIB);
	do_reserve_err(f, 0, 0);
	assert_done(w[0], 4 * KIB);
	assert_false(w[1]->done);
	assert_int_equal(f->batches, 2);
	assert_int_equal(f->n_rsv, 1);
	assert_int_equal(f->rsv[0].off, 4 * KIB);
	assert_int_equal(f->rsv[0].end, 16 * KIB);
	do_reserve_err(f, 0, 0);
	for (i = 1; i < 4; i++) {
		assert_done(w[i], 4 * KIB);
	}
	assert_int_equal(f->disk.reserves, 2);
	assert_int_equal(f->stats.reserve_calls, 2);
	assert_int_equal(f->disk.writes, 0);	/* all in the cache */
	/* bytes known to be reserved make no call */
	assert_done(write_at(f, 2 * KIB, 4 * KIB, 9), 4 * KIB);
	assert_int_equal(f->batches, 2);
	settle(f);
	assert_closes_to_model(f);
	assert_reserved_only_written(&f->disk);
}

/*
 * A batch launched once the writes of the client have arrived reserves
 * them all with one call; the writes wait until it is answered.
 */
static void test_async_launch_takes_the_writes_that_arrived(void **state)
{
	struct fixture *f = *state;
	struct w *w[4];
	unsigned i;

	f->auto_launch = false;
	for (i = 0; i < 4; i++) {
		w[i] = write_at(f, i * 4 * KIB, 4 * KIB, i);
	}
	assert_int_equal(iotune_wc_reserve_due(&f->c), 4);
	assert_int_equal(f->batches, 0);
	launch(f);
	assert_int_equal(iotune_wc_reserve_due(&f->c), 0);
	assert_int_equal(f->n_rsv, 1);
	assert_int_equal(f->rsv[0].off, 0);
	assert_int_equal(f->rsv[0].end, 16 * KIB);
	assert_false(w[3]->done);
	do_reserve_err(f, 0, 0);
	for (i = 0; i < 4; i++) {
		assert_done(w[i], 4 * KIB);
	}
	assert_int_equal(f->stats.reserve_calls, 1);
	settle(f);
	assert_closes_to_model(f);
	assert_reserved_only_written(&f->disk);
}

static bool pace_more;	/* requests of the client wait to be read */

static bool pace_more_waiting(void *private_data)
{
	return pace_more;
}

/* iotune_wc_reserve_pace() with wait_us 100 and max_wait_us 2000 */
static enum iotune_rsvq_go pace(struct fixture *f, bool more,
				uint64_t waited, uint64_t *after)
{
	struct iotune_rsvq_wait w = {
		.waited_us = waited,
		.wait_us = 100,
		.max_wait_us = 2000,
		.more_waiting = pace_more_waiting,
	};

	pace_more = more;
	return iotune_wc_reserve_pace(&f->c, &w, after);
}

/*
 * The pace of batches: after a batch of four, a write that arrives alone
 * (the others of the client are on their way) waits in a batch for
 * them, at most the time given; a wait in vain makes the next write
 * alone reserve inline again.
 */
static void test_async_pace_waits_for_the_client_s_next_writes(void **state)
{
	struct fixture *f = *state;
	struct w *w[6];
	uint64_t after = 0;
	unsigned i;

	f->auto_launch = false;
	for (i = 0; i < 4; i++) {
		w[i] = write_at(f, i * 4 * KIB, 4 * KIB, i);
	}
	assert_int_equal(pace(f, true, 0, &after), IOTUNE_RSVQ_WAIT);
	assert_int_equal(pace(f, false, 10, &after), IOTUNE_RSVQ_GO);
	launch(f);
	do_reserve_err(f, 0, 0);
	for (i = 0; i < 4; i++) {
		assert_done(w[i], 4 * KIB);
	}
	/* alone, but the client sent four last time: a batch waits */
	f->busy = false;
	w[4] = write_at(f, 16 * KIB, 4 * KIB, 4);
	assert_false(w[4]->done);
	assert_int_equal(iotune_wc_reserve_due(&f->c), 1);
	assert_int_equal(pace(f, false, 0, &after),
			 IOTUNE_RSVQ_WAIT_TIMER);
	assert_int_equal(after, 100);
	/* nobody came: it goes, and the next write alone goes inline */
	assert_int_equal(pace(f, false, 100, &after), IOTUNE_RSVQ_GO);
	launch(f);
	assert_int_equal(f->n_rsv, 1);
	assert_int_equal(f->rsv[0].off, 16 * KIB);
	do_reserve_err(f, 0, 0);
	assert_done(w[4], 4 * KIB);
	w[5] = write_at(f, 20 * KIB, 4 * KIB, 5);
	assert_done(w[5], 4 * KIB);
	assert_int_equal(iotune_wc_reserve_due(&f->c), 0);
	assert_int_equal(f->stats.reserve_calls, 3);
	settle(f);
	assert_closes_to_model(f);
	assert_reserved_only_written(&f->disk);
}

/*
 * A batch full to the next (its 4 calls taken by disjoint writes, a
 * fifth had to wait for the next batch) starts at once, even while
 * requests wait to be read, and the next batch waits for 4, not 5.
 */
static void test_async_pace_full_batch_goes_at_once(void **state)
{
	struct fixture *f = *state;
	struct w *w[5];
	uint64_t after = 7;
	unsigned i;

	f->auto_launch = false;
	for (i = 0; i < 5; i++) {
		w[i] = write_at(f, i * 8 * KIB, 4 * KIB, i);
		assert_false(w[i]->done);
	}
	assert_int_equal(iotune_wc_reserve_due(&f->c), 4);
	assert_int_equal(pace(f, true, 0, &after), IOTUNE_RSVQ_GO);
	assert_int_equal(after, 0);
	assert_int_equal(f->c.rq.pace.want, 4);
	launch(f);
	assert_int_equal(f->n_rsv, 4);
	for (i = 0; i < 4; i++) {
		do_reserve_err(f, i, 0);	/* a batch goes whole */
	}
	for (i = 0; i < 4; i++) {
		assert_done(w[i], 4 * KIB);
	}
	assert_false(w[4]->done);
	assert_int_equal(iotune_wc_reserve_due(&f->c), 1);
	settle(f);
	assert_done(w[4], 4 * KIB);
	assert_closes_to_model(f);
	assert_reserved_only_written(&f->disk);
}

/* a write alone in flight reserves inline: no batch, no wait */
static void test_async_write_alone_reserves_inline(void **state)
{
	struct fixture *f = *state;

	f->busy = false;
	assert_done(write_at(f, 0, 4 * KIB, 1), 4 * KIB);
	assert_int_equal(f->batches, 0);
	assert_int_equal(f->disk.reserves, 1);
	f->busy = true;
	assert_false(write_at(f, 4 * KIB, 4 * KIB, 2)->done);
	assert_int_equal(f->batches, 1);
	f->busy = false;
	/* a batch is on its way: this one asks behind it */
	assert_false(write_at(f, 8 * KIB, 4 * KIB, 3)->done);
	settle(f);
	assert_closes_to_model(f);
}

/*
 * No space for a batch's call: its writes go to disk uncached, after the
 * older data they overlap, and fail there as without the cache; what fits
 * is acknowledged from the cache.
 */
static void test_async_no_space_writes_through(void **state)
{
	struct fixture *f = *state;
	struct w *a = NULL;
	struct w *b = NULL;
	struct w *c = NULL;

	f->disk.limit = 8 * KIB;
	a = write_at(f, 0, 4 * KIB, 1);
	b = write_at(f, 4 * KIB, 4 * KIB, 2);
	c = write_at(f, 8 * KIB, 4 * KIB, 3);
	do_reserve_err(f, 0, 0);
	assert_done(a, 4 * KIB);
	assert_int_equal(f->rsv[0].end, 12 * KIB);	/* b and c */
	do_reserve_err(f, 0, 0);	/* ENOSPC from the fake disk */
	assert_true(b->on_disk && c->on_disk);
	settle(f);
	assert_done(b, 4 * KIB);
	assert_failed(c, ENOSPC);
	assert_int_equal(f->stats.reserve_full, 2);
	assert_false(f->cannot_reserve);
	assert_closes_to_model(f);
	assert_reserved_only_written(&f->disk);
}

/* an error other than no space: everything goes through from then on */
static void test_async_cannot_reserve(void **state)
{
	struct fixture *f = *state;
	struct w *a = write_at(f, 0, 4 * KIB, 1);
	struct w *b = write_at(f, 4 * KIB, 4 * KIB, 2);

	do_reserve_err(f, 0, EOPNOTSUPP);
	assert_true(f->cannot_reserve);
	assert_true(a->on_disk && b->on_disk);	/* they do not overlap */
	settle(f);
	assert_done(a, 4 * KIB);
	assert_done(b, 4 * KIB);
	assert_true(write_at(f, 8 * KIB, 4 * KIB, 3)->on_disk);
	assert_int_equal(f->batches, 1);
	settle(f);
	assert_closes_to_model(f);
}

/*
 * The file's space changes while a batch is on its way (a truncate):
 * the batch is made again, and writes whose verdict came before it ask
 * again; none is acknowledged on a reservation that may be gone.
 */
static void test_async_forget_asks_again(void **state)
{
	struct fixture *f = *state;
	struct w *a = write_at(f, 0, 4 * KIB, 1);
	struct w *b = write_at(f, 4 * KIB, 4 * KIB, 2);

	iotune_wc_forget_reservations(&f->c);
	do_reserve_err(f, 0, 0);
	assert_false(a->done);
	assert_int_equal(f->batches, 2);	/* the same calls again */
	assert_int_equal(f->rsv[0].end, 4 * KIB);
	do_reserve_err(f, 0, 0);
	assert_done(a, 4 * KIB);
	do_reserve_err(f, 0, 0);
	assert_done(b, 4 * KIB);
	assert_int_equal(f->disk.reserves, 3);
	settle(f);
	assert_closes_to_model(f);
}

/* a write whose bytes were known reserved, waiting behind a barrier
 * when the space changes, asks again */
static void test_async_forget_behind_a_barrier(void **state)
{
	struct fixture *f = *state;
	struct w *a = write_at(f, 0, 4 * KIB, 1);
	struct w *fsync = NULL;
	struct w *b = NULL;

	do_reserve_err(f, 0, 0);
	assert_done(a, 4 * KIB);
	fsync = barrier(f, IOTUNE_FLUSH_FSYNC);
	b = write_at(f, 0, 2 * KIB, 2);		/* known: no call */
	assert_int_equal(f->batches, 1);
	iotune_wc_forget_reservations(&f->c);
	do_piece(f);
	assert_done(fsync, 0);
	assert_false(b->done);
	assert_int_equal(f->batches, 2);
	do_reserve_err(f, 0, 0);
	assert_done(b, 2 * KIB);
	settle(f);
	assert_closes_to_model(f);
}

/* a write whose request ends before its batch starts is not reserved */
static void test_async_cancelled_write_is_not_reserved(void **state)
{
	struct fixture *f = *state;
	struct w *a = write_at(f, 0, 4 * KIB, 1);
	struct w *b = write_at(f, 64 * KIB, 4 * KIB, 2);
	struct w *c = write_at(f, 4 * KIB, 4 * KIB, 3);

	assert_true(iotune_wc_cancel(&f->c, &b->op));
	do_reserve_err(f, 0, 0);
	assert_done(a, 4 * KIB);
	assert_int_equal(f->n_rsv, 1);
	assert_int_equal(f->rsv[0].off, 4 * KIB);
	assert_int_equal(f->rsv[0].end, 8 * KIB);
	do_reserve_err(f, 0, 0);
	assert_done(c, 4 * KIB);
	assert_false(b->done);
	settle(f);
	assert_closes_to_model(f);
	assert_reserved_only_written(&f->disk);
}

/* more writes than a batch decides: the rest ask again, in order */
static void test_async_full_batch_asks_again_in_order(void **state)
{
	struct fixture *f = *state;
	struct w *w[IOTUNE_RSVQ_WRITES + 3];
	unsigned i;

	for (i = 0; i < IOTUNE_RSVQ_WRITES + 3; i++) {
		w[i] = write_at(f, i * KIB, KIB, i);
	}
	do_reserve_err(f, 0, 0);
	assert_done(w[0], KIB);
	assert_int_equal(f->rsv[0].end, (IOTUNE_RSVQ_WRITES + 1) * KIB);
	do_reserve_err(f, 0, 0);
	for (i = 1; i <= IOTUNE_RSVQ_WRITES; i++) {
		assert_done(w[i], KIB);
	}
	assert_false(w[IOTUNE_RSVQ_WRITES + 1]->done);
	assert_int_equal(f->rsv[0].off, (IOTUNE_RSVQ_WRITES + 1) * KIB);
	assert_int_equal(f->rsv[0].end, (IOTUNE_RSVQ_WRITES + 3) * KIB);
	settle(f);
	assert_done(w[IOTUNE_RSVQ_WRITES + 2], KIB);
	assert_closes_to_model(f);
}

/*
 * Writes that found both batches full wait to ask again; when every write
 * of the two batches leaves before the first starts, they ask at once
 * (no answer would come to make them ask).
 */
static void test_async_busy_writes_ask_when_the_batches_empty(void **state)
{
	struct fixture *f = *state;
	struct w *w[2 * IOTUNE_RSVQ_WRITES];
	struct w *late = NULL;
	unsigned i;

	f->auto_launch = false;
	for (i = 0; i < 2 * IOTUNE_RSVQ_WRITES; i++) {
		w[i] = write_at(f, i * KIB, KIB, i);
	}
	late = write_at(f, 64 * KIB, KIB, 99);
	assert_int_equal(late->op.rsv, IOTUNE_WC_RSV_BUSY);
	for (i = 0; i < 2 * IOTUNE_RSVQ_WRITES; i++) {
		assert_true(iotune_wc_cancel(&f->c, &w[i]->op));
	}
	assert_int_equal(iotune_wc_reserve_due(&f->c), 1);
	launch(f);
	assert_int_equal(f->rsv[0].off, 64 * KIB);
	do_reserve_err(f, 0, 0);
	assert_done(late, KIB);
	assert_int_equal(f->disk.reserves, 1);
	settle(f);
	assert_closes_to_model(f);
	assert_reserved_only_written(&f->disk);
}

/* the cache ends with writes waiting for a batch: they fail, nothing
 * more is reserved */
static void test_async_end_with_writes_waiting(void **state)
{
	struct fixture *f = *state;
	struct iotune_wc_action act;
	struct w *a = write_at(f, 0, 4 * KIB, 1);
	struct w *b = write_at(f, 8 * KIB, 4 * KIB, 2);

	iotune_wc_end(&f->c, &act);
	apply(f, &act);
	assert_failed(a, EBADF);
	assert_failed(b, EBADF);
	assert_false(iotune_wc_idle(&f->c));	/* a's call is on its way */
	do_reserve_err(f, 0, 0);
	assert_int_equal(f->n_rsv, 1);		/* no batch for b */
	assert_int_equal(f->batches, 1);
	assert_true(iotune_wc_idle(&f->c));
}

/* One step of the randomized test; *lost: the right to cache is gone */
static void random_step(struct fixture *f, unsigned step, bool *lost)
{
	unsigned op = (unsigned)random() % 100;
	uint64_t off = (uint64_t)random() % (512 * KIB);
	size_t n = 1 + (size_t)random() % (op < 5 ? 2 * CAP : 9 * KIB);
	size_t i;
	size_t busy = 0;

	for (i = 0; i < MAX_OPS; i++) {
		enum iotune_wc_op_state st = f->w[i].op.state;

		busy += st == IOTUNE_WC_OP_QUEUED || f->w[i].on_disk ||
			f->w[i].copying;
	}
	if (busy > MAX_OPS / 2) {
		settle(f);	/* like a client with a bounded queue depth */
	}
	if (f->c.p.reserve_async) {
		f->busy = random() % 4 != 0;
		f->auto_launch = random() % 2 == 0;
	}
	if (op < 5 && iotune_wc_reserve_due(&f->c) > 0) {
		launch(f);
	} else if (op < 20 && reserve_waiting(f) >= 0) {
		int r = reserve_waiting(f);

		r += (int)((unsigned)random() % (f->n_rsv - (unsigned)r));
		if (!f->rsv_done[r]) {
			do_reserve_err(f, (unsigned)r,
				       random() % 8 == 0 ? ENOSPC : 0);
		}
	} else if (op < 55) {
		submit(f, new_write(f, off, n, step, !*lost));
	} else if (op < 65 && f->piece) {
		f->disk.fail_errno = random() % 4 == 0 ? ENOSPC : 0;
		f->disk.fail_count = f->disk.fail_errno != 0;
		do_piece_at(f, (unsigned)random() % f->piece);
		f->disk.fail_count = 0;
	} else if (op < 75) {
		for (i = 0; i < MAX_OPS; i++) {
			if (f->w[i].copying && random() % 2) {
				do_copy(f, &f->w[i]);
				break;
			}
			if (f->w[i].on_disk) {
				do_disk(f, &f->w[i]);
				break;
			}
		}
	} else if (op < 90) {
		assert_reads_model(f, off, n);
	} else if (op < 94) {
		barrier(f, IOTUNE_FLUSH_FSYNC);
	} else if (op < 95 && !*lost && !f->piece && !iotune_wc_failed(&f->c)) {
		struct iotune_wc_action act;

		/* a break: what it writes cannot fail here (nothing dropped) */
		settle(f);	/* the adapter waits for copies and pieces */
		*lost = true;
		iotune_wc_lose_right(&f->c, f->now, &act);
		apply(f, &act);
		assert_int_equal(flush_sync(f, IOTUNE_FLUSH_BREAK), 0);
		assert_false(iotune_wc_is_dirty(&f->c));
	} else {
		tick_at(f, f->now + (uint64_t)random() % 3000);
	}
}

/*
 * Random writes (small, window sized, overlapping), flush results (some
 * failing, several windows in flight completing in any order), disk
 * writes completing out of order, barriers, ticks and
 * reads: every read matches the model of acknowledged writes, and once
 * everything is settled so does the disk.
 */
static void test_randomized_against_model(void **state)
{
	struct fixture *f = *state;
	unsigned seed;

	for (seed = 1; seed <= 40; seed++) {
		bool lost = false;
		unsigned step;

		teardown(state);
		/*
		 * copies by the caller or not, 1 to 4 flushes at once,
		 * reservations in batches or inline
		 */
		setup_all(state, seed % 2 ? 8 * KIB : 0,
			  1 + (seed / 2) % IOTUNE_WC_MAX_FLUSHES,
			  seed % 3 == 0);
		f = *state;
		srandom(seed);
		for (step = 0; step < 2000; step++) {
			random_step(f, step, &lost);
		}
		settle(f);
		f->now += 100000;
		while (iotune_wc_is_dirty(&f->c) || f->piece) {
			tick_at(f, f->now);
			settle(f);
			f->now += 100000;
		}
		(void)iotune_wc_take_error(&f->c);
		assert_true(iotune_wc_idle(&f->c));
		assert_disk_is_model(f);
	}
}

int main(void)
{
	const struct CMUnitTest tests[] = {
#define T(name) cmocka_unit_test_setup_teardown(name, setup, teardown)
		T(test_sequential_writes_coalesce_into_one_flush),
		T(test_out_of_order_and_overlapping_writes),
		T(test_writes_wait_behind_a_flush_in_order),
		T(test_window_sized_writes_pass_straight_through),
		T(test_would_keep_below_the_bypass_size),
		T(test_large_write_goes_after_the_dirty_data_it_overlaps),
		T(test_small_write_waits_for_overlapping_disk_write),
		T(test_barrier_waits_for_older_data),
		T(test_failing_disk_fails_writes_without_spinning),
		T(test_failed_sync_flush_leaves_nothing_in_flight),
		T(test_write_during_a_timed_retry_waits_for_it),
		T(test_retry_that_works_reports_nothing),
		T(test_failure_with_full_window_waits_for_its_retry),
		T(test_never_acknowledges_more_than_fits),
		T(test_reserves_exactly_what_writes_cover),
		T(test_holes_stay_holes),
		T(test_reservation_moves_the_end_of_file),
		T(test_rewrite_of_reserved_bytes_makes_no_call),
		T(test_pipelined_writes_are_cached),
		T(test_allocation_change_forgets_reservations),
		T(test_no_space_writes_through_after_older_data),
		T(test_file_system_that_cannot_reserve),
		T(test_lost_right_drops_what_fails_and_never_retries),
		T(test_lost_right_drops_kept_remains),
		T(test_write_of_a_handle_without_the_right),
		T(test_short_write_and_eintr_are_continued),
		T(test_timeout),
		T(test_too_many_extents_is_noncontiguous),
		T(test_end_drops_and_fails_queued),
		T(test_cancel_leaves_the_queue),
		T(test_out_of_memory_is_an_error),
		T(test_zero_length_write),
		T(test_not_counting),
		cmocka_unit_test_setup_teardown(
			test_large_writes_are_copied_by_the_caller,
			setup_copies, teardown),
		T(test_read_served_from_memory),
		T(test_read_overlays_disk_and_zero_fills_holes),
		T(test_snapshot_survives_flush_during_read),
		T(test_flush_size_buckets),
		T(test_randomized_against_model),
		T(test_written_window_asks_for_its_writeback),
		T(test_failed_window_asks_after_its_retry),
		T(test_sync_flush_asks_for_what_it_wrote),
		cmocka_unit_test_setup_teardown(
			test_no_writeback_unless_asked,
			setup_no_writeback, teardown),
#undef T
#define T(name) cmocka_unit_test_setup_teardown(name, setup_flushes, \
						teardown)
		T(test_windows_flush_in_parallel),
		T(test_overlapping_window_waits_for_older_flush),
		T(test_one_failed_window_among_several),
		T(test_write_waits_for_each_failed_window),
		T(test_waiting_write_ignores_older_failures),
		T(test_write_waits_for_the_result_of_its_retry),
		T(test_one_retry_at_a_time),
		T(test_flush_slots_and_alignment),
		T(test_parallel_windows_ask_each_for_their_own),
		T(test_sync_flush_merges_retried_and_active_writeback),
		T(test_one_writeback_on_its_way),
		T(test_writeback_range_waits_for_the_window_it_spans),
		T(test_sync_flush_behind_a_writeback_on_its_way),
		T(test_ended_cache_leaves_its_buffers_to_the_next),
		T(test_pool_keeps_a_bounded_number_of_buffers),
		T(test_pool_keeps_a_bounded_number_of_bytes),
#undef T
#define T(name) cmocka_unit_test_setup_teardown(name, setup_async, \
						teardown)
		T(test_async_writes_wait_for_their_batch),
		T(test_async_launch_takes_the_writes_that_arrived),
		T(test_async_write_alone_reserves_inline),
		T(test_async_pace_waits_for_the_client_s_next_writes),
		T(test_async_pace_full_batch_goes_at_once),
		T(test_async_no_space_writes_through),
		T(test_async_cannot_reserve),
		T(test_async_forget_asks_again),
		T(test_async_forget_behind_a_barrier),
		T(test_async_cancelled_write_is_not_reserved),
		T(test_async_full_batch_asks_again_in_order),
		T(test_async_end_with_writes_waiting),
		T(test_async_busy_writes_ask_when_the_batches_empty),
#undef T
	};

	return cmocka_run_group_tests_name("wcache", tests, NULL, NULL);
}
