/*
 * iotune - the memory cgroup that bounds smbd's page cache (pure core,
 * no Samba): which cgroup files to read, and what they say.
 *
 * Copyright (C) iotune authors 2026
 * SPDX-License-Identifier: GPL-3.0-or-later
 *
 * /proc/self/cgroup names smbd's cgroup on each hierarchy: "0::<path>"
 * on cgroup v2, "<n>:<controllers>:<path>" on v1, where the memory
 * controller's line is the one that counts.  The limit that bounds
 * smbd's page cache is the lowest of the cgroup's own and every
 * ancestor's up to the hierarchy's root, the root included (in a
 * container the root may be the container's cgroup): on v2 memory.high
 * and memory.max, on v1 memory.limit_in_bytes, where a value of 2^62 or
 * more is the kernel's "unlimited".  The walk reads the files again at
 * every sample, so a limit set later on any of them counts.
 */

#ifndef IOTUNE_MEMCG_H
#define IOTUNE_MEMCG_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

/* smbd's cgroup paths, relative to each hierarchy's root; "": none */
struct iotune_cgroup_paths {
	char v2[4096];
	char v1_memory[4096];
};

/* one line of /proc/self/cgroup (without its newline) into paths */
void iotune_cgroup_line(const char *line, struct iotune_cgroup_paths *c);

/* a v2 root's cgroup.controllers text: the memory controller is on */
bool iotune_cgroup_v2_has_memory(const char *controllers);

/*
 * A limit file's text: true and the limit in *value (0: "max", none),
 * false when it is not a number.
 */
bool iotune_cgroup_number(const char *text, uint64_t *value);

/* reads a limit file of a directory: false when it is not there */
typedef bool (*iotune_cgroup_read_fn)(const char *dir, const char *name,
				      uint64_t *value, void *private_data);

/*
 * The lowest limit in names (a NULL-terminated list) of dir and of each
 * of its ancestors up to root, root included; 0: none.  root has no
 * trailing slash; a dir that is neither root nor under it has none.
 */
uint64_t iotune_memcg_walk(const char *root,
			   const char *dir,
			   const char *const *names,
			   iotune_cgroup_read_fn read,
			   void *private_data);

#endif /* IOTUNE_MEMCG_H */
