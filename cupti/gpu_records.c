// SPDX-License-Identifier: (LGPL-2.1 OR BSD-2-Clause)
/*
 * GPU records leave the process the way the allocator's do (docs/DESIGN.md §5,
 * alloc/events.c): each thread appends struct tally_ev records to its own
 * struct tally_batch, and a whole batch is handed over at once (the hooks'
 * sink: the USDT probe tally:batch in injection.c). A batch is handed over
 *   - when the next record would not fit,
 *   - at a callback of its thread, once its first record is older than
 *     TALLY_CUPTI_FLUSH_MS,
 *   - by any other thread's callback, at most every TALLY_CUPTI_FLUSH_MS, once
 *     that old (a thread that stops calling CUDA would otherwise hold its
 *     records until it exits),
 *   - at thread exit (a pthread key's destructor) and at process exit.
 *
 * Each thread's records form one stream: heap_id = the stream's id (1, 2, ...
 * in order of creation, never reused), seq_first = the words handed over
 * before on that stream, tid = the thread handing the batch over (usually,
 * not always, the owner).
 *
 * Kernel names: a KERNEL_NAME record (and the words of its text) goes into a
 * batch before the first launch in that batch that uses its id, in the same
 * batch as that launch. So every batch can be read alone: a late, lost or
 * reordered batch never leaves a launch without its name, at the cost of a
 * name's words once per batch (a batch holds 2048 words).
 *
 * Locking: a stream's lock guards its batch and the figures beside it; the
 * owner takes it for each record, another thread only to hand the batch
 * over (trylock). streams_lock guards the list; it is taken before a
 * stream's lock, never after.
 */
#include <dlfcn.h>
#include <stdatomic.h>
#include <stdlib.h>
#include <stdio.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include "internal.h"
#include "../alloc/common/hash.h"
#include "../alloc/common/sdk_lookup.h"

#define SENT_SLOTS 1024 /* > names a batch can hold: each takes >= 5 words with its launch */
#define MSEC_PER_SEC 1000ULL
#define NSEC_PER_MSEC 1000000ULL

struct sent_name {
	uint32_t id;
	uint32_t batch_no; /* this stream's batch_no when sent; another value: empty */
};

struct stream {
	pthread_mutex_t lock;
	struct stream *next, *prev;	   /* all streams, under streams_lock */
	uint64_t id;			   /* the batches' heap_id */
	uint64_t seq;			   /* words handed over before batch.words[0] */
	uint64_t first_ms;		   /* when batch.words[0] was written (count > 0) */
	uint32_t batch_no;		   /* batches handed over + 1, never 0: tags sent[] */
	struct sent_name sent[SENT_SLOTS]; /* names this batch carries */
	struct tally_cupti_thread thread;  /* the owner's own state, not locked */
	struct tally_batch batch;
};

struct tally_cupti_hooks tally_cupti_hooks;
struct tally_cupti_counters tally_cupti_counters;

static __thread struct stream *tls_stream;
static pthread_key_t stream_key;
static pthread_once_t stream_key_once = PTHREAD_ONCE_INIT;
static pthread_mutex_t streams_lock = PTHREAD_MUTEX_INITIALIZER;
static struct stream *streams;
static _Atomic uint64_t next_stream_id = 1;
static _Atomic uint64_t last_sweep_ms;
static _Atomic bool eager; /* after process exit's flush: hand over every record */

static void count(uint64_t *counter)
{
	__atomic_fetch_add(counter, 1, __ATOMIC_RELAXED);
}

static uint64_t now_ms(void)
{
	struct timespec ts;

	if (tally_cupti_hooks.now_ms)
		return tally_cupti_hooks.now_ms();
	clock_gettime(CLOCK_MONOTONIC_COARSE, &ts);
	return (uint64_t)ts.tv_sec * MSEC_PER_SEC + (uint64_t)ts.tv_nsec / NSEC_PER_MSEC;
}

/* Hand the batch over and start the next one. Stream locked. */
static void stream_flush(struct stream *s)
{
	struct tally_batch *b = &s->batch;
	size_t bytes;

	if (!b->count)
		return;
	bytes = tally_batch_seal(b, TALLY_SRC_CUPTI, (__u32)gettid(), s->id, s->seq);
	if (tally_cupti_hooks.sink)
		tally_cupti_hooks.sink(b, bytes);
	count(&tally_cupti_counters.batches);
	s->seq += b->count;
	b->count = 0;
	if (++s->batch_no == 0) { /* wrapped: old tags could match again */
		memset(s->sent, 0, sizeof(s->sent));
		s->batch_no = 1;
	}
}

