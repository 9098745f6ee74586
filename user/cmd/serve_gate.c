// SPDX-License-Identifier: (LGPL-2.1 OR BSD-2-Clause)
/*
 * The metrics server's door (serve_gate.h). libmicrohttpd reads a request
 * line as a C string: one that begins with a NUL byte is an empty line to
 * it, which it skips as RFC 9112 allows, and then it waits for the request
 * that never comes until its timeout (10 s). So every connection is accepted
 * here first and its first line looked at without taking it (MSG_PEEK): a
 * line with a NUL or another control byte gets 400 at once; a sound one,
 * or one too long to judge here, goes to libmicrohttpd with its bytes still
 * unread. A client that sends nothing is closed at the same timeout.
 */
#include <errno.h>
#include <poll.h>
#include <pthread.h>
#include <stdbool.h>
#include <stdlib.h>
#include <string.h>
#include <sys/eventfd.h>
#include <sys/socket.h>
#include <unistd.h>

#include "../util/clock.h"
#include "serve_gate.h"

#define GATE_MAX 64	      /* connections waiting for their first line */
#define GATE_PEEK 1024	      /* the most of a first line judged here */
#define GATE_TIMEOUT_MS 10000 /* idle, as libmicrohttpd's connection timeout */
#define GATE_RECHECK_MS 20    /* a line not complete yet: looked at again */

struct waiting {
	int fd;
	unsigned peeked; /* bytes seen last time (0: none yet, wait in poll) */
	uint64_t deadline_ms, recheck_ms;
	struct sockaddr_storage addr;
	socklen_t addr_len;
};

struct serve_gate {
	struct MHD_Daemon *d;
	int listen_fd, stop_fd;
	pthread_t thread;
	struct waiting w[GATE_MAX];
	unsigned n;
};

static uint64_t now_ms(void)
{
	return clock_now_ns() / NSEC_PER_MSEC;
}

enum verdict { LINE_WAIT, LINE_PASS, LINE_BAD, LINE_GONE };

/* The first line as far as it came (leading empty lines skipped, as
 * libmicrohttpd does). */
static enum verdict judge(struct waiting *c)
{
	char buf[GATE_PEEK];
	ssize_t n = recv(c->fd, buf, sizeof(buf), MSG_PEEK | MSG_DONTWAIT);

	if (n == 0 || (n < 0 && errno != EAGAIN && errno != EINTR))
		return LINE_GONE;
	if (n < 0)
		return LINE_WAIT;
	c->peeked = (unsigned)n;
	ssize_t i = 0;
	while (i < n && (buf[i] == '\r' || buf[i] == '\n'))
		i++;
	for (; i < n; i++) {
		unsigned char ch = (unsigned char)buf[i];
		if (ch == '\n')
			return LINE_PASS;
		if ((ch < 0x20 && ch != '\t' && ch != '\r') || ch == 0x7f)
			return LINE_BAD;
	}
	return n == sizeof(buf) ? LINE_PASS : LINE_WAIT;
}

static void drop(struct serve_gate *g, unsigned i)
{
	g->w[i] = g->w[--g->n];
}

static void refuse(int fd)
{
	static const char msg[] = "HTTP/1.1 400 Bad Request\r\n"
				  "Content-Type: text/plain; charset=utf-8\r\n"
				  "Content-Length: 38\r\n"
				  "Connection: close\r\n\r\n"
				  "tally: not an HTTP request line (NUL)\n";
	/* best effort: the socket is closed either way */
	if (send(fd, msg, sizeof(msg) - 1, MSG_DONTWAIT | MSG_NOSIGNAL) < 0)
		(void)0;
	shutdown(fd, SHUT_WR);
	close(fd);
}

static void pass(struct serve_gate *g, struct waiting *c)
{
	/* libmicrohttpd closes the socket when it refuses it */
	MHD_add_connection(g->d, c->fd, (const struct sockaddr *)&c->addr, c->addr_len);
}

static void settle(struct serve_gate *g, unsigned i, enum verdict v)
{
	struct waiting *c = &g->w[i];

	if (v == LINE_WAIT)
		return;
	if (v == LINE_PASS)
		pass(g, c);
	else if (v == LINE_BAD)
		refuse(c->fd);
	else
		close(c->fd);
	drop(g, i);
}

