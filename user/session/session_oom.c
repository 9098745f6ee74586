// SPDX-License-Identifier: (LGPL-2.1 OR BSD-2-Clause)
/*
 * The OOM killer and the tree (docs/DESIGN.md §8): where each process keeps
 * its heaps, given to the OOM program (bpf/tally_oom.bpf.h) as soon as its
 * allocator is mapped, so that the records its heaps hold can be read if it
 * is chosen; and, when one is, its cgroups' paths and one line on stderr.
 */
#include <stdio.h>
#include <string.h>

#include "../os/cgroup_id.h"
#include "../os/target.h"
#include "../util/clock.h"
#include "../util/text.h"
#include "session.h"
#include "internal.h"

/* Looks for the allocator in a process that has not mapped it yet: 20 ms,
 * then twice as long each time, 6 tries (1.26 s). A command tally starts
 * maps it as its dynamic loader runs, milliseconds after its exec; a
 * process still without it then runs on another malloc, and is left alone
 * (its maps are not read for ever). */
#define ARM_FIRST_NS (20 * NSEC_PER_MSEC)
#define ARM_TRIES 6

struct arm {
	pid_t pid;
	uint64_t *heaps_addr; /* the session's or the tree's: 0 until found */
	char *path;	      /* where the library was found */
	size_t path_len;
	struct oom_arm *st;
};

static void arm_one(struct session *s, const struct arm *a, uint64_t now)
{
	struct oom_arm *st = a->st;

	if (!*a->heaps_addr && st->tries < ARM_TRIES && now >= st->retry_ns) {
		if (target_lib_symbol(a->pid, "libtally_alloc.so", "tally_heaps", a->path,
				      a->path_len, a->heaps_addr))
			*a->heaps_addr = 0;
		st->retry_ns = now + (ARM_FIRST_NS << st->tries);
		st->tries++;
	}
	if (*a->heaps_addr && *a->heaps_addr != st->pushed &&
	    !loader_oom_heaps(s->loader, a->pid, *a->heaps_addr))
		st->pushed = *a->heaps_addr;
}

void session_oom_arm(struct session *s)
{
	uint64_t now = clock_now_ns();
	char path[TARGET_PATH_MAX];

	/* at most every ARM_FIRST_NS: a poll comes every 250 us while shared
	 * rings are read, and a tree may hold thousands of processes */
	if (now < s->oom_arm_ns)
		return;
	s->oom_arm_ns = now + ARM_FIRST_NS;

	if (!s->gone && !s->injected && !s->foreign_alloc) {
		struct arm a = { s->pid, &s->heaps_addr, s->alloc_path, sizeof(s->alloc_path),
				 &s->oom_arm };
		arm_one(s, &a, now);
	}
	for (size_t i = 0; i < s->tree.n; i++) {
		struct tree_proc *p = &s->tree.procs[i];
		if (p->ended)
			continue;
		struct arm a = { p->pid, &p->heaps_addr, path, sizeof(path), &p->oom_arm };
		arm_one(s, &a, now);
		if (p->heaps_addr)
			p->heaps_looked = true;
	}
}

/* An exec: the new image's allocator is looked for anew. */
void session_oom_exec(struct oom_arm *st)
{
	memset(st, 0, sizeof(*st));
}

/* A cgroup's path for the terminal ("" was not found). */
static void path_shown(char *out, size_t size, const char *path)
{
	const char *p = path[0] ? path : "(not found)";

	text_sanitize_terminal(out, size, p, strlen(p));
}

/* The one line. The paths are the cgroup tree's, which whoever may make
 * cgroups there named: sanitized for the terminal, as the comm. */
static void say(const struct model_oom *o, pid_t pid, bool records)
{
	char comm[4 * TALLY_COMM_LEN + 1], limit[4 * OOM_PATH_MAX + 96];
	char cg[4 * OOM_PATH_MAX + 1], lcg[4 * OOM_PATH_MAX + 1];
	const struct tally_msg_oom *m = &o->msg;
	const char *file = model_oom_limit_file(m);

	text_sanitize_terminal(comm, sizeof(comm), m->comm, strnlen(m->comm, TALLY_COMM_LEN));
	path_shown(cg, sizeof(cg), o->cgroup);
	path_shown(lcg, sizeof(lcg), o->limit_cgroup);
	if (!file)
		snprintf(limit, sizeof(limit), "no cgroup at its limit (the system's OOM)");
	else if (m->limit_cgroup_id == m->cgroup_id)
		snprintf(limit, sizeof(limit), "%s %.1f MiB", file, (double)m->limit / 1048576.0);
	else /* an ancestor's limit: which one */
		snprintf(limit, sizeof(limit), "%s %.1f MiB on %s", file,
			 (double)m->limit / 1048576.0, lcg);
	/* records: its allocator is tally's, whose held records were not all read */
	fprintf(stderr, "tally: %d (%s) was killed by the OOM killer: cgroup %s, %s%s\n", (int)pid,
		comm, cg, limit, records ? "; records its threads held then are missing" : "");
}

void session_oom_news(struct model *m, const void *data, size_t len)
{
	const struct tally_msg *h = data;
	struct model_oom *o = &m->oom;

	if (len < sizeof(struct tally_msg_oom) || h->kind != TALLY_MSG_OOM || !o->killed)
		return;
	bool v1 = o->msg.v1;
	if (cgroup_id_path(o->msg.cgroup_id, v1, o->cgroup, sizeof(o->cgroup)))
		o->cgroup[0] = 0;
	if (o->msg.limit == TALLY_OOM_NO_LIMIT)
		o->limit_cgroup[0] = 0;
	else if (o->msg.limit_cgroup_id == o->msg.cgroup_id)
		memcpy(o->limit_cgroup, o->cgroup, sizeof(o->cgroup));
	else if (cgroup_id_path(o->msg.limit_cgroup_id, v1, o->limit_cgroup,
				sizeof(o->limit_cgroup)))
		o->limit_cgroup[0] = 0;
	say(o, (pid_t)h->pid, m->saw_alloc && !model_oom_whole(o));
}
