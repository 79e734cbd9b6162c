#!/usr/bin/env bash
# bench/lpm/run.sh — the LPM benchmark (make bench-lpm): fetch the data sets,
# compile bench/lpm/bpf/lpm_bench.c, run bench/lpm (lpmbench) and write
# results/lpm.md. Run as root from anywhere, after scripts/deps.sh (the make
# target runs it first: clang, ipset, nftables, iproute2).
#
#   bench/lpm/run.sh [lpmbench flags…]     e.g. -quick, -runs 7, -kernel-sets=false
#
# Data sets, into results/tmp/lpm-data (gitignored), each fetched once:
#   bart-prefixes.txt.gz      the routing table (~1.06M prefixes) shipped as
#                             test data in the Go module github.com/gaissmai/bart
#                             (go mod download; not a dependency of xfw)
#   geoip2fast-prefixes.txt   GeoLite2 country networks of the PyPI package
#                             geoip2fast (pip download; extracted by
#                             geoip2fast_prefixes.py)
#   tor-geoip, tor-geoip6     Debian package tor-geoipdb
# lpmbench makes the synthetic /32 blocklists itself. It creates one network
# namespace (xfwlpm-PID) for ipset/nft and removes it; the trap below removes
# it too if lpmbench dies.
set -euo pipefail

readonly REPO_DIR="$(cd "$(dirname "${BASH_SOURCE[0]}")/../.." && pwd)"
readonly DATA="${REPO_DIR}/results/tmp/lpm-data"
readonly BART_MODULE="github.com/gaissmai/bart@v0.30.0"
readonly GEOIP2FAST_VERSION="1.2.2"

log() { printf 'bench-lpm: %s\n' "$*"; }
die() { printf 'bench-lpm: ERROR: %s\n' "$*" >&2; exit 1; }

[[ "$(id -u)" -eq 0 ]] || die "must run as root (BPF, network namespaces)"
mkdir -p "${DATA}"
cd "${REPO_DIR}"
export DEBIAN_FRONTEND=noninteractive

missing=()
for pkg in tor-geoipdb python3-pip ipset nftables iproute2 clang; do
	status="$(dpkg-query -W -f='${db:Status-Status}' "${pkg}" 2>/dev/null || true)"
	[[ "${status}" == "installed" ]] || missing+=("${pkg}")
done
if [[ "${#missing[@]}" -gt 0 ]]; then
	log "installing: ${missing[*]}"
	apt-get update -q || die "apt-get update failed"
	apt-get install -y -q --no-install-recommends "${missing[@]}" || die "apt-get install failed: ${missing[*]}"
fi

if [[ ! -s "${DATA}/bart-prefixes.txt.gz" ]]; then
	log "fetching ${BART_MODULE} (Go module proxy)"
	dir="$(go mod download -json "${BART_MODULE}" | sed -n 's/^[[:space:]]*"Dir": "\(.*\)",$/\1/p')"
	[[ -n "${dir}" ]] || die "go mod download ${BART_MODULE}: no module directory"
	cp "${dir}/internal/tests/testdata/prefixes.txt.gz" "${DATA}/bart-prefixes.txt.gz"
fi
if [[ ! -s "${DATA}/geoip2fast-prefixes.txt" ]]; then
	log "fetching geoip2fast ${GEOIP2FAST_VERSION} (PyPI)"
	tmp="$(mktemp -d)"
	python3 -m pip download --no-deps -q -d "${tmp}" "geoip2fast==${GEOIP2FAST_VERSION}" ||
		{ rm -rf "${tmp}"; die "pip download geoip2fast failed"; }
	tar -xzf "${tmp}"/geoip2fast-*.tar.gz -C "${tmp}"
	python3 "${REPO_DIR}/bench/lpm/geoip2fast_prefixes.py" \
		"${tmp}/geoip2fast-${GEOIP2FAST_VERSION}/geoip2fast/geoip2fast-ipv6.dat.gz" "${DATA}/geoip2fast-prefixes.txt" ||
		{ rm -rf "${tmp}"; die "extracting geoip2fast networks failed"; }
	rm -rf "${tmp}"
fi
cp /usr/share/tor/geoip "${DATA}/tor-geoip"
cp /usr/share/tor/geoip6 "${DATA}/tor-geoip6"

log "compiling bench/lpm/bpf/lpm_bench.c"
clang -O2 -g -Wall -Werror -target bpf -I"/usr/include/$(uname -m)-linux-gnu" \
	-c bench/lpm/bpf/lpm_bench.c -o "${DATA}/lpm_bench.o"
go build -o "${REPO_DIR}/bin/lpmbench" ./bench/lpm

bench_pid=""
ns_cleanup() {
	# lpmbench names its namespace after its PID; remove it if lpmbench died
	# before removing it itself.
	if [[ -n "${bench_pid}" ]]; then
		kill "${bench_pid}" 2>/dev/null || true
		wait "${bench_pid}" 2>/dev/null || true
	fi
	if [[ -n "${bench_pid}" ]] && ip netns list | grep -q "^xfwlpm-${bench_pid}\b"; then
		ip netns delete "xfwlpm-${bench_pid}" || true
	fi
}
trap ns_cleanup EXIT
"${REPO_DIR}/bin/lpmbench" -data "${DATA}" -obj "${DATA}/lpm_bench.o" -out "${REPO_DIR}/results/lpm.md" "$@" &
bench_pid=$!
wait "${bench_pid}"
