#!/bin/sh
# Fuzzes the core for longer than the test command's short runs:
#
#   scripts/fuzz.sh [SECONDS]     each libFuzzer target for SECONDS
#                                 (default 600), with ASan and UBSan
#                                 (wscript builds the targets with them)
#   scripts/fuzz.sh --merge       adds what earlier runs found and that
#                                 reaches new code (edges) to the seeds,
#                                 minimized
#
# Each target starts from its seeds in tests/fuzz/corpus/TARGET (kept in
# the repository: small inputs only) and from what earlier runs found in
# build/fuzz/corpus_TARGET, where new inputs go.  A crash, a leak or a
# sanitizer report stops the target with its input in build/fuzz/ and
# makes the script exit non-zero.  Needs ./waf configure build first (clang
# with libFuzzer: scripts/install-deps.sh installs it).
#
# SPDX-License-Identifier: GPL-3.0-or-later
set -eu
cd "$(dirname "$0")/.."

targets="parsers wcache rsvq"
max_len() {
	case $1 in
	parsers) echo 512 ;;
	wcache) echo 2048 ;;
	rsvq) echo 1024 ;;
	esac
}

mkdir -p build/fuzz
if [ "${1:-}" = "--merge" ]; then
	for t in $targets; do
		mkdir -p "tests/fuzz/corpus/$t" "build/fuzz/corpus_$t"
		"build/tests/fuzz/fuzz_$t" -merge=1 -use_counters=0 \
			-max_len="$(max_len "$t")" \
			"tests/fuzz/corpus/$t" "build/fuzz/corpus_$t"
	done
	exit 0
fi

seconds=${1:-600}
rc=0
for t in $targets; do
	bin="build/tests/fuzz/fuzz_$t"
	if [ ! -x "$bin" ]; then
		echo "fuzz: $bin is missing: ./waf configure build (needs clang" \
		     "with libFuzzer)" >&2
		exit 1
	fi
	mkdir -p "build/fuzz/corpus_$t"
	echo "fuzz: $t for $seconds s"
	"$bin" -max_total_time="$seconds" -max_len="$(max_len "$t")" \
		-print_final_stats=1 -artifact_prefix=build/fuzz/ \
		"build/fuzz/corpus_$t" "tests/fuzz/corpus/$t" || rc=1
done
exit $rc
