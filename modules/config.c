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

#include <ctype.h>
#include <errno.h>
#include <inttypes.h>
#include <stdio.h>
#include <string.h>
#include <strings.h>

#include "iotune/config.h"
#include "iotune/readahead.h"

#define KIB ((uint64_t)1024)
#define MIB (KIB * KIB)
#define GIB (KIB * MIB)

enum option_kind {
	OPTION_SIZE,
	OPTION_SIZE_AUTO,	/* "auto" (IOTUNE_SIZE_AUTO) or a size */
	OPTION_MSEC,
	OPTION_UINT,
	OPTION_BOOL,
	OPTION_ENUM,
};

struct option_spec {
	const char *name;
	enum option_kind kind;
	const char *default_text;
	uint64_t min;
	uint64_t max;
	const struct iotune_enum_value *values;
	size_t offset;
};

#define CONFIG_FIELD(field) offsetof(struct iotune_config, field)

static const struct iotune_enum_value readahead_modes[] = {
	{ "off", IOTUNE_RA_OFF },
	{ "kernel", IOTUNE_RA_KERNEL },
	{ "fixed", IOTUNE_RA_FIXED },
	{ "adaptive", IOTUNE_RA_ADAPTIVE },
	{ NULL, 0 },
};

static const struct iotune_enum_value direct_io_choices[] = {
	{ "no", IOTUNE_DIRECT_NO },
	{ "reads", IOTUNE_DIRECT_READS },
	{ "writes", IOTUNE_DIRECT_WRITES },
	{ "both", IOTUNE_DIRECT_BOTH },
	{ "client", IOTUNE_DIRECT_CLIENT },
	{ NULL, 0 },
};

static const struct iotune_enum_value fadvise_choices[] = {
	{ "none", IOTUNE_FADVISE_NONE },
	{ "normal", IOTUNE_FADVISE_NORMAL },
	{ "sequential", IOTUNE_FADVISE_SEQUENTIAL },
	{ "random", IOTUNE_FADVISE_RANDOM },
	{ "noreuse", IOTUNE_FADVISE_NOREUSE },
	{ NULL, 0 },
};

static const struct option_spec option_specs[] = {
	{
		.name = "stats",
		.kind = OPTION_BOOL,
		.default_text = "yes",
		.offset = CONFIG_FIELD(stats),
	},
	{
		.name = "direct io",
		.kind = OPTION_ENUM,
		.default_text = "no",
		.values = direct_io_choices,
		.offset = CONFIG_FIELD(direct_io),
	},
	{
		.name = "direct io min size",
		.kind = OPTION_SIZE,
		.default_text = "64K",
		.min = 0,
		.max = 1 * GIB,
		.offset = CONFIG_FIELD(direct_io_min_size),
	},
	{
		.name = "readahead",
		.kind = OPTION_ENUM,
		.default_text = "kernel",
		.values = readahead_modes,
		.offset = CONFIG_FIELD(readahead),
	},
	{
		.name = "readahead offset",
		.kind = OPTION_SIZE,
		.default_text = "1M",
		.min = 4 * KIB,
		.max = 1 * GIB,
		.offset = CONFIG_FIELD(readahead_offset),
	},
	{
		.name = "readahead size",
		.kind = OPTION_SIZE,
		.default_text = "2M",
		.min = 4 * KIB,
		.max = 1 * GIB,
		.offset = CONFIG_FIELD(readahead_size),
	},
	{
		.name = "readahead max",
		.kind = OPTION_SIZE,
		.default_text = "2M",
		.min = 128 * KIB,
		.max = 1 * GIB,
		.offset = CONFIG_FIELD(readahead_max),
	},
	{
		.name = "readahead budget",
		.kind = OPTION_SIZE,
		.default_text = "64M",
		.min = 0,
		.max = 64 * GIB,
		.offset = CONFIG_FIELD(readahead_budget),
	},
	{
		.name = "readahead pressure",
		.kind = OPTION_UINT,
		.default_text = "10",
		.min = 0,
		.max = 100,
		.offset = CONFIG_FIELD(readahead_pressure),
	},
	{
		.name = "fadvise",
		.kind = OPTION_ENUM,
		.default_text = "none",
		.values = fadvise_choices,
		.offset = CONFIG_FIELD(fadvise),
	},
	{
		.name = "drop behind",
		.kind = OPTION_BOOL,
		.default_text = "no",
		.offset = CONFIG_FIELD(drop_behind),
	},
	{
		.name = "write cache size",
		.kind = OPTION_SIZE,
		.default_text = "1M",
		.min = 0,
		.max = 1 * GIB,
		.offset = CONFIG_FIELD(write_cache_size),
	},
	{
		.name = "write cache bypass size",
		.kind = OPTION_SIZE_AUTO,
		.default_text = "auto",
		.min = 4 * KIB,
		.max = 1 * GIB,
		.offset = CONFIG_FIELD(write_cache_bypass_size),
	},
	{
		.name = "write cache max files",
		.kind = OPTION_UINT,
		.default_text = "10",
		.min = 0,
		.max = 100000,
		.offset = CONFIG_FIELD(write_cache_max_files),
	},
	{
		.name = "write cache flush timeout",
		.kind = OPTION_MSEC,
		.default_text = "1000",
		.min = 1,
		.max = 3600 * 1000,
		.offset = CONFIG_FIELD(write_cache_flush_timeout_ms),
	},
	{
		.name = "write cache batch reservations",
		.kind = OPTION_BOOL,
		.default_text = "no",
		.offset = CONFIG_FIELD(write_cache_batch_reservations),
	},
	{
		.name = "write cache start writeback",
		.kind = OPTION_BOOL,
		.default_text = "yes",
		.offset = CONFIG_FIELD(write_cache_start_writeback),
	},
};

