// SPDX-License-Identifier: (LGPL-2.1 OR BSD-2-Clause)
/*
 * The Chrome trace writer (user/views/trace.c) on synthetic message sequences, as
 * the session hands them over (the model first, then the trace): slices
 * balanced on every thread, unclosed and unmatched ones included; hostile
 * thread and group names escaped; counters for every Stats term; GPU
 * events; lost-event markers. Every document is checked by a small JSON
 * validator, and each event (one per line) is looked at as text.
 *
 * Build (see the reply of the record/serve work for the Makefile rule):
 *   make build/tests/san/tests/test_trace.o build/tests/san/user/trace.o \
 *     build/tests/san/user/json.o build/tests/san/user/model.o build/tests/san/user/gpu.o \
 *     build/tests/san/user/replay.o build/tests/san/alloc/stats_identity.o
 *   cc -fsanitize=address,undefined -fno-sanitize-recover=undefined -fno-omit-frame-pointer \
 *     -o build/tests/test_trace <those .o> -lcmocka
 */
#include <errno.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <cmocka.h>
#include "test_skip.h"

#include "../user/views/trace.h"

#define START 1000000000ull /* the session's start, ns */

struct fixture {
	struct model m;
	struct trace *t;
	FILE *f;
	char *buf;
	size_t len;
};

static struct fixture *fx_new(void)
{
	struct fixture *x = calloc(1, sizeof(*x));

	assert_non_null(x);
	model_init(&x->m);
	x->f = open_memstream(&x->buf, &x->len);
	assert_non_null(x->f);
	assert_int_equal(trace_new(&x->t, x->f, 42, START), 0);
	return x;
}

static void fx_free(struct fixture *x)
{
	trace_free(x->t);
	if (x->f)
		fclose(x->f);
	free(x->buf);
	model_free(&x->m);
	free(x);
}

/* The end of the document; the text is then in x->buf. */
static void fx_end(struct fixture *x, uint64_t now)
{
	static struct figures_process end;
	struct figures fig = { .nprocs = 1, .cap = 1, .procs = &end };

	end.exact = true;
	end.target.allocator = FIGURES_ALLOC_TALLY;
	assert_int_equal(trace_end(x->t, &x->m, now, &fig), 0);
	assert_int_equal(fclose(x->f), 0);
	x->f = NULL;
}

static void feed(struct fixture *x, const void *msg, size_t len)
{
	model_apply(&x->m, msg, len);
	trace_message(x->t, &x->m, msg, len);
}

static void group(struct fixture *x, uint16_t kind, uint32_t tid, uint32_t g, uint32_t other,
		  uint64_t ts, const char *name)
{
	struct tally_msg_group msg = { .hdr = { kind, 0, tid, ts }, .group = g, .other = other };

	if (name)
		memcpy(msg.name, name, strnlen(name, sizeof(msg.name)));
	feed(x, &msg, sizeof(msg));
}

static void thread(struct fixture *x, uint16_t kind, uint32_t tid, const char *comm, size_t n)
{
	struct tally_msg_thread msg = { .hdr = { kind, 0, tid, START + 5 }, .pid = 42 };

	memcpy(msg.comm, comm, n);
	feed(x, &msg, sizeof(msg));
}

/* ---- a JSON validator: RFC 8259 syntax, nothing more ---- */

static const char *ws(const char *p)
{
	while (*p == ' ' || *p == '\n' || *p == '\t' || *p == '\r')
		p++;
	return p;
}

static const char *value(const char *p, int depth);

static const char *string(const char *p)
{
	if (*p++ != '"')
		return NULL;
	for (;;) {
		unsigned char c = (unsigned char)*p++;
		if (c == '"')
			return p;
		if (c < 0x20)
			return NULL; /* raw control characters are not JSON */
		if (c == '\\') {
			c = (unsigned char)*p++;
			if (c == 'u') {
				for (int i = 0; i < 4; i++)
					if (!strchr("0123456789abcdefABCDEF", *p++) || !p[-1])
						return NULL;
			} else if (!c || !strchr("\"\\/bfnrt", c)) {
				return NULL;
			}
		}
	}
}

