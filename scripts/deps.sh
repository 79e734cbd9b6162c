#!/usr/bin/env bash
# deps.sh — install what xfw needs to build and test, on Debian 12 (bookworm).
#
# Idempotent and fast when everything is already present: it asks dpkg what is
# installed and only then, if something is missing, runs `apt-get update` and
# `apt-get install`. Run as root. Exits non-zero with a message on failure.
#
# What it ensures:
#   - BPF toolchain: clang, llvm, libbpf-dev, linux-libc-dev, libc6-dev (libc.a:
#     bin/xfw-cmd is linked statically), bpftool, make,
#     and that `clang -target bpf` finds <asm/types.h> (via gcc-multilib on
#     amd64, which owns the /usr/include/asm symlink, or a symlink elsewhere);
#   - networking tools for the integration tests: iproute2, iptables, nftables,
#     ipset, tcpdump, ethtool, iputils-ping, netcat-openbsd, conntrack (the
#     conntrack e2e tests compare with it, the differential test's stateful
#     runs flush the kernel's table);
#   - the real iptables clients tests/clients runs: ufw, fail2ban, firewalld,
#     docker.io, busybox-static. Installed with a policy-rc.d that forbids
#     starting services (when the machine has none) and with firewalld's,
#     fail2ban's and Docker's units disabled afterwards: they must never
#     start on the host, at installation or at boot;
#   - packaging tools for `make deb` and tests/install: dpkg-dev
#     (dpkg-shlibdeps), man-db and groff-base (the manual page), systemd
#     (systemd-analyze verify of the units);
#   - Go >= 1.24 (and >= the `go` line of go.mod): Debian's golang from
#     bookworm-backports if `go` is missing; if the installed Go is older than
#     go.mod asks for, Go's own toolchain switching fetches the right release
#     from the Go module proxy (GOTOOLCHAIN=auto).
#
# Environment:
#   XFW_DEPS_DRY_RUN=1   only report what would be installed.
set -euo pipefail

readonly MIN_GO="1.24"
readonly SCRIPT_DIR="$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)"
readonly REPO_DIR="$(cd "${SCRIPT_DIR}/.." && pwd)"
readonly BACKPORTS_LIST="/etc/apt/sources.list.d/xfw-bookworm-backports.list"

log() { printf 'deps.sh: %s\n' "$*"; }
die() { printf 'deps.sh: ERROR: %s\n' "$*" >&2; exit 1; }

export DEBIAN_FRONTEND=noninteractive

# --- preconditions -----------------------------------------------------------

[[ "$(id -u)" -eq 0 ]] || die "must run as root (try: sudo $0)"
command -v apt-get >/dev/null 2>&1 || die "apt-get not found: this script supports Debian 12 (bookworm) only"
command -v dpkg-query >/dev/null 2>&1 || die "dpkg-query not found: this script supports Debian 12 (bookworm) only"
if [[ -r /etc/os-release ]]; then
	# shellcheck disable=SC1091
	. /etc/os-release
	if [[ "${ID:-}" != "debian" || "${VERSION_ID:-}" != "12" ]]; then
		log "warning: written for Debian 12, found ${PRETTY_NAME:-unknown}; continuing"
	fi
fi

ARCH="$(dpkg --print-architecture)"
readonly ARCH

PACKAGES=(
	clang llvm libbpf-dev linux-libc-dev libc6-dev bpftool make
	iproute2 iptables nftables ipset
	tcpdump ethtool iputils-ping netcat-openbsd conntrack
	dpkg-dev man-db groff-base systemd # make deb, tests/install
	ca-certificates # HTTPS to the Go module proxy (toolchain download)
)
# On amd64 gcc-multilib owns /usr/include/asm -> x86_64-linux-gnu/asm, which
# `clang -target bpf` needs for <linux/types.h> -> <asm/types.h>.
if [[ "${ARCH}" == "amd64" ]]; then
	PACKAGES+=(gcc-multilib)
fi

APT_UPDATED=0
apt_update_once() {
	if [[ "${APT_UPDATED}" -eq 0 ]]; then
		log "running apt-get update"
		apt-get update -q || die "apt-get update failed"
		APT_UPDATED=1
	fi
}

