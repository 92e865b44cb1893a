# Shared by iotune's benchmarks: side-by-side medians.
#
# SPDX-License-Identifier: GPL-3.0-or-later

import statistics


def median_alternating(rounds, fns):
    """Runs every function of fns (name -> fn) once per round, in order on
    even rounds and reversed on odd ones, so that drift of the machine
    hits all alike; returns name -> the median of its results (a tuple of
    medians when fn returns tuples)."""
    results = {name: [] for name in fns}
    names = list(fns)
    for r in range(rounds):
        for name in (names if r % 2 == 0 else names[::-1]):
            results[name].append(fns[name]())
    return {name: median_of_results(v) for name, v in results.items()}


def median_of_results(values):
    if isinstance(values[0], tuple):
        return tuple(statistics.median(v[i] for v in values)
                     for i in range(len(values[0])))
    return statistics.median(values)
