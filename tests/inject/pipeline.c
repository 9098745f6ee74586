// SPDX-License-Identifier: (LGPL-2.1 OR BSD-2-Clause)
/*
 * --inject's cross-thread workload (tests/inject/run.sh): a producer thread
 * mallocs bunches of BUNCH blocks and hands each bunch to a consumer thread
 * that frees it, at most INFLIGHT bunches on their way, until SIGTERM. It
 * is still running when tally's snapshot ends, so that what its two
 * threads hold then decides the figures: at any moment its live bytes are
 * between one bunch (the consumer frees one when the next has come) and
 * INFLIGHT + 1 bunches of BUNCH * (SIZE + 8) bytes (a bunch's array
 * included), and a snapshot that lost one thread's last records and kept
 * the other's shows them outside (negative when the frees came in and the
 * allocations did not). Prints "ready max_live=N" once both threads run.
 * Built by the test script itself (cc -pthread).
 */
#include <pthread.h>
#include <semaphore.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <unistd.h>

#define BUNCH 16
#define INFLIGHT 2
#define SIZE 64

static int pipefd[2];
static sem_t room;
static volatile sig_atomic_t stop;

static void on_term(int sig)
{
	(void)sig;
	stop = 1;
}

static void *produce(void *arg)
{
	(void)arg;
	while (!stop) {
		if (sem_wait(&room))
			continue;
		void **bunch = malloc(BUNCH * sizeof(*bunch));
		if (!bunch)
			abort();
		for (int i = 0; i < BUNCH; i++) {
			if (!(bunch[i] = malloc(SIZE)))
				abort();
			/* a block of its own as well: the producer's records
			 * outnumber the consumer's, so that the points where
			 * each thread's batch fills drift apart (in step, what
			 * one thread holds matched what the other did) */
			free(malloc(SIZE / 2));
		}
		if (write(pipefd[1], &bunch, sizeof(bunch)) != sizeof(bunch))
			abort();
	}
	void *none = NULL;
	if (write(pipefd[1], &none, sizeof(none)) != sizeof(none))
		abort();
	return NULL;
}

/* Frees a bunch once the next one has come: one at least is live. */
static void drop(void **bunch)
{
	for (int i = 0; bunch && i < BUNCH; i++)
		free(bunch[i]);
	free(bunch);
}

static void *consume(void *arg)
{
	void **bunch, **held = NULL;
	(void)arg;

	while (read(pipefd[0], &bunch, sizeof(bunch)) == sizeof(bunch) && bunch) {
		drop(held);
		held = bunch;
		sem_post(&room);
	}
	drop(held);
	return NULL;
}

int main(void)
{
	pthread_t p, c;
	struct sigaction sa = { .sa_handler = on_term };

	sigaction(SIGTERM, &sa, NULL);
	if (pipe(pipefd) || sem_init(&room, 0, INFLIGHT))
		return 1;
	if (pthread_create(&c, NULL, consume, NULL) || pthread_create(&p, NULL, produce, NULL))
		return 1;
	printf("ready max_live=%d\n", (INFLIGHT + 1) * BUNCH * (SIZE + 8));
	fflush(stdout);
	while (!stop)
		pause();
	sem_post(&room); /* a producer waiting for room sees stop */
	pthread_join(p, NULL);
	pthread_join(c, NULL);
	return 0;
}