#define NUM_OPTION_SPECS (sizeof(option_specs) / sizeof(option_specs[0]))

static const char *skip_blanks(const char *p)
{
	while (isspace((unsigned char)*p)) {
		p++;
	}
	return p;
}

static bool only_blanks(const char *p)
{
	return *skip_blanks(p) == '\0';
}

/*
 * Reads leading decimal digits.  *end points after them; -EINVAL when
 * there are none, -ERANGE when they do not fit.
 */
static int parse_digits(const char *p, uint64_t *value, const char **end)
{
	uint64_t v = 0;
	const char *start = p;

	while (isdigit((unsigned char)*p)) {
		unsigned digit = (unsigned)(*p - '0');

		if (v > (UINT64_MAX - digit) / 10) {
			return -ERANGE;
		}
		v = v * 10 + digit;
		p++;
	}
	if (p == start) {
		return -EINVAL;
	}
	*value = v;
	*end = p;
	return 0;
}

struct unit_suffix {
	const char *suffix;
	uint64_t multiplier;
};

static int parse_with_units(const char *text,
			    const struct unit_suffix *units,
			    uint64_t *value)
{
	const char *p = NULL;
	const char *unit = NULL;
	size_t unit_len;
	uint64_t number;
	size_t i;
	int ret;

	if (text == NULL) {
		return -EINVAL;
	}
	ret = parse_digits(skip_blanks(text), &number, &p);
	if (ret != 0) {
		return ret;
	}
	unit = skip_blanks(p);
	unit_len = strcspn(unit, " \t\r\n");
	if (!only_blanks(unit + unit_len)) {
		return -EINVAL;
	}
	for (i = 0; units[i].suffix != NULL; i++) {
		uint64_t mult = units[i].multiplier;

		if (strlen(units[i].suffix) != unit_len ||
		    strncasecmp(unit, units[i].suffix, unit_len) != 0) {
			continue;
		}
		if (number > UINT64_MAX / mult) {
			return -ERANGE;
		}
		*value = number * mult;
		return 0;
	}
	return -EINVAL;
}

int iotune_parse_size(const char *text, uint64_t *value)
{
	static const struct unit_suffix units[] = {
		{ "", 1 }, { "b", 1 },
		{ "k", KIB }, { "kb", KIB }, { "kib", KIB },
		{ "m", MIB }, { "mb", MIB }, { "mib", MIB },
		{ "g", GIB }, { "gb", GIB }, { "gib", GIB },
		{ NULL, 0 },
	};

	return parse_with_units(text, units, value);
}

int iotune_parse_msec(const char *text, uint64_t *value)
{
	static const struct unit_suffix units[] = {
		{ "", 1 }, { "ms", 1 }, { "s", 1000 },
		{ NULL, 0 },
	};

	return parse_with_units(text, units, value);
}

