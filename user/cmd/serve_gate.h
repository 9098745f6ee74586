/* SPDX-License-Identifier: (LGPL-2.1 OR BSD-2-Clause) */
/*
 * The metrics server's door: a thread that accepts each connection, looks at
 * its first line before libmicrohttpd does, answers 400 to one it would hang
 * on, and hands the rest to the daemon (started with MHD_USE_NO_LISTEN_SOCKET
 * and MHD_USE_ITC).
 */
#ifndef TALLY_SERVE_GATE_H
#define TALLY_SERVE_GATE_H

#include <microhttpd.h>

struct serve_gate;

/* Takes listen_fd (closed by serve_gate_stop). 0 or -errno. */
int serve_gate_start(struct serve_gate **out, struct MHD_Daemon *d, int listen_fd);
/* Before MHD_stop_daemon: no connection is handed over after it. */
void serve_gate_stop(struct serve_gate *g);

#endif /* TALLY_SERVE_GATE_H */