# missing_packages prints the packages from "$@" that dpkg does not report as
# installed, one per line.
missing_packages() {
	local pkg status
	for pkg in "$@"; do
		status="$(dpkg-query -W -f='${db:Status-Status}' "${pkg}" 2>/dev/null || true)"
		if [[ "${status}" != "installed" ]]; then
			printf '%s\n' "${pkg}"
		fi
	done
}

apt_install() {
	log "installing: $*"
	if [[ "${XFW_DEPS_DRY_RUN:-0}" == "1" ]]; then
		log "dry run: not installing"
		return 0
	fi
	apt_update_once
	apt-get install -y -q --no-install-recommends "$@" || die "apt-get install failed for: $*"
}

# --- Debian packages -----------------------------------------------------------

mapfile -t MISSING < <(missing_packages "${PACKAGES[@]}")
if [[ "${#MISSING[@]}" -gt 0 ]]; then
	apt_install "${MISSING[@]}"
else
	log "all Debian packages present: ${PACKAGES[*]}"
fi

# --- the iptables clients tests/clients runs ---------------------------------------

CLIENT_PACKAGES=(ufw fail2ban firewalld busybox-static docker.io)
CLIENT_SERVICES=(firewalld.service fail2ban.service docker.service docker.socket containerd.service)
readonly POLICY_RC=/usr/sbin/policy-rc.d

# install_clients installs the missing client packages without letting
# their maintainer scripts start a daemon, then disables the daemons'
# units (the tests start them in namespaces of their own).
install_clients() {
	local own_policy=0
	if [[ ! -e "${POLICY_RC}" ]]; then
		printf '#!/bin/sh\n# deps.sh: no service starts while it installs packages\nexit 101\n' >"${POLICY_RC}"
		chmod 0755 "${POLICY_RC}"
		own_policy=1
		trap 'rm -f "${POLICY_RC}"' EXIT
	fi
	apt_install "$@"
	if [[ "${own_policy}" -eq 1 ]]; then
		rm -f "${POLICY_RC}"
		trap - EXIT
	fi
	local unit
	for unit in "${CLIENT_SERVICES[@]}"; do
		if command -v systemctl >/dev/null 2>&1; then
			# Works on the unit files, with or without a running systemd.
			systemctl disable "${unit}" >/dev/null 2>&1 || log "warning: could not disable ${unit}"
		fi
	done
}

mapfile -t MISSING < <(missing_packages "${CLIENT_PACKAGES[@]}")
if [[ "${#MISSING[@]}" -gt 0 ]]; then
	if [[ "${XFW_DEPS_DRY_RUN:-0}" == "1" ]]; then
		log "would install: ${MISSING[*]}"
	else
		install_clients "${MISSING[@]}"
	fi
else
	log "all client packages present: ${CLIENT_PACKAGES[*]}"
fi

# --- BPF headers -------------------------------------------------------------------

# check_bpf_compile compiles a tiny BPF object that includes <linux/bpf.h>
# (and thus <asm/types.h>) and libbpf's helpers header.
check_bpf_compile() {
	local dir rc
	dir="$(mktemp -d)"
	cat >"${dir}/probe.c" <<-'EOF'
		#include <linux/bpf.h>
		#include <bpf/bpf_helpers.h>
		SEC("xdp")
		int probe(struct xdp_md *ctx) { return XDP_PASS; }
		char LICENSE[] SEC("license") = "GPL";
	EOF
	rc=0
	clang -O2 -g -target bpf -c "${dir}/probe.c" -o "${dir}/probe.o" 2>"${dir}/err" || rc=$?
	if [[ "${rc}" -ne 0 ]]; then
		sed 's/^/deps.sh:   /' "${dir}/err" >&2
	fi
	rm -rf "${dir}"
	return "${rc}"
}

if [[ "${XFW_DEPS_DRY_RUN:-0}" != "1" ]]; then
	if ! check_bpf_compile; then
		# Not amd64 (or gcc-multilib did not provide it): link the multiarch asm dir.
		multiarch="$(gcc -print-multiarch 2>/dev/null || true)"
		if [[ -n "${multiarch}" && -d "/usr/include/${multiarch}/asm" && ! -e /usr/include/asm ]]; then
			log "linking /usr/include/asm -> ${multiarch}/asm for clang -target bpf"
			ln -s "${multiarch}/asm" /usr/include/asm
		fi
		check_bpf_compile || die "clang -target bpf cannot compile a program including <linux/bpf.h> (see errors above)"
	fi
	log "clang -target bpf compiles <linux/bpf.h> programs"
