// SPDX-License-Identifier: (LGPL-2.1 OR BSD-2-Clause)
/* `tally serve`'s heap profiles on demand (serve_pprof.h). */
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "serve_pprof.h"
#include "../util/clock.h"
#include "../session/profile.h"
#include "../views/pprof.h"

/* what a request waits for the next tick (serve's -i is at most 60 s, but
 * a scraper's timeout is about 10 s) */
#define WAIT_MS 5000

void serve_pprof_init(struct serve_pprof *sp)
{
	pthread_condattr_t ca;

	memset(sp, 0, sizeof(*sp));
	pthread_mutex_init(&sp->lock, NULL);
	pthread_condattr_init(&ca);
	pthread_condattr_setclock(&ca, CLOCK_MONOTONIC);
	pthread_cond_init(&sp->cond, &ca);
	pthread_condattr_destroy(&ca);
	sp->start_ns = clock_now_ns();
}

void serve_pprof_destroy(struct serve_pprof *sp)
{
	free(sp->buf[0]);
	free(sp->buf[1]);
	pthread_cond_destroy(&sp->cond);
	pthread_mutex_destroy(&sp->lock);
}

int serve_pprof_get(struct serve_pprof *sp, bool allocs, uint8_t **out, size_t *len)
{
	struct timespec until;
	int err = 0;

	clock_gettime(CLOCK_MONOTONIC, &until);
	until.tv_sec += WAIT_MS / 1000;
	pthread_mutex_lock(&sp->lock);
	uint64_t gen = sp->gen;
	sp->wanted = true;
	while (sp->gen == gen && !err)
		err = pthread_cond_timedwait(&sp->cond, &sp->lock, &until);
	/* in time or not, the newest there is */
	*out = sp->buf[allocs] ? malloc(sp->len[allocs]) : NULL;
	if (*out) {
		memcpy(*out, sp->buf[allocs], sp->len[allocs]);
		*len = sp->len[allocs];
	}
	err = *out ? 0 : sp->buf[allocs] ? -ENOMEM : -EAGAIN;
	pthread_mutex_unlock(&sp->lock);
	return err;
}

void serve_pprof_tick(struct serve_pprof *sp, struct session *s, bool force)
{
	uint8_t *buf[2] = { NULL, NULL };
	size_t len[2] = { 0, 0 };
	struct profile pr;
	struct timespec now;

	pthread_mutex_lock(&sp->lock);
	bool wanted = sp->wanted || force;
	sp->wanted = false;
	pthread_mutex_unlock(&sp->lock);
	if (!wanted)
		return;
	int err = profile_build(s, &pr);
	if (!err) {
		clock_gettime(CLOCK_REALTIME, &now);
		pr.p.time_nanos = (int64_t)now.tv_sec * 1000000000 + now.tv_nsec;
		pr.p.duration_nanos = (int64_t)(clock_now_ns() - sp->start_ns);
		err = pprof_encode(&pr.p, &buf[0], &len[0]);
		pr.p.default_type = "alloc_space";
		if (!err)
			err = pprof_encode(&pr.p, &buf[1], &len[1]);
		profile_free(&pr);
	}
	if (err && !sp->failed) {
		fprintf(stderr, "tally serve: cannot build the heap profile: %s\n", strerror(-err));
		sp->failed = true;
	}
	pthread_mutex_lock(&sp->lock);
	if (!err) {
		free(sp->buf[0]);
		free(sp->buf[1]);
		memcpy(sp->buf, buf, sizeof(buf));
		memcpy(sp->len, len, sizeof(len));
	} else {
		free(buf[0]);
		free(buf[1]);
	}
	/* waiters go on, with a fresh profile or the last one */
	sp->gen++;
	pthread_cond_broadcast(&sp->cond);
	pthread_mutex_unlock(&sp->lock);
}
