/*
 * What counting one I/O costs iotune: two monotonic clock reads, the
 * counters and a histogram bucket, as iotune_count_io() does.
 *
 * Copyright (C) iotune authors 2026
 * SPDX-License-Identifier: GPL-3.0-or-later
 */

#include <stdio.h>
#include <time.h>

#include "iotune/stats.h"

static uint64_t now_us(void)
{
	struct timespec ts;

	clock_gettime(CLOCK_MONOTONIC, &ts);
	return (uint64_t)ts.tv_sec * 1000000 + (uint64_t)ts.tv_nsec / 1000;
}

int main(void)
{
	static struct iotune_stats s;
	const unsigned n = 5000000;
	struct timespec a, b;
	unsigned i;
	double ns;

	clock_gettime(CLOCK_MONOTONIC, &a);
	for (i = 0; i < n; i++) {
		uint64_t started = now_us();

		s.write_ops++;
		s.write_bytes += 4096;
		iotune_latency_add(&s.write_latency, now_us() - started);
	}
	clock_gettime(CLOCK_MONOTONIC, &b);
	ns = ((double)(b.tv_sec - a.tv_sec) * 1e9 +
	      (double)(b.tv_nsec - a.tv_nsec)) / n;
	printf("%.1f\n", ns);
	return s.write_ops == n ? 0 : 1;
}
