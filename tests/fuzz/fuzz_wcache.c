/*
 * libFuzzer target: a sequence of write cache operations decoded from
 * the input, checked against a model of the file after every read and at
 * the end.  Flushes may fail; errors must be reported, data never lost.
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

static uint8_t disk[SPACE * 2];
static uint64_t disk_size;
static uint8_t model[SPACE * 2];
static uint64_t model_size;
static int fail_next;

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
	return (ssize_t)n;
}

static const struct iotune_wc_io_ops ops = { .pwrite = fake_pwrite };

static void check_read(struct iotune_wcache *c, uint64_t off, size_t n)
{
	static uint8_t buf[SPACE * 2];
	size_t got_disk = 0;
	size_t got;
	size_t want = 0;

	if (off < disk_size) {
		got_disk = disk_size - off < n ? disk_size - off : n;
		memcpy(buf, disk + off, got_disk);
	}
	got = iotune_wc_read_overlay(c, NULL, off, buf, n, got_disk);
	if (off < model_size) {
		want = model_size - off < n ? model_size - off : n;
	}
	if (got != want || memcmp(buf, model + off, want) != 0) {
		abort();
	}
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
	struct iotune_wc_stats stats = { 0 };
	struct iotune_wcache c;
	enum iotune_flush_reason reason;
	size_t i;
	int err;

	disk_size = model_size = 0;
	fail_next = 0;
	iotune_wc_init(&c, CAP, 1000, 0, &stats);
	for (i = 0; i + 4 <= size; i += 4) {
		uint8_t op = data[i] % 8;
		uint64_t off = ((uint64_t)data[i + 1] << 8 | data[i + 2]) %
			       SPACE;
		size_t n = 1 + (size_t)data[i + 3] * 37 % (CAP + CAP / 2);
		uint8_t buf[CAP + CAP / 2];

		memset(buf, data[i] ^ data[i + 3], n);
		switch (op) {
		case 0: case 1: case 2: case 3: {
			enum iotune_wc_verdict v = iotune_wc_write(
				&c, off, buf, n, 1, &reason, &err);

			while (v == IOTUNE_WC_FLUSH_FIRST) {
				if (iotune_wc_flush_sync(&c, reason, &ops,
							 1) != 0) {
					v = IOTUNE_WC_ERROR;
					break;
				}
				v = iotune_wc_write(&c, off, buf, n, 1,
						    &reason, &err);
			}
			if (v == IOTUNE_WC_BYPASS &&
			    fake_pwrite(NULL, buf, n, off) != (ssize_t)n) {
				v = IOTUNE_WC_ERROR;	/* client sees it */
			}
			if (v == IOTUNE_WC_ABSORBED ||
			    v == IOTUNE_WC_BYPASS) {
				if (off > model_size) {
					memset(model + model_size, 0,
					       off - model_size);
				}
				memcpy(model + off, buf, n);
				if (off + n > model_size) {
					model_size = off + n;
				}
			}
			break;
		}
		case 4: case 5:
			check_read(&c, off, n);
			break;
		case 6:
			fail_next = data[i + 3] & 1;
			(void)iotune_wc_flush_sync(&c, IOTUNE_FLUSH_TIMEOUT,
						   &ops, 1);
			break;
		case 7: {
			/* an async flush, piece by piece, maybe failing */
			uint64_t o;
			const uint8_t *b = NULL;
			size_t len;

			if (!iotune_wc_flush_begin(&c, IOTUNE_FLUSH_FULL,
						   false)) {
				break;
			}
			while (iotune_wc_flush_next(&c, &o, &b, &len)) {
				ssize_t r = fake_pwrite(NULL, b, len, o);

				iotune_wc_flush_result(&c, r, r < 0 ? errno : 0,
						       1);
				if (!iotune_wc_flush_in_flight(&c)) {
					break;
				}
			}
			break;
		}
		}
	}
	fail_next = 0;
	/* an earlier failure is reported once, even when the retry works */
	if (iotune_wc_flush_sync(&c, IOTUNE_FLUSH_CLOSE, &ops, 1) != 0 &&
	    iotune_wc_flush_sync(&c, IOTUNE_FLUSH_CLOSE, &ops, 1) != 0) {
		abort();
	}
	if (iotune_wc_is_dirty(&c)) {
		abort();
	}
	if (disk_size != model_size ||
	    memcmp(disk, model, model_size) != 0) {
		abort();
	}
	iotune_wc_destroy(&c);
	return 0;
}