/* Thread exit: the stream's last batch, then the stream. */
static void stream_release(void *p)
{
	struct stream *s = p;

	pthread_mutex_lock(&streams_lock);
	if (s->prev)
		s->prev->next = s->next;
	else
		streams = s->next;
	if (s->next)
		s->next->prev = s->prev;
	pthread_mutex_unlock(&streams_lock);
	pthread_mutex_lock(&s->lock);
	stream_flush(s);
	pthread_mutex_unlock(&s->lock);
	pthread_mutex_destroy(&s->lock);
	if (tls_stream == s)
		tls_stream = NULL;
	free(s);
}

static void stream_key_create(void)
{
	if (pthread_key_create(&stream_key, stream_release))
		stream_key = (pthread_key_t)-1;
}

/* The calling thread's stream, made at its first record; NULL without memory. */
static struct stream *stream_get(void)
{
	struct stream *s = tls_stream;

	if (s)
		return s;
	pthread_once(&stream_key_once, stream_key_create);
	s = calloc(1, sizeof(*s));
	if (!s)
		return NULL;
	pthread_mutex_init(&s->lock, NULL);
	s->id = atomic_fetch_add_explicit(&next_stream_id, 1, memory_order_relaxed);
	s->batch_no = 1;
	/* without a key the thread's last records wait for process exit */
	if (stream_key != (pthread_key_t)-1)
		pthread_setspecific(stream_key, s);
	pthread_mutex_lock(&streams_lock);
	s->next = streams;
	if (streams)
		streams->prev = s;
	streams = s;
	pthread_mutex_unlock(&streams_lock);
	tls_stream = s;
	return s;
}

struct tally_cupti_thread *tally_cupti_thread(void)
{
	struct stream *s = stream_get();

	return s ? &s->thread : NULL;
}

/* Room for words more words in the batch, handing it over if need be. Stream
 * locked. true when the batch was handed over. */
static bool stream_room(struct stream *s, uint32_t words)
{
	bool flushed = false;

	if (s->batch.count + words > TALLY_BATCH_WORDS) {
		stream_flush(s);
		flushed = true;
	}
	if (!s->batch.count)
		s->first_ms = now_ms();
	return flushed;
}

/* After a record: at process exit, nothing waits. Stream locked. */
static void stream_written(struct stream *s)
{
	if (atomic_load_explicit(&eager, memory_order_relaxed))
		stream_flush(s);
}

static void stream_put(struct stream *s, uint8_t type, uint8_t term, uint32_t group, uint32_t n,
		       uint64_t bytes)
{
	struct tally_ev e = { type, term, (__u16)group, n, bytes };

	tally_ev_put(s->batch.words, &s->batch.count, &e);
}

void tally_cupti_emit(uint8_t type, uint8_t term, uint32_t group, uint32_t n, uint64_t bytes)
{
	struct stream *s = stream_get();

	if (!s) {
		count(&tally_cupti_counters.dropped_records);
		return;
	}
	pthread_mutex_lock(&s->lock);
	stream_room(s, 2);
	stream_put(s, type, term, group, n, bytes);
	stream_written(s);
	pthread_mutex_unlock(&s->lock);
}

void tally_cupti_refused(int result, const char *why, const char *holder)
{
	char text[TALLY_KERNEL_NAME_MAX + 1];
	struct stream *s = stream_get();
	int len = snprintf(text, sizeof(text), "%s%s%s", why ? why : "error",
			   holder && *holder ? "; held by " : "", holder ? holder : "");
	uint32_t n = len < 0 ? 0 : (uint32_t)len >= sizeof(text) ? sizeof(text) - 1 : (uint32_t)len;
	uint32_t words = (n + 7) / 8;

	if (!s) {
		count(&tally_cupti_counters.dropped_records);
		return;
	}
	pthread_mutex_lock(&s->lock);
	stream_room(s, 2 + words);
	stream_put(s, TALLY_EV_GPU_CUPTI_REFUSED, 0, 0, (uint32_t)result, n);
	memset(&s->batch.words[s->batch.count], 0, words * sizeof(s->batch.words[0]));
	memcpy(&s->batch.words[s->batch.count], text, n);
	s->batch.count += words;
	stream_flush(s); /* once, at start: the tracer learns it now */
	pthread_mutex_unlock(&s->lock);
}

/* Knuth's multiplicative hash (common/hash.h): ids are small and
 * consecutive, and this spreads them over the slots */
static size_t sent_home(uint32_t id)
{
	return hash_knuth32(id) % SENT_SLOTS;
}

static bool sent_has(const struct stream *s, uint32_t id)
{
	for (size_t i = sent_home(id); s->sent[i].batch_no == s->batch_no; i = (i + 1) % SENT_SLOTS)
		if (s->sent[i].id == id)
			return true;
	return false;
}

