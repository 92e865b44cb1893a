#!/bin/sh
# Fetch waf, the build tool Samba bundles (Debian has no waf package),
# without preparing Samba's tree: download Debian's Samba source (the
# installed smbd's version, else apt's candidate) and keep only its
# third_party/waf.  For a core-only build on a machine without the
# prepared Samba tree.  Cached in /var/cache/iotune/waf-<version>.
#
# Prints the directory holding waflib as its last line of stdout.
#
# SPDX-License-Identifier: GPL-3.0-or-later
set -eu

cache_root=${IOTUNE_CACHE_DIR:-/var/cache/iotune}
version=$(dpkg-query -W -f='${Version}' samba 2>/dev/null) ||
	version=$(apt-cache showsrc samba 2>/dev/null |
		  sed -n 's/^Version: //p' | head -n 1)
if [ -z "$version" ]; then
	echo "iotune: apt knows no samba source package" >&2
	exit 1
fi
key=$(echo "$version" | tr ':~' '__')
dir="$cache_root/waf-$key"
if [ -f "$dir/.iotune-waf" ]; then
	echo "$dir"
	exit 0
fi
# shellcheck source=scripts/deb-src.sh
. "$(dirname "$0")/deb-src.sh"

mkdir -p "$cache_root"
work=$(mktemp -d "$cache_root/waf-fetch.XXXXXX")
trap 'rm -rf "$work"' EXIT
if ! (cd "$work" && apt-get source --download-only -q "samba=$version" >&2)
then
	add_deb_src
	(cd "$work" && apt-get source --download-only -q "samba=$version" >&2)
fi
tarball=$(find "$work" -maxdepth 1 -name 'samba_*.orig.tar.*' | head -n 1)
tar -C "$work" -xf "$tarball" --wildcards '*/third_party/waf/*' >&2
rm -rf "$dir"
mv "$(find "$work" -type d -path '*/third_party/waf' | head -n 1)" "$dir"
touch "$dir/.iotune-waf"
echo "$dir"
