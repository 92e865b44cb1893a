/*
 * iotune - direct I/O alignment planner (pure core, no Samba)
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

#include <string.h>

#include "iotune/dio.h"

/* the largest file offset (off_t) */
#define IOTUNE_DIO_MAX_OFFSET ((uint64_t)INT64_MAX)

static bool power_of_two(uint64_t v)
{
	return v != 0 && (v & (v - 1)) == 0;
}

struct iotune_dio_align iotune_dio_align_choose(uint32_t statx_offset_align,
						uint32_t statx_mem_align,
						uint32_t logical_block_size)
{
	struct iotune_dio_align a = { .offset = 4096, .memory = 4096 };

	if (power_of_two(statx_offset_align)) {
		a.offset = statx_offset_align;
		a.memory = power_of_two(statx_mem_align) ? statx_mem_align
							 : a.offset;
	} else if (power_of_two(logical_block_size)) {
		a.offset = logical_block_size;
		a.memory = logical_block_size;
	}
	return a;
}

static uint64_t down(uint64_t v, uint64_t align)
{
	return v & ~(align - 1);
}

static uint64_t up(uint64_t v, uint64_t align)
{
	return down(v + align - 1, align);
}

void iotune_dio_plan_read(const struct iotune_dio_align *a,
			  uint64_t min_size,
			  uint64_t off,
			  uint64_t len,
			  uintptr_t buf,
			  struct iotune_dio_read_plan *plan)
{
	memset(plan, 0, sizeof(*plan));
	/* near the largest off_t: the page cache path gives the answer */
	if (len == 0 || len < min_size || off > IOTUNE_DIO_MAX_OFFSET ||
	    len > IOTUNE_DIO_MAX_OFFSET - off ||
	    a->offset > IOTUNE_DIO_MAX_OFFSET - off - len) {
		return;
	}
	plan->direct = true;
	plan->off = down(off, a->offset);
	plan->len = up(off + len, a->offset) - plan->off;
	plan->skip = off - plan->off;
	plan->bounce = plan->skip != 0 || plan->len != len ||
		       (buf & (a->memory - 1)) != 0;
}

uint64_t iotune_dio_read_result(const struct iotune_dio_read_plan *plan,
				uint64_t len,
				uint64_t got)
{
	if (!plan->direct) {
		return got < len ? got : len;
	}
	if (got <= plan->skip) {
		return 0;	/* end of file before the request */
	}
	got -= plan->skip;
	return got < len ? got : len;
}

void iotune_dio_plan_write(const struct iotune_dio_align *a,
			   uint64_t min_size,
			   uint64_t off,
			   uint64_t len,
			   uintptr_t buf,
			   struct iotune_dio_write_plan *plan)
{
	uint64_t end = off + len;
	uint64_t mid_start;
	uint64_t mid_end;

	memset(plan, 0, sizeof(*plan));
	plan->head_len = len;	/* by default all of it is buffered */
	if (len == 0 || len < min_size || off > IOTUNE_DIO_MAX_OFFSET ||
	    len > IOTUNE_DIO_MAX_OFFSET - off) {
		return;
	}
	mid_start = up(off, a->offset);
	mid_end = down(end, a->offset);
	if (mid_start >= mid_end || mid_start < off) {
		return;
	}
	plan->head_len = mid_start - off;
	plan->mid_off = mid_start;
	plan->mid_len = mid_end - mid_start;
	plan->tail_off = mid_end;
	plan->tail_len = end - mid_end;
	plan->bounce = ((buf + plan->head_len) & (a->memory - 1)) != 0;
}
