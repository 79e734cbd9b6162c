#!/usr/bin/env bash
# mkdeb.sh — build the Debian package of xfw: bin/xfw_VERSION_ARCH.deb.
#
# Run by `make deb` after `make build`. It stages `make install` into a
# temporary tree (PREFIX=/usr, units in /lib/systemd/system), adds the
# maintainer scripts of dist/deb (postinst registers the alternatives,
# prerm removes them; no unit is enabled), the control file and md5sums,
# and builds the package with dpkg-deb (files owned by root, no fakeroot
# needed). Installing the package is not part of the build: it would change
# the machine's iptables alternatives.
#
# Version: the one `bin/xfw version` prints, plus, in a git checkout,
# +git<commits>.<abbreviated hash>[.dirty] (so that later commits sort
# later). Depends: the shared libraries the binaries link (dpkg-shlibdeps)
# and iptables (see docs/install.md: its alternatives stay the default, and
# xfw-difftest runs iptables-legacy).
#
# Prints the package's path on standard output (the rest goes to stderr).
#
# Environment:
#   DEB_OUT_DIR   where the package goes (default: bin)
#   DEB_VERSION   the package version (default: as above)
#   DEB_ARCH      the architecture (default: dpkg --print-architecture)
#   DEBFULLNAME, DEBEMAIL   the Maintainer field (default: git's user.name
#                 and user.email, else the user at this host)
#   MAKE          the make to stage with (default: make)
set -euo pipefail

readonly SCRIPT_DIR="$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)"
readonly REPO_DIR="$(cd "${SCRIPT_DIR}/.." && pwd)"
readonly OUT_DIR="${DEB_OUT_DIR:-${REPO_DIR}/bin}"

die() { printf 'mkdeb.sh: ERROR: %s\n' "$*" >&2; exit 1; }

for tool in dpkg-deb dpkg-shlibdeps dpkg md5sum; do
	command -v "${tool}" >/dev/null 2>&1 || die "${tool} not found (make deps installs dpkg-dev)"
done
[[ -x "${REPO_DIR}/bin/xfw" ]] || die "bin/xfw not built (make build)"

# package_version prints the version of the package.
package_version() {
	local base count hash dirty=""
	base="$("${REPO_DIR}/bin/xfw" version | sed -n 's/^xfw \([0-9][0-9A-Za-z.+~]*\)$/\1/p')"
	[[ -n "${base}" ]] || die "bin/xfw version printed no version"
	if ! git -C "${REPO_DIR}" rev-parse --git-dir >/dev/null 2>&1; then
		printf '%s\n' "${base}"
		return
	fi
	count="$(git -C "${REPO_DIR}" rev-list --count HEAD)"
	hash="$(git -C "${REPO_DIR}" rev-parse --short HEAD)"
	if [[ -n "$(git -C "${REPO_DIR}" status --porcelain --untracked-files=no)" ]]; then
		dirty=".dirty"
	fi
	printf '%s+git%s.%s%s\n' "${base}" "${count}" "${hash}" "${dirty}"
}

# maintainer prints the Maintainer field: whoever builds the package.
maintainer() {
	local name="${DEBFULLNAME:-}" email="${DEBEMAIL:-}"
	[[ -n "${name}" ]] || name="$(git -C "${REPO_DIR}" config user.name 2>/dev/null || true)"
	[[ -n "${email}" ]] || email="$(git -C "${REPO_DIR}" config user.email 2>/dev/null || true)"
	[[ -n "${name}" ]] || name="$(id -un)"
	[[ -n "${email}" ]] || email="$(id -un)@$(hostname -f 2>/dev/null || hostname)"
	printf '%s <%s>\n' "${name}" "${email}"
}

VERSION="${DEB_VERSION:-$(package_version)}"
ARCH="${DEB_ARCH:-$(dpkg --print-architecture)}"
readonly VERSION ARCH
readonly DEB="${OUT_DIR}/xfw_${VERSION}_${ARCH}.deb"

WORK="$(mktemp -d)"
readonly WORK
trap 'rm -rf "${WORK}"' EXIT
# dpkg-shlibdeps wants a source package's layout: debian/control and the
# package's tree in debian/PACKAGE.
readonly ROOT="${WORK}/debian/xfw"

"${MAKE:-make}" -s -C "${REPO_DIR}" install DESTDIR="${ROOT}" \
	PREFIX=/usr SBINDIR=/usr/sbin MANDIR=/usr/share/man \
	UNITDIR=/lib/systemd/system SYSCONFDIR=/etc >&2

install -d -m 0755 "${ROOT}/DEBIAN"
install -m 0755 "${REPO_DIR}/dist/deb/postinst" "${REPO_DIR}/dist/deb/prerm" \
	"${REPO_DIR}/dist/deb/postrm" "${ROOT}/DEBIAN/"

printf 'Source: xfw\n\nPackage: xfw\nArchitecture: any\n' >"${WORK}/debian/control"
shlibs="$(cd "${WORK}" && dpkg-shlibdeps -O debian/xfw/usr/sbin/xfw debian/xfw/usr/sbin/xfw-cmd debian/xfw/usr/sbin/xfw-difftest \
	| sed -n 's/^shlibs:Depends=//p')"
depends="iptables"
if [[ -n "${shlibs}" ]]; then
	depends="${shlibs}, ${depends}"
fi

(cd "${ROOT}" && find . -path ./DEBIAN -prune -o -type f -printf '%P\0' | sort -z | xargs -0 md5sum) \
	>"${ROOT}/DEBIAN/md5sums"
installed_size="$(du -sk --apparent-size --exclude=DEBIAN "${ROOT}" | cut -f1)"

cat >"${ROOT}/DEBIAN/control" <<EOF
Package: xfw
Version: ${VERSION}
Architecture: ${ARCH}
Maintainer: $(maintainer)
Installed-Size: ${installed_size}
Depends: ${depends}
Suggests: ethtool, iproute2
Section: net
Priority: optional
Description: iptables-compatible packet filter enforced with eBPF
 xfw keeps the iptables language (iptables-restore, iptables-save,
 iptables -A ... and the ip6tables twins, with iptables 1.8.9's output
 and exit statuses) and enforces the filter table with eBPF: XDP on the
 ingress and TCX on the egress of every interface.
 .
 The package registers xfw in the iptables and ip6tables alternatives
 with a priority below iptables-legacy and iptables-nft: installing it
 switches nothing (update-alternatives --set iptables
 /usr/sbin/iptables-xfw does). Its systemd units, xfw-restore (the saved
 firewall at boot) and xfw-agent, are not enabled. See xfw(8).
EOF

mkdir -p "${OUT_DIR}"
dpkg-deb --root-owner-group -Zxz --build "${ROOT}" "${DEB}" >&2
printf '%s\n' "${DEB}"