static const char *number(const char *p)
{
	const char *s = p;

	if (*p == '-')
		p++;
	if (*p == '0')
		p++;
	else if (*p >= '1' && *p <= '9')
		while (*p >= '0' && *p <= '9')
			p++;
	else
		return NULL;
	if (*p == '.') {
		if (*++p < '0' || *p > '9')
			return NULL;
		while (*p >= '0' && *p <= '9')
			p++;
	}
	if (*p == 'e' || *p == 'E') {
		p++;
		if (*p == '+' || *p == '-')
			p++;
		if (*p < '0' || *p > '9')
			return NULL;
		while (*p >= '0' && *p <= '9')
			p++;
	}
	return p > s ? p : NULL;
}

static const char *container(const char *p, int depth, char close)
{
	p = ws(p + 1);
	if (*p == close)
		return p + 1;
	for (;;) {
		if (close == '}') {
			p = string(ws(p));
			if (!p || *(p = ws(p)) != ':')
				return NULL;
			p++;
		}
		p = value(p, depth + 1);
		if (!p)
			return NULL;
		p = ws(p);
		if (*p == close)
			return p + 1;
		if (*p++ != ',')
			return NULL;
	}
}

static const char *value(const char *p, int depth)
{
	p = ws(p);
	if (depth > 64)
		return NULL;
	switch (*p) {
	case '{':
		return container(p, depth, '}');
	case '[':
		return container(p, depth, ']');
	case '"':
		return string(p);
	case 't':
		return strncmp(p, "true", 4) ? NULL : p + 4;
	case 'f':
		return strncmp(p, "false", 5) ? NULL : p + 5;
	case 'n':
		return strncmp(p, "null", 4) ? NULL : p + 4;
	default:
		return number(p);
	}
}

static void assert_valid_json(const char *doc)
{
	const char *end = value(doc, 0);

	if (!end || *ws(end)) {
		print_error("not JSON near: %.80s\n", end ? end : doc);
		fail();
	}
}

/* ---- events, one per line ---- */

/* Lines that hold every needle given (NULL-terminated). */
static int count_lines(const char *doc, ...)
{
	const char *needles[8];
	int n = 0, hits = 0;
	va_list ap;

	va_start(ap, doc);
	while (n < 8 && (needles[n] = va_arg(ap, const char *)))
		n++;
	va_end(ap);
	for (const char *line = doc; line && *line;) {
		const char *nl = strchr(line, '\n');
		size_t len = nl ? (size_t)(nl - line) : strlen(line);
		bool all = true;
		for (int i = 0; i < n && all; i++) {
			/* the first occurrence from here: past the line, none in it */
			const char *h = strstr(line, needles[i]);
			all = h && h < line + len;
		}
		hits += all;
		line = nl ? nl + 1 : NULL;
	}
	return hits;
}

#define B "\"ph\":\"B\""
#define E "\"ph\":\"E\""

