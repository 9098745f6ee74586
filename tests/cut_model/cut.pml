/*
 * The cut's hand-over (alloc/cut.c, docs/DESIGN.md §8) as a model for spin:
 * every interleaving of two heaps' operations with the tracer's request and
 * reads, checked for a cut of one moment.
 *
 * Heap A allocates NB blocks and passes each to heap B (the pointer, a
 * channel). B frees it: a foreign free, which pushes the block on A's list
 * (xfree) before it writes its record, the order most open to a torn cut.
 * A drains the list in an operation of its own. Every operation starts as
 * op_start does: busy, then a look at the request, answered at once (the
 * position, cnt). The tracer writes the request, then reads each heap, in
 * either order, as user/os/remote.c does: busy (with the position, in the
 * copy of the heap), then the answer; answered: its position; else, unless
 * busy (then again), where it stands.
 *
 * The cut must be of one moment: no free below B's cut whose allocation is
 * not below A's, no drain below A's whose free is not below B's.
 * Built with -DNO_BUSY the tracer ignores busy: spin must then find a torn
 * cut (tests/cut_model/run.sh checks both), so that the model is seen to
 * check something.
 */
#define NB 2
#define LOGN 8
#define ALLOC 1
#define FREE 2
#define DRAIN 3

bit req;
bit busy[2];
bit ans[2];
byte cutpos[2];
byte cnt[2];
byte logt[16];
byte logb[16];
byte pos[2];
chan pass = [NB] of { byte };
chan xfree = [NB] of { byte };

inline op_start(h) {
	busy[h] = 1;
	if
	:: req && !ans[h] -> cutpos[h] = cnt[h]; ans[h] = 1
	:: else -> skip
	fi
}

inline record(h, t, b) {
	logt[h * LOGN + cnt[h]] = t;
	logb[h * LOGN + cnt[h]] = b;
	cnt[h]++
}

inline op_end(h) {
	busy[h] = 0
}

active proctype A() {
	byte b = 0, d;
	do
	:: b < NB -> op_start(0); record(0, ALLOC, b); op_end(0); pass!b; b++
	:: nempty(xfree) -> op_start(0); xfree?d; record(0, DRAIN, d); op_end(0)
	:: b == NB && empty(xfree) -> break
	od
}

active proctype B() {
	byte n = 0, b;
	do
	:: n < NB -> pass?b; op_start(1); xfree!b; record(1, FREE, b); op_end(1); n++
	:: n == NB -> break
	od
}

/* The tracer's read of heap h: pos[h] once it is answered or not busy. */
inline read_heap(h) {
	bit tb, ta;
	byte tc;
	do
	:: tb = busy[h]; tc = cnt[h]; ta = ans[h];
		if
		:: ta -> pos[h] = cutpos[h]; break
#ifdef NO_BUSY
		:: else -> pos[h] = tc; break
#else
		:: !ta && !tb -> pos[h] = tc; break
		:: else -> skip
#endif
		fi
	od
}

/* Whether record (type t, block b) is below heap h's cut. */
inline below(h, t, b, found) {
	byte j = 0;
	found = 0;
	do
	:: j < pos[h] -> if :: logt[h * LOGN + j] == t && logb[h * LOGN + j] == b -> found = 1 :: else -> skip fi; j++
	:: j >= pos[h] -> break
	od
}

active proctype T() {
	byte i;
	bit f;
	req = 1;
	if
	:: read_heap(0); read_heap(1)
	:: read_heap(1); read_heap(0)
	fi;
	/* every free below B's cut: its allocation below A's */
	i = 0;
	do
	:: i < pos[1] -> below(0, ALLOC, logb[1 * LOGN + i], f); assert(f); i++
	:: i >= pos[1] -> break
	od;
	/* every drain below A's cut: its free below B's */
	i = 0;
	do
	:: i < pos[0] ->
		if
		:: logt[i] == DRAIN -> below(1, FREE, logb[i], f); assert(f)
		:: else -> skip
		fi;
		i++
	:: i >= pos[0] -> break
	od
}
