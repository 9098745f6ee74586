/* SPDX-License-Identifier: (LGPL-2.1 OR BSD-2-Clause) */
/*
 * What `tally serve` and `tally serve --all` share on the HTTP side: the
 * listening socket (bound before anything starts), libmicrohttpd on its own
 * thread behind the gate (serve_gate.h), the latest exposition swapped whole
 * under a mutex, and the replies Go's net/http/pprof and Prometheus expect.
 */
#ifndef TALLY_SERVE_HTTP_H
#define TALLY_SERVE_HTTP_H

#include <microhttpd.h>
#include <pthread.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <sys/socket.h>

struct serve_gate;

/* What the HTTP thread reads: the latest exposition, swapped whole. */
struct serve_text {
	pthread_mutex_t lock;
	char *buf; /* NULL until the first render */
	size_t len;
};

void serve_text_init(struct serve_text *t);
/* buf (malloc'd) in place of the last one, which is freed. */
void serve_text_swap(struct serve_text *t, char *buf, size_t len);
void serve_text_destroy(struct serve_text *t);

/* The socket, bound and listening: the fd or -errno. Ours rather than
 * libmicrohttpd's, so that a port in use is said plainly and nothing is
 * started for nothing. */
int serve_listen(const struct sockaddr_storage *addr, socklen_t len);
/* libmicrohttpd on its own thread, its connections from the gate; fd is
 * taken. 0, or -1 after one line on stderr (who: "tally serve"). */
int serve_http_start(const char *who, const char *listen, int family, int fd,
		     MHD_AccessHandlerCallback handler, void *ctx, struct MHD_Daemon **d,
		     struct serve_gate **gate);
void serve_http_stop(struct MHD_Daemon *d, struct serve_gate *gate);

/* A short text reply (405 says which methods are allowed). */
enum MHD_Result serve_reply(struct MHD_Connection *c, unsigned status, const char *body);
/* The exposition as Prometheus wants it; 503 before the first. */
enum MHD_Result serve_reply_metrics(struct MHD_Connection *c, struct serve_text *t);
/* A gzip'd profile.proto (buf malloc'd, taken) as Go's net/http/pprof
 * sends it. */
enum MHD_Result serve_reply_pprof(struct MHD_Connection *c, uint8_t *buf, size_t len, bool allocs);
/* One request of either serve command: 405 for a method not GET or HEAD,
 * /metrics from t, /debug/pprof/heap and /allocs from pprof(ctx, c,
 * allocs), 404 saying where things are for any other path (`more`: what
 * the pprof paths take, or ""). */
typedef enum MHD_Result (*serve_pprof_fn)(void *ctx, struct MHD_Connection *c, bool allocs);
enum MHD_Result serve_route(struct MHD_Connection *c, const char *url, const char *method,
			    struct serve_text *t, serve_pprof_fn pprof, void *ctx,
			    const char *more);

#endif /* TALLY_SERVE_HTTP_H */