static void trace__nested_groups__balanced_per_thread(void **state)
{
	struct fixture *x = fx_new();

	(void)state;
	trace_begin(x->t, &x->m, "server");
	group(x, TALLY_MSG_GROUP_REGISTER, 10, 1, 0, START, "parse");
	group(x, TALLY_MSG_GROUP_REGISTER, 10, 2, 0, START, "index");
	group(x, TALLY_MSG_GROUP_ENTER, 10, 1, 0, START + 1000, NULL);
	group(x, TALLY_MSG_GROUP_ENTER, 10, 2, 1, START + 2000, NULL);
	group(x, TALLY_MSG_GROUP_ENTER, 11, 2, 0, START + 2500, NULL);
	group(x, TALLY_MSG_GROUP_EXIT, 10, 1, 2, START + 3000, NULL);
	group(x, TALLY_MSG_GROUP_EXIT, 10, 0, 1, START + 4000, NULL);
	group(x, TALLY_MSG_GROUP_EXIT, 11, 0, 2, START + 4500, NULL);
	assert_int_equal(trace_open_slices(x->t), 0);
	fx_end(x, START + 9000);
	assert_valid_json(x->buf);
	assert_int_equal(count_lines(x->buf, B, "\"tid\":10,", NULL), 2);
	assert_int_equal(count_lines(x->buf, E, "\"tid\":10", NULL), 2);
	assert_int_equal(count_lines(x->buf, B, "\"tid\":11,", NULL), 1);
	assert_int_equal(count_lines(x->buf, E, "\"tid\":11", NULL), 1);
	/* named slices, at microseconds since the start */
	assert_int_equal(count_lines(x->buf, "\"name\":\"parse\"", "\"ts\":1,", B, NULL), 1);
	assert_int_equal(count_lines(x->buf, "\"name\":\"index\"", "\"ts\":2,", B, NULL), 1);
	assert_int_equal(count_lines(x->buf, E, "\"ts\":4.5,", NULL), 1);
	assert_non_null(strstr(x->buf, "{\"traceEvents\": ["));
	assert_int_equal(count_lines(x->buf, "process_name", "\"name\":\"server\"", NULL), 1);
	fx_free(x);
}

static void trace__slices_open_at_the_end__closed_at_the_end(void **state)
{
	struct fixture *x = fx_new();

	(void)state;
	group(x, TALLY_MSG_GROUP_ENTER, 10, 1, 0, START + 1000, NULL);
	group(x, TALLY_MSG_GROUP_ENTER, 10, 2, 1, START + 2000, NULL);
	group(x, TALLY_MSG_GROUP_ENTER, 12, 3, 0, START + 3000, NULL);
	assert_int_equal(trace_open_slices(x->t), 3);
	fx_end(x, START + 7000);
	assert_valid_json(x->buf);
	assert_int_equal(count_lines(x->buf, E, "\"ts\":7,", "\"tid\":10", NULL), 2);
	assert_int_equal(count_lines(x->buf, E, "\"ts\":7,", "\"tid\":12", NULL), 1);
	fx_free(x);
}

static void
trace__exit_without_enter__root_dropped_else_slice_for_the_group_returned_to(void **state)
{
	struct fixture *x = fx_new();

	(void)state;
	group(x, TALLY_MSG_GROUP_REGISTER, 10, 5, 0, START, "outer");
	/* entered before tally came: back to root, nothing to draw */
	group(x, TALLY_MSG_GROUP_EXIT, 10, 0, 1, START + 1000, NULL);
	assert_int_equal(trace_open_slices(x->t), 0);
	/* back to group 5, entered before tally came: shown from here */
	group(x, TALLY_MSG_GROUP_EXIT, 11, 5, 1, START + 2000, NULL);
	assert_int_equal(trace_open_slices(x->t), 1);
	group(x, TALLY_MSG_GROUP_EXIT, 11, 0, 5, START + 3000, NULL);
	assert_int_equal(trace_open_slices(x->t), 0);
	fx_end(x, START + 5000);
	assert_valid_json(x->buf);
	assert_int_equal(count_lines(x->buf, B, NULL), 1);
	assert_int_equal(
		count_lines(x->buf, B, "\"tid\":11", "\"name\":\"outer\"", "returned to", NULL), 1);
	assert_int_equal(count_lines(x->buf, E, NULL), 1);
	fx_free(x);
}

static void trace__late_attach_inside_a_group__slice_from_ts_0(void **state)
{
	struct fixture *x = fx_new();
	struct model_thread *mt;

	(void)state;
	/* what a late attach read from the registry */
	mt = model_thread(&x->m, 77, true);
	assert_non_null(mt);
	mt->group = 3;
	trace_begin(x->t, &x->m, "svc");
	assert_int_equal(trace_open_slices(x->t), 1);
	group(x, TALLY_MSG_GROUP_EXIT, 77, 0, 3, START + 1000, NULL);
	fx_end(x, START + 2000);
	assert_valid_json(x->buf);
	assert_int_equal(count_lines(x->buf, B, "\"ts\":0,", "\"tid\":77", "before attach", NULL),
			 1);
	assert_int_equal(count_lines(x->buf, E, "\"ts\":1,", "\"tid\":77", NULL), 1);
	fx_free(x);
}

