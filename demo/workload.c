// SPDX-License-Identifier: (LGPL-2.1 OR BSD-2-Clause)
/*
 * tally's demo workload: threads in named resource groups doing what real
 * services do to an allocator: short-lived churn, a cross-thread pipeline
 * (blocks allocated in one group and thread, freed in another), a cache that
 * grows and shrinks, cooperative yields and back-pressure rejections.
 *
 * It uses only the SDK (libtally.so) and the C library, so it runs under any
 * allocator. When libtally_alloc is its malloc, it ends with the allocator's
 * own figures: the byte identity and each group's live bytes.
 *
 * An "infer" thread drives a GPU through the CUDA driver when one can be
 * loaded: DEMO_LIBCUDA (tally demo points it at the fake driver of the
 * tests when the machine has no GPU), else the system's libcuda.so.1.
 */
#include <dlfcn.h>
#include <errno.h>
#include <getopt.h>
#include <pthread.h>
#include <stdatomic.h>
#include <stdbool.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include "../alloc/include/tally.h"
#include "../alloc/include/tally_alloc.h"

#define QUEUE_LEN 1024

static double seconds = 3;
static atomic_bool stop;

static struct {
	pthread_mutex_t lock;
	pthread_cond_t cv;
	void *items[QUEUE_LEN];
	unsigned head, tail;
} queue = { PTHREAD_MUTEX_INITIALIZER, PTHREAD_COND_INITIALIZER, { 0 }, 0, 0 };

static uint64_t rnd(uint64_t *s)
{
	*s ^= *s << 13;
	*s ^= *s >> 7;
	*s ^= *s << 17;
	return *s;
}

static void pause_us(long us)
{
	struct timespec ts = { 0, us * 1000 };
	nanosleep(&ts, NULL);
}

/* "ingest": reads requests (allocates buffers) and hands them on; refuses
 * work when the pipeline is full. */
static void *ingest(void *arg)
{
	uint64_t s = 1;
	(void)arg;
	tally_group_enter(tally_group_register("ingest"));
	while (!atomic_load(&stop)) {
		size_t n = 64 + rnd(&s) % 4000;
		char *buf = malloc(n);
		if (!buf)
			continue;
		memset(buf, 'i', n);
		pthread_mutex_lock(&queue.lock);
		if (queue.tail - queue.head == QUEUE_LEN) {
			pthread_mutex_unlock(&queue.lock);
			free(buf);
			tally_reject(); /* back-pressure: the request is dropped */
			pause_us(200);
			continue;
		}
		queue.items[queue.tail++ % QUEUE_LEN] = buf;
		pthread_cond_signal(&queue.cv);
		pthread_mutex_unlock(&queue.lock);
		if (rnd(&s) % 64 == 0)
			pause_us(100);
	}
	return NULL;
}

/* "decode": takes buffers from ingest, works on them, frees them (a free of
 * another thread's block, charged back to "ingest"). */
static void *decode(void *arg)
{
	uint64_t s = 2;
	(void)arg;
	tally_group_enter(tally_group_register("decode"));
	while (!atomic_load(&stop)) {
		pthread_mutex_lock(&queue.lock);
		while (queue.head == queue.tail && !atomic_load(&stop)) {
			struct timespec ts;
			clock_gettime(CLOCK_REALTIME, &ts);
			ts.tv_nsec += 10 * 1000 * 1000;
			if (ts.tv_nsec >= 1000000000)
				ts.tv_sec++, ts.tv_nsec -= 1000000000;
			pthread_cond_timedwait(&queue.cv, &queue.lock, &ts);
		}
		void *buf = queue.head != queue.tail ? queue.items[queue.head++ % QUEUE_LEN] : NULL;
		pthread_mutex_unlock(&queue.lock);
		if (!buf)
			continue;
		/* scratch space of its own while decoding */
		size_t n = 32 + rnd(&s) % 512;
		char *volatile scratch =
			malloc(n); /* volatile: keep the compiler from eliding it */
		if (scratch)
			memset(scratch, 'd', n);
		free(scratch);
		free(buf);
		if (rnd(&s) % 16 == 0)
			tally_yield(); /* a cooperative scheduler's yield point */
	}
	return NULL;
}

