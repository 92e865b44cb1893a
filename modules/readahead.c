/*
 * iotune - read-ahead policy (pure core, no Samba)
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

#include "iotune/readahead.h"
#include "iotune/util.h"

/* sequential after this many reads in one stream */
#define IOTUNE_RA_SEQUENTIAL_READS 2
/* out-of-order reads in flight a stream tolerates, in read sizes */
#define IOTUNE_RA_REORDER_READS 8

uint64_t iotune_ra_tolerance(const struct iotune_ra_stream *s, uint64_t len)
{
	return MAX(s->window, IOTUNE_RA_REORDER_READS * len);
}

static uint64_t unread(const struct iotune_ra_stream *s)
{
	return s->ahead > s->pos ? s->ahead - s->pos : 0;
}

static bool matches(const struct iotune_ra_stream *s, uint64_t off,
		    uint64_t len)
{
	return s->used && off >= s->start &&
	       off <= s->pos + iotune_ra_tolerance(s, len);
}

static struct iotune_ra_stream *find_stream(struct iotune_ra_file *f,
					    uint64_t off, uint64_t len)
{
	size_t i;

	for (i = 0; i < IOTUNE_RA_STREAMS; i++) {
		if (matches(&f->stream[i], off, len)) {
			return &f->stream[i];
		}
	}
	return NULL;
}

static void forget_stream(struct iotune_ra_stream *s,
			  struct iotune_ra_budget *budget)
{
	uint64_t u = unread(s);

	budget->outstanding -= MIN(u, budget->outstanding);
	memset(s, 0, sizeof(*s));
}

/* A read that fits no stream: random access shrinks the others. */
static struct iotune_ra_stream *new_stream(const struct iotune_ra_config *cfg,
					   struct iotune_ra_file *f,
					   struct iotune_ra_budget *budget,
					   struct iotune_ra_stats *stats,
					   uint64_t off)
{
	struct iotune_ra_stream *victim = &f->stream[0];
	size_t i;

	for (i = 0; i < IOTUNE_RA_STREAMS; i++) {
		struct iotune_ra_stream *s = &f->stream[i];

		if (s->used && s->window > cfg->initial_window) {
			s->window = MAX(s->window / 2, cfg->initial_window);
			stats->windows_shrunk++;
		}
		if (!s->used) {
			victim = s;
			break;
		}
		if (s->last_used < victim->last_used) {
			victim = s;
		}
	}
	forget_stream(victim, budget);
	victim->used = true;
	victim->start = off;
	victim->pos = off;
	victim->ahead = off;
	victim->dropped = off;
	victim->window = cfg->initial_window;
	if (off == 0) {
		/* a file read from its start is most likely read through */
		victim->reads = IOTUNE_RA_SEQUENTIAL_READS - 1;
	}
	if (f->hint == IOTUNE_RA_HINT_SEQUENTIAL) {
		victim->reads = IOTUNE_RA_SEQUENTIAL_READS - 1;
		victim->window = MIN(2 * cfg->initial_window,
				     cfg->max_window);
	}
	return victim;
}

/* the reader moved to end: its unread prefetched bytes shrink */
static void advance(struct iotune_ra_stream *s,
		    struct iotune_ra_budget *budget,
		    uint64_t end)
{
	uint64_t before = unread(s);
	uint64_t after;

	s->pos = MAX(s->pos, end);
	after = unread(s);
	if (before > after) {
		budget->outstanding -= MIN(before - after,
					   budget->outstanding);
	}
}

static bool take_budget(struct iotune_ra_budget *budget,
			struct iotune_ra_stats *stats,
			uint64_t len)
{
	if (budget->limit != 0 && budget->outstanding + len > budget->limit) {
		stats->budget_refusals++;
		return false;
	}
	budget->outstanding += len;
	return true;
}

static void prefetch(struct iotune_ra_stream *s,
		     struct iotune_ra_budget *budget,
		     struct iotune_ra_stats *stats,
		     uint64_t from,
		     uint64_t to,
		     struct iotune_ra_action *action)
{
	if (to <= from || !take_budget(budget, stats, to - from)) {
		return;
	}
	action->prefetch_off = from;
	action->prefetch_len = to - from;
	s->ahead = MAX(s->ahead, to);
	stats->prefetch_calls++;
	stats->prefetch_bytes += to - from;
}

/* a stream's first window: a few reads, within the limit */
static uint64_t first_window(const struct iotune_ra_config *cfg,
			     uint64_t len)
{
	return MIN(MAX(cfg->initial_window, 2 * len), cfg->max_window);
}

static void adaptive(const struct iotune_ra_config *cfg,
		     struct iotune_ra_stream *s,
		     struct iotune_ra_budget *budget,
		     struct iotune_ra_stats *stats,
		     uint64_t len,
		     struct iotune_ra_action *action)
{
	uint64_t from = MAX(s->ahead, s->pos);
	uint64_t floor = first_window(cfg, len);

