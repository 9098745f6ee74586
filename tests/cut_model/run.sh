#!/usr/bin/env bash
# The cut's hand-over as a model (tests/cut_model/cut.pml), every
# interleaving checked by spin (Debian's package): the protocol gives a cut
# of one moment in all of them; the same tracer without its look at `busy`
# must give a torn one, which spin finds (else the model checks nothing).
set -u
cd "$(dirname "$0")/../.." || exit 1
. tests/lib.sh

if ! command -v spin >/dev/null; then
	skip "the cut's model" "spin is not installed (scripts/setup.sh installs it)" 2
	finish
fi
cp tests/cut_model/cut.pml "$tmp/"
verify() { # NAME [SPIN-FLAGS...]: spin's pan on the model, its output in $tmp/NAME.out
	local name=$1
	shift
	(cd "$tmp" && rm -f pan pan.c && spin "$@" -a cut.pml >"$name.spin" 2>&1 &&
		cc -O2 -DSAFETY -o pan pan.c >>"$name.spin" 2>&1 && ./pan -m100000 >"$name.out" 2>&1)
}
verify protocol
check "every interleaving of two heaps and the tracer: the cut is of one moment (spin: errors 0)" \
	"$(grep -q 'errors: 0$' "$tmp/protocol.out" && ! grep -q 'assertion violated' "$tmp/protocol.out"; echo $?)" \
	"$(grep -E 'errors|violated|error' "$tmp/protocol.out" "$tmp/protocol.spin" | head -5)"
verify no_busy -DNO_BUSY
check "the tracer without its look at busy: spin finds a torn cut (the model can fail)" \
	"$(grep -q 'assertion violated' "$tmp/no_busy.out"; echo $?)" \
	"$(grep -E 'errors|violated' "$tmp/no_busy.out" | head -3)"
finish
