/*
 * iotune - find a file's direct I/O alignment (pure core, no Samba)
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

#define _GNU_SOURCE

#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <sys/stat.h>
#include <sys/sysmacros.h>

#include "iotune/dio.h"

static uint32_t read_block_size(const char *path)
{
	char buf[32] = {0};
	unsigned long v = 0;
	char *end = NULL;
	FILE *f = NULL;

	f = fopen(path, "re");
	if (f == NULL) {
		return 0;
	}
	if (fgets(buf, sizeof(buf), f) != NULL) {
		v = strtoul(buf, &end, 10);
		if (end == buf || (*end != '\n' && *end != '\0')) {
			v = 0;
		}
	}
	fclose(f);
	return v <= UINT32_MAX ? (uint32_t)v : 0;
}

uint32_t iotune_dio_device_block_size(unsigned int maj,
				      unsigned int min,
				      const char *sysfs_root)
{
	char path[512];
	uint32_t lbs;

	if (maj == 0) {
		return 0;	/* no block device: tmpfs, btrfs, NFS ... */
	}
	snprintf(path, sizeof(path), "%s/dev/block/%u:%u/queue/"
		 "logical_block_size", sysfs_root, maj, min);
	lbs = read_block_size(path);
	if (lbs != 0) {
		return lbs;
	}
	/* a partition: the queue is its disk's */
	snprintf(path, sizeof(path), "%s/dev/block/%u:%u/../queue/"
		 "logical_block_size", sysfs_root, maj, min);
	return read_block_size(path);
}

struct iotune_dio_align iotune_dio_align_probe(int fd, const char *sysfs_root)
{
	struct statx stx;
	struct stat st;
	uint32_t lbs = 0;

	if (statx(fd, "", AT_EMPTY_PATH, STATX_DIOALIGN, &stx) == 0 &&
	    (stx.stx_mask & STATX_DIOALIGN) &&
	    stx.stx_dio_offset_align != 0) {
		return iotune_dio_align_choose(stx.stx_dio_offset_align,
					       stx.stx_dio_mem_align, 0);
	}
	if (fstat(fd, &st) == 0) {
		lbs = iotune_dio_device_block_size(major(st.st_dev),
						   minor(st.st_dev),
						   sysfs_root);
	}
	return iotune_dio_align_choose(0, 0, lbs);
}
