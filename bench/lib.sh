# lib.sh — shell functions the command-latency scripts share (sourced by
# bench/chainlat.sh, ipsetlat.sh, cmdlat.sh and firstcmd.sh; not run).

# latstats LABEL [WIDTH]: reads one time in µs per line on stdin and prints
# LABEL, the median and min–max in ms, and the count.
latstats() {
	sort -n | awk -v l="$1" -v w="${2:-34}" '
		{ v[NR] = $1 }
		END {
			if (NR == 0) { printf "%-*s no values\n", w, l; exit }
			m = (NR % 2) ? v[(NR + 1) / 2] : (v[NR / 2] + v[NR / 2 + 1]) / 2
			printf "%-*s median %6.2f ms  (min %.2f – max %.2f, n=%d)\n", w, l, m / 1000, v[1] / 1000, v[NR] / 1000, NR
		}'
}

# agent_start NS XFW LOG: starts `XFW agent --no-log` in NS with its output
# in LOG, sets AGENT_PID, and returns once the agent follows the namespace's
# interfaces (it serves commands from then on); fails after 10 s.
agent_start() {
	local ns=$1 xfw=$2 log=$3
	ip netns exec "$ns" "$xfw" agent --no-log >"$log" 2>&1 &
	AGENT_PID=$!
	for _ in $(seq 100); do
		grep -q "following the interfaces" "$log" && return 0
		sleep 0.1
	done
	echo "$ns: the agent did not start" >&2
	cat "$log" >&2
	return 1
}
