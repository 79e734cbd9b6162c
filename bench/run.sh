#!/usr/bin/env bash
# bench/run.sh — build and run xfw's benchmark suite (make bench, make
# bench-quick). Run as root from the repository root, after scripts/deps.sh
# and `make build` (the Makefile targets do both).
#
#   bench/run.sh full [xfwbench flags…]   every section; writes results/
#                                          (bench.json, bench.md, *.png) and
#                                          the generated part of
#                                          docs/benchmarks.md
#   bench/run.sh quick                     headline ratios only (< 1 minute)
#
# Like scripts/deps.sh it installs what is missing (Debian packages, asking
# dpkg first): python3-matplotlib for the plots, util-linux for taskset,
# tor-geoipdb for the rfpf section's country networks.
set -euo pipefail

readonly REPO_DIR="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
readonly BIN="${REPO_DIR}/bin/xfwbench"
# Debian's interpreter, where apt installs matplotlib (a python3 earlier in
# PATH, e.g. pyenv's, would not see it).
readonly PYTHON=/usr/bin/python3

log() { printf 'bench: %s\n' "$*"; }
die() { printf 'bench: ERROR: %s\n' "$*" >&2; exit 1; }

[[ "$(id -u)" -eq 0 ]] || die "must run as root (network namespaces, BPF)"
cd "${REPO_DIR}"
mode="${1:-full}"
shift || true

export DEBIAN_FRONTEND=noninteractive
missing=()
for pkg in python3-matplotlib util-linux tor-geoipdb; do
	status="$(dpkg-query -W -f='${db:Status-Status}' "${pkg}" 2>/dev/null || true)"
	[[ "${status}" == "installed" ]] || missing+=("${pkg}")
done
if [[ "${#missing[@]}" -gt 0 ]]; then
	log "installing: ${missing[*]}"
	apt-get update -q || die "apt-get update failed"
	apt-get install -y -q --no-install-recommends "${missing[@]}" || die "apt-get install failed for: ${missing[*]}"
fi

[[ -x bin/xfw ]] || die "bin/xfw missing: run make build first"
# The run uses its own copy of xfw, taken now, so a rebuild of bin/xfw
# while it runs does not change what it measures (xfwbench embeds the data
# plane it loads in-process, built from the same tree now).
mkdir -p results/tmp
cp bin/xfw results/tmp/xfw
# The agent's client beside it (the update section's "xfw, agent": the
# iptables alternatives link to it when xfw is installed).
cp bin/xfw-cmd results/tmp/xfw-cmd
log "building ${BIN}"
go build -o "${BIN}" ./bench

case "${mode}" in
quick)
	exec "${BIN}" -quick -xfw results/tmp/xfw
	;;
full)
	"${BIN}" -out results -xfw results/tmp/xfw "$@"
	log "drawing plots"
	"${PYTHON}" bench/plot.py results
	log "updating docs/benchmarks.md"
	"${BIN}" docs -in results/bench.json -out docs/benchmarks.md
	log "results in results/bench.md"
	;;
*)
	die "unknown mode ${mode} (full or quick)"
	;;
esac