static void trace__thread_exit__closes_its_slices(void **state)
{
	struct fixture *x = fx_new();
	struct tally_msg_thread msg = { .hdr = { TALLY_MSG_THREAD_EXIT, 0, 10, START + 3000 } };

	(void)state;
	group(x, TALLY_MSG_GROUP_ENTER, 10, 1, 0, START + 1000, NULL);
	group(x, TALLY_MSG_GROUP_ENTER, 10, 2, 1, START + 2000, NULL);
	feed(x, &msg, sizeof(msg));
	assert_int_equal(trace_open_slices(x->t), 0);
	fx_end(x, START + 9000);
	assert_int_equal(count_lines(x->buf, E, "\"ts\":3,", "\"tid\":10", NULL), 2);
	fx_free(x);
}

/* Thousands of threads entering, then leaving in another order: the table
 * of open slices must find each one (its deletion shifts entries back). */
static void trace__many_threads_out_of_order__every_exit_matched(void **state)
{
	struct fixture *x = fx_new();
	enum { N = 5000 };
	uint64_t s = 88172645463325252ull;
	uint32_t tids[N];

	(void)state;
	for (uint32_t i = 0; i < N; i++) {
		/* runs of neighbours and far-apart ones: clusters of mixed homes */
		tids[i] = i % 2 ? 1000 + i : 64 * (i + 1);
		group(x, TALLY_MSG_GROUP_ENTER, tids[i], 1, 0, START + i, NULL);
	}
	for (uint32_t i = N - 1; i > 0; i--) {
		s ^= s << 13, s ^= s >> 7, s ^= s << 17;
		uint32_t j = (uint32_t)(s % (i + 1)), tmp = tids[i];
		tids[i] = tids[j];
		tids[j] = tmp;
	}
	for (uint32_t i = 0; i < N; i++)
		group(x, TALLY_MSG_GROUP_EXIT, tids[i], 0, 1, START + N + i, NULL);
	assert_int_equal(trace_open_slices(x->t), 0);
	fx_end(x, START + 3 * N);
	assert_valid_json(x->buf);
	assert_int_equal(count_lines(x->buf, B, NULL), N);
	assert_int_equal(count_lines(x->buf, E, NULL), N);
	assert_int_equal(count_lines(x->buf, "returned to", NULL), 0);
	fx_free(x);
}

static void trace__hostile_thread_and_group_names__escaped(void **state)
{
	struct fixture *x = fx_new();
	const char hostile[] = "\x1b[31m\"q\\b";
	const char full[16] = "0123456789abcdef"; /* no NUL: comm fills its 16 bytes */

	(void)state;
	thread(x, TALLY_MSG_THREAD_NAME, 10, hostile, sizeof(hostile) - 1);
	thread(x, TALLY_MSG_THREAD_NEW, 11, full, sizeof(full));
	thread(x, TALLY_MSG_THREAD_NAME, 12, "bad\xff\xfe\n\t", 7);
	group(x, TALLY_MSG_GROUP_REGISTER, 10, 4, 0, START, "g\"}]\n\\x");
	group(x, TALLY_MSG_GROUP_ENTER, 10, 4, 0, START + 1000, NULL);
	fx_end(x, START + 2000);
	assert_valid_json(x->buf);
	assert_true(count_lines(x->buf, "\"tid\":10,", "\"name\":\"\\u001b[31m\\\"q\\\\b\"",
				NULL) >= 1);
	assert_true(count_lines(x->buf, "\"tid\":11,", "\"name\":\"0123456789abcdef\"", NULL) >= 1);
	assert_true(count_lines(x->buf, "\"tid\":12,",
				"\"name\":\"bad\xef\xbf\xbd\xef\xbf\xbd\\n\\t\"", NULL) >= 1);
	assert_int_equal(count_lines(x->buf, B, "\"name\":\"g\\\"}]\\n\\\\x\"", NULL), 1);
	/* no raw escape byte anywhere */
	assert_null(memchr(x->buf, 0x1b, x->len));
	fx_free(x);
}