/* "render": many small short-lived objects, a nested "layout" phase. */
static void *render(void *arg)
{
	uint64_t s = 3;
	void *ring[256] = { 0 };
	struct tally_group layout = tally_group_register("layout");
	(void)arg;
	tally_group_enter(tally_group_register("render"));
	for (unsigned i = 0; !atomic_load(&stop); i++) {
		unsigned k = i % 256;
		free(ring[k]);
		ring[k] = malloc(16 + rnd(&s) % 240);
		if (i % 4096 == 0) {
			struct tally_group_guard g = tally_group_enter(layout);
			void *volatile tmp = calloc(64, 64);
			free(tmp);
			tally_group_exit(g);
			pause_us(500);
		}
	}
	for (unsigned k = 0; k < 256; k++)
		free(ring[k]);
	return NULL;
}

/* "cache": grows to a few MiB, then evicts most of it, again and again. */
static void *cache(void *arg)
{
	enum { N = 20000 };
	uint64_t s = 4;
	void **v = calloc(N, sizeof(*v));
	(void)arg;
	if (!v)
		return NULL;
	tally_group_enter(tally_group_register("cache"));
	while (!atomic_load(&stop)) {
		for (int i = 0; i < N && !atomic_load(&stop); i++)
			if (!v[i] && (v[i] = malloc(100 + rnd(&s) % 900)))
				memset(v[i], 'c', 100);
		for (int i = 0; i < N; i++)
			if (rnd(&s) % 10) {
				free(v[i]);
				v[i] = NULL;
			}
		pause_us(20000);
	}
	for (int i = 0; i < N; i++)
		free(v[i]);
	free(v);
	return NULL;
}

/* The driver entry points "infer" uses, from dlopen: no link-time CUDA. */
struct cuda {
	int (*init)(unsigned);
	int (*device_get)(int *, int);
	int (*ctx_create)(void **, unsigned, int);
	int (*module_load)(void **, const void *);
	int (*module_unload)(void *);
	int (*get_function)(void **, void *, const char *);
	int (*mem_alloc)(unsigned long long *, size_t);
	int (*mem_free)(unsigned long long);
	int (*launch)(void *, unsigned, unsigned, unsigned, unsigned, unsigned, unsigned, unsigned,
		      void *, void **, void **);
	int (*sync)(void);
};

static bool cuda_open(struct cuda *cu)
{
	const char *path = getenv("DEMO_LIBCUDA");
	void *lib = dlopen(path && *path ? path : "libcuda.so.1", RTLD_NOW);

	if (!lib)
		return false;
#define SYM(field, name) (*(void **)&cu->field = dlsym(lib, name))
	return SYM(init, "cuInit") && SYM(device_get, "cuDeviceGet") &&
	       SYM(ctx_create, "cuCtxCreate_v2") && SYM(module_load, "cuModuleLoadData") &&
	       SYM(module_unload, "cuModuleUnload") && SYM(get_function, "cuModuleGetFunction") &&
	       SYM(mem_alloc, "cuMemAlloc_v2") && SYM(mem_free, "cuMemFree_v2") &&
	       SYM(launch, "cuLaunchKernel") && SYM(sync, "cuCtxSynchronize");
#undef SYM
}

/* "infer": loads a module, launches kernels (every 64th with an empty grid,
 * which the driver refuses), keeps a few device buffers in flight. */
static void *infer(void *arg)
{
	static const char ptx[] = ".version 7.0\n.target sm_50\n.address_size 64\n"
				  ".visible .entry noop()\n{\n\tret;\n}\n";
	unsigned long long bufs[8] = { 0 };
	void *ctx, *mod, *fn;
	struct cuda cu;
	uint64_t s = 5;
	int dev;
	(void)arg;

	if (!cuda_open(&cu) || cu.init(0) || cu.device_get(&dev, 0) ||
	    cu.ctx_create(&ctx, 0, dev) || cu.module_load(&mod, ptx) ||
	    cu.get_function(&fn, mod, "noop"))
		return NULL; /* no GPU: the demo goes on without one */
	tally_group_enter(tally_group_register("infer"));
	for (unsigned i = 0; !atomic_load(&stop); i++) {
		unsigned k = i % 8;
		if (bufs[k])
			cu.mem_free(bufs[k]);
		bufs[k] = 0;
		cu.mem_alloc(&bufs[k], (1 + rnd(&s) % 64) << 16);
		cu.launch(fn, i % 64 == 63 ? 0 : 1, 1, 1, 32, 1, 1, 0, NULL, NULL, NULL);
		if (i % 16 == 0) {
			cu.sync();
			tally_yield();
		}
		pause_us(2000);
	}
	for (unsigned k = 0; k < 8; k++)
		if (bufs[k])
			cu.mem_free(bufs[k]);
	cu.module_unload(mod);
	return NULL;
}

