// SPDX-License-Identifier: (LGPL-2.1 OR BSD-2-Clause)
/* The HTTP side both serve commands share (serve_http.h). */
#include <errno.h>
#include <netinet/in.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "serve_gate.h"
#include "serve_http.h"

void serve_text_init(struct serve_text *t)
{
	memset(t, 0, sizeof(*t));
	pthread_mutex_init(&t->lock, NULL);
}

void serve_text_swap(struct serve_text *t, char *buf, size_t len)
{
	pthread_mutex_lock(&t->lock);
	char *old = t->buf;
	t->buf = buf;
	t->len = len;
	pthread_mutex_unlock(&t->lock);
	free(old);
}

void serve_text_destroy(struct serve_text *t)
{
	free(t->buf);
	t->buf = NULL;
	pthread_mutex_destroy(&t->lock);
}

int serve_listen(const struct sockaddr_storage *addr, socklen_t len)
{
	int one = 1, fd, err;

	fd = socket(addr->ss_family, SOCK_STREAM | SOCK_CLOEXEC, 0);
	if (fd < 0)
		return -errno;
	/* a restart may bind over the last run's TIME_WAIT; two listeners
	 * still cannot share the port on Linux */
	setsockopt(fd, SOL_SOCKET, SO_REUSEADDR, &one, sizeof(one));
	if (addr->ss_family == AF_INET6)
		setsockopt(fd, IPPROTO_IPV6, IPV6_V6ONLY, &one, sizeof(one));
	if (bind(fd, (const struct sockaddr *)addr, len) || listen(fd, 64)) {
		err = -errno;
		close(fd);
		return err;
	}
	return fd;
}

int serve_http_start(const char *who, const char *listen, int family, int fd,
		     MHD_AccessHandlerCallback handler, void *ctx, struct MHD_Daemon **d,
		     struct serve_gate **gate)
{
	*d = MHD_start_daemon(MHD_USE_INTERNAL_POLLING_THREAD | MHD_USE_NO_LISTEN_SOCKET |
				      MHD_USE_ITC | (family == AF_INET6 ? MHD_USE_IPv6 : 0),
			      0, NULL, NULL, handler, ctx, MHD_OPTION_CONNECTION_TIMEOUT,
			      (unsigned)10, MHD_OPTION_END);
	if (*d && !serve_gate_start(gate, *d, fd))
		return 0;
	fprintf(stderr, "%s: cannot start the HTTP server on %s\n", who, listen);
	if (*d)
		MHD_stop_daemon(*d);
	*d = NULL;
	close(fd);
	return -1;
}

void serve_http_stop(struct MHD_Daemon *d, struct serve_gate *gate)
{
	serve_gate_stop(gate); /* closes the listening socket */
	if (d)
		MHD_stop_daemon(d);
}

enum MHD_Result serve_reply(struct MHD_Connection *c, unsigned status, const char *body)
{
	struct MHD_Response *r =
		MHD_create_response_from_buffer(strlen(body), (void *)body, MHD_RESPMEM_MUST_COPY);
	enum MHD_Result ret;

	if (!r)
		return MHD_NO;
	MHD_add_response_header(r, "Content-Type", "text/plain; charset=utf-8");
	if (status == MHD_HTTP_METHOD_NOT_ALLOWED)
		MHD_add_response_header(r, "Allow", "GET, HEAD");
	ret = MHD_queue_response(c, status, r);
	MHD_destroy_response(r);
	return ret;
}

enum MHD_Result serve_reply_metrics(struct MHD_Connection *c, struct serve_text *t)
{
	struct MHD_Response *r;
	enum MHD_Result ret;

	pthread_mutex_lock(&t->lock);
	r = t->buf ? MHD_create_response_from_buffer(t->len, t->buf, MHD_RESPMEM_MUST_COPY) : NULL;
	pthread_mutex_unlock(&t->lock);
	if (!r)
		return serve_reply(c, MHD_HTTP_SERVICE_UNAVAILABLE, "tally: no figures yet\n");
	MHD_add_response_header(r, "Content-Type", "text/plain; version=0.0.4; charset=utf-8");
	ret = MHD_queue_response(c, MHD_HTTP_OK, r);
	MHD_destroy_response(r);
	return ret;
}

enum MHD_Result serve_reply_pprof(struct MHD_Connection *c, uint8_t *buf, size_t len, bool allocs)
{
	struct MHD_Response *r = MHD_create_response_from_buffer(len, buf, MHD_RESPMEM_MUST_FREE);
	enum MHD_Result ret;

	if (!r) {
		free(buf);
		return MHD_NO;
	}
	MHD_add_response_header(r, "Content-Type", "application/octet-stream");
	MHD_add_response_header(r, "Content-Disposition",
				allocs ? "attachment; filename=\"allocs\"" :
					 "attachment; filename=\"heap\"");
	MHD_add_response_header(r, "X-Content-Type-Options", "nosniff");
	ret = MHD_queue_response(c, MHD_HTTP_OK, r);
	MHD_destroy_response(r);
	return ret;
}

enum MHD_Result serve_route(struct MHD_Connection *c, const char *url, const char *method,
			    struct serve_text *t, serve_pprof_fn pprof, void *ctx, const char *more)
{
	char where[256];

	if (strcmp(method, MHD_HTTP_METHOD_GET) && strcmp(method, MHD_HTTP_METHOD_HEAD))
		return serve_reply(c, MHD_HTTP_METHOD_NOT_ALLOWED, "tally: only GET and HEAD\n");
	if (!strcmp(url, "/debug/pprof/heap") || !strcmp(url, "/debug/pprof/allocs"))
		return pprof(ctx, c, !strcmp(url, "/debug/pprof/allocs"));
	if (!strcmp(url, "/metrics"))
		return serve_reply_metrics(c, t);
	snprintf(where, sizeof(where),
		 "tally: the metrics are at /metrics, heap profiles at /debug/pprof/heap and "
		 "/debug/pprof/allocs%s\n",
		 more);
	return serve_reply(c, MHD_HTTP_NOT_FOUND, where);
}
