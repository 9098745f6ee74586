#!/usr/bin/env bash
# Program 1 of tests/programs: a bash script that forks a lot: command
# substitutions, a pipeline of several stages, a ( ... ) subshell and a
# background job. Its output is deterministic; it exits 3 on purpose. The
# useless echos are there to fork.
# shellcheck disable=SC2116,SC2012
set -u
export LC_ALL=C
sum=0
for i in $(seq 1 150); do
	sq=$(echo $((i * i)))
	w=$(printf '%s' "word$i" | tr '[:lower:]' '[:upper:]')
	sum=$((sum + sq + ${#w}))
done
echo "substitutions: sum $sum"
declare -A h
for i in $(seq 1 3000); do h[key$i]=$((i * 7)); done
echo "assoc: ${#h[@]} keys, key2999=${h[key2999]}"
echo "pipeline: $(seq 1 20000 | awk '{print $1 % 97}' | sort -n | uniq -c | sort -k1,1nr -k2,2n | head -n 3 | tr -s ' \n' ' ')"
(
	cd / || exit 1
	here=$(pwd)
	for j in 1 2 3; do n=$(ls / | wc -l); done
	echo "subshell: in $here, $j rounds, $((n > 0))"
)
bgout=$(mktemp)
{
	s=0
	for k in $(seq 1 200); do s=$((s + $(echo "$k"))); done
	echo "background: $s"
} >"$bgout" &
wait $!
echo "wait: status $?"
cat "$bgout"
rm -f "$bgout"
exit 3