/* Counters of figures made by hand. */
static void sample(struct fixture *x, struct figures_process *p, uint64_t now)
{
	struct figures fig = { .nprocs = 1, .cap = 1, .procs = p };

	trace_sample(x->t, &fig, now);
}

static void fill_sample(struct figures_process *smp)
{
	memset(smp, 0, sizeof(*smp));
	for (unsigned i = 0; i < TALLY_STATS_FIELDS; i++)
		smp->stats.v[i] = 1000 + i;
	smp->stats.known = (1u << TALLY_STATS_FIELDS) - 1;
	/* listed: root (0) and io (7) */
	static struct figures_group groups[2];
	memset(groups, 0, sizeof(groups));
	smp->groups = groups;
	smp->ngroups = 2;
	groups[0].shown = true;
	groups[0].name = "root";
	groups[1].id = 7;
	groups[1].name = "io";
	groups[0].live_bytes = 64;
	groups[0].cpu_ns = 5;
	groups[1].shown = true;
	groups[1].live_bytes = -16; /* freed more than allocated since attach */
	groups[1].cpu_ns = 123456789;
}

static void trace__sample__every_stats_term_and_group_counters(void **state)
{
	struct fixture *x = fx_new();
	struct figures_process *smp = malloc(sizeof(*smp));
	char want[128];

	(void)state;
	group(x, TALLY_MSG_GROUP_REGISTER, 10, 7, 0, START, "io");
	fill_sample(smp);
	sample(x, smp, START + 100000);
	sample(x, smp, START + 200000);
	fx_end(x, START + 300000);
	assert_valid_json(x->buf);
	for (unsigned i = 0; i < TALLY_STATS_FIELDS; i++) {
		snprintf(want, sizeof(want), "\"name\":\"stats.%s\"", figures_stat_names[i]);
		char val[64];
		snprintf(val, sizeof(val), "\":%u}", 1000 + i);
		assert_int_equal(count_lines(x->buf, want, "\"ph\":\"C\"", val, NULL), 2);
	}
	assert_int_equal(count_lines(x->buf, "stats.", "\"bytes\":", NULL), 18);
	assert_int_equal(count_lines(x->buf, "stats.", "\"count\":", NULL), 4);
	assert_int_equal(count_lines(x->buf, "\"group root live_bytes\"", "\"bytes\":64}", NULL),
			 2);
	assert_int_equal(count_lines(x->buf, "\"group io live_bytes\"", "\"bytes\":-16}", NULL), 2);
	assert_int_equal(count_lines(x->buf, "\"group io cpu_ns\"", "\"ns\":123456789}", NULL), 2);
	assert_int_equal(count_lines(x->buf, "\"ph\":\"C\"", "\"ts\":200,", NULL), 11 + 4);
	/* group 1 is not shown: no track */
	assert_int_equal(count_lines(x->buf, "group 1 ", NULL), 0);
	free(smp);
	fx_free(x);
}

static void trace__sample_in_glibc_mode__only_known_terms(void **state)
{
	struct fixture *x = fx_new();
	struct figures_process *smp = calloc(1, sizeof(*smp));

	(void)state;
	smp->stats.known = 1u << 1 | 1u << 2 | 1u << 9;
	sample(x, smp, START + 1000);
	fx_end(x, START + 2000);
	assert_int_equal(count_lines(x->buf, "stats.", NULL), 3);
	assert_int_equal(count_lines(x->buf, "stats.live", NULL), 1);
	assert_int_equal(count_lines(x->buf, "stats.mapped", NULL), 0);
	free(smp);
	fx_free(x);
}

