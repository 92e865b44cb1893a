/*
 * iotune - throughput counters (pure core, no Samba)
 *
 * Copyright (C) iotune authors 2026
 *
 * This program is free software; you can redistribute it and/or modify
 * it under the terms of the GNU General Public License as published by
 * the Free Software Foundation; either version 3 of the License, or
 * (at your option) any later version.
 *
 * This program is distributed in the hope that it will be useful,
 * but WITHOUT ANY WARRANTY; without even the implied warranty of
 * MERCHANTABILITY or FITNESS FOR A PARTICULAR PURPOSE.  See the
 * GNU General Public License for more details.
 *
 * You should have received a copy of the GNU General Public License
 * along with this program.  If not, see <http://www.gnu.org/licenses/>.
 */

#include <ctype.h>
#include <errno.h>
#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "iotune/stats.h"

/*
 * struct iotune_stats is nothing but uint64_t counters; this table names
 * them in the order they are laid out.
 */
enum part_kind {
	PART_SCALAR,
	PART_LATENCY,
	PART_REASONS,
	PART_SIZES,
};

struct part {
	const char *name;
	enum part_kind kind;
	size_t offset;
};

#define AT(field) offsetof(struct iotune_stats, field)

static const struct part parts[] = {
	{ "read_ops", PART_SCALAR, AT(read_ops) },
	{ "read_bytes", PART_SCALAR, AT(read_bytes) },
	{ "write_ops", PART_SCALAR, AT(write_ops) },
	{ "write_bytes", PART_SCALAR, AT(write_bytes) },
	{ "fsync_ops", PART_SCALAR, AT(fsync_ops) },
	{ "read_latency_us", PART_LATENCY, AT(read_latency) },
	{ "write_latency_us", PART_LATENCY, AT(write_latency) },
	{ "flush_latency_us", PART_LATENCY, AT(flush_latency) },
	{ "wc_writes_total", PART_SCALAR, AT(wc.writes_total) },
	{ "wc_writes_cached", PART_SCALAR, AT(wc.writes_cached) },
	{ "wc_writes_bypassed", PART_SCALAR, AT(wc.writes_bypassed) },
	{ "wc_bytes_absorbed", PART_SCALAR, AT(wc.bytes_absorbed) },
	{ "wc_flushes", PART_REASONS, AT(wc.flushes) },
	{ "wc_flush_writes", PART_SCALAR, AT(wc.flush_writes) },
	{ "wc_flush_bytes", PART_SCALAR, AT(wc.flush_bytes) },
	{ "wc_flush_size", PART_SIZES, AT(wc.flush_size) },
	{ "wc_flush_short_writes", PART_SCALAR, AT(wc.flush_short_writes) },
	{ "wc_flush_errors", PART_SCALAR, AT(wc.flush_errors) },
	{ "wc_read_hits_full", PART_SCALAR, AT(wc.read_hits_full) },
	{ "wc_read_hits_overlay", PART_SCALAR, AT(wc.read_hits_overlay) },
	{ "wc_caches_active", PART_SCALAR, AT(wc.caches_active) },
	{ "wc_caches_refused", PART_SCALAR, AT(wc.caches_refused) },
	{ "wc_reserve_calls", PART_SCALAR, AT(wc.reserve_calls) },
	{ "wc_reserve_us", PART_SCALAR, AT(wc.reserve_us) },
	{ "wc_reserve_full", PART_SCALAR, AT(wc.reserve_full) },
	{ "wc_writes_failed", PART_SCALAR, AT(wc.writes_failed) },
	{ "wc_bytes_dropped", PART_SCALAR, AT(wc.bytes_dropped) },
	{ "ra_prefetch_calls", PART_SCALAR, AT(ra.prefetch_calls) },
	{ "ra_prefetch_bytes", PART_SCALAR, AT(ra.prefetch_bytes) },
	{ "ra_windows_grown", PART_SCALAR, AT(ra.windows_grown) },
	{ "ra_windows_shrunk", PART_SCALAR, AT(ra.windows_shrunk) },
	{ "ra_budget_refusals", PART_SCALAR, AT(ra.budget_refusals) },
	{ "ra_streams_detected", PART_SCALAR, AT(ra.streams_detected) },
	{ "ra_drop_calls", PART_SCALAR, AT(ra.drop_calls) },
	{ "ra_drop_bytes", PART_SCALAR, AT(ra.drop_bytes) },
	{ "ra_pressure_shrinks", PART_SCALAR, AT(ra.pressure_shrinks) },
	{ "ra_takeovers", PART_SCALAR, AT(ra.takeovers) },
	{ "ra_handbacks", PART_SCALAR, AT(ra.handbacks) },
	{ "fadvise_calls", PART_SCALAR, AT(fadvise_calls) },
	{ "dio_reads", PART_SCALAR, AT(dio_reads) },
	{ "dio_read_bytes", PART_SCALAR, AT(dio_read_bytes) },
	{ "dio_writes", PART_SCALAR, AT(dio_writes) },
	{ "dio_write_bytes", PART_SCALAR, AT(dio_write_bytes) },
	{ "dio_splits", PART_SCALAR, AT(dio_splits) },
	{ "dio_bounces", PART_SCALAR, AT(dio_bounces) },
	{ "dio_fallbacks", PART_SCALAR, AT(dio_fallbacks) },
};

