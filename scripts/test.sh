#!/bin/sh
# Runs every iotune test on this machine (as root): installs what is
# needed, builds, then unit, integration (real smbd) and conformance
# (smbtorture) tests.  Stage names as arguments run only those stages.
set -eu
cd "$(dirname "$0")/.."
./scripts/install-deps.sh
./waf configure build
exec /usr/bin/python3 tests/run_all.py "$@"
