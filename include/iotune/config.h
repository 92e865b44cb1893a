/*
 * iotune - option parsing and per-share configuration
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

#ifndef IOTUNE_CONFIG_H
#define IOTUNE_CONFIG_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

/*
 * Value parsers.  Each returns 0 on success, -EINVAL for text that is not
 * a value of the type and -ERANGE for a value out of range.  Leading and
 * trailing blanks are ignored, as smb.conf does.
 */

/* "4096", "64K", "1M", "2 GiB": binary multiples, case-insensitive */
int iotune_parse_size(const char *text, uint64_t *value);

/* "250", "250ms", "2s" */
int iotune_parse_msec(const char *text, uint64_t *value);

/* plain decimal unsigned integer */
int iotune_parse_uint(const char *text, uint64_t *value);

/* yes/no, true/false, on/off, 1/0, case-insensitive (like smb.conf) */
int iotune_parse_bool(const char *text, bool *value);

struct iotune_enum_value {
	const char *name;
	int value;
};

/* names are matched case-insensitively; the table ends with name NULL */
int iotune_parse_enum(const char *text,
		      const struct iotune_enum_value *values,
		      int *value);

/* Formats a size the way an admin would write it: "1M", "64K", "1000" */
void iotune_format_size(uint64_t value, char *buf, size_t buflen);

/* "auto" for options that take it */
#define IOTUNE_SIZE_AUTO UINT64_MAX

/*
 * The configuration of one share, read once at tree connect.
 */
enum iotune_fadvise_choice {
	IOTUNE_FADVISE_NONE,
	IOTUNE_FADVISE_NORMAL,
	IOTUNE_FADVISE_SEQUENTIAL,
	IOTUNE_FADVISE_RANDOM,
	IOTUNE_FADVISE_NOREUSE,
};

enum iotune_direct_io {
	IOTUNE_DIRECT_NO,
	IOTUNE_DIRECT_READS,
	IOTUNE_DIRECT_WRITES,
	IOTUNE_DIRECT_BOTH,
	IOTUNE_DIRECT_CLIENT,
};

struct iotune_config {
	bool stats;
	int direct_io;			/* enum iotune_direct_io */
	uint64_t direct_io_min_size;
	int readahead;			/* enum iotune_ra_mode */
	uint64_t readahead_offset;
	uint64_t readahead_size;
	uint64_t readahead_max;
	uint64_t readahead_budget;
	uint64_t readahead_pressure;	/* percent; 0: ignored */
	int fadvise;			/* enum iotune_fadvise_choice */
	bool drop_behind;
	uint64_t write_cache_size;
	uint64_t write_cache_bypass_size;	/* or IOTUNE_SIZE_AUTO */
	uint64_t write_cache_max_files;
	uint64_t write_cache_flush_timeout_ms;
	bool write_cache_batch_reservations;
	bool write_cache_start_writeback;
};

/*
 * Returns the raw smb.conf text of "iotune:<name>" for the share, or NULL
 * when the option is not set.
 */
typedef const char *(*iotune_option_lookup_fn)(void *private_data,
					       const char *name);

/*
 * Loads every option, defaults for the unset ones (all of them when
 * lookup is NULL).  On an invalid value
 * returns -EINVAL and writes one line for the admin into errbuf naming
 * the option, the bad value and what is accepted.
 */
int iotune_config_load(struct iotune_config *config,
		       iotune_option_lookup_fn lookup,
		       void *private_data,
		       char *errbuf,
		       size_t errbuf_len);

/* One line "write cache size = 1M, ..." for the log */
void iotune_config_describe(const struct iotune_config *config,
			    char *buf,
			    size_t buflen);

#endif /* IOTUNE_CONFIG_H */
