/*
 * iotune: the kernel's memory-pressure signals for adaptive read-ahead.
 * The core (modules/readahead.c, rules in include/iotune/readahead.h)
 * decides; this file reads, at most every IOTUNE_RA_PRESSURE_INTERVAL_MS
 * while reads arrive, Linux's pressure stall information (PSI) of smbd's
 * cgroup or of the whole system, and the limit of the memory cgroup
 * that bounds smbd's page cache (cgroup v2 or v1), and hands them to the
 * core.
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

#include "includes.h"
#include "smbd/smbd.h"

#include "vfs_iotune.h"
#include "iotune/memcg.h"

#undef DBGC_CLASS
#define DBGC_CLASS DBGC_VFS

/* failed reads of the pressure file in a row before the process is blind */
#define IOTUNE_PSI_RETRIES 3

/* the hierarchies a memory cgroup may be on, v2's first; limit files */
struct iotune_memcg_kind {
	const char *root;
	bool v1;
	const char *limits[3];
};

static const struct iotune_memcg_kind iotune_memcg_kinds[] = {
	{ "/sys/fs/cgroup", false, { "memory.high", "memory.max", NULL } },
	{ "/sys/fs/cgroup/unified", false,
	  { "memory.high", "memory.max", NULL } },
	{ "/sys/fs/cgroup/memory", true, { "memory.limit_in_bytes", NULL } },
};

static void iotune_cgroup_paths_of_self(struct iotune_cgroup_paths *c)
{
	char line[PATH_MAX + 64];
	FILE *f = NULL;

	c->v2[0] = c->v1_memory[0] = '\0';
	f = fopen("/proc/self/cgroup", "re");
	if (f == NULL) {
		return;
	}
	while (fgets(line, sizeof(line), f) != NULL) {
		line[strcspn(line, "\n")] = '\0';
		iotune_cgroup_line(line, c);
	}
	fclose(f);
}

/* a small file of dir's, as a string; false: not there, or empty */
static bool iotune_cgroup_text(const char *dir, const char *name,
			       char *buf, size_t size)
{
	char path[PATH_MAX + 64];
	ssize_t n = -1;
	int fd = -1;

	snprintf(path, sizeof(path), "%s/%s", dir, name);
	fd = open(path, O_RDONLY | O_CLOEXEC);
	if (fd == -1) {
		return false;
	}
	n = pread(fd, buf, size - 1, 0);
	close(fd);
	if (n <= 0) {
		return false;
	}
	buf[n] = '\0';
	return true;
}

static bool iotune_cgroup_read(const char *dir, const char *name,
			       uint64_t *value, void *private_data)
{
	char buf[32];

	return iotune_cgroup_text(dir, name, buf, sizeof(buf)) &&
	       iotune_cgroup_number(buf, value);
}

/*
 * Whether the memory controller is on this hierarchy: v2 lists it in the
 * root's cgroup.controllers (smbd's own cgroup may lack memory.max where
 * its parent does not delegate the controller, while an ancestor's limit
 * still bounds its pages); v1's memory hierarchy is its own mount.
 */
static bool iotune_memcg_on(const struct iotune_memcg_kind *kind)
{
	char buf[256];

	if (kind->v1) {
		return access(kind->root, F_OK) == 0;
	}
	return iotune_cgroup_text(kind->root, "cgroup.controllers", buf,
				  sizeof(buf)) &&
	       iotune_cgroup_v2_has_memory(buf);
}

/*
 * smbd's memory cgroup (memcg.h): its directory on the first hierarchy
 * with the memory controller.  Found when the pressure file opens; a
 * process moved to another cgroup later keeps the first.  Each sample
 * walks it and its ancestors (a few small reads, at most five times a
 * second while reads arrive).
 */
static void iotune_memcg_find(struct iotune_process *p,
			      const struct iotune_cgroup_paths *c)
{
	char dir[PATH_MAX + 64];
	const char *path = NULL;
	size_t i;

	TALLOC_FREE(p->memcg);
	for (i = 0; i < ARRAY_SIZE(iotune_memcg_kinds); i++) {
		const struct iotune_memcg_kind *kind = &iotune_memcg_kinds[i];

		path = kind->v1 ? c->v1_memory : c->v2;
		if (path[0] != '/' || !iotune_memcg_on(kind)) {
			continue;
		}
		snprintf(dir, sizeof(dir), "%s%s", kind->root, path);
		if (access(dir, F_OK) == 0) {
			p->memcg = talloc_strdup(p, dir);
			p->memcg_kind = kind;
			DBG_DEBUG("memory cgroup %s\n", dir);
			return;
		}
	}
}

static void iotune_memcg_sample(struct iotune_process *p)
{
	uint64_t ram = 0;
	uint64_t limit = 0;

	if (p->memcg != NULL) {
		limit = iotune_memcg_walk(p->memcg_kind->root, p->memcg,
					  p->memcg_kind->limits,
					  iotune_cgroup_read, NULL);
	}
	ram = (uint64_t)sysconf(_SC_PHYS_PAGES) *
	      (uint64_t)sysconf(_SC_PAGESIZE);
	iotune_ra_pressure_limit(&p->ra_budget.pressure, limit, ram);
}

