# Sourced by the scripts that fetch Debian source packages.
#
# SPDX-License-Identifier: GPL-3.0-or-later

add_deb_src() {
	# Derive deb-src entries from the machine's own enabled apt sources;
	# never name a registry here.
	out=/etc/apt/sources.list.d/iotune-deb-src.sources
	: > "$out.tmp"
	for f in /etc/apt/sources.list.d/*.sources; do
		[ -f "$f" ] && [ "$f" != "$out" ] || continue
		sed -e 's/^Types:.*$/Types: deb-src/' "$f" >> "$out.tmp"
		echo >> "$out.tmp"
	done
	if [ -f /etc/apt/sources.list ]; then
		grep -E '^deb ' /etc/apt/sources.list 2>/dev/null |
			sed 's/^deb /deb-src /' > "${out%.sources}.list.tmp" || true
		if [ -s "${out%.sources}.list.tmp" ]; then
			mv "${out%.sources}.list.tmp" "${out%.sources}.list"
		else
			rm -f "${out%.sources}.list.tmp"
		fi
	fi
	mv "$out.tmp" "$out"
	apt-get update -q >&2
}
