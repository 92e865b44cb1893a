#!/bin/sh
# iotune's sanitize stage (tests/run_all.py runs it; so can you, as root):
#
#   scripts/sanitize.sh build
#       builds the module, the core and its unit tests (run by the build),
#       the fault module and the test client with AddressSanitizer and
#       UBSan in build-sanitize/ (its own waf lock file: build/ stays)
#   scripts/sanitize.sh run REPORTS [PYTEST ARGS]
#       in a mount namespace of its own (unshare -m): a copy of smbd's vfs module
#       directory is bind-mounted over the real one (the tests install the
#       sanitized iotune.so there; the installed module stays as it is),
#       and the integration tests start their smbd with libasan and
#       libubsan preloaded.  Every report goes to a file in REPORTS; the
#       stage fails on any.
#
# SPDX-License-Identifier: GPL-3.0-or-later
set -eu
cd "$(dirname "$0")/.."
export WAFLOCK=.lock-waf_sanitize

runtime() {
	lib=$(readlink -f "$(gcc -print-file-name="$1")")
	if [ ! -e "$lib" ]; then
		echo "sanitize: gcc has no $1 (apt-get install lib${1%%.so}*)" >&2
		exit 1
	fi
	echo "$lib"
}

case "${1:-}" in
build)
	IOTUNE_SANITIZE=1 ./waf configure --out=build-sanitize
	./waf build
	;;
run)
	# the rest runs in a mount namespace of its own
	shift
	exec unshare -m sh "$0" run-in-namespace "$@"
	;;
run-in-namespace)
	reports=$2
	shift 2
	preload="$(runtime libasan.so) $(runtime libubsan.so)"
	moddir=$(smbd -b | sed -n 's/^ *MODULESDIR: //p')
	copy=$(mktemp -d /tmp/iotune-sanitize-vfs.XXXXXX)
	trap 'umount "$moddir/vfs" 2>/dev/null; rm -rf "$copy"' EXIT
	cp -a "$moddir/vfs/." "$copy/"
	mount --bind "$copy" "$moddir/vfs"
	export IOTUNE_BUILD_DIR=build-sanitize
	export IOTUNE_SMBD_PRELOAD="$preload"
	export IOTUNE_SANITIZE_REPORTS="$reports"
	export ASAN_OPTIONS="detect_leaks=0:halt_on_error=0:log_path=$reports/asan"
	export UBSAN_OPTIONS="print_stacktrace=1:halt_on_error=0:log_path=$reports/ubsan"
	echo "sanitize: smbd with LD_PRELOAD=$IOTUNE_SMBD_PRELOAD," \
	     "module from build-sanitize/, reports in $reports"
	rc=0
	/usr/bin/python3 -m pytest -q -rfEs -p no:cacheprovider "$@" || rc=$?
	exit $rc
	;;
*)
	echo "usage: $0 build | run REPORTS [PYTEST ARGS]" >&2
	exit 2
	;;
esac
