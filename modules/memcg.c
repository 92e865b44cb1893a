/*
 * iotune - the memory cgroup that bounds smbd's page cache (pure core,
 * no Samba; rules in include/iotune/memcg.h)
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

#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "iotune/memcg.h"
#include "iotune/util.h"

/* a cgroup v1 limit this high is none (the kernel's "unlimited") */
#define IOTUNE_MEMCG_V1_NONE (1ULL << 62)

/* whether a list of controllers separated by sep has "memory" */
static bool has_memory(const char *list, size_t len, char sep)
{
	const char *p = list;
	const char *end = list + len;

	while (p < end) {
		const char *comma = memchr(p, sep, (size_t)(end - p));
		size_t n = comma != NULL ? (size_t)(comma - p) :
					   (size_t)(end - p);

		if (n == strlen("memory") && memcmp(p, "memory", n) == 0) {
			return true;
		}
		p += n + 1;
	}
	return false;
}

void iotune_cgroup_line(const char *line, struct iotune_cgroup_paths *c)
{
	const char *first = strchr(line, ':');
	const char *second = NULL;

	if (first == NULL) {
		return;
	}
	second = strchr(first + 1, ':');
	if (second == NULL || second[1] != '/') {
		return;
	}
	if (first - line == 1 && line[0] == '0' && second == first + 1) {
		snprintf(c->v2, sizeof(c->v2), "%s", second + 1);
		return;
	}
	if (has_memory(first + 1, (size_t)(second - first - 1), ',')) {
		snprintf(c->v1_memory, sizeof(c->v1_memory), "%s",
			 second + 1);
	}
}

bool iotune_cgroup_v2_has_memory(const char *controllers)
{
	return has_memory(controllers, strcspn(controllers, "\n"), ' ');
}

bool iotune_cgroup_number(const char *text, uint64_t *value)
{
	char *end = NULL;
	unsigned long long v = 0;

	if (strncmp(text, "max", 3) == 0 &&
	    (text[3] == '\0' || text[3] == '\n')) {
		*value = 0;
		return true;
	}
	if (text[0] < '0' || text[0] > '9') {
		return false;
	}
	errno = 0;
	v = strtoull(text, &end, 10);
	if (errno != 0 || (*end != '\0' && *end != '\n')) {
		return false;
	}
	*value = v >= IOTUNE_MEMCG_V1_NONE ? 0 : (uint64_t)v;
	return true;
}

/* the lowest nonzero limit of names in one directory; 0: none */
static uint64_t lowest_of(const char *dir, const char *const *names,
			  iotune_cgroup_read_fn read, void *private_data)
{
	uint64_t limit = 0;
	uint64_t v = 0;
	size_t i;

	for (i = 0; names[i] != NULL; i++) {
		if (read(dir, names[i], &v, private_data) && v != 0) {
			limit = limit == 0 ? v : MIN(limit, v);
		}
	}
	return limit;
}

uint64_t iotune_memcg_walk(const char *root,
			   const char *dir,
			   const char *const *names,
			   iotune_cgroup_read_fn read,
			   void *private_data)
{
	char path[4096 + 64];
	size_t root_len = strlen(root);
	uint64_t limit = 0;
	uint64_t v = 0;
	char *slash = NULL;

	if (strncmp(dir, root, root_len) != 0 ||
	    (dir[root_len] != '\0' && dir[root_len] != '/') ||
	    (size_t)snprintf(path, sizeof(path), "%s", dir) >= sizeof(path)) {
		return 0;
	}
	while (true) {
		v = lowest_of(path, names, read, private_data);
		if (v != 0) {
			limit = limit == 0 ? v : MIN(limit, v);
		}
		if (strlen(path) <= root_len) {
			return limit;
		}
		slash = strrchr(path + root_len, '/');
		if (slash == NULL) {
			return limit;
		}
		*slash = '\0';
	}
}