/*
 * Memory pressure (readahead.h): the cumulative "some" stall time of
 * smbd's cgroup on the cgroup v2 hierarchy (<cgroup>/memory.pressure),
 * else of the whole system (/proc/pressure/memory; stalls in a v1 memory
 * cgroup's reclaim count there).  Opened at the process's first sample:
 * smbd forks a process per connection, each may be in its own cgroup.
 */
static int iotune_psi_open(struct iotune_process *p)
{
	struct iotune_cgroup_paths c;
	char path[PATH_MAX + 64];
	int fd = -1;
	size_t i;

	iotune_cgroup_paths_of_self(&c);
	iotune_memcg_find(p, &c);
	for (i = 0; c.v2[0] == '/' && c.v2[1] != '\0' &&
		    i < ARRAY_SIZE(iotune_memcg_kinds) &&
		    !iotune_memcg_kinds[i].v1 && fd == -1; i++) {
		snprintf(path, sizeof(path), "%s%s/memory.pressure",
			 iotune_memcg_kinds[i].root, c.v2);
		fd = open(path, O_RDONLY | O_CLOEXEC);
	}
	if (fd == -1) {
		snprintf(path, sizeof(path), "/proc/pressure/memory");
		fd = open(path, O_RDONLY | O_CLOEXEC);
	}
	if (fd == -1) {
		DBG_INFO("no memory pressure information (PSI): adaptive "
			 "read-ahead does not see memory pressure\n");
		return -1;
	}
	DBG_DEBUG("memory pressure from %s\n", path);
	return fd;
}

/* "12.34" percent: 123 permille */
static unsigned iotune_psi_permille(const char *text)
{
	char *end = NULL;
	unsigned long whole = strtoul(text, &end, 10);
	unsigned tenths = 0;

	if (end != NULL && end[0] == '.' && isdigit((unsigned char)end[1])) {
		tenths = (unsigned)(end[1] - '0');
	}
	return (unsigned)MIN(whole * 10 + tenths, 1000);
}

/*
 * "some avg10=1.23 avg60=... avg300=... total=<us>\nfull ...": the
 * cumulative stall time and the share stalled in the last 10 s
 */
static bool iotune_psi_read(int fd, uint64_t *stall_us, unsigned *avg10)
{
	char buf[256];
	const char *total = NULL;
	const char *avg = NULL;
	ssize_t n = pread(fd, buf, sizeof(buf) - 1, 0);

	if (n <= 0) {
		errno = (n == 0) ? ENODATA : errno;
		return false;
	}
	buf[n] = '\0';
	total = strstr(buf, "total=");
	avg = strstr(buf, "avg10=");
	if (total == NULL || avg == NULL) {
		errno = EPROTO;
		return false;
	}
	*stall_us = strtoull(total + strlen("total="), NULL, 10);
	*avg10 = iotune_psi_permille(avg + strlen("avg10="));
	return true;
}

void iotune_pressure_update(struct iotune_process *p)
{
	uint64_t now = iotune_now_ms();
	uint64_t stall_us = 0;
	unsigned avg10 = 0;

	if (p->psi_fd == -1 ||
	    !iotune_ra_pressure_due(&p->ra_budget.pressure, now)) {
		return;
	}
	if (p->psi_fd == -2) {
		p->psi_fd = iotune_psi_open(p);
	}
	if (p->psi_fd >= 0 && !iotune_psi_read(p->psi_fd, &stall_us, &avg10)) {
		/*
		 * Its cgroup went away (smbd moved out of one that was then
		 * removed), or the file was not what we read: open the
		 * process's current one at the next sample, which starts
		 * afresh; give up after a few failures in a row.
		 */
		DBG_INFO("reading memory pressure failed: %s\n",
			 strerror(errno));
		close(p->psi_fd);
		p->psi_fd = ++p->psi_failures < IOTUNE_PSI_RETRIES ? -2 : -1;
		iotune_ra_pressure_restart(&p->ra_budget.pressure, now);
		if (p->psi_fd == -2) {
			return;
		}
	}
	if (p->psi_fd == -1) {
		/* no signal: adaptive never leaves reads to Linux's */
		p->ra_budget.pressure.blind = true;
		return;
	}
	p->psi_failures = 0;
	iotune_ra_pressure_sample(&p->ra_budget.pressure, now, stall_us,
				  avg10);
	iotune_memcg_sample(p);
	DBG_DEBUG("memory pressure: stalled %u/1000 of the last interval%s\n",
		  p->ra_budget.pressure.permille,
		  p->ra_budget.pressure.limited ?
		  ", in a memory cgroup with a limit" : "");
}

void iotune_ra_process_fini(struct iotune_process *p)
{
	if (p->psi_fd >= 0) {
		close(p->psi_fd);
	}
	p->psi_fd = -1;
	TALLOC_FREE(p->memcg);
}