int iotune_parse_uint(const char *text, uint64_t *value)
{
	static const struct unit_suffix units[] = {
		{ "", 1 },
		{ NULL, 0 },
	};

	return parse_with_units(text, units, value);
}

int iotune_parse_enum(const char *text,
		      const struct iotune_enum_value *values,
		      int *value)
{
	const char *word = NULL;
	size_t len;
	size_t i;

	if (text == NULL) {
		return -EINVAL;
	}
	word = skip_blanks(text);
	len = strlen(word);
	while (len > 0 && isspace((unsigned char)word[len - 1])) {
		len--;
	}
	for (i = 0; values[i].name != NULL; i++) {
		if (strlen(values[i].name) == len &&
		    strncasecmp(word, values[i].name, len) == 0) {
			*value = values[i].value;
			return 0;
		}
	}
	return -EINVAL;
}

int iotune_parse_bool(const char *text, bool *value)
{
	static const struct iotune_enum_value words[] = {
		{ "yes", 1 }, { "true", 1 }, { "on", 1 }, { "1", 1 },
		{ "no", 0 }, { "false", 0 }, { "off", 0 }, { "0", 0 },
		{ NULL, 0 },
	};
	int v;
	int ret;

	ret = iotune_parse_enum(text, words, &v);
	if (ret != 0) {
		return ret;
	}
	*value = (v != 0);
	return 0;
}

void iotune_format_size(uint64_t value, char *buf, size_t buflen)
{
	if (value != 0 && value % GIB == 0) {
		snprintf(buf, buflen, "%" PRIu64 "G", value / GIB);
	} else if (value != 0 && value % MIB == 0) {
		snprintf(buf, buflen, "%" PRIu64 "M", value / MIB);
	} else if (value != 0 && value % KIB == 0) {
		snprintf(buf, buflen, "%" PRIu64 "K", value / KIB);
	} else {
		snprintf(buf, buflen, "%" PRIu64, value);
	}
}

static void describe_accepted(const struct option_spec *spec,
			      char *buf,
			      size_t buflen)
{
	char lo[32];
	char hi[32];
	size_t used;
	size_t i;

	switch (spec->kind) {
	case OPTION_SIZE:
	case OPTION_SIZE_AUTO:
		iotune_format_size(spec->min, lo, sizeof(lo));
		iotune_format_size(spec->max, hi, sizeof(hi));
		snprintf(buf, buflen,
			 "%sa size in bytes with an optional K, M or G suffix, "
			 "from %s to %s",
			 spec->kind == OPTION_SIZE_AUTO ? "auto, or " : "",
			 lo, hi);
		return;
	case OPTION_MSEC:
		snprintf(buf, buflen,
			 "a time in milliseconds (optional suffix ms or s), "
			 "from %" PRIu64 " to %" PRIu64,
			 spec->min, spec->max);
		return;
	case OPTION_UINT:
		snprintf(buf, buflen,
			 "a whole number from %" PRIu64 " to %" PRIu64,
			 spec->min, spec->max);
		return;
	case OPTION_BOOL:
		snprintf(buf, buflen, "yes or no");
		return;
	case OPTION_ENUM:
		used = (size_t)snprintf(buf, buflen, "one of:");
		for (i = 0; spec->values[i].name != NULL && used < buflen;
		     i++) {
			used += (size_t)snprintf(buf + used, buflen - used,
						 "%s %s", i == 0 ? "" : ",",
						 spec->values[i].name);
		}
		return;
	}
	snprintf(buf, buflen, "?");
}

static int parse_number_option(const struct option_spec *spec,
			       const char *text,
			       uint64_t *value)
{
	static const struct iotune_enum_value auto_word[] = {
		{ "auto", 1 },
		{ NULL, 0 },
	};
	int auto_value;
	int ret;

	switch (spec->kind) {
	case OPTION_SIZE_AUTO:
		if (iotune_parse_enum(text, auto_word, &auto_value) == 0) {
			*value = IOTUNE_SIZE_AUTO;
			return 0;
		}
		ret = iotune_parse_size(text, value);
		break;
	case OPTION_SIZE:
		ret = iotune_parse_size(text, value);
		break;
	case OPTION_MSEC:
		ret = iotune_parse_msec(text, value);
		break;
	default:
		ret = iotune_parse_uint(text, value);
		break;
	}
	if (ret != 0) {
		return ret;
	}
	if (*value < spec->min || *value > spec->max) {
		return -ERANGE;
	}
	return 0;
}