static void trace__lost_events__one_marker_per_growth(void **state)
{
	struct fixture *x = fx_new();
	struct figures_process *smp = calloc(1, sizeof(*smp));

	(void)state;
	sample(x, smp, START + 1000);
	smp->events.lost = 3;
	smp->events.lost_record_words = 4096;
	sample(x, smp, START + 2000);
	sample(x, smp, START + 3000);
	smp->events.lost = 5;
	sample(x, smp, START + 4000);
	fx_end(x, START + 5000);
	assert_valid_json(x->buf);
	assert_int_equal(count_lines(x->buf, "\"events lost\"", NULL), 2);
	assert_int_equal(count_lines(x->buf, "\"events lost\"", "\"s\":\"g\"", "\"ts\":2,",
				     "\"messages\":3,", "\"record_words\":4096", NULL),
			 1);
	assert_int_equal(count_lines(x->buf, "\"events lost\"", "\"ts\":4,", "\"messages\":2,",
				     "\"messages_total\":5", NULL),
			 1);
	free(smp);
	fx_free(x);
}

static void trace__yields_and_rejections__a_counter_and_instants(void **state)
{
	struct fixture *x = fx_new();

	(void)state;
	for (int i = 0; i < 3; i++)
		group(x, TALLY_MSG_YIELD, 10, 0, 0, START + 1000 + i, NULL);
	group(x, TALLY_MSG_REJECT, 10, 0, 0, START + 2000, NULL);
	/* the counters from the model, as tally builds them */
	static struct figures_sources src;
	struct figures fig = { 0 };
	src.allocator = FIGURES_ALLOC_NONE;
	assert_int_equal(figures_build(&fig, &x->m, &src), 0);
	trace_sample(x->t, &fig, START + 3000);
	figures_free(&fig);
	fx_end(x, START + 4000);
	assert_valid_json(x->buf);
	assert_int_equal(count_lines(x->buf, "\"name\":\"reject\"", "\"ph\":\"i\"", "\"ts\":2,",
				     "\"group\":\"root\"", NULL),
			 1);
	assert_int_equal(count_lines(x->buf, "\"name\":\"yield\"", NULL), 0);
	assert_int_equal(count_lines(x->buf, "\"sdk.yields\"", "\"count\":3}", NULL), 1);
	assert_int_equal(
		count_lines(x->buf, "\"sdk.back_pressure_rejections\"", "\"count\":1}", NULL), 1);
	fx_free(x);
}

static void gpu_msg(struct fixture *x, uint32_t tid, uint8_t type, uint8_t term, uint16_t g,
		    uint32_t n, uint64_t bytes, uint64_t ts)
{
	struct tally_msg_gpu msg = { .hdr = { TALLY_MSG_GPU, 0, tid, ts },
				     .ev = { type, term, g, n, bytes } };
	feed(x, &msg, sizeof(msg));
}

