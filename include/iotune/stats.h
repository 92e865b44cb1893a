/*
 * iotune - throughput counters (pure core, no Samba)
 *
 * Copyright (C) iotune authors 2026
 * SPDX-License-Identifier: GPL-3.0-or-later
 *
 * All counters are uint64_t and add up across smbd processes.  A record
 * is text, one "name value" line per counter, so that readers need no
 * knowledge of this struct's layout (tools/iotune-stat is Python).
 */

#ifndef IOTUNE_STATS_H
#define IOTUNE_STATS_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "iotune/readahead.h"
#include "iotune/wcache.h"

/*
 * Latency histogram with log2 buckets in microseconds: bucket 0 counts
 * latencies below 1 us, bucket i (0 < i < last) those in [2^(i-1), 2^i),
 * the last one everything from 2^(last-1) us (about 4 s) on.
 */
#define IOTUNE_LATENCY_BUCKETS 24

struct iotune_latency {
	uint64_t count;
	uint64_t sum_us;
	uint64_t bucket[IOTUNE_LATENCY_BUCKETS];
};

/*
 * Inline: every read and write the client makes adds its latency, the
 * ones iotune passes through included.
 */

/* the first b with us < 2^b (0 for 0), at most the last bucket */
static inline unsigned iotune_latency_bucket(uint64_t us)
{
	unsigned b = 0;

	if (us == 0) {
		return 0;
	}
	b = 64 - (unsigned)__builtin_clzll(us);
	return b < IOTUNE_LATENCY_BUCKETS - 1 ? b : IOTUNE_LATENCY_BUCKETS - 1;
}

static inline void iotune_latency_add(struct iotune_latency *l, uint64_t us)
{
	l->count++;
	l->sum_us += us;
	l->bucket[iotune_latency_bucket(us)]++;
}

struct iotune_stats {
	uint64_t read_ops;
	uint64_t read_bytes;
	uint64_t write_ops;
	uint64_t write_bytes;
	uint64_t fsync_ops;
	struct iotune_latency read_latency;
	struct iotune_latency write_latency;
	struct iotune_latency flush_latency;
	struct iotune_wc_stats wc;
	struct iotune_ra_stats ra;
	uint64_t fadvise_calls;
	uint64_t dio_reads;
	uint64_t dio_read_bytes;
	uint64_t dio_writes;
	uint64_t dio_write_bytes;
	uint64_t dio_splits;
	uint64_t dio_bounces;
	uint64_t dio_fallbacks;
};

/* dst += src, counter by counter */
void iotune_stats_merge(struct iotune_stats *dst,
			const struct iotune_stats *src);

/*
 * Writes the record text ("name value\n" lines) into buf; returns the
 * length it needs without the NUL (like snprintf).
 */
size_t iotune_stats_format(const struct iotune_stats *s,
			   char *buf,
			   size_t buflen);

/* Parses a record; unknown names are skipped; -EINVAL on bad text. */
int iotune_stats_parse(const char *text,
		       size_t len,
		       struct iotune_stats *s);

/* the number of counters, and the name and address of counter i */
size_t iotune_stats_count(void);
const char *iotune_stats_name(size_t i, char *buf, size_t buflen);
uint64_t *iotune_stats_field(struct iotune_stats *s, size_t i);

#endif /* IOTUNE_STATS_H */
