/*
 * iotune - read-ahead policy (pure core, no Samba)
 *
 * Copyright (C) iotune authors 2026
 * SPDX-License-Identifier: GPL-3.0-or-later
 *
 * Per open handle, up to IOTUNE_RA_STREAMS streams of reads are tracked.
 * A read belongs to a stream when it starts at or after the stream's
 * first offset and no further than a tolerance past the stream's end:
 * forward reads that arrive out of order (clients keep several 1 MiB
 * reads in flight) stay in their stream, reverse and far-strided reads do
 * not.  Each read returns an action: a range to prefetch and/or a range
 * to drop behind the reader.  Prefetched bytes the reader has not reached
 * yet count against a per-process budget.
 */

#ifndef IOTUNE_READAHEAD_H
#define IOTUNE_READAHEAD_H

#include <stdbool.h>
#include <stdint.h>

enum iotune_ra_mode {
	IOTUNE_RA_OFF,		/* no read-ahead at all (kernel's off too) */
	IOTUNE_RA_KERNEL,	/* leave it to Linux */
	IOTUNE_RA_FIXED,	/* like vfs_readahead: at offset multiples */
	IOTUNE_RA_ADAPTIVE,	/* per-stream windows */
};

struct iotune_ra_config {
	enum iotune_ra_mode mode;
	uint64_t fixed_offset;
	uint64_t fixed_size;
	uint64_t initial_window;
	uint64_t max_window;
	unsigned pressure_permille;	/* 0: memory pressure ignored */
	bool kernel_first;	/* adaptive: Linux's own until pressure,
				   outside a memory cgroup with a limit */
	bool drop_behind;
};

#define IOTUNE_RA_STREAMS 4

/*
 * Drop-behind drops in pieces of at least this much: each
 * POSIX_FADV_DONTNEED costs about a third of a millisecond here whatever
 * its length (Linux drains every CPU's LRU lists first), and in 1 MiB
 * pieces a 512 MiB stream read at 0.63 of its speed without drop-behind;
 * in 32 MiB pieces at 0.95 (bench/readahead.py part c).
 */
#define IOTUNE_RA_DROP_CHUNK (32 * 1024 * 1024)

struct iotune_ra_stream {
	bool used;
	uint64_t start;		/* lowest offset of the stream */
	uint64_t pos;		/* end of the furthest read */
	uint64_t ahead;		/* prefetched up to here */
	uint64_t dropped;	/* dropped behind up to here */
	uint64_t window;
	uint64_t last_used;
	unsigned reads;
};

/* client hints from the create options */
enum iotune_ra_hint {
	IOTUNE_RA_HINT_NONE,
	IOTUNE_RA_HINT_SEQUENTIAL,	/* FILE_SEQUENTIAL_ONLY */
	IOTUNE_RA_HINT_RANDOM,		/* FILE_RANDOM_ACCESS */
};

struct iotune_ra_file {
	struct iotune_ra_stream stream[IOTUNE_RA_STREAMS];
	uint64_t tick;
	enum iotune_ra_hint hint;
	bool kernel_off;	/* Linux's read-ahead is off (RANDOM) */
};

/*
 * Memory pressure, from Linux's pressure stall information (PSI): the
 * share of time in which some tasks of smbd's cgroup (or, without one, of
 * the whole system) stalled waiting for memory.  Pages are then being
 * evicted, and a prefetched page may go before its reader reaches it (it
 * is read twice) or push out a page another reader is about to use.
 * While the last interval's share is at or above the share's threshold
 * (cfg->pressure_permille), adaptive read-ahead halves a stream's window
 * at each prefetch instead of doubling it, down to two of the stream's
 * reads (its first window, at least the initial window: less would not
 * run ahead of a client that keeps reads in flight; with `readahead max`
 * at two reads or less nothing shrinks), so that what is prefetched and
 * not yet read shrinks before the page cache
 * thrashes; when an interval passes below the threshold the windows grow
 * again.  The adapter reads the cumulative stall time when
 * iotune_ra_pressure_due() says so and passes it to
 * iotune_ra_pressure_sample(), with Linux's own average of the last
 * 10 s, the verdict of a first sample; where PSI is missing the process
 * is blind (below), and it passes the memory limit of smbd's cgroup
 * (iotune_ra_pressure_limit(), memcg.h).
 *
 * Who reads ahead (cfg->kernel_first, a share that watches pressure):
 * outside a memory cgroup with a limit (below), while memory is
 * plentiful Linux's own read-ahead is left on and iotune
 * prefetches nothing.  Linux's is the faster one then (it reads ahead
 * from inside the page cache, marked pages trigger the next window
 * without a system call) and it needs no bound while nothing is evicted.
 * When an interval reaches the threshold iotune takes over: the file's
 * next read says "switch Linux's off" (POSIX_FADV_RANDOM) and the
 * bounded, shrinking windows above begin.  Linux's read-ahead comes back
 * only after IOTUNE_RA_CALM_SAMPLES intervals in a row below half the
 * threshold, so that a stall that comes and goes, or drops because
 * iotune's windows waste less, does not switch a file back and forth.
 * A file opened while an interval of the last IOTUNE_RA_CALM_SAMPLES
 * reached half the threshold starts with iotune's windows.  A share
 * with no threshold (0) or with an fadvise option (the adapter leaves
 * kernel_first off), or a process without PSI (blind), always uses its
 * own windows; a file with the client's random-access hint keeps
 * Linux's read-ahead off (RANDOM) and gets no prefetch.
 *
 * In a memory cgroup with a limit below the RAM, iotune's windows serve
 * every file from its open, whatever the stall: the cgroup fills within
 * a second of streaming, and Linux's read-ahead (up to two windows of
 * read_ahead_kb per file) overshoots it before the first stalled
 * interval shows; the pages it prefetched are evicted unread and read
 * again.  With 16 readers in a 192 MiB cgroup (bench/readahead.py), the
 * takeover at the first stall still left 1.20-1.25 bytes read per byte
 * served, and iotune's windows from the open 1.00.
 * Without such a limit the stall alone decides.
 */
