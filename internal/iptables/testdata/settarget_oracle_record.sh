#!/bin/bash
# Records testdata/settarget_oracle_v4.txt or _v6.txt again from
# iptables-legacy and ipset (as root): settarget_oracle_record.sh 4|6 <
# CASES > TRANSCRIPT, where CASES are the transcript's unindented lines.
# Every case runs in a network namespace created for it, with the sets the
# set match's transcripts use (match_set_test.go fakeSets), and deleted
# afterwards; the host's tables and sets are never touched.
set -u
fam=$1
ipt=iptables-legacy; [ "$fam" = 6 ] && ipt=ip6tables-legacy
echo '# Recorded from iptables-legacy 1.8.9 (kernel 6.18) in a network namespace with the sets'
echo '# bl, foo (hash:ip), bl6 (hash:ip family inet6), ipport (hash:ip,port), ipportip (hash:ip,port,ip),'
echo '# ls (list:set), nets (hash:net): iptables -A INPUT ARGS; rc and stderr (newlines as |), then iptables -S'"'"'s rule.'
while IFS= read -r line; do
  case "$line" in ''|'#'*|' '*) continue ;; esac
  ns=xfw-setrec-$$
  ip netns add "$ns"
  ip netns exec "$ns" sh -c 'ipset create bl hash:ip && ipset create foo hash:ip &&
    ipset create bl6 hash:ip family inet6 && ipset create ipport hash:ip,port &&
    ipset create ipportip hash:ip,port,ip && ipset create ls list:set && ipset create nets hash:net'
  err=$(eval "ip netns exec $ns $ipt -A INPUT $line" 2>&1); rc=$?
  echo "$line"
  if [ -n "$err" ]; then err="$err"$'\n'; fi
  echo "  rc=$rc $(printf '%s' "$err" | tr '\n' '|')"
  if [ $rc = 0 ]; then
    ip netns exec "$ns" $ipt -S INPUT | sed -n 's/^-A /  S: -A /p'
  fi
  ip netns del "$ns"
done