static void take_new(struct serve_gate *g)
{
	struct waiting c = { .addr_len = sizeof(c.addr) };

	c.fd = accept4(g->listen_fd, (struct sockaddr *)&c.addr, &c.addr_len,
		       SOCK_NONBLOCK | SOCK_CLOEXEC);
	if (c.fd < 0)
		return;
	if (g->n == GATE_MAX) {
		/* a crowd at the door: libmicrohttpd's own limits and timeout */
		pass(g, &c);
		return;
	}
	c.deadline_ms = now_ms() + GATE_TIMEOUT_MS;
	g->w[g->n++] = c;
}

/* The poll set: the stop and listening fds, then each waiting connection
 * that has sent nothing yet (idx: its place in g->w); closes those past
 * their deadline and settles those a recheck decides. Returns the poll
 * timeout: the nearest deadline or recheck. */
static int gate_plan(struct serve_gate *g, struct pollfd *p, unsigned *idx, unsigned *np)
{
	uint64_t now = now_ms();
	int timeout = GATE_TIMEOUT_MS;

	p[0] = (struct pollfd){ .fd = g->stop_fd, .events = POLLIN };
	p[1] = (struct pollfd){ .fd = g->listen_fd, .events = POLLIN };
	*np = 2;
	for (unsigned i = 0; i < g->n;) {
		struct waiting *c = &g->w[i];
		if (now >= c->deadline_ms) {
			close(c->fd);
			drop(g, i);
			continue;
		}
		uint64_t until = c->deadline_ms;
		if (c->peeked) {
			/* unread bytes keep POLLIN up: a timer instead */
			if (now >= c->recheck_ms) {
				unsigned before = c->peeked;
				enum verdict v = judge(c);
				if (v != LINE_WAIT) {
					settle(g, i, v);
					continue;
				}
				if (c->peeked != before) /* idle for the timeout: closed */
					c->deadline_ms = now + GATE_TIMEOUT_MS;
				c->recheck_ms = now + GATE_RECHECK_MS;
			}
			until = c->recheck_ms;
		} else {
			idx[*np - 2] = i;
			p[(*np)++] = (struct pollfd){ .fd = c->fd, .events = POLLIN };
		}
		int left = until > now ? (int)(until - now) : 0;
		if (left < timeout)
			timeout = left;
		i++;
	}
	return timeout;
}

static void *gate_main(void *arg)
{
	struct serve_gate *g = arg;
	struct pollfd p[GATE_MAX + 2];
	unsigned np, idx[GATE_MAX];

	for (;;) {
		int timeout = gate_plan(g, p, idx, &np);

		if (poll(p, np, timeout) < 0 && errno != EINTR)
			break;
		if (p[0].revents)
			break;
		/* from the last, so that drop() moves only entries looked at */
		for (unsigned k = np; k-- > 2;) {
			if (!p[k].revents)
				continue;
			struct waiting *c = &g->w[idx[k - 2]];
			enum verdict v = judge(c);
			if (v == LINE_WAIT)
				c->recheck_ms = now_ms() + GATE_RECHECK_MS;
			settle(g, idx[k - 2], v);
		}
		if (p[1].revents & POLLIN)
			take_new(g);
	}
	return NULL;
}

int serve_gate_start(struct serve_gate **out, struct MHD_Daemon *d, int listen_fd)
{
	struct serve_gate *g = calloc(1, sizeof(*g));
	int err;

	if (!g)
		return -ENOMEM;
	g->d = d;
	g->listen_fd = listen_fd;
	g->stop_fd = eventfd(0, EFD_CLOEXEC);
	if (g->stop_fd < 0) {
		err = -errno;
		goto fail;
	}
	err = -pthread_create(&g->thread, NULL, gate_main, g);
	if (err)
		goto fail;
	*out = g;
	return 0;
fail:
	if (g->stop_fd >= 0)
		close(g->stop_fd);
	free(g);
	return err;
}

void serve_gate_stop(struct serve_gate *g)
{
	uint64_t one = 1;

	if (!g)
		return;
	if (write(g->stop_fd, &one, sizeof(one)) == sizeof(one))
		pthread_join(g->thread, NULL);
	for (unsigned i = 0; i < g->n; i++)
		close(g->w[i].fd);
	close(g->stop_fd);
	close(g->listen_fd);
	free(g);
}