#define IOTUNE_RA_CALM_SAMPLES 5

struct iotune_ra_pressure {
	uint64_t sampled_ms;	/* when stall_us was read; 0: never */
	uint64_t stall_us;	/* the cumulative "some" stall time then */
	unsigned permille;	/* stalled share of the last interval */
	unsigned recent[IOTUNE_RA_CALM_SAMPLES]; /* the last intervals' */
	unsigned peak;		/* the highest of recent[] */
	bool restart;		/* the next sample is a first one */
	bool limited;		/* a memory cgroup's limit below the RAM */
	bool blind;		/* no PSI here: iotune's windows always */
};

/* a sample at most this often */
#define IOTUNE_RA_PRESSURE_INTERVAL_MS 200
/*
 * An interval longer than Linux's avg10 window (no reads meanwhile)
 * forgets the earlier ones; the sample is the larger of its own share
 * and avg10.
 */
#define IOTUNE_RA_PRESSURE_STALE_MS 10000

bool iotune_ra_pressure_due(const struct iotune_ra_pressure *p,
			    uint64_t now_ms);
void iotune_ra_pressure_sample(struct iotune_ra_pressure *p,
			       uint64_t now_ms,
			       uint64_t stall_us,
			       unsigned avg10_permille);
/*
 * The memory limit of smbd's cgroup (the lowest over it and its
 * ancestors, memcg.h; 0: none) and the machine's RAM, at a sample.
 */
void iotune_ra_pressure_limit(struct iotune_ra_pressure *p,
			      uint64_t limit,
			      uint64_t ram);
/* the adapter opens the counter again: the next sample is a first one */
void iotune_ra_pressure_restart(struct iotune_ra_pressure *p,
				uint64_t now_ms);

/* per smbd process: prefetched bytes not yet read, memory pressure */
struct iotune_ra_budget {
	uint64_t limit;
	uint64_t outstanding;
	struct iotune_ra_pressure pressure;
};

struct iotune_ra_stats {
	uint64_t prefetch_calls;
	uint64_t prefetch_bytes;
	uint64_t windows_grown;
	uint64_t windows_shrunk;
	uint64_t budget_refusals;
	uint64_t streams_detected;
	uint64_t drop_calls;
	uint64_t drop_bytes;
	uint64_t pressure_shrinks;	/* windows halved: memory pressure */
	uint64_t takeovers;	/* Linux's read-ahead switched off */
	uint64_t handbacks;	/* and back on when the pressure ended */
};

/* what to do with Linux's own read-ahead on the file */
enum iotune_ra_kernel {
	IOTUNE_RA_KERNEL_KEEP,
	IOTUNE_RA_KERNEL_ON,	/* NORMAL, or SEQUENTIAL on the client's hint */
	IOTUNE_RA_KERNEL_OFF,	/* RANDOM */
};

struct iotune_ra_action {
	uint64_t prefetch_off;
	uint64_t prefetch_len;		/* 0: nothing to prefetch */
	uint64_t drop_off;
	uint64_t drop_len;		/* 0: nothing to drop */
	enum iotune_ra_kernel kernel;
};

/* a read of len bytes at off has arrived: what to do */
void iotune_ra_read(const struct iotune_ra_config *cfg,
		    struct iotune_ra_file *file,
		    struct iotune_ra_budget *budget,
		    struct iotune_ra_stats *stats,
		    uint64_t off,
		    uint64_t len,
		    struct iotune_ra_action *action);

/*
 * A handle opens (or learns the client's hint) on an adaptive share:
 * whether iotune's windows serve it from the start, so that Linux's own
 * read-ahead goes off now (the adapter applies the other modes' and the
 * client's advice itself).
 */
bool iotune_ra_open(const struct iotune_ra_config *cfg,
		    struct iotune_ra_file *file,
		    const struct iotune_ra_budget *budget);

/*
 * When the handle closes no read is in flight any more: with drop-behind,
 * all that stream i read can go.  False: nothing to do.
 */
bool iotune_ra_drop_rest(const struct iotune_ra_config *cfg,
			 struct iotune_ra_file *file,
			 size_t i,
			 struct iotune_ra_stats *stats,
			 struct iotune_ra_action *action);

/* the handle closes: its unread prefetched bytes leave the budget */
void iotune_ra_close(struct iotune_ra_file *file,
		     struct iotune_ra_budget *budget);

/* reads this far behind a stream's end may still be in flight */
uint64_t iotune_ra_tolerance(const struct iotune_ra_stream *s,
			     uint64_t len);

#endif /* IOTUNE_READAHEAD_H */
