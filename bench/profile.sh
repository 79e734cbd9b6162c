#!/usr/bin/env bash
# bench/profile.sh — where xfw_xdp's time goes, by source line (issue 22).
# Runs the progrun section (BPF_PROG_TEST_RUN, one ruleset size) and
# samples the CPU it runs on with perf's cpu-clock (this VM has no
# hardware counters), then maps each sample of xfwbench's thread to the
# kernel function it fell in, or, inside a BPF program, to the source line
# of the JIT image (xfwbench -jit-lines: the kernel's line infos). The
# shares are of all the samples of the test runs: the program, the helpers
# it calls (array_map_lookup_elem, the hash map's functions, ...) and the
# test-run loop. Sampling is skewed towards the instruction after a slow
# one (a load, a locked add): read a line's share with its neighbours'.
# Run as root from the repository root after `make build`.
#
#   bench/profile.sh [-s SIZE] [-n LINES] [-o DIR]
set -euo pipefail

readonly REPO_DIR="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
readonly CPU=1     # the CPU xfwbench pins its test runs to (bench/topo.go fwCPU)
readonly WARMUP=10 # seconds before sampling: namespaces, load, calibration
readonly SAMPLE=8  # seconds sampled

size=50
top=50
out="${TMPDIR:-/tmp}/xfw-profile"
while getopts "s:n:o:" opt; do
	case "${opt}" in
	s) size="${OPTARG}" ;;
	n) top="${OPTARG}" ;;
	o) out="${OPTARG}" ;;
	*) exit 2 ;;
	esac
done
[[ "$(id -u)" -eq 0 ]] || { echo "profile: must run as root" >&2; exit 1; }
command -v perf >/dev/null || { echo "profile: perf is missing" >&2; exit 1; }
cd "${REPO_DIR}"
mkdir -p "${out}"
bench="${out}/xfwbench"
go build -o "${bench}" ./bench

# Enough repetitions that the test runs outlast the sampling.
"${bench}" -out "${out}/res" -xfw bin/xfw -sections progrun -progrun-sizes "${size}" \
	-reps 40 -wait-idle 1s >"${out}/bench.log" 2>&1 &
pid=$!
sleep "${WARMUP}"
# Every loaded xfw_xdp (other namespaces' too): only addresses the samples
# of xfwbench's thread hit are looked up.
ids="$(bpftool prog show | awk '/ xdp +name xfw_xdp /{sub(":", "", $1); print $1}' | paste -sd, -)"
"${bench}" -jit-lines "${ids}" >"${out}/lines.txt"
cp /proc/kallsyms "${out}/kallsyms.txt"
perf record -q -C "${CPU}" -e cpu-clock -F 20000 -o "${out}/perf.data" -- sleep "${SAMPLE}" >/dev/null 2>&1
wait "${pid}"
grep 'progrun:' "${out}/bench.log" || true
perf script -i "${out}/perf.data" -F comm,ip 2>/dev/null |
	awk '$1 == "xfwbench" {print $2}' >"${out}/samples.txt"

/usr/bin/python3 - "${out}" "${top}" <<'PY'
import bisect, collections, sys

out, top = sys.argv[1], int(sys.argv[2])
lines = []
for l in open(f"{out}/lines.txt"):
    f = l.rstrip("\n").split("\t")
    if len(f) >= 2:
        lines.append((int(f[0], 16), f[1].split("/bpf/")[-1], f[2] if len(f) > 2 else ""))
lines.sort()
la = [x[0] for x in lines]
syms = []
for l in open(f"{out}/kallsyms.txt"):
    f = l.split()
    if len(f) >= 3:
        syms.append((int(f[0], 16), f[2]))
syms.sort()
sa = [x[0] for x in syms]
count, total = collections.Counter(), 0
for l in open(f"{out}/samples.txt"):
    try:
        ip = int(l, 16)
    except ValueError:
        continue
    total += 1
    name = syms[bisect.bisect_right(sa, ip) - 1][1]
    i = bisect.bisect_right(la, ip) - 1
    if not name.startswith("bpf_prog_") or i < 0:
        count["[kernel] " + name] += 1
    else:
        count[f"{lines[i][1]}  {lines[i][2][:60]}"] += 1
print(f"samples: {total}")
for k, c in count.most_common(top):
    print(f"{100 * c / max(total, 1):6.2f}%  {k}")
PY
