// SPDX-License-Identifier: (LGPL-2.1 OR BSD-2-Clause)
/*
 * serve --all's heap profiles (serve_all.h): /debug/pprof/heap and /allocs
 * for one process (?pid=PID, a root or a process of a root's tree) or for
 * every followed process in one profile, each sample labelled pid, comm
 * and container, as Pyroscope and Parca label what they scrape. The
 * sessions belong to the agent's thread, so the HTTP thread asks and
 * waits: one request at a time, answered at the agent's next pass.
 */
#include <bpf/bpf.h>
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "../session/profile.h"
#include "../views/pprof.h"
#include "serve_all.h"

#define PPROF_WAIT_S 10 /* the most a scrape waits for its profile */

void agent_pprof_init(struct agent *a)
{
	struct agent_pprof *pp = &a->pp;
	pthread_condattr_t ca;

	memset(pp, 0, sizeof(*pp));
	pthread_mutex_init(&pp->lock, NULL);
	pthread_condattr_init(&ca);
	pthread_condattr_setclock(&ca, CLOCK_MONOTONIC);
	pthread_cond_init(&pp->cond, &ca);
	pthread_condattr_destroy(&ca);
	pp->start_ns = clock_now_ns();
}

void agent_pprof_destroy(struct agent *a)
{
	free(a->pp.buf);
	pthread_cond_destroy(&a->pp.cond);
	pthread_mutex_destroy(&a->pp.lock);
}

/* ?pid=: 0 (absent: all), a pid, or -1 (not a pid). */
static long query_pid(struct MHD_Connection *c)
{
	const char *v = MHD_lookup_connection_value(c, MHD_GET_ARGUMENT_KIND, "pid");
	char *end;

	if (!v)
		return 0;
	errno = 0;
	long pid = strtol(v, &end, 10);
	if (!*v || *end || errno || pid <= 0 || pid > 0x3fffffff)
		return -1;
	return pid;
}

/* Wait on the condition until ns (CLOCK_MONOTONIC): false at the time. */
static bool wait_until(struct agent_pprof *pp, uint64_t ns)
{
	struct timespec ts = { (time_t)(ns / 1000000000u), (long)(ns % 1000000000u) };

	return pthread_cond_timedwait(&pp->cond, &pp->lock, &ts) != ETIMEDOUT;
}

/* Ask the agent's thread; 0 and the profile, or -errno. */
static int ask(struct agent_pprof *pp, pid_t pid, bool allocs, uint8_t **buf, size_t *len)
{
	uint64_t until = clock_now_ns() + PPROF_WAIT_S * 1000000000ull;
	int err = -EAGAIN;

	pthread_mutex_lock(&pp->lock);
	while ((pp->wanted || pp->busy || pp->posted) && wait_until(pp, until))
		;
	if (!pp->wanted && !pp->busy && !pp->posted) {
		uint64_t gen = pp->gen;
		pp->wanted = true;
		pp->pid = pid;
		pp->allocs = allocs;
		while (pp->gen == gen && wait_until(pp, until))
			;
		if (pp->gen != gen) { /* ours: taken, the slot free again */
			err = pp->err;
			*buf = pp->buf;
			*len = pp->len;
			pp->buf = NULL;
			pp->posted = false;
			pthread_cond_broadcast(&pp->cond);
		} else if (pp->busy) {
			pp->abandoned = true; /* its answer is thrown away */
		} else {
			pp->wanted = false; /* not taken up: withdrawn */
		}
	}
	pthread_mutex_unlock(&pp->lock);
	return err;
}

enum MHD_Result agent_pprof_reply(struct agent *a, struct MHD_Connection *c, bool allocs)
{
	long pid = query_pid(c);
	uint8_t *buf = NULL;
	size_t len = 0;
	char msg[128];

	if (pid < 0)
		return serve_reply(c, MHD_HTTP_BAD_REQUEST,
				   "tally: bad ?pid=: want a process's pid (or none: all)\n");
	int err = ask(&a->pp, (pid_t)pid, allocs, &buf, &len);
	if (!err)
		return serve_reply_pprof(c, buf, len, allocs);
	free(buf);
	if (err == -ENOENT) {
		snprintf(msg, sizeof(msg), "tally: process %ld is not followed\n", pid);
		return serve_reply(c, MHD_HTTP_NOT_FOUND, msg);
	}
	return serve_reply(c, MHD_HTTP_SERVICE_UNAVAILABLE, "tally: no heap profile yet\n");
}

/* Where pid is followed: its root's session, or NULL. */
static struct agent_proc *owner(struct agent *a, pid_t pid)
{
	uint32_t key = (uint32_t)pid, val;

	for (struct agent_proc *p = a->procs; p; p = p->next) {
		int fd = loader_procs_fd(p->s.loader);
		if (p->pid == pid || (fd >= 0 && !bpf_map_lookup_elem(fd, &key, &val)))
			return p;
	}
	return NULL;
}

/* The comm and container of a process of p's tree, as its figures say. */
static void labels_of(const struct agent_proc *p, int64_t pid, const char **comm,
		      const char **container)
{
	*comm = p->s.comm;
	*container = NULL;
	for (unsigned i = 0; p->have_fig && i < p->fig.nprocs; i++) {
		const struct figures_target *t = &p->fig.procs[i].target;
		if (t->pid == pid) {
			*comm = t->comm;
			*container = t->container;
			return;
		}
	}
}

/* The profiles in one: maps, locations and samples laid end to end, each
 * sample's location indices moved with its profile's; only pid's samples
 * when pid is not 0. The arrays are out's to free (merged.*). */
