/* SPDX-License-Identifier: (LGPL-2.1 OR BSD-2-Clause) */
/*
 * libtally_interpose.so, what `tally -p PID --inject` loads into a process
 * that runs on glibc's malloc: what its files share. interpose.c has the
 * wrappers, the table of blocks and the records; interpose_got.c points the
 * process's GOT entries at the wrappers and back.
 */
#ifndef TALLY_ALLOC_INTERPOSE_H
#define TALLY_ALLOC_INTERPOSE_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#define IP_API __attribute__((visibility("default")))
#define likely(x) __builtin_expect(!!(x), 1)
#define unlikely(x) __builtin_expect(!!(x), 0)

/* the tally:batch probe's semaphore (interpose_batch.c) */
extern unsigned short tally_batch_semaphore;

/* One function of the family: the name its GOT entries are bound to, the
 * wrapper they are pointed at. */
struct ip_func {
	const char *name;
	void *wrapper;
};

/* interpose.c, what the injector calls in the process (user/core/inject.c):
 * start recording (0, -EALREADY while a tracer records already, or -errno),
 * and how many GOT entries lead to the wrappers now. */
IP_API int tally_interpose_start(void);
IP_API size_t tally_interpose_patched(void);

/* interpose_batch.c: the calling thread's batch takes a record (one word,
 * or two for a block past the one-word sizes), or a record and `nextra`
 * words after it; the batches are handed over when full, by ip_flush_all
 * (every thread's whose lock is free; `wait`: every thread's) and at a
 * thread's exit (ip_batch_init). In a forked child (one thread), the locks
 * of the parent's other threads are let go, and with `drop` every record
 * the parent's threads held is dropped (the parent hands them over). */
void ip_put_word(uint8_t type, uint64_t q, uint64_t usable);
struct tally_ev;
void ip_put_ev(const struct tally_ev *e, const uint64_t *extra, uint32_t nextra);
void ip_flush_all(bool wait);
int ip_batch_init(void);
void ip_batch_child(bool drop);

/* interpose_table.c: the blocks allocated since the start. put: 0, or
 * -ENOMEM (the table cannot grow); an entry p had already is returned in
 * *stale (else -1). take: p's requested size, out of the table, or -1. */
int ip_table_put(uintptr_t p, uint64_t q, int64_t *stale);
int64_t ip_table_take(uintptr_t p);
uint64_t ip_table_bytes(void);
void ip_table_child(void); /* a forked child: every stripe's lock let go */

/* interpose_got.c: point every GOT entry of `funcs` in every loaded object
 * (but this library's) at its wrapper, remembering what each held; objects
 * already done are skipped, so it is called again after a dlopen. Returns
 * the entries patched so far, or -errno. */
int ip_got_patch(const struct ip_func *funcs, size_t n);
/* Put back every entry ip_got_patch changed that still holds its wrapper. */
void ip_got_restore(void);
/* Entries patched now. */
size_t ip_got_count(void);

#endif /* TALLY_ALLOC_INTERPOSE_H */
