#!/bin/bash
# Records testdata/nat_oracle_v4.txt or _v6.txt again from iptables-legacy
# (as root): nat_oracle_record.sh 4|6 < CASES > TRANSCRIPT, where CASES are
# the transcript's unindented lines. Every case runs in a network namespace
# created for it and deleted afterwards; the host's tables are never touched.
set -u
fam=$1
ipt=iptables-legacy; [ "$fam" = 6 ] && ipt=ip6tables-legacy
out=$(mktemp)
trap 'rm -f "$out"' EXIT
echo '# Recorded from iptables-legacy 1.8.9: each case (commands separated by " ;; ") run in a'
echo '# fresh namespace; rc and standard error of the last command (newlines as |), what it'
echo '# printed (O:), then -t TABLE -S (S:) and -t TABLE -L -n (L:) of its table when it succeeded.'
while IFS= read -r line; do
  case "$line" in ''|'#'*|' '*) continue ;; esac
  ns=xfw-natrec-$$
  ip netns add "$ns"
  IFS=$'\n' read -r -d '' -a cmds < <(echo "$line" | sed 's/ ;; /\n/g'; printf '\0')
  rc=0; err=
  for c in "${cmds[@]}"; do
    err=$(eval "ip netns exec $ns $ipt $c" 2>&1 >"$out"); rc=$?
  done
  table=$(echo "${cmds[-1]}" | sed -n 's/^-t \([a-z]*\).*/\1/p')
  echo "$line"
  echo "  rc=$rc $(printf '%s\n' "$err" | tr '\n' '|' | sed 's/|$//')"
  if [ -s "$out" ]; then sed 's/^/  O: /' "$out"; fi
  if [ $rc = 0 ]; then
    ip netns exec "$ns" $ipt -t "$table" -S | sed 's/^/  S: /'
    ip netns exec "$ns" $ipt -t "$table" -L -n | sed 's/^/  L: /'
  fi
  ip netns del "$ns"
done
