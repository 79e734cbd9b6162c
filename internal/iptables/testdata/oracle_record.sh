#!/bin/bash
# Records testdata/connlimit_oracle_*.txt or cpu_oracle_*.txt again from
# iptables-legacy (as root): oracle_record.sh 4|6 < CASES > TRANSCRIPT,
# where CASES are the transcript's unindented lines (after the header). Every case runs in a network namespace
# created for it and deleted afterwards; the host's tables are never touched.
set -u
fam=$1
ipt=iptables-legacy; [ "$fam" = 6 ] && ipt=ip6tables-legacy
while IFS= read -r line; do
  case "$line" in ''|'#'*|' '*) continue ;; esac
  ns=xfw-rec-$$
  ip netns add "$ns"
  err=$(eval "ip netns exec $ns $ipt -A INPUT $line" 2>&1 >/dev/null); rc=$?
  echo "$line"
  msg=; [ -n "$err" ] && msg=$(printf '%s\n' "$err" | tr '\n' '|')
  echo "  rc=$rc $msg"
  if [ $rc = 0 ]; then
    ip netns exec "$ns" $ipt -S INPUT | sed -n '2s/^/  S: /p'
    ip netns exec "$ns" $ipt -L INPUT -n | sed -n '3s/^/  L: /p'
  fi
  ip netns del "$ns"
done
