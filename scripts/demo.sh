#!/bin/sh
# The main job (as root): install what is needed, build and install
# iotune, start a real smbd with it on a loopback address, move data
# through it, verify it and show what happened.
set -eu
cd "$(dirname "$0")/.."
./scripts/install-deps.sh
./waf configure build install
exec /usr/bin/python3 scripts/demo.py "$@"
