// SPDX-License-Identifier: (LGPL-2.1 OR BSD-2-Clause)
/*
 * What the OOM killer took (snapshot_oom.h): "oom_kill" true or false, and
 * when true "oom" with what the kernel said as it chose the process
 * (bpf/tally_oom.bpf.h), its sizes in bytes; else "oom" is null.
 */
#include "snapshot_oom.h"

/* A path the session resolved, or null when it was not found (the cgroup
 * was gone, or its hierarchy not mounted where tally runs). */
static void kv_path(struct json_writer *w, const char *key, const char *path)
{
	json_kv_str(w, key, path[0] ? path : NULL);
}

void snapshot_oom_write(struct json_writer *w, const struct model_oom *o)
{
	const struct tally_msg_oom *m = &o->msg;

	json_kv_bool(w, "oom_kill", o->killed);
	if (!o->killed) {
		json_kv_null(w, "oom");
		return;
	}
	json_key(w, "oom");
	json_begin_object(w);
	kv_path(w, "cgroup", o->cgroup);
	json_kv_i64(w, "cgroup_version", m->v1 ? 1 : 2);
	/* the limit the OOM was for, whose it is and in which file; nulls for
	 * the system's OOM killer (no cgroup on the path at its limit) */
	if (m->limit == TALLY_OOM_NO_LIMIT) {
		json_kv_null(w, "limit");
		json_kv_null(w, "limit_file");
		json_kv_null(w, "limit_cgroup");
		json_kv_null(w, "usage");
	} else {
		json_kv_u64(w, "limit", m->limit);
		json_kv_str(w, "limit_file", model_oom_limit_file(m));
		kv_path(w, "limit_cgroup", o->limit_cgroup);
		json_kv_u64(w, "usage", m->usage);
	}
	json_kv_u64(w, "total_vm", m->total_vm_kb * 1024);
	json_kv_u64(w, "anon_rss", m->anon_rss_kb * 1024);
	json_kv_u64(w, "file_rss", m->file_rss_kb * 1024);
	json_kv_u64(w, "shmem_rss", m->shmem_rss_kb * 1024);
	json_kv_u64(w, "pgtables", m->pgtables_kb * 1024);
	json_kv_i64(w, "oom_score_adj", m->oom_score_adj);
	json_kv_u64(w, "uid", m->uid);
	/* the records its heaps held then: read in the killer's context when
	 * it ran in the victim, else as the victim's last thread exited (the
	 * same moment: none of its code ran since); every heap whole or not */
	json_kv_bool(w, "killer_in_victim", m->hdr.flags & TALLY_OOM_SHARES_MM);
	json_kv_bool(w, "read_at_exit", m->hdr.flags & TALLY_OOM_AT_EXIT);
	json_kv_u64(w, "heaps_read", m->heaps);
	json_kv_bool(w, "held_records_read", model_oom_whole(o));
	json_end_object(w);
}