static void sent_add(struct stream *s, uint32_t id)
{
	size_t i = sent_home(id);

	while (s->sent[i].batch_no == s->batch_no)
		i = (i + 1) % SENT_SLOTS;
	s->sent[i] = (struct sent_name){ id, s->batch_no };
}

static uint32_t name_words(const struct tally_cupti_name *nm)
{
	return (nm->len + 7) / 8;
}

void tally_cupti_emit_launch(const struct tally_cupti_name *nm, uint32_t group, uint32_t api)
{
	struct stream *s = stream_get();
	struct tally_batch *b;
	bool with_name;

	if (!s) {
		count(&tally_cupti_counters.dropped_records);
		return;
	}
	b = &s->batch;
	pthread_mutex_lock(&s->lock);
	with_name = nm && !sent_has(s, nm->id);
	/* a fresh batch carries no name yet */
	if (stream_room(s, 2 + (with_name ? 2 + name_words(nm) : 0)))
		with_name = nm != NULL;
	if (with_name) {
		stream_put(s, TALLY_EV_GPU_KERNEL_NAME, 0, 0, nm->id, nm->len);
		memset(&b->words[b->count], 0, name_words(nm) * sizeof(b->words[0]));
		memcpy(&b->words[b->count], nm->text, nm->len);
		b->count += name_words(nm);
		sent_add(s, nm->id);
	}
	stream_put(s, TALLY_EV_GPU_LAUNCH, 0, group, nm ? nm->id : 0, api);
	stream_written(s);
	pthread_mutex_unlock(&s->lock);
}

/* Other threads' batches older than TALLY_CUPTI_FLUSH_MS; busy ones wait. */
static void streams_sweep(const struct stream *self, uint64_t now)
{
	pthread_mutex_lock(&streams_lock);
	for (struct stream *s = streams; s; s = s->next) {
		if (s == self || pthread_mutex_trylock(&s->lock))
			continue;
		if (s->batch.count && now - s->first_ms >= TALLY_CUPTI_FLUSH_MS)
			stream_flush(s);
		pthread_mutex_unlock(&s->lock);
	}
	pthread_mutex_unlock(&streams_lock);
}

void tally_cupti_tick(void)
{
	struct stream *s = tls_stream;
	uint64_t now = now_ms();
	uint64_t last = atomic_load_explicit(&last_sweep_ms, memory_order_relaxed);

	if (s) {
		pthread_mutex_lock(&s->lock);
		if (s->batch.count && now - s->first_ms >= TALLY_CUPTI_FLUSH_MS)
			stream_flush(s);
		pthread_mutex_unlock(&s->lock);
	}
	if (now - last >= TALLY_CUPTI_FLUSH_MS &&
	    atomic_compare_exchange_strong_explicit(&last_sweep_ms, &last, now,
						    memory_order_relaxed, memory_order_relaxed))
		streams_sweep(s, now);
}

void tally_cupti_flush_self(void)
{
	struct stream *s = tls_stream;

	if (!s)
		return;
	pthread_mutex_lock(&s->lock);
	stream_flush(s);
	pthread_mutex_unlock(&s->lock);
}

void tally_cupti_flush_all(void)
{
	atomic_store(&eager, true);
	pthread_mutex_lock(&streams_lock);
	for (struct stream *s = streams; s; s = s->next) {
		pthread_mutex_lock(&s->lock);
		stream_flush(s);
		pthread_mutex_unlock(&s->lock);
	}
	pthread_mutex_unlock(&streams_lock);
}

void tally_cupti_records_reset(void)
{
	struct stream *s, *next;

	tally_cupti_flush_all();
	pthread_mutex_lock(&streams_lock);
	for (s = streams; s; s = next) {
		next = s->next;
		pthread_mutex_destroy(&s->lock);
		free(s);
	}
	streams = NULL;
	pthread_mutex_unlock(&streams_lock);
	/* a stream of this thread implies the key exists */
	if (tls_stream && stream_key != (pthread_key_t)-1)
		pthread_setspecific(stream_key, NULL);
	tls_stream = NULL;
	atomic_store(&eager, false);
	atomic_store(&last_sweep_ms, 0);
	memset(&tally_cupti_counters, 0, sizeof(tally_cupti_counters));
}

/* libtally.so's tally_group_current, if the process has it. */
static struct tally_group (*group_current)(void);
static pthread_once_t group_once = PTHREAD_ONCE_INIT;

static void group_lookup(void)
{
	/* a weak reference, no dlsym: no dlerror message left to a CUDA
	 * program without the SDK (tests/cupti/test_nosdk.c) */
	group_current = sdk_lookup_group_current();
}

uint32_t tally_cupti_group(void)
{
	uint32_t id;

	pthread_once(&group_once, group_lookup);
	if (!group_current)
		return 0;
	id = group_current().id;
	return id < TALLY_MAX_GROUPS ? id : 0;
}
