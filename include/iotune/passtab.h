/*
 * iotune - the table that finds what a pass-through request needs when
 * it completes (pure core, no Samba).
 *
 * A pass-through read or write is sent to the next VFS layer with smbd's
 * own memory context; when smbd hands the next layer's request back to
 * iotune's recv function, the request's address is all iotune has.  The
 * table maps that address (the key) to a slot: the one its hash names.
 * The adapter keeps its record for the request in a parallel array,
 * indexed by slot (modules/vfs_iotune_pass.c).
 *
 * Rules (tests/unit/test_passtab.c):
 * - claim: a key gets its slot when the slot is free or already holds
 *   the same key; a slot holding another key is taken, and the caller
 *   keeps the record elsewhere (-1).
 * - A key whose request was freed without being received stays in its
 *   slot (stale).  Only a newer request can have the same address, and
 *   it hashes to the same slot: a claim by it takes the slot over; a
 *   request that does not claim (one of iotune's own) must forget its
 *   key when it is made, so that a lookup never finds a stale record.
 * - find and release: the slot of a key that holds it, or -1; release
 *   frees a slot that find returned.
 *
 * Copyright (C) iotune authors 2026
 * SPDX-License-Identifier: GPL-3.0-or-later
 */

#ifndef IOTUNE_PASSTAB_H
#define IOTUNE_PASSTAB_H

#include <stdint.h>

#define IOTUNE_PASSTAB_BITS 8
#define IOTUNE_PASSTAB_SLOTS (1 << IOTUNE_PASSTAB_BITS)

struct iotune_passtab {
	const void *key[IOTUNE_PASSTAB_SLOTS];	/* NULL: free */
};

/*
 * The slot key hashes to, held or not: Fibonacci hashing of the address
 * without its low 4 bits (talloc's chunks are 16-byte aligned), so that
 * requests allocated close together land in different slots.
 */
static inline unsigned iotune_passtab_slot(const void *key)
{
	uint64_t h = (uint64_t)((uintptr_t)key >> 4) *
		     UINT64_C(0x9E3779B97F4A7C15);

	return (unsigned)(h >> (64 - IOTUNE_PASSTAB_BITS));
}

/* The slot that key now holds, or -1 when another key holds it */
static inline int iotune_passtab_claim(struct iotune_passtab *t,
				       const void *key)
{
	unsigned i = iotune_passtab_slot(key);

	if (t->key[i] != NULL && t->key[i] != key) {
		return -1;
	}
	t->key[i] = key;
	return (int)i;
}

/* The slot key holds, or -1 */
static inline int iotune_passtab_find(const struct iotune_passtab *t,
				      const void *key)
{
	unsigned i = iotune_passtab_slot(key);

	return t->key[i] == key ? (int)i : -1;
}

static inline void iotune_passtab_release(struct iotune_passtab *t, int i)
{
	t->key[i] = NULL;
}

/* A request that does not claim now has this address */
static inline void iotune_passtab_forget(struct iotune_passtab *t,
					 const void *key)
{
	int i = iotune_passtab_find(t, key);

	if (i >= 0) {
		iotune_passtab_release(t, i);
	}
}

#endif /* IOTUNE_PASSTAB_H */
