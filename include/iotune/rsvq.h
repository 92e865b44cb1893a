/*
 * iotune - the write cache's reservations made in batches (pure core, no
 * Samba): the writes of a client that pipelines share one call.  The
 * write cache's core uses it (modules/wcache_reserve.c, deferred: the
 * adapter launches each batch), docs/design.md "Reservation" explains
 * where and why.
 *
 * One batch of reservation calls is on its way per cache at a time.  A
 * write whose bytes are not known to be reserved is queued: the first
 * starts a batch of its own; those that arrive while a batch is on its
 * way join the next batch, which makes one call per contiguous run of
 * their bytes (exactly their bytes: nothing ahead, nothing in a hole no
 * write covers) when the one on its way has been answered.
 *
 * Rules (tests/unit/test_rsvq.c, tests/fuzz/fuzz_rsvq.c):
 * - submit: a write into bytes known to be reserved, overlapping no
 *   queued write, may be cached at once (CACHE).  Any other write is
 *   QUEUED, behind every queued write: a queued write's verdict comes
 *   from done(), and the verdicts of writes that overlap come in the
 *   order the writes were submitted.  When the next batch is full
 *   (IOTUNE_RSVQ_WRITES writes or IOTUNE_RSVQ_RUNS calls) the write is
 *   not queued (BUSY): submit it again after a done(), and no later
 *   write before it.  A queue that cannot reserve says THROUGH.
 * - done: the answer of one call of the batch on its way.  When all of
 *   its calls are answered, its writes are decided in submission order:
 *   a write inside a call that succeeded may be cached (CACHE), one
 *   inside a call that failed goes to disk uncached (THROUGH; ENOSPC or
 *   EDQUOT, and the next write tries again).  Any other error means the
 *   file system cannot reserve: the writes of the batch's failed calls,
 *   every write of the next batch and every later one go THROUGH.  Then
 *   the next batch: decided at once when the batch just answered
 *   reserved all of its bytes, else its calls start (out->calls), for
 *   all of its writes: a call covers only bytes of writes that wait.
 * - forget: the file's space changed (truncate, punched hole, a
 *   client's allocation): nothing is known to be reserved, and a batch
 *   on its way when it happened is made again when it is answered, as
 *   its calls may have landed before the change.
 * - cancel: a queued write that will not be written (its request
 *   ended, it failed, it went to disk) leaves the next batch, whose calls
 *   then cover only the other writes' bytes.  A write of the batch on
 *   its way stays in it (its calls are made), and so does one whose
 *   leaving would split the next batch into more calls than it may
 *   make: their verdicts still come, but a batch made again (after a
 *   forget) or launched later drops them first, so no call made after a
 *   truncate reserves the bytes of a write that left.
 * - deferred (set after init): a batch that forms makes no calls yet;
 *   the writes that arrive meanwhile join it (while it has room and no
 *   write went to the next batch), and launch() makes its calls (the
 *   caller launches once the writes it expects have arrived).  Until
 *   then, due() says a batch waits, and done() has no call to answer.
 *   A cancel may take a write out of a batch not launched.
 * - pace (deferred): when the caller launches the batch that waits.  A
 *   client that keeps n writes in flight sends its next ones as the
 *   answers of the last batch reach it, one after the other; a batch
 *   launched with the first of them leaves the others a call of their
 *   own.  So a batch waits while more requests of the client wait to be
 *   read (at most max_wait_us), and for as many writes as the batch
 *   launched last held (want), at most wait_us (what a call costs: a
 *   wait in vain costs no more than the call a wait that pays saves);
 *   a full batch (16 writes, or a write had to go to the next) never
 *   waits.  Every launch sets want to the writes it holds: a wait in
 *   vain teaches the client's smaller depth at once.  While want is
 *   above one, a write that arrives alone is queued too (the write
 *   cache's rule): the others follow.
 * - Nothing is ever given back: only bytes of writes are reserved.
 *
 * Copyright (C) iotune authors 2026
 * SPDX-License-Identifier: GPL-3.0-or-later
 */

#ifndef IOTUNE_RSVQ_H
#define IOTUNE_RSVQ_H

#include <stdbool.h>
#include <stdint.h>

#define IOTUNE_RSVQ_WRITES 16	/* writes one batch decides */
#define IOTUNE_RSVQ_RUNS 4	/* calls one batch makes */

struct iotune_rsvq_range {
	uint64_t off;
	uint64_t end;		/* exclusive; off == end: empty */
};

struct iotune_rsvq_batch {
	unsigned int n_writes;
	uint64_t id[IOTUNE_RSVQ_WRITES];	/* in submission order */
	struct iotune_rsvq_range w[IOTUNE_RSVQ_WRITES];
	unsigned int n_runs;
	struct iotune_rsvq_range run[IOTUNE_RSVQ_RUNS];
	int err[IOTUNE_RSVQ_RUNS];	/* each call's answer */
	unsigned int answered;		/* bit per answered call */
	unsigned int gone;		/* bit per write that left it */
	uint64_t epoch;			/* of the file's space at its start */
};