static void trace__gpu_records__instant_events_with_their_arguments(void **state)
{
	struct fixture *x = fx_new();
	struct tally_msg_batch *mb = calloc(1, sizeof(*mb));
	const char kname[] = "gemm_\"kernel\"";
	struct tally_ev name = { TALLY_EV_GPU_KERNEL_NAME, 0, 0, 9, sizeof(kname) - 1 };
	struct tally_ev launch = { TALLY_EV_GPU_LAUNCH, 0, 2, 9, TALLY_GPU_API_LAUNCH_KERNEL_EX };

	(void)state;
	group(x, TALLY_MSG_GROUP_REGISTER, 10, 2, 0, START, "train");
	gpu_msg(x, 10, TALLY_EV_GPU_DEVICE_MEM, 0, 2, 0, 1 << 20, START + 1000);
	gpu_msg(x, 10, TALLY_EV_GPU_LAUNCH_FAILED, 0, 2, 700, TALLY_GPU_API_LAUNCH_KERNEL,
		START + 2000);
	gpu_msg(x, 10, TALLY_EV_GPU_IMAGE, 1, 0, 0, 4096, START + 3000);
	/* a CUPTI batch: a kernel's name, then a launch that uses it */
	mb->hdr = (struct tally_msg){ TALLY_MSG_BATCH, 0, 10, START + 4000, 0, 0 };
	mb->batch.magic = TALLY_BATCH_MAGIC;
	mb->batch.version = TALLY_BATCH_VERSION;
	mb->batch.source = TALLY_SRC_CUPTI;
	mb->batch.tid = 10;
	mb->batch.heap_id = 1;
	tally_ev_put(mb->batch.words, &mb->batch.count, &name);
	memcpy(&mb->batch.words[mb->batch.count], kname, sizeof(kname) - 1);
	mb->batch.count += (uint32_t)((sizeof(kname) - 1 + 7) / 8);
	tally_ev_put(mb->batch.words, &mb->batch.count, &launch);
	mb->bytes = (uint32_t)(offsetof(struct tally_batch, words) + mb->batch.count * 8);
	feed(x, mb, sizeof(*mb));
	/* CUPTI spoke: the driver's view of the same launches is not drawn twice */
	gpu_msg(x, 10, TALLY_EV_GPU_LAUNCH, 0, 2, 0, TALLY_GPU_API_LAUNCH_KERNEL, START + 5000);
	fx_end(x, START + 6000);
	assert_valid_json(x->buf);
	assert_int_equal(count_lines(x->buf, "\"device alloc\"", "\"i\"", "\"group\":\"train\"",
				     "\"bytes\":1048576", "\"source\":\"driver\"", NULL),
			 1);
	assert_int_equal(count_lines(x->buf, "\"launch failed\"", "\"result\":700",
				     "\"entry_point\":\"cuLaunchKernel\"", NULL),
			 1);
	assert_int_equal(count_lines(x->buf, "\"image unload\"", "\"group\":\"root\"",
				     "\"bytes\":4096", NULL),
			 1);
	assert_int_equal(count_lines(x->buf, "\"kernel launch\"", "\"ts\":4,",
				     "\"kernel\":\"gemm_\\\"kernel\\\"\"",
				     "\"entry_point\":\"cuLaunchKernelEx\"", "\"source\":\"cupti\"",
				     NULL),
			 1);
	assert_int_equal(count_lines(x->buf, "\"kernel launch\"", NULL), 1);
	free(mb);
	fx_free(x);
}

/* A CUPTI batch is read as the model reads it (tally_replay_each): the
 * records before one cut short are drawn, as the model takes them, and a
 * batch of another version, or one whose count runs past the bytes its
 * producer handed over, is not drawn at all. */
static void trace__cupti_batch__drawn_as_far_as_the_model_reads(void **state)
{
	struct fixture *x = fx_new();
	struct tally_msg_batch *mb = calloc(1, sizeof(*mb));
	struct tally_ev launch = { TALLY_EV_GPU_LAUNCH, 0, 0, 9, TALLY_GPU_API_LAUNCH_KERNEL };
	struct tally_ev name = { TALLY_EV_GPU_KERNEL_NAME, 0, 0, 9, 100 }; /* no text follows */

	(void)state;
	mb->hdr = (struct tally_msg){ TALLY_MSG_BATCH, 0, 10, START + 1000, 0, 0 };
	mb->batch.magic = TALLY_BATCH_MAGIC;
	mb->batch.version = TALLY_BATCH_VERSION;
	mb->batch.source = TALLY_SRC_CUPTI;
	mb->batch.tid = 10;
	tally_ev_put(mb->batch.words, &mb->batch.count, &launch);
	tally_ev_put(mb->batch.words, &mb->batch.count, &name);
	mb->bytes = (uint32_t)(offsetof(struct tally_batch, words) + mb->batch.count * 8);
	assert_int_equal(model_apply(&x->m, mb, sizeof(*mb)), -EINVAL);
	assert_int_equal(x->m.records, 1);
	trace_message(x->t, &x->m, mb, sizeof(*mb));
	mb->batch.version = TALLY_BATCH_VERSION + 1;
	feed(x, mb, sizeof(*mb));
	/* its count past the bytes the producer handed over: the model refuses
	 * it whole, and the trace draws none of it */
	mb->batch.version = TALLY_BATCH_VERSION;
	mb->bytes = (uint32_t)offsetof(struct tally_batch, words);
	assert_int_equal(model_apply(&x->m, mb, sizeof(*mb)), -EINVAL);
	assert_int_equal(x->m.records, 1);
	trace_message(x->t, &x->m, mb, sizeof(*mb));
	fx_end(x, START + 2000);
	assert_valid_json(x->buf);
	assert_int_equal(count_lines(x->buf, "\"kernel launch\"", "\"source\":\"cupti\"", NULL), 1);
	free(mb);
	fx_free(x);
}

