/*
 * iotune - direct I/O alignment planner (pure core, no Samba)
 *
 * Copyright (C) iotune authors 2026
 * SPDX-License-Identifier: GPL-3.0-or-later
 *
 * O_DIRECT needs file offsets, lengths and memory aligned to what the
 * file system asks for (statx STATX_DIOALIGN, else the logical block
 * size, else 4096).  Client requests are not.  Reads are expanded to whole
 * aligned blocks and trimmed; writes are split into a buffered head and
 * tail around an aligned direct middle.
 */

#ifndef IOTUNE_DIO_H
#define IOTUNE_DIO_H

#include <stdbool.h>
#include <stdint.h>
#include <sys/types.h>

struct iotune_dio_align {
	uint64_t offset;	/* file offset and length alignment */
	uint64_t memory;	/* buffer address alignment */
};

/* what to do when statx gives nothing: the logical block size or 4096 */
struct iotune_dio_align iotune_dio_align_choose(uint32_t statx_offset_align,
						uint32_t statx_mem_align,
						uint32_t logical_block_size);

/*
 * The logical block size of block device maj:min (a file's st_dev), from
 * <sysfs_root>/dev/block/MAJ:MIN; 0 when there is none.
 */
uint32_t iotune_dio_device_block_size(unsigned int maj,
				      unsigned int min,
				      const char *sysfs_root);

/*
 * The alignment O_DIRECT on fd needs: statx STATX_DIOALIGN, else the
 * logical block size, else 4096.  sysfs_root is "/sys" outside tests.
 */
struct iotune_dio_align iotune_dio_align_probe(int fd, const char *sysfs_root);

struct iotune_dio_read_plan {
	bool direct;		/* false: read through the page cache */
	uint64_t off;		/* aligned read: offset ... */
	uint64_t len;		/* ... and length */
	uint64_t skip;		/* the request starts this far into it */
	bool bounce;		/* the caller's buffer cannot be used */
};

/*
 * Plans a read of len bytes at off into a buffer at address buf; requests
 * below min_size use the page cache.
 */
void iotune_dio_plan_read(const struct iotune_dio_align *a,
			  uint64_t min_size,
			  uint64_t off,
			  uint64_t len,
			  uintptr_t buf,
			  struct iotune_dio_read_plan *plan);

/* Bytes of the request a read plan delivers when the disk gave got. */
uint64_t iotune_dio_read_result(const struct iotune_dio_read_plan *plan,
				uint64_t len,
				uint64_t got);

struct iotune_dio_write_plan {
	uint64_t head_len;	/* buffered, at the request's offset */
	uint64_t mid_off;	/* direct, aligned */
	uint64_t mid_len;	/* 0: the whole request is buffered */
	uint64_t tail_off;	/* buffered */
	uint64_t tail_len;
	bool bounce;		/* the middle must be copied to align it */
};

void iotune_dio_plan_write(const struct iotune_dio_align *a,
			   uint64_t min_size,
			   uint64_t off,
			   uint64_t len,
			   uintptr_t buf,
			   struct iotune_dio_write_plan *plan);

/*
 * One read or write executed on plain descriptors: the request's plan
 * is made and carried out (aligned bounce buffer, buffered head and tail
 * around a direct middle, short results).  Blocking: the adapter runs it
 * in smbd's thread pool.
 */
struct iotune_dio_io {
	int buffered_fd;
	int direct_fd;
	struct iotune_dio_align align;
	bool is_write;
	void *buf;
	size_t len;
	uint64_t off;
	ssize_t ret;		/* bytes done, or -1 with err */
	int err;
	bool split;		/* a write needed a buffered head or tail */
	bool bounced;		/* an aligned bounce buffer was used */
};

void iotune_dio_io_run(struct iotune_dio_io *io);

#endif /* IOTUNE_DIO_H */
