#!/bin/sh
# Make, once, a Debian 13 ("trixie") chroot with its Samba 4.22, the
# packages iotune needs to build and test, and the project's prepared
# Samba 4.22 tree; cached outside the repository, keyed by the chroot's
# samba package version.  Later runs print the cached path at once.
#
#   scripts/debian13-chroot.sh            prints the chroot's path
#   scripts/debian13-chroot.sh run CMD... runs CMD in it (as root, with
#                                         /proc, /dev, /sys bound in, in
#                                         a mount namespace of its own)
#
# The mirror is the machine's own Debian mirror, read from its apt
# sources (never named here).  About 5 minutes on a fresh machine.
#
# SPDX-License-Identifier: GPL-3.0-or-later
set -eu

cache_root=${IOTUNE_CACHE_DIR:-/var/cache/iotune}
suite=trixie
current="$cache_root/$suite-current"
here=$(cd "$(dirname "$0")" && pwd)

# the packages inside: what scripts/install-deps.sh installs on the host
# that the 4.22 stages use (fincore is in util-linux-extra since trixie)
PACKAGES="build-essential samba samba-vfs-modules smbclient samba-testsuite python3-samba
	libtalloc-dev libtevent-dev libtdb-dev libcmocka-dev
	gcc make pkg-config python3 perl dpkg-dev
	flex bison libkeyutils-dev libparse-yapp-perl libbsd-dev
	libgnutls28-dev zlib1g-dev
	tdb-tools iproute2 strace util-linux util-linux-extra procps
	python3-pytest python3-tdb e2fsprogs xfsprogs
	debhelper xsltproc docbook-xsl docbook-xml man-db"

mirror() {
	m=$(sed -n 's/^URIs: *//p' /etc/apt/sources.list.d/*.sources \
		2>/dev/null | grep -v -e security -e '^$' | head -n 1)
	if [ -z "$m" ] && [ -f /etc/apt/sources.list ]; then
		m=$(awk '$1 == "deb" && $2 !~ /security/ { print $2; exit }' \
			/etc/apt/sources.list)
	fi
	if [ -z "$m" ]; then
		echo "iotune: no Debian mirror in this machine's apt sources" >&2
		exit 1
	fi
	echo "$m"
}

# Mounts that an earlier version of this script left in a chroot (it
# bound them in the host's namespace, and a run killed before it unbound
# them left them there; run_in's namespace leaves none): made slaves
# first, so that unmounting them never reaches the host's mounts where
# they propagate (systemd mounts / shared).
unbind_leftovers() {
	for d in dev/pts dev sys proc; do
		if mountpoint -q "$1/$d" 2>/dev/null; then
			mount --make-rslave "$1/$d"
			umount -R -l "$1/$d"
		fi
	done
}

# Runs a command in the chroot, in a mount namespace of its own where
# /proc, /dev and /sys are bound in: /sys with what is mounted under it
# (/sys/fs/cgroup and its hierarchies: the read-ahead tests put smbd in
# a memory cgroup, and iotune reads its limit).  The namespace's mounts
# are private: none of them is seen by the host or another namespace,
# nothing unmounted in it reaches the host's, and they go when its last
# process ends, even one killed, so a cached chroot never holds the
# host's /dev or /sys mounted (deleting the cache cannot reach them).
run_in() {
	root=$1
	shift
	unbind_leftovers "$root"
	mkdir -p "$root/proc" "$root/sys" "$root/dev" "$root/run/samba"
	# shellcheck disable=SC2016 # expanded by the inner sh
	LC_ALL=C.UTF-8 DEBIAN_FRONTEND=noninteractive \
		PATH=/usr/sbin:/usr/bin:/sbin:/bin \
		unshare --mount --propagation private -- sh -eu -c '
			r=$1
			shift
			mount --bind /proc "$r/proc"
			mount --rbind /sys "$r/sys"
			mount --bind /dev "$r/dev"
			mount --bind /dev/pts "$r/dev/pts"
			exec chroot "$r" "$@"' sh "$root" "$@"
}

make_chroot() {
	command -v debootstrap >/dev/null ||
		apt-get install -y -q --no-install-recommends debootstrap >&2
	m=$(mirror)
	work="$cache_root/$suite-build"
	unbind_leftovers "$work"
	rm -rf --one-file-system "$work"
	mkdir -p "$cache_root"
	debootstrap --variant=minbase "$suite" "$work" "$m" >&2
	sed -n 's/^deb /deb-src /p' "$work/etc/apt/sources.list" \
		>> "$work/etc/apt/sources.list"
	run_in "$work" apt-get update -q >&2
	# shellcheck disable=SC2086
	run_in "$work" apt-get install -y -q --no-install-recommends \
		$PACKAGES >&2
	version=$(run_in "$work" dpkg-query -W -f='${Version}' samba)
	# the prepared 4.22 tree, by the project's own script, inside
	mkdir -p "$work/iotune-scripts"
	cp "$here/prepare-samba.sh" "$here/deb-src.sh" "$work/iotune-scripts/"
	run_in "$work" sh /iotune-scripts/prepare-samba.sh >&2
	key=$(echo "$version" | tr ':~' '__')
	final="$cache_root/$suite-samba-$key"
	unbind_leftovers "$final"
	rm -rf --one-file-system "$final"
	mv "$work" "$final"
	echo "$version" > "$final/.iotune-chroot"
	ln -sfn "$final" "$current"
}

# packages added to PACKAGES since a cached chroot was made
ensure_packages() {
	missing=""
	for p in $PACKAGES; do
		chroot "$1" dpkg-query -W -f='${Status}\n' "$p" 2>/dev/null |
			grep -q '^install ok installed$' || missing="$missing $p"
	done
	if [ -n "$missing" ]; then
		# shellcheck disable=SC2086
		run_in "$1" apt-get install -y -q --no-install-recommends \
			$missing >&2
	fi
}

if [ ! -f "$current/.iotune-chroot" ]; then
	make_chroot
fi
root=$(readlink -f "$current")
ensure_packages "$root"
if [ "${1:-}" = run ]; then
	shift
	run_in "$root" "$@"
	exit $?
fi
echo "$root"
