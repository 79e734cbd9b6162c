#!/usr/bin/env bash
# bench/stages.sh — the per-stage cost table of xfw_xdp (issue 22): builds
# one xfwbench per stop point of bpf/bench.h (the data plane compiled with
# -DXFW_BENCH_STOP=n returns at stop n) and the full program, then times
# each with the progrun section (BPF_PROG_TEST_RUN), the variants
# interleaved round by round so drift of the machine's load spreads over
# all of them. Run as root from the repository root after `make build`.
#
#   bench/stages.sh [-r ROUNDS] [-s SIZES] [-o DIR]
#
# Writes DIR/stage-N.log per variant and round and prints, per stop point
# and ruleset size, the median of the rounds' medians for each frame case.
set -euo pipefail

readonly REPO_DIR="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
readonly OBJ=internal/dataplane/bpf/xfw.o
readonly STOPS=(14 1 2 3 4 5 6 7 8 9 10 11 12 13 full)
readonly NAMES=(bare enter parse slot opts device natpre fib route fields walksetup resolve walk judge full)

rounds=3
sizes=0,50
out="${TMPDIR:-/tmp}/xfw-stages"
while getopts "r:s:o:" opt; do
	case "${opt}" in
	r) rounds="${OPTARG}" ;;
	s) sizes="${OPTARG}" ;;
	o) out="${OPTARG}" ;;
	*) exit 2 ;;
	esac
done
[[ "$(id -u)" -eq 0 ]] || { echo "stages: must run as root" >&2; exit 1; }
cd "${REPO_DIR}"
mkdir -p "${out}"
cp "${OBJ}" "${out}/xfw.o.saved"
restore() { cp "${out}/xfw.o.saved" "${OBJ}"; }
trap restore EXIT

for stop in "${STOPS[@]}"; do
	def=()
	[[ "${stop}" == full ]] || def=(-DXFW_BENCH_STOP="${stop}")
	clang -O2 -g -Wall -Werror -target bpf -I/usr/include/"$(uname -m)"-linux-gnu \
		"${def[@]}" -c bpf/xfw.c -o "${OBJ}"
	go build -o "${out}/xfwbench.${stop}" ./bench
done
restore

for ((r = 1; r <= rounds; r++)); do
	for stop in "${STOPS[@]}"; do
		# One size per run: a fresh namespace loads the program again
		# (a variant stopped early lacks maps a later Apply looks for).
		for size in ${sizes//,/ }; do
			"${out}/xfwbench.${stop}" -out "${out}/res.${stop}" -xfw bin/xfw -sections progrun \
				-progrun-sizes "${size}" -reps 5 -wait-idle 1s 2>&1 | grep 'progrun:' || true
		done >"${out}/stage-${stop}.${r}.log"
	done
done

# Table: stop, size, then each case's median over the rounds.
for i in "${!STOPS[@]}"; do
	stop="${STOPS[$i]}"
	for size in ${sizes//,/ }; do
		label="${size}"
		[[ "${size}" -ge 1000 ]] && label="$((size / 1000))K"
		for c in first last none; do
			grep -h "progrun: *${label} rules:" "${out}"/stage-"${stop}".*.log |
				sed -nE "s/.*${c} ([0-9]+) ns.*/\1/p" | sort -n |
				awk -v s="${NAMES[$i]}" -v z="${size}" -v c="${c}" \
					'{x[NR]=$1} END {printf "%-10s %6s %-5s median %s ns (min %s, max %s, n %d)\n", s, z, c, x[int((NR+1)/2)], x[1], x[NR], NR}'
		done
	done
done