static int store_option(const struct option_spec *spec,
			const char *text,
			struct iotune_config *config)
{
	char *field = (char *)config + spec->offset;
	uint64_t number;
	bool flag;
	int choice;
	int ret;

	switch (spec->kind) {
	case OPTION_BOOL:
		ret = iotune_parse_bool(text, &flag);
		if (ret == 0) {
			memcpy(field, &flag, sizeof(flag));
		}
		return ret;
	case OPTION_ENUM:
		ret = iotune_parse_enum(text, spec->values, &choice);
		if (ret == 0) {
			memcpy(field, &choice, sizeof(choice));
		}
		return ret;
	default:
		ret = parse_number_option(spec, text, &number);
		if (ret == 0) {
			memcpy(field, &number, sizeof(number));
		}
		return ret;
	}
}

int iotune_config_load(struct iotune_config *config,
		       iotune_option_lookup_fn lookup,
		       void *private_data,
		       char *errbuf,
		       size_t errbuf_len)
{
	char accepted[256];
	size_t i;

	memset(config, 0, sizeof(*config));

	for (i = 0; i < NUM_OPTION_SPECS; i++) {
		const struct option_spec *spec = &option_specs[i];
		const char *text = NULL;
		int ret;

		if (lookup != NULL) {
			text = lookup(private_data, spec->name);
		}

		if (text == NULL) {
			ret = store_option(spec, spec->default_text, config);
			if (ret != 0) {
				/* a bug in the table, not in smb.conf */
				snprintf(errbuf, errbuf_len,
					 "built-in default '%s' of "
					 "'iotune:%s' does not parse",
					 spec->default_text, spec->name);
				return -EINVAL;
			}
			continue;
		}
		ret = store_option(spec, text, config);
		if (ret == 0) {
			continue;
		}
		describe_accepted(spec, accepted, sizeof(accepted));
		snprintf(errbuf, errbuf_len,
			 "invalid value '%s' for 'iotune:%s'%s: expected %s",
			 text, spec->name,
			 ret == -ERANGE ? " (out of range)" : "",
			 accepted);
		return -EINVAL;
	}
	return 0;
}

static const char *enum_name(const struct iotune_enum_value *values,
			     int value)
{
	size_t i;

	for (i = 0; values[i].name != NULL; i++) {
		if (values[i].value == value) {
			return values[i].name;
		}
	}
	return "?";
}

void iotune_config_describe(const struct iotune_config *config,
			    char *buf,
			    size_t buflen)
{
	char size[32];
	char bypass[32] = "auto";
	char ra_max[32];
	char budget[32];

	iotune_format_size(config->write_cache_size, size, sizeof(size));
	if (config->write_cache_bypass_size != IOTUNE_SIZE_AUTO) {
		iotune_format_size(config->write_cache_bypass_size, bypass,
				   sizeof(bypass));
	}
	iotune_format_size(config->readahead_max, ra_max, sizeof(ra_max));
	iotune_format_size(config->readahead_budget, budget, sizeof(budget));
	snprintf(buf, buflen,
		 "write cache size = %s, write cache bypass size = %s"
		 ", write cache max files = %" PRIu64
		 ", write cache flush timeout = %" PRIu64 "ms"
		 ", write cache batch reservations = %s"
		 ", write cache start writeback = %s, readahead = %s"
		 ", readahead max = %s, readahead budget = %s, fadvise = %s"
		 ", drop behind = %s, direct io = %s, stats = %s",
		 size, bypass, config->write_cache_max_files,
		 config->write_cache_flush_timeout_ms,
		 config->write_cache_batch_reservations ? "yes" : "no",
		 config->write_cache_start_writeback ? "yes" : "no",
		 enum_name(readahead_modes, config->readahead), ra_max, budget,
		 enum_name(fadvise_choices, config->fadvise),
		 config->drop_behind ? "yes" : "no",
		 enum_name(direct_io_choices, config->direct_io),
		 config->stats ? "yes" : "no");
}
