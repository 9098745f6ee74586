// SPDX-License-Identifier: (LGPL-2.1 OR BSD-2-Clause)
/*
 * libtally_interpose.so's own thread ("tally-inject"), one a start: every
 * 20 ms it hands over the batches of threads that went quiet, sends glibc's
 * own totals (mallinfo2), patches objects loaded behind the wrappers' back,
 * and, once the probe's semaphore falls (tally detached or died, for any
 * reason), puts every GOT entry back and ends.
 *
 * A start that takes over from a dead tally (interpose.c) makes the thread
 * of the one before end at its next tick, whenever that comes: a stopped
 * or starved thread may never have seen its tally's semaphore fall, and
 * the new tally's probe has raised it again since. Ticks take a lock, so
 * that an old thread stopped in the middle of one finishes it before the
 * new thread begins its own.
 */
#include <link.h>
#include <pthread.h>
#include <signal.h>
#include <stdatomic.h>
#include <stddef.h>
#include <time.h>

#include "internal.h"

#define IP_TICK_NS (20ULL * 1000000ULL) /* the thread's period */
#define IP_INFO_TICKS 5			/* mallinfo2 every 100 ms */

/* each start's number: its thread's, which ends once a newer start has one */
static _Atomic unsigned ip_gen;
static pthread_mutex_t ip_tick_lock = PTHREAD_MUTEX_INITIALIZER; /* one thread's tick at once */

/* Whether start number gen's recording is still on. */
static bool current(unsigned gen)
{
	return atomic_load(&ip_state) == IP_TRACING && atomic_load(&ip_gen) == gen;
}

static void detach(unsigned gen)
{
	pthread_mutex_lock(&ip_lock);
	if (current(gen)) {
		atomic_store(&ip_state, IP_GONE);
		ip_got_restore();
	}
	pthread_mutex_unlock(&ip_lock);
}

/* glibc's count of objects ever loaded, from the first object's entry */
static int read_adds(struct dl_phdr_info *info, size_t size, void *data)
{
	if (size >= offsetof(struct dl_phdr_info, dlpi_subs))
		*(unsigned long *)data = (unsigned long)info->dlpi_adds;
	return 1;
}

/* One tick of the library's thread (start number gen's): false once its
 * recording is over. */
static bool tick(unsigned gen, unsigned n, unsigned long *adds)
{
	bool on = true;

	pthread_mutex_lock(&ip_tick_lock);
	if (!current(gen)) {
		on = false;
	} else if (!tally_batch_semaphore) {
		/* up since before the start (tally attaches its probe first):
		 * down, tally detached or died, whatever ended it (this waited
		 * 10 s for a tracer it had not seen up yet, and a tally stopped
		 * by Ctrl-C within a tick of the start was one) */
		detach(gen);
		on = false;
	} else {
		if (ip_cut_asked()) { /* tally's end: glibc's totals with the rest */
			ip_send_info();
			ip_cut_take();
		}
		if (n % IP_INFO_TICKS == 0)
			ip_send_info();
		ip_flush_all(false);
		/* objects loaded without the program's dlopen (glibc's own, for
		 * NSS or iconv) */
		unsigned long now_adds = 0;
		dl_iterate_phdr(read_adds, &now_adds);
		if (now_adds != *adds) {
			pthread_mutex_lock(&ip_lock);
			if (current(gen))
				ip_patch_all();
			pthread_mutex_unlock(&ip_lock);
			*adds = now_adds;
		}
	}
	pthread_mutex_unlock(&ip_tick_lock);
	return on;
}

static void *flusher(void *arg)
{
	unsigned gen = (unsigned)(uintptr_t)arg;
	unsigned long adds = 0;

	ip_depth_add(1); /* its own calls pass on */
	for (unsigned n = 0;; n++) {
		struct timespec ts = { 0, (long)IP_TICK_NS };
		nanosleep(&ts, NULL);
		if (!tick(gen, n, &adds))
			return NULL;
	}
}

/* A start's thread, which takes none of the program's signals (under
 * ip_lock). A thread of an earlier start still running ends at its next
 * tick. */
int ip_thread_start(void)
{
	unsigned gen = atomic_fetch_add(&ip_gen, 1) + 1;
	sigset_t all, old;
	pthread_t th;
	pthread_attr_t attr;
	int err;

	sigfillset(&all);
	pthread_attr_init(&attr);
	pthread_attr_setdetachstate(&attr, PTHREAD_CREATE_DETACHED);
	pthread_sigmask(SIG_SETMASK, &all, &old);
	ip_depth_add(1);
	err = -pthread_create(&th, &attr, flusher, (void *)(uintptr_t)gen);
	ip_depth_add(-1);
	pthread_sigmask(SIG_SETMASK, &old, NULL);
	pthread_attr_destroy(&attr);
	if (err)
		return err;
	pthread_setname_np(th, "tally-inject");
	return 0;
}

/* A recording whose tally died, found by one that holds the target's lock
 * (so no other tally can be recording), under ip_lock: its entries go back
 * and its thread ends at its next tick. Not waited for. */
void ip_take_over(void)
{
	atomic_fetch_add(&ip_gen, 1);
	atomic_store(&ip_state, IP_GONE);
	ip_got_restore();
}

/* A forked child: a tick another thread of the parent was in is over. */
void ip_thread_child(void)
{
	pthread_mutex_init(&ip_tick_lock, NULL);
}