	if (s->reads < IOTUNE_RA_SEQUENTIAL_READS) {
		return;
	}
	/* the reader is into the last half of what was prefetched */
	if (s->pos + s->window / 2 < s->ahead) {
		return;
	}
	if (cfg->pressure_permille != 0 &&
	    budget->pressure.permille >= cfg->pressure_permille) {
		/*
		 * The page cache is short: less ahead, down to two reads
		 * (less would not run ahead of a client that keeps a read
		 * or two in flight: it would cost calls and save nothing).
		 */
		if (s->window > floor) {
			s->window = MAX(s->window / 2, floor);
			stats->windows_shrunk++;
			stats->pressure_shrinks++;
		}
	} else if (s->ahead > s->start && s->window < cfg->max_window) {
		s->window = MIN(2 * s->window, cfg->max_window);
		stats->windows_grown++;
	}
	prefetch(s, budget, stats, from, s->pos + s->window, action);
}

static void fixed(const struct iotune_ra_config *cfg,
		  struct iotune_ra_stream *s,
		  struct iotune_ra_budget *budget,
		  struct iotune_ra_stats *stats,
		  uint64_t off,
		  struct iotune_ra_action *action)
{
	if (cfg->fixed_offset == 0 || off % cfg->fixed_offset != 0) {
		return;
	}
	prefetch(s, budget, stats, MAX(off, s->ahead), off + cfg->fixed_size,
		 action);
}

/* Drops what the reader left well behind, never what it may still read. */
static void drop_behind(struct iotune_ra_stream *s,
			uint64_t len,
			struct iotune_ra_stats *stats,
			struct iotune_ra_action *action)
{
	uint64_t keep = iotune_ra_tolerance(s, len);
	uint64_t upto;

	if (s->pos <= s->start + keep) {
		return;
	}
	upto = s->pos - keep;
	if (upto < s->dropped + IOTUNE_RA_DROP_CHUNK) {
		return;
	}
	action->drop_off = s->dropped;
	action->drop_len = upto - s->dropped;
	s->dropped = upto;
	stats->drop_calls++;
	stats->drop_bytes += action->drop_len;
}

/*
 * adaptive: whether iotune's windows serve reads now, or Linux's.  A
 * band between half the threshold and the threshold keeps each side:
 * Linux's read-ahead is taken over at the threshold, given back only
 * when all recent intervals stayed under half of it (with iotune's
 * windows the stall drops, often under the threshold while memory is
 * still short: it must not hand back then).  In a memory cgroup with a
 * limit, iotune's always.
 */
static bool own_turn(const struct iotune_ra_config *cfg,
		     const struct iotune_ra_budget *budget,
		     bool own_now)
{
	unsigned bar = own_now ? MAX(cfg->pressure_permille / 2, 1) :
				 cfg->pressure_permille;

	return !cfg->kernel_first || cfg->pressure_permille == 0 ||
	       budget->pressure.blind || budget->pressure.limited ||
	       budget->pressure.peak >= bar;
}

bool iotune_ra_open(const struct iotune_ra_config *cfg,
		    struct iotune_ra_file *file,
		    const struct iotune_ra_budget *budget)
{
	file->kernel_off = cfg->mode == IOTUNE_RA_ADAPTIVE &&
			   file->hint != IOTUNE_RA_HINT_RANDOM &&
			   own_turn(cfg, budget, true);
	return file->kernel_off;
}

/* the pressure came or went: hand the file over */
static bool handover(const struct iotune_ra_config *cfg,
		     struct iotune_ra_file *file,
		     const struct iotune_ra_budget *budget,
		     struct iotune_ra_stats *stats,
		     struct iotune_ra_action *action)
{
	bool own = own_turn(cfg, budget, file->kernel_off);

	if (own != file->kernel_off) {
		file->kernel_off = own;
		action->kernel = own ? IOTUNE_RA_KERNEL_OFF :
				       IOTUNE_RA_KERNEL_ON;
		if (own) {
			stats->takeovers++;
		} else {
			stats->handbacks++;
		}
	}
	return own;
}

void iotune_ra_read(const struct iotune_ra_config *cfg,
		    struct iotune_ra_file *file,
		    struct iotune_ra_budget *budget,
		    struct iotune_ra_stats *stats,
		    uint64_t off,
		    uint64_t len,
		    struct iotune_ra_action *action)
{
	struct iotune_ra_stream *s = NULL;

	bool ours = cfg->mode == IOTUNE_RA_FIXED ||
		    cfg->mode == IOTUNE_RA_ADAPTIVE;

