/*
 * iotune - small helpers the core's files share (pure core, no Samba).
 * Samba's headers define MIN and MAX the same way; the Samba-side files
 * get theirs.
 *
 * Copyright (C) iotune authors 2026
 * SPDX-License-Identifier: GPL-3.0-or-later
 */

#ifndef IOTUNE_UTIL_H
#define IOTUNE_UTIL_H

#ifndef MIN
#define MIN(a, b) ((a) < (b) ? (a) : (b))
#endif
#ifndef MAX
#define MAX(a, b) ((a) > (b) ? (a) : (b))
#endif

#endif /* IOTUNE_UTIL_H */
