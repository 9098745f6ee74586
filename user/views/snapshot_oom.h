/* SPDX-License-Identifier: (LGPL-2.1 OR BSD-2-Clause) */
/*
 * A process's "oom_kill" and "oom" in the snapshot document (docs/DESIGN.md
 * §6, §8): written into its "target" by snapshot_doc.c.
 */
#ifndef TALLY_SNAPSHOT_OOM_H
#define TALLY_SNAPSHOT_OOM_H

#include "../model/oom.h"
#include "json.h"

void snapshot_oom_write(struct json_writer *w, const struct model_oom *o);

#endif /* TALLY_SNAPSHOT_OOM_H */