#define NUM_PARTS (sizeof(parts) / sizeof(parts[0]))

static size_t part_width(const struct part *p)
{
	switch (p->kind) {
	case PART_LATENCY:
		return 2 + IOTUNE_LATENCY_BUCKETS;
	case PART_REASONS:
		return IOTUNE_FLUSH_REASONS;
	case PART_SIZES:
		return IOTUNE_FLUSH_SIZE_BUCKETS;
	case PART_SCALAR:
		break;
	}
	return 1;
}

size_t iotune_stats_count(void)
{
	return sizeof(struct iotune_stats) / sizeof(uint64_t);
}

/* the part holding counter i, and i's index within it */
static const struct part *find_part(size_t i, size_t *k)
{
	size_t p;

	for (p = 0; p < NUM_PARTS; p++) {
		size_t w = part_width(&parts[p]);

		if (i < w) {
			*k = i;
			return &parts[p];
		}
		i -= w;
	}
	return NULL;
}

const char *iotune_stats_name(size_t i, char *buf, size_t buflen)
{
	size_t k = 0;
	const struct part *p = find_part(i, &k);

	if (p == NULL) {
		return NULL;
	}
	switch (p->kind) {
	case PART_SCALAR:
		snprintf(buf, buflen, "%s", p->name);
		break;
	case PART_LATENCY:
		if (k == 0) {
			snprintf(buf, buflen, "%s_count", p->name);
		} else if (k == 1) {
			snprintf(buf, buflen, "%s_sum", p->name);
		} else {
			snprintf(buf, buflen, "%s_bucket_%zu", p->name, k - 2);
		}
		break;
	case PART_REASONS:
		snprintf(buf, buflen, "%s_%s", p->name,
			 iotune_flush_reason_name((enum iotune_flush_reason)k));
		break;
	case PART_SIZES:
		snprintf(buf, buflen, "%s_bucket_%zu", p->name, k);
		break;
	}
	return buf;
}

uint64_t *iotune_stats_field(struct iotune_stats *s, size_t i)
{
	size_t k = 0;
	const struct part *p = find_part(i, &k);

	if (p == NULL) {
		return NULL;
	}
	return (uint64_t *)((char *)s + p->offset) + k;
}

void iotune_stats_merge(struct iotune_stats *dst,
			const struct iotune_stats *src)
{
	uint64_t *d = (uint64_t *)dst;
	const uint64_t *s = (const uint64_t *)src;
	size_t i;

	for (i = 0; i < iotune_stats_count(); i++) {
		d[i] += s[i];
	}
}

size_t iotune_stats_format(const struct iotune_stats *s,
			   char *buf,
			   size_t buflen)
{
	struct iotune_stats *mut = (struct iotune_stats *)s;
	size_t used = 0;
	size_t i;
	char name[64];

	if (buflen > 0) {
		buf[0] = '\0';
	}
	for (i = 0; i < iotune_stats_count(); i++) {
		int n = snprintf(used < buflen ? buf + used : NULL,
				 used < buflen ? buflen - used : 0,
				 "%s %" PRIu64 "\n",
				 iotune_stats_name(i, name, sizeof(name)),
				 *iotune_stats_field(mut, i));

		if (n > 0) {
			used += (size_t)n;
		}
	}
	return used;
}

/*
 * The field called name; *next is where the search starts (the field
 * after the last one found), so that text in the order of
 * iotune_stats_format() is parsed in one pass.
 */
static bool field_by_name(struct iotune_stats *s, const char *name,
			  size_t len, size_t *next, uint64_t **field)
{
	size_t count = iotune_stats_count();
	char buf[64];
	size_t j;

	for (j = 0; j < count; j++) {
		size_t i = (*next + j) % count;
		const char *n = iotune_stats_name(i, buf, sizeof(buf));

		if (strlen(n) == len && memcmp(n, name, len) == 0) {
			*field = iotune_stats_field(s, i);
			*next = i + 1;
			return true;
		}
	}
	return false;
}

int iotune_stats_parse(const char *text,
		       size_t len,
		       struct iotune_stats *s)
{
	const char *p = text;
	const char *end = text + len;
	size_t next = 0;

	memset(s, 0, sizeof(*s));
	while (p < end) {
		const char *eol = memchr(p, '\n', (size_t)(end - p));
		const char *sp = NULL;
		uint64_t *field = NULL;
		uint64_t value = 0;
		const char *q = NULL;

		if (eol == NULL) {
			return -EINVAL;
		}
		sp = memchr(p, ' ', (size_t)(eol - p));
		if (sp == NULL || sp == p || sp + 1 == eol) {
			return -EINVAL;
		}
		for (q = sp + 1; q < eol; q++) {
			if (!isdigit((unsigned char)*q) ||
			    value > (UINT64_MAX - (uint64_t)(*q - '0')) / 10) {
				return -EINVAL;
			}
			value = value * 10 + (uint64_t)(*q - '0');
		}
		if (field_by_name(s, p, (size_t)(sp - p), &next, &field)) {
			*field = value;
		}
		p = eol + 1;
	}
	return 0;
}