struct merged {
	struct prof p;
	struct prof_mapping *maps;
	struct prof_loc *locs;
	struct prof_sample *samples;
	size_t *ix;
	const char **comm, **container; /* each sample's labels */
};

static int merge(struct profile *prs, struct agent_proc **who, unsigned n, pid_t pid,
		 struct merged *m)
{
	size_t nm = 0, nl = 0, ns = 0, nix = 0;

	for (unsigned k = 0; k < n; k++) {
		nm += prs[k].p.nmaps;
		nl += prs[k].p.nlocs;
		ns += prs[k].p.nsamples;
		for (size_t i = 0; i < prs[k].p.nsamples; i++)
			nix += prs[k].p.samples[i].nlocs;
	}
	m->maps = calloc(nm + 1, sizeof(*m->maps));
	m->locs = calloc(nl + 1, sizeof(*m->locs));
	m->samples = calloc(ns + 1, sizeof(*m->samples));
	m->ix = calloc(nix + 1, sizeof(*m->ix));
	m->comm = calloc(ns + 1, sizeof(*m->comm));
	m->container = calloc(ns + 1, sizeof(*m->container));
	if (!m->maps || !m->locs || !m->samples || !m->ix || !m->comm || !m->container)
		return -ENOMEM;
	nm = nl = ns = nix = 0;
	for (unsigned k = 0; k < n; k++) {
		const struct prof *p = &prs[k].p;
		memcpy(m->maps + nm, p->maps, p->nmaps * sizeof(*p->maps));
		for (size_t i = 0; i < p->nlocs; i++) {
			m->locs[nl + i] = p->locs[i];
			if (p->locs[i].mapping >= 0)
				m->locs[nl + i].mapping += (int)nm;
		}
		for (size_t i = 0; i < p->nsamples; i++) {
			const struct prof_sample *s = &p->samples[i];
			if (pid && s->pid != pid)
				continue;
			labels_of(who[k], s->pid, &m->comm[ns], &m->container[ns]);
			struct prof_sample *o = &m->samples[ns++];
			*o = *s;
			o->locs = m->ix + nix;
			for (size_t j = 0; j < s->nlocs; j++)
				m->ix[nix++] = s->locs[j] + nl;
		}
		nm += p->nmaps;
		nl += p->nlocs;
		if (!m->p.period)
			m->p.period = p->period;
	}
	m->p.maps = m->maps;
	m->p.nmaps = nm;
	m->p.locs = m->locs;
	m->p.nlocs = nl;
	m->p.samples = m->samples;
	m->p.nsamples = ns;
	m->p.comm = m->comm;
	m->p.container = m->container;
	return 0;
}

static int build(struct agent *a, pid_t pid, bool allocs, uint8_t **buf, size_t *len)
{
	unsigned n = 0, cap = 0;
	struct agent_proc *one = pid ? owner(a, pid) : NULL;
	struct merged m = { 0 };
	struct timespec now;
	int err = 0;

	if (pid && !one)
		return -ENOENT;
	for (struct agent_proc *p = a->procs; p; p = p->next)
		cap++;
	struct profile *prs = calloc(cap + 1, sizeof(*prs));
	struct agent_proc **who = calloc(cap + 1, sizeof(*who));
	for (struct agent_proc *p = a->procs; prs && who && !err && p; p = p->next) {
		if (one && p != one)
			continue;
		err = profile_build(&p->s, &prs[n]);
		if (!err)
			who[n++] = p;
	}
	if (!prs || !who)
		err = -ENOMEM;
	if (!err)
		err = merge(prs, who, n, pid, &m);
	if (!err) {
		clock_gettime(CLOCK_REALTIME, &now);
		m.p.time_nanos = (int64_t)now.tv_sec * 1000000000 + now.tv_nsec;
		m.p.duration_nanos = (int64_t)(clock_now_ns() - a->pp.start_ns);
		m.p.default_type = allocs ? "alloc_space" : "inuse_space";
		if (!m.p.period)
			m.p.period = a->o->target.o.sample_rate;
		err = pprof_encode(&m.p, buf, len);
	}
	for (unsigned k = 0; prs && k < n; k++)
		profile_free(&prs[k]);
	free(prs);
	free(who);
	free(m.maps);
	free(m.locs);
	free(m.samples);
	free(m.ix);
	free(m.comm);
	free(m.container);
	return err;
}

void agent_pprof_tick(struct agent *a)
{
	struct agent_pprof *pp = &a->pp;
	uint8_t *buf = NULL;
	size_t len = 0;

	pthread_mutex_lock(&pp->lock);
	if (!pp->wanted) {
		pthread_mutex_unlock(&pp->lock);
		return;
	}
	pp->wanted = false;
	pp->busy = true;
	pid_t pid = pp->pid;
	bool allocs = pp->allocs;
	pthread_mutex_unlock(&pp->lock);
	int err = build(a, pid, allocs, &buf, &len);
	if (err && err != -ENOENT && !pp->failed) {
		fprintf(stderr, "tally serve --all: cannot build the heap profile: %s\n",
			strerror(-err));
		pp->failed = true;
	}
	pthread_mutex_lock(&pp->lock);
	pp->busy = false;
	if (pp->abandoned || err) {
		free(buf);
		buf = NULL;
	}
	if (!pp->abandoned) {
		pp->buf = buf;
		pp->len = len;
		pp->err = err;
		pp->posted = true;
		pp->gen++;
	}
	pp->abandoned = false;
	pthread_cond_broadcast(&pp->cond);
	pthread_mutex_unlock(&pp->lock);
}