static void report(void)
{
	int (*stats)(struct tally_stats *) =
		(int (*)(struct tally_stats *))dlsym(RTLD_DEFAULT, "tally_alloc_stats");
	int (*gstats)(uint32_t, struct tally_group_stats *) =
		(int (*)(uint32_t, struct tally_group_stats *))dlsym(RTLD_DEFAULT,
								     "tally_alloc_group_stats");
	struct tally_stats st;

	/* the first printf allocates stdout's buffer: print before the snapshot */
	printf("demo: done\n");
	fflush(stdout);
	if (!stats || !gstats || stats(&st)) {
		printf("(malloc is not libtally_alloc: no allocator figures)\n");
		return;
	}
	printf("the allocator's figures at the end:\n");
	printf("  %-17s %14s\n", "term", "bytes");
#define ROW(f) printf("  %-17s %14llu\n", #f, (unsigned long long)st.f)
	ROW(mapped);
	ROW(live);
	ROW(rounding);
	ROW(cache);
	ROW(span_free);
	ROW(returned);
	ROW(virgin);
	ROW(hysteresis);
	ROW(segment_overhead);
#undef ROW
	uint64_t acc = st.live + st.rounding + st.cache + st.span_free + st.returned + st.virgin +
		       st.hysteresis + st.segment_overhead;
	printf("  mapped %s the sum of the eight terms (%llu)\n",
	       acc == st.mapped ? "==" : "!=", (unsigned long long)acc);
	printf("  %-10s %14s %14s %10s\n", "group", "allocated", "live", "objects");
	static const char *names[] = { "root",	 "ingest", "decode", "render",
				       "layout", "cache",  "infer" };
	for (unsigned i = 0; i < sizeof(names) / sizeof(names[0]); i++) {
		struct tally_group g = tally_group_register(names[i]);
		struct tally_group_stats gs;
		if (g.id == TALLY_GROUP_INVALID || gstats(g.id, &gs))
			continue;
		printf("  %-10s %14llu %14lld %10llu\n", names[i],
		       (unsigned long long)gs.allocated_bytes,
		       (long long)(gs.allocated_bytes - gs.deallocated_bytes),
		       (unsigned long long)gs.allocated_objects);
	}
}

static void usage(FILE *f)
{
	fprintf(f, "usage: demo_workload [-s SECONDS]\n"
		   "Threads in the groups ingest, decode, render (with layout nested) and cache\n"
		   "allocate, pass blocks between threads, yield and reject, for SECONDS (3);\n"
		   "infer drives a GPU through DEMO_LIBCUDA or libcuda.so.1 when one loads.\n");
}

int main(int argc, char **argv)
{
	void *(*fns[])(void *) = { ingest, decode, render, cache, infer };
	pthread_t th[5];
	int c;

	while ((c = getopt(argc, argv, "s:h")) != -1) {
		char *end;
		switch (c) {
		case 's':
			errno = 0;
			seconds = strtod(optarg, &end);
			if (errno || *end || seconds <= 0 || seconds > 86400) {
				fprintf(stderr,
					"demo_workload: -s wants seconds in (0, 86400]: %s\n",
					optarg);
				return 2;
			}
			break;
		case 'h':
			usage(stdout);
			return 0;
		default:
			usage(stderr);
			return 2;
		}
	}
	for (int i = 0; i < 5; i++) {
		if ((errno = pthread_create(&th[i], NULL, fns[i], NULL))) {
			perror("demo_workload: pthread_create");
			return 1;
		}
	}
	pause_us(0);
	struct timespec ts = { (time_t)seconds, (long)((seconds - (time_t)seconds) * 1e9) };
	nanosleep(&ts, NULL);
	atomic_store(&stop, true);
	pthread_cond_broadcast(&queue.cv);
	for (int i = 0; i < 5; i++)
		pthread_join(th[i], NULL);
	while (queue.head != queue.tail)
		free(queue.items[queue.head++ % QUEUE_LEN]);
	report();
	return 0;
}
