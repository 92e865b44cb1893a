#!/bin/sh
# Fetch Debian's Samba source at exactly the installed smbd version,
# configure it like Debian's build where struct layouts matter, and
# generate the headers a VFS module includes.  The prepared tree is cached
# outside the repository, keyed by the package version; a second run only
# checks the stamp and prints the path.
#
# Prints the prepared tree's path as its last line of stdout.
set -eu

cache_root=${IOTUNE_CACHE_DIR:-/var/cache/iotune}
pkg_version=$(dpkg-query -W -f='${Version}' samba 2>/dev/null) || {
	echo "iotune: the samba package is not installed" >&2
	exit 1
}
upstream=$(echo "$pkg_version" | sed -e 's/^[0-9]*://' -e 's/+dfsg.*//' -e 's/-.*//')
smbd_version=$(smbd -V | sed -n 's/^Version \([0-9.]*\).*/\1/p')
if [ "$smbd_version" != "$upstream" ]; then
	echo "iotune: smbd reports version '$smbd_version' but package" \
		"samba is '$pkg_version'; refusing to build against a" \
		"mismatched source" >&2
	exit 1
fi

key=$(echo "$pkg_version" | tr ':~' '__')
# shellcheck source=scripts/deb-src.sh
. "$(dirname "$0")/deb-src.sh"
tree="$cache_root/samba-$key"
stamp="$tree/.iotune-prepared"
if [ -f "$stamp" ]; then
	echo "$tree"
	exit 0
fi

fetch_source() {
	work="$cache_root/fetch-$key"
	rm -rf "$work"
	mkdir -p "$work"
	if ! (cd "$work" && apt-get source -q "samba=$pkg_version" >&2); then
		echo "iotune: no deb-src entry found; deriving one from the" \
			"machine's apt sources" >&2
		add_deb_src
		(cd "$work" && apt-get source -q "samba=$pkg_version" >&2)
	fi
	src=$(find "$work" -mindepth 1 -maxdepth 1 -type d -name 'samba-*')
	if [ ! -f "$src/source3/include/vfs.h" ]; then
		echo "iotune: apt-get source samba=$pkg_version gave no tree" >&2
		exit 1
	fi
	rm -rf "$tree"
	mv "$src" "$tree"
	rm -rf "$work"
}

configure_tree() {
	multiarch=$(dpkg-architecture -qDEB_HOST_MULTIARCH)
	cd "$tree"
	# Paths and --with-profiling-data as in debian/rules: the latter
	# changes struct smbd_smb2_request.  Everything a module does not
	# see is switched off to keep this quick.
	PYTHONHASHSEED=1 ./configure \
		--prefix=/usr --enable-fhs --sysconfdir=/etc \
		--localstatedir=/var --libexecdir=/usr/libexec \
		--libdir="/usr/lib/$multiarch" --datadir=/usr/share \
		--with-modulesdir="/usr/lib/$multiarch/samba" \
		--with-privatedir=/var/lib/samba/private \
		--with-smbpasswd-file=/etc/samba/smbpasswd \
		--with-piddir=/run/samba --with-lockdir=/run/samba \
		--with-sockets-dir=/run/samba \
		--with-statedir=/var/lib/samba \
		--with-cachedir=/var/cache/samba \
		--with-profiling-data \
		--without-ad-dc --without-ldap --without-ads \
		--disable-python --without-json --without-systemd \
		--without-pam --without-acl-support --disable-cups \
		--without-gpgme --without-libarchive --disable-avahi \
		--without-ldb-lmdb --bundled-libraries=NONE,ldb,popt \
		--with-shared-modules='!vfs_snapper' >&2
	# newer trees (4.20+) include generated error and IDL headers that
	# 4.17 does not have
	extra=""
	if grep -q hresult_generated libcli/util/wscript_build; then
		extra="hresult_generated PIDL_NBT"
	fi
	if [ -f librpc/idl/smb3posix.idl ]; then
		extra="$extra PIDL_SMB3POSIX"
	fi
	PYTHONHASHSEED=1 ./buildtools/bin/waf build --targets="$(echo $extra \
		PIDL_SERVER_ID PIDL_MISC PIDL_FILE_ID PIDL_SMB2_LEASE_STRUCT \
		PIDL_SECURITY PIDL_SMB_ACL PIDL_SMBXSRV PIDL_AUTH PIDL_LSA \
		PIDL_KRB5PAC PIDL_NETLOGON PIDL_SAMR PIDL_MESSAGING \
		ntstatus_generated werror_generated param_local.h \
		s3_param_proto_h | tr ' ' ',')" >&2
}

mkdir -p "$cache_root"
echo "iotune: preparing Samba $pkg_version source in $tree" >&2
fetch_source
(configure_tree)
touch "$stamp"
echo "$tree"
