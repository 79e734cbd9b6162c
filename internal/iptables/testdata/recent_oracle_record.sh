#!/bin/bash
# Records testdata/recent_oracle_v4.txt or _v6.txt again from iptables-legacy
# (as root): recent_oracle_record.sh 4|6 < CASES > TRANSCRIPT, where CASES are
# the transcript's unindented lines. Every case runs in a network namespace
# created for it and deleted afterwards; the host's tables are never touched.
set -u
fam=$1
ipt=iptables-legacy; [ "$fam" = 6 ] && ipt=ip6tables-legacy
echo "# Recorded from iptables-legacy 1.8.9 (ip6tables-legacy for _v6) on Linux 6.18: each case run as"
echo '# "-A INPUT CASE" in a fresh namespace; rc and standard error (newlines as |),'
echo "# then -S INPUT's rule and -L INPUT -n's line of the accepted ones."
while IFS= read -r line; do
  case "$line" in ''|'#'*|' '*) continue ;; esac
  ns=xfw-recrec-$$
  ip netns add "$ns"
  err=$(eval "ip netns exec $ns $ipt -A INPUT $line" 2>&1); rc=$?
  echo "$line"
  if [ -n "$err" ]; then err=$(printf '%s\n' "$err" | tr '\n' '|'); fi
  echo "  rc=$rc $err"
  if [ $rc = 0 ]; then
    ip netns exec "$ns" $ipt -S INPUT | sed -n '2s/^/  S: /p'
    ip netns exec "$ns" $ipt -L INPUT -n | sed -n '3s/^/  L: /p'
  fi
  ip netns del "$ns"
done