static void trace__short_and_unknown_messages__ignored(void **state)
{
	struct fixture *x = fx_new();
	struct tally_msg_group g = { .hdr = { TALLY_MSG_GROUP_ENTER, 0, 10, START }, .group = 1 };
	struct tally_msg odd = { 99, 0, 10, START, 0, 0 };

	(void)state;
	trace_message(x->t, &x->m, &g, sizeof(g) - 1);
	trace_message(x->t, &x->m, &g, 3);
	trace_message(x->t, &x->m, &odd, sizeof(odd));
	g.group = TALLY_MAX_GROUPS; /* out of range */
	trace_message(x->t, &x->m, &g, sizeof(g));
	assert_int_equal(trace_open_slices(x->t), 0);
	fx_end(x, START + 1000);
	assert_valid_json(x->buf);
	assert_int_equal(count_lines(x->buf, "\"ph\"", NULL), 0);
	fx_free(x);
}

static void trace__write_error__reported_at_the_end(void **state)
{
	struct model m;
	struct trace *t;
	static struct figures_process end;
	struct figures fig = { .nprocs = 1, .cap = 1, .procs = &end };
	FILE *f = fopen("/dev/full", "w");

	(void)state;
	if (!f)
		skip_because("no /dev/full");
	model_init(&m);
	assert_int_equal(trace_new(&t, f, 1, START), 0);
	trace_begin(t, &m, "x");
	assert_int_equal(trace_end(t, &m, START, &fig), -ENOSPC); /* the real error, not -EIO */
	trace_free(t);
	fclose(f);
	model_free(&m);
}

int main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(trace__nested_groups__balanced_per_thread),
		cmocka_unit_test(trace__slices_open_at_the_end__closed_at_the_end),
		cmocka_unit_test(
			trace__exit_without_enter__root_dropped_else_slice_for_the_group_returned_to),
		cmocka_unit_test(trace__late_attach_inside_a_group__slice_from_ts_0),
		cmocka_unit_test(trace__thread_exit__closes_its_slices),
		cmocka_unit_test(trace__many_threads_out_of_order__every_exit_matched),
		cmocka_unit_test(trace__hostile_thread_and_group_names__escaped),
		cmocka_unit_test(trace__sample__every_stats_term_and_group_counters),
		cmocka_unit_test(trace__sample_in_glibc_mode__only_known_terms),
		cmocka_unit_test(trace__lost_events__one_marker_per_growth),
		cmocka_unit_test(trace__yields_and_rejections__a_counter_and_instants),
		cmocka_unit_test(trace__gpu_records__instant_events_with_their_arguments),
		cmocka_unit_test(trace__cupti_batch__drawn_as_far_as_the_model_reads),
		cmocka_unit_test(trace__short_and_unknown_messages__ignored),
		cmocka_unit_test(trace__write_error__reported_at_the_end),
	};

	return cmocka_run_group_tests(tests, NULL, NULL);
}
