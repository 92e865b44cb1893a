#!/bin/sh
# Runs the benchmarks that feed the report and writes docs/benchmarks.md
# with its charts (docs/benchmarks/*.png): the instructions smbd runs per
# MiB written (callgrind, first), the write matrix on a page-cache share,
# an O_DIRECT share and GlusterFS (vfs_glusterfs and FUSE), twice, and the
# read-ahead modes, drop-behind and random readers.  As root, on a machine
# prepared by scripts/install-deps.sh (it is run first).  Not a test: it
# takes about 60 minutes on a 2-core VM (--quick: fewer rounds and bytes).
#
#   bench/run.sh [--quick]
#
# SPDX-License-Identifier: GPL-3.0-or-later
set -eu
cd "$(dirname "$0")/.."

rounds=7
scale=1
ra_args=""
insn_rounds=7
command="bench/run.sh"
if [ "${1:-}" = "--quick" ]; then
	rounds=3
	scale=0.2
	insn_rounds=1
	ra_args="--readers 8 --file-mib 32 --stream-mib 256 --memory-limit-mib 64"
	command="bench/run.sh --quick"
fi

./scripts/install-deps.sh
./waf configure build
out=build/bench
mkdir -p "$out"
# the instructions first, on a machine that has not yet written and
# deleted the matrices' gigabytes: callgrind counts what smbd runs, but
# how often its main loop goes around per request follows the timing of
# the client and the disk.  On the same code (f8afee2), one run counted
# after the first matrix read 1.008-1.034 in the pass-through cells
# (their control pair 0.998-1.018), one counted alone 1.011-1.015
# (0.990-1.012)
/usr/bin/python3 bench/instructions.py --rounds "$insn_rounds" \
	--json "$out/instructions.json"
/usr/bin/python3 bench/write_matrix.py --rounds "$rounds" --scale "$scale" \
	--backends pagecache,control,odirect,odirect-control --gluster \
	--json "$out/write_matrix.json"
# shellcheck disable=SC2086
/usr/bin/python3 bench/readahead.py --rounds "$rounds" $ra_args \
	--json "$out/readahead.json"
# the matrices again: the no-regression goal is judged on two runs
/usr/bin/python3 bench/write_matrix.py --rounds "$rounds" --scale "$scale" \
	--backends pagecache,control,odirect,odirect-control --gluster \
	--matrix-only --json "$out/write_matrix_again.json"
/usr/bin/python3 bench/report.py --command "$command" \
	--write-matrix "$out/write_matrix.json" \
	--write-matrix-again "$out/write_matrix_again.json" \
	--instructions "$out/instructions.json" \
	--readahead "$out/readahead.json"
