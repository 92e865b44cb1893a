#!/bin/sh
# Install every Debian package iotune needs to build, run and test.
# Idempotent: packages already present are skipped by apt-get.
set -eu

PACKAGES="
	samba samba-vfs-modules smbclient samba-testsuite python3-samba
	libtalloc-dev libtevent-dev libtdb-dev libcmocka-dev
	gcc make pkg-config python3 perl dpkg-dev libasan8 libubsan1
	flex bison libkeyutils-dev libparse-yapp-perl libbsd-dev
	libgnutls28-dev zlib1g-dev
	tdb-tools iproute2 strace util-linux procps python3-pytest python3-tdb
	clang libclang-rt-14-dev valgrind
	glusterfs-server glusterfs-client e2fsprogs xfsprogs debootstrap ctdb
	debhelper python3-matplotlib
	xsltproc docbook-xsl docbook-xml man-db
"

missing=""
for p in $PACKAGES; do
	dpkg-query -W -f='${Status}\n' "$p" 2>/dev/null |
		grep -q '^install ok installed$' || missing="$missing $p"
done
if [ -z "$missing" ]; then
	exit 0
fi

echo "iotune: installing Debian packages:$missing"
export DEBIAN_FRONTEND=noninteractive
apt-get update -q
# shellcheck disable=SC2086
apt-get install -y -q --no-install-recommends $missing