/* when a deferred batch starts (see pace above) */
struct iotune_rsvq_pace {
	unsigned int want;	/* writes the batch launched last held */
};

struct iotune_rsvq {
	bool deferred;			/* batches start at launch() */
	bool flying;			/* fly is formed (on its way once
					 * started) */
	bool started;			/* fly's calls are made */
	bool disabled;			/* the file system cannot reserve */
	uint64_t epoch;			/* counts forget() */
	struct iotune_rsvq_range known;	/* reserved, known */
	struct iotune_rsvq_batch fly;
	struct iotune_rsvq_batch next;	/* non-empty only while flying */
	struct iotune_rsvq_pace pace;	/* deferred: the caller's pace */
};

enum iotune_rsvq_verdict {
	IOTUNE_RSVQ_CACHE,	/* its bytes are reserved: cache it */
	IOTUNE_RSVQ_QUEUED,	/* a done() decides it */
	IOTUNE_RSVQ_BUSY,	/* not queued: submit it again after a done() */
	IOTUNE_RSVQ_THROUGH,	/* write it to disk, uncached */
};

/* the calls of a batch that starts: the adapter makes them now */
struct iotune_rsvq_calls {
	unsigned int n;
	struct iotune_rsvq_range run[IOTUNE_RSVQ_RUNS];
};

/* what one done() decided, in submission order, and what to call next */
struct iotune_rsvq_decided {
	unsigned int n;
	uint64_t id[2 * IOTUNE_RSVQ_WRITES];
	enum iotune_rsvq_verdict verdict[2 * IOTUNE_RSVQ_WRITES];
	bool cannot_reserve;	/* this answer disabled the queue */
	struct iotune_rsvq_calls calls;
};

void iotune_rsvq_init(struct iotune_rsvq *q);

/*
 * A write of [off, end) with the caller's id.  QUEUED may come with
 * calls to make (the write started a batch).
 */
enum iotune_rsvq_verdict iotune_rsvq_submit(struct iotune_rsvq *q,
					    uint64_t id, uint64_t off,
					    uint64_t end,
					    struct iotune_rsvq_calls *calls);

/*
 * The answer (0 or an errno) of call number run of the batch on its
 * way.  false: no such call is waiting for an answer (nothing changed).
 */
bool iotune_rsvq_done(struct iotune_rsvq *q, unsigned int run, int err,
		      struct iotune_rsvq_decided *out);

/* a write of the next batch leaves it (true), or stays (see above) */
bool iotune_rsvq_cancel(struct iotune_rsvq *q, uint64_t id);

/* the file's space changed: nothing is known to be reserved */
void iotune_rsvq_forget(struct iotune_rsvq *q);

/* deferred: starts the batch that waits (false: none waits) */
bool iotune_rsvq_launch(struct iotune_rsvq *q,
			struct iotune_rsvq_calls *calls);

/* deferred: a batch waits for launch() */
bool iotune_rsvq_due(const struct iotune_rsvq *q);

/* ... and how many writes it holds (0: none waits) */
unsigned int iotune_rsvq_due_writes(const struct iotune_rsvq *q);

/* ... and no more may join it (a write went to the next batch) */
bool iotune_rsvq_due_full(const struct iotune_rsvq *q);

enum iotune_rsvq_go {
	IOTUNE_RSVQ_GO,		/* launch it now */
	IOTUNE_RSVQ_WAIT,	/* requests wait to be read: ask again
				 * before the next loop iteration, at the
				 * latest in *after_us */
	IOTUNE_RSVQ_WAIT_TIMER,	/* ask again when the next request
				 * arrives, at the latest in *after_us */
};

/* how long a batch that waits to launch may wait, and for what */
struct iotune_rsvq_wait {
	uint64_t waited_us;	/* since the batch formed */
	uint64_t wait_us;	/* for as many writes as the last held */
	uint64_t max_wait_us;	/* for requests waiting to be read */
	/* requests of the client wait to be read (asked only when that
	 * decides: not for a full batch, nor past max_wait_us) */
	bool (*more_waiting)(void *private_data);
	void *private_data;
};

/*
 * due writes wait in the batch (full: no more may join it).  GO records
 * due as the new want; with nothing due it is GO and nothing is learnt.
 */
enum iotune_rsvq_go iotune_rsvq_pace(struct iotune_rsvq_pace *p,
				     unsigned int due, bool full,
				     const struct iotune_rsvq_wait *w,
				     uint64_t *after_us);

/* no batch on its way and no write queued */
bool iotune_rsvq_idle(const struct iotune_rsvq *q);

#endif /* IOTUNE_RSVQ_H */
