/* SPDX-License-Identifier: (LGPL-2.1 OR BSD-2-Clause) */
/*
 * The replay: allocator records in, struct tally_stats and per-group counters
 * out. Pure code, no I/O (docs/STYLE.md rule 8): the same module rebuilds the figures
 * in tally from the ring buffer and, in the tests, from the batches the
 * allocator hands to a sink, where it must equal the allocator's own figures.
 */
#ifndef TALLY_REPLAY_H
#define TALLY_REPLAY_H

#include <stddef.h>
#include <stdint.h>

#include "../../alloc/include/tally_alloc.h"
#include "../../bpf/contract/tally_events.h"

/* The figures at one moment of the stream: the record `seq` (records
 * applied then) brought them. */
struct tally_replay_mark {
	int64_t mapped, live, rounding, cache, span_free, returned, virgin, hysteresis,
		segment_overhead, large_count, spans_assigned;
	uint64_t seq;
};

struct tally_replay {
	/* signed: records of different threads arrive in any order */
	int64_t mapped, live, rounding, cache, span_free, returned, virgin, hysteresis,
		segment_overhead, large_count, spans_assigned;
	struct {
		int64_t alloc_bytes, alloc_objs, dealloc_bytes, dealloc_objs;
		/* the group's live at `peak` (docs/DESIGN.md §11), kept lazily:
		 * taken when the group changes for the first time after the
		 * peak; until then its live now is its live then. `changed`:
		 * the record that changed it last. */
		int64_t peak_live;
		uint64_t changed;
	} groups[TALLY_MAX_GROUPS];
	uint32_t groups_used; /* groups[0..groups_used) have changed */
	/* the highest live and the highest mapped since the start (or the
	 * seed: tally_replay_mark_now), record by record: the whole figures
	 * at each. O(1) a record; a run of one-word records that may pass the
	 * peak is scanned for where it does (tally_replay_word_run). */
	struct tally_replay_mark peak, peak_mapped;
	/* records that moved live (the model's exactness of a peak) */
	uint64_t live_moves;
	/* sample records (heap profiles, docs/DESIGN.md §7) go here, the words
	 * after the record's two with them; NULL: skipped. They move no byte
	 * of the identity. Set by the caller before each use (the model sets
	 * it to its own sites, models move). */
	void (*on_sample)(void *ctx, const struct tally_ev *e, const __u64 *extra);
	void *sample_ctx;
	uint64_t samples;  /* sample records seen */
	uint64_t records;  /* records applied */
	uint64_t batches;  /* batches applied */
	uint64_t rejected; /* malformed batches or records, not applied */
};

void tally_replay_init(struct tally_replay *r);
/* One record; -EINVAL (and counted in rejected) for an unknown type or group. */
int tally_replay_record(struct tally_replay *r, const struct tally_ev *e);
/* A run of one-word records (alloc, free, foreign free) of one group from
 * words[pos], summed; where the run ends. rule >= 0: a --group rule's group,
 * charged what the records charge to root. */
uint32_t tally_replay_word_run(struct tally_replay *r, const __u64 *words, uint32_t pos,
			       uint32_t count, int32_t rule);
/* words[pos..count): runs of one-word records summed, the others one by one
 * (tally_replay_record); the path of tally's model and of tally_replay_batch.
 * Adds to *applied and *refused; -EINVAL when a record runs past count. */
int tally_replay_words(struct tally_replay *r, const __u64 *words, uint32_t pos, uint32_t count,
		       int32_t rule, uint64_t *applied, uint64_t *refused);
/* A whole batch as handed over (header and records); -EINVAL when malformed. */
int tally_replay_batch(struct tally_replay *r, const void *data, size_t bytes);
/* The bytes of a batch message (len bytes) that are the producer's: what
 * it said it handed over (mb->bytes, no more than a batch) and the message
 * holds; the BPF ring's messages are all of a whole batch's size, and their
 * words past `bytes` are not the producer's. 0: no batch at all (the
 * message too short for one, or bytes past a batch). */
uint64_t tally_msg_batch_valid(const struct tally_msg_batch *mb, size_t len);
/* The records of a batch of which `valid` bytes are the producer's, from
 * one of `sources` (tally_batch_check), to fn in order, each with the words
 * after its first two (a KERNEL_NAME record's text), until one does not
 * decode: 0, or -EINVAL for a batch refused whole or a record cut short
 * (those before it given). The one reading of a CUPTI batch, the model's
 * and the trace's: the two read a batch alike. */
int tally_replay_each(const struct tally_batch *b, uint64_t valid, __u32 sources,
		      void (*fn)(void *ctx, const struct tally_ev *e, const __u64 *extra),
		      void *ctx);
void tally_replay_stats(const struct tally_replay *r, struct tally_stats *out);
/* The figures of a mark as Stats. */
void tally_replay_mark_stats(const struct tally_replay_mark *k, struct tally_stats *out);
/* A group's live at the peak. */
int64_t tally_replay_group_peak(const struct tally_replay *r, uint32_t group);
/* Both peaks start anew at the figures as they are now (a seed read from
 * memory, a fork, an exec). */
void tally_replay_mark_now(struct tally_replay *r);
int tally_replay_group(const struct tally_replay *r, uint32_t group, struct tally_group_stats *out);

#endif /* TALLY_REPLAY_H */
