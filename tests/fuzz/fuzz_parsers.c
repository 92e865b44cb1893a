/*
 * libFuzzer target: iotune's text parsers (option values, counter
 * records) on arbitrary input.  They must never crash, read out of
 * bounds, or accept what they then cannot format back the same.
 *
 * Copyright (C) iotune authors 2026
 * SPDX-License-Identifier: GPL-3.0-or-later
 */

#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "iotune/config.h"
#include "iotune/stats.h"

static const char *lookup_all(void *private_data, const char *name)
{
	return private_data;
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
	char *text = malloc(size + 1);
	struct iotune_config config;
	struct iotune_stats stats;
	struct iotune_stats again;
	char err[256];
	uint64_t v;
	bool b;

	if (text == NULL) {
		return 0;
	}
	memcpy(text, data, size);
	text[size] = '\0';

	if (iotune_parse_size(text, &v) == 0) {
		char formatted[32];
		uint64_t back;

		iotune_format_size(v, formatted, sizeof(formatted));
		if (iotune_parse_size(formatted, &back) != 0 || back != v) {
			abort();
		}
	}
	(void)iotune_parse_msec(text, &v);
	(void)iotune_parse_bool(text, &b);
	(void)iotune_config_load(&config, lookup_all, text, err, sizeof(err));

	if (iotune_stats_parse((const char *)data, size, &stats) == 0) {
		size_t need = iotune_stats_format(&stats, NULL, 0);
		char *buf = malloc(need + 1);

		if (buf == NULL) {
			abort();
		}
		iotune_stats_format(&stats, buf, need + 1);
		if (iotune_stats_parse(buf, need, &again) != 0 ||
		    memcmp(&stats, &again, sizeof(stats)) != 0) {
			abort();
		}
		free(buf);
	}
	free(text);
	return 0;
}