	memset(action, 0, sizeof(*action));
	if ((!ours && !cfg->drop_behind) || len == 0 || off + len < off) {
		return;
	}
	s = find_stream(file, off, len);
	if (s == NULL) {
		s = new_stream(cfg, file, budget, stats, off);
		s->window = MAX(s->window, first_window(cfg, len));
	}
	s->last_used = ++file->tick;
	s->reads++;
	if (s->reads == IOTUNE_RA_SEQUENTIAL_READS) {
		stats->streams_detected++;
	}
	advance(s, budget, off + len);

	if (cfg->mode == IOTUNE_RA_FIXED) {
		fixed(cfg, s, budget, stats, off, action);
	} else if (cfg->mode == IOTUNE_RA_ADAPTIVE &&
		   file->hint != IOTUNE_RA_HINT_RANDOM &&
		   handover(cfg, file, budget, stats, action)) {
		adaptive(cfg, s, budget, stats, len, action);
	}
	if (cfg->drop_behind && s->reads >= IOTUNE_RA_SEQUENTIAL_READS) {
		drop_behind(s, len, stats, action);
	}
}

bool iotune_ra_pressure_due(const struct iotune_ra_pressure *p,
			    uint64_t now_ms)
{
	return p->sampled_ms == 0 ||
	       now_ms >= p->sampled_ms + IOTUNE_RA_PRESSURE_INTERVAL_MS;
}

void iotune_ra_pressure_sample(struct iotune_ra_pressure *p,
			       uint64_t now_ms,
			       uint64_t stall_us,
			       unsigned avg10_permille)
{
	uint64_t interval_ms = now_ms - p->sampled_ms;
	size_t i;

	if (p->sampled_ms == 0 || p->restart || now_ms <= p->sampled_ms ||
	    stall_us < p->stall_us) {
		/*
		 * The first sample, or another counter (the adapter opened
		 * it again): no interval of its own yet, Linux's average of
		 * the last 10 s stands for it (a process that starts while
		 * memory is short must not begin with Linux's read-ahead).
		 */
		p->permille = MIN(avg10_permille, 1000);
	} else {
		/* stalled us / interval us * 1000 = stalled us / interval ms */
		p->permille = (unsigned)MIN((stall_us - p->stall_us) /
					    interval_ms, 1000);
	}
	if (p->sampled_ms != 0 && interval_ms > IOTUNE_RA_PRESSURE_STALE_MS) {
		/*
		 * Samples come with reads: after an idle gap the earlier
		 * intervals say nothing of now, and the gap's average
		 * dilutes a stall that began just before this sample.
		 */
		memset(p->recent, 0, sizeof(p->recent));
		p->permille = MAX(p->permille, MIN(avg10_permille, 1000));
	}
	p->sampled_ms = now_ms;
	p->stall_us = stall_us;
	p->restart = false;
	memmove(&p->recent[1], &p->recent[0],
		sizeof(p->recent) - sizeof(p->recent[0]));
	p->recent[0] = p->permille;
	p->peak = 0;
	for (i = 0; i < IOTUNE_RA_CALM_SAMPLES; i++) {
		p->peak = MAX(p->peak, p->recent[i]);
	}
}

void iotune_ra_pressure_limit(struct iotune_ra_pressure *p,
			      uint64_t limit,
			      uint64_t ram)
{
	p->limited = limit != 0 && limit < ram;
}

void iotune_ra_pressure_restart(struct iotune_ra_pressure *p,
				uint64_t now_ms)
{
	/* the next sample is due after an interval, and is a first one */
	p->sampled_ms = MAX(now_ms, 1);
	p->restart = true;
}

bool iotune_ra_drop_rest(const struct iotune_ra_config *cfg,
			 struct iotune_ra_file *file,
			 size_t i,
			 struct iotune_ra_stats *stats,
			 struct iotune_ra_action *action)
{
	struct iotune_ra_stream *s = &file->stream[i];

	memset(action, 0, sizeof(*action));
	if (!cfg->drop_behind || !s->used ||
	    s->reads < IOTUNE_RA_SEQUENTIAL_READS || s->pos <= s->dropped) {
		return false;
	}
	/*
	 * All the stream read: pages of earlier drops that were busy then
	 * (or came back through the kernel's read-ahead) go now too.
	 */
	action->drop_off = s->start;
	action->drop_len = s->pos - s->start;
	stats->drop_calls++;
	stats->drop_bytes += s->pos - s->dropped;
	s->dropped = s->pos;
	return true;
}

void iotune_ra_close(struct iotune_ra_file *file,
		     struct iotune_ra_budget *budget)
{
	size_t i;

	for (i = 0; i < IOTUNE_RA_STREAMS; i++) {
		forget_stream(&file->stream[i], budget);
	}
}
