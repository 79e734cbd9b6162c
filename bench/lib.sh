# lib.sh — shell functions the command-latency scripts share (sourced by
# bench/chainlat.sh, ipsetlat.sh and firstcmd.sh; not run).

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

# ns_make NS: creates network namespace NS with loopback and a veth pair
# v0–v1, all up.
ns_make() {
	ip netns add "$1"
	ip -n "$1" link add v0 type veth peer name v1
	for d in lo v0 v1; do ip -n "$1" link set "$d" up; done
}

# ns_clean NS XFW: ends the agent agent_start started (AGENT_PID), removes
# xfw from NS and deletes NS (NS "": the agent alone); quiet about what is
# gone already.
ns_clean() {
	if [ -n "${AGENT_PID:-}" ]; then
		kill "$AGENT_PID" 2>/dev/null || true
		wait "$AGENT_PID" 2>/dev/null || true
	fi
	AGENT_PID=
	[ -n "$1" ] || return 0
	ip netns exec "$1" "$2" stop >/dev/null 2>&1 || true
	ip netns del "$1" 2>/dev/null || true
}