fi

# --- Go --------------------------------------------------------------------------------

# version_ge A B: true if dotted version A >= B.
version_ge() {
	[[ "$(printf '%s\n%s\n' "$2" "$1" | sort -V | head -n1)" == "$2" ]]
}

# go_version DIR prints the version of the go command (e.g. 1.23.5) run in DIR:
# in the repository, go.mod's toolchain selection applies; in / it does not.
go_version() {
	(cd "$1" && go env GOVERSION 2>/dev/null) | sed -n 's/^go\([0-9][0-9.]*\).*/\1/p' || true
}

# Make a Go installed outside PATH visible to this script.
for dir in /usr/local/go/bin /usr/lib/go/bin; do
	if ! command -v go >/dev/null 2>&1 && [[ -x "${dir}/go" ]]; then
		log "found go in ${dir} (not in PATH; add it to PATH)"
		export PATH="${dir}:${PATH}"
	fi
done

install_go_from_backports() {
	if ! grep -rqs 'bookworm-backports' /etc/apt/sources.list /etc/apt/sources.list.d/; then
		log "adding bookworm-backports to ${BACKPORTS_LIST}"
		echo 'deb http://deb.debian.org/debian bookworm-backports main' >"${BACKPORTS_LIST}"
		APT_UPDATED=0
	fi
	apt_update_once
	log "installing: golang-go (bookworm-backports)"
	apt-get install -y -q --no-install-recommends -t bookworm-backports golang-go \
		|| die "could not install golang-go from bookworm-backports; install Go >= ${MIN_GO} from https://go.dev/dl and put it in PATH"
	log "installed golang-go $(dpkg-query -W -f='${Version}' golang-go 2>/dev/null || echo '?')"
}

REQUIRED_GO="${MIN_GO}"
if [[ -f "${REPO_DIR}/go.mod" ]]; then
	mod_go="$(sed -n 's/^go[[:space:]]\+\([0-9][0-9.]*\).*/\1/p' "${REPO_DIR}/go.mod" | head -n1)"
	if [[ -n "${mod_go}" ]] && ! version_ge "${REQUIRED_GO}" "${mod_go}"; then
		REQUIRED_GO="${mod_go}"
	fi
fi

if [[ "${XFW_DEPS_DRY_RUN:-0}" == "1" ]]; then
	log "dry run: Go >= ${REQUIRED_GO} required; found: $(command -v go >/dev/null 2>&1 && go_version / || echo none)"
	exit 0
fi

if ! command -v go >/dev/null 2>&1; then
	log "go not found: installing Debian's golang-go from bookworm-backports"
	install_go_from_backports
	hash -r
	command -v go >/dev/null 2>&1 || die "golang-go installed but 'go' is not in PATH"
fi

have_go="$(go_version "${REPO_DIR}")"
if [[ -z "${have_go}" ]]; then
	# e.g. an old go with GOTOOLCHAIN=local refuses to run in the repository.
	have_go="$(go_version /)"
fi
[[ -n "${have_go}" ]] || die "could not determine the Go version ('go env GOVERSION' failed)"
if ! version_ge "${have_go}" "${REQUIRED_GO}"; then
	# Go >= 1.21 can fetch the release go.mod names from the Go module proxy.
	log "go ${have_go} is older than the required ${REQUIRED_GO}: fetching go${REQUIRED_GO} via GOTOOLCHAIN"
	(cd "${REPO_DIR}" && GOTOOLCHAIN="go${REQUIRED_GO}" go version) \
		|| die "could not fetch the go${REQUIRED_GO} toolchain; install Go >= ${REQUIRED_GO} from https://go.dev/dl and put it in PATH"
	log "setting 'go env -w GOTOOLCHAIN=auto' so go.mod selects go${REQUIRED_GO}"
	go env -w GOTOOLCHAIN=auto || die "go env -w GOTOOLCHAIN=auto failed"
	have_go="$(go_version "${REPO_DIR}")"
	version_ge "${have_go}" "${REQUIRED_GO}" \
		|| die "go still reports ${have_go} (< ${REQUIRED_GO}) in ${REPO_DIR}; is GOTOOLCHAIN=local set in the environment?"
fi
log "go ${have_go} (>= ${REQUIRED_GO}) OK"
log "done"
