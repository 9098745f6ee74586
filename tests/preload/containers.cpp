// SPDX-License-Identifier: MIT
//
// Exercise the allocator through the C++ standard library and the libc
// allocation API: growing vectors, strings, node containers with millions of
// inserts and erases, cross-thread frees, over-aligned new, the aligned libc
// entry points, array new/delete, exceptions and fork() while other threads
// allocate.
//
// Every section prints one line: its name and a checksum of what it computed.
// The checksums depend only on the program, never on addresses, timing or
// thread interleaving, so a run with the allocator preloaded must print
// exactly what a plain run prints. stdout is flushed after each line so that a
// crash shows which section it happened in.
//
// Exit status: 0 when every self-check held, 1 otherwise (the failing check is
// named on stderr). A check that fails also changes its section's line.

#include <algorithm>
#include <atomic>
#include <cerrno>
#include <condition_variable>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <deque>
#include <future>
#include <list>
#include <map>
#include <memory>
#include <mutex>
#include <new>
#include <set>
#include <sstream>
#include <stdexcept>
#include <string>
#include <thread>
#include <unordered_map>
#include <unordered_set>
#include <vector>

#include <malloc.h>
#include <poll.h>
#include <signal.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

static int failures;

static void check(bool ok, const char *what)
{
	if (!ok) {
		failures++;
		fprintf(stderr, "containers: check failed: %s\n", what);
	}
}

// Deterministic pseudo-random numbers: xorshift64*, seeded per use so that
// each section (and each thread) sees the same sequence on every run.
struct rng {
	uint64_t s;
	explicit rng(uint64_t seed) : s(seed * 0x9e3779b97f4a7c15ull + 1) {}
	uint64_t next()
	{
		s ^= s >> 12;
		s ^= s << 25;
		s ^= s >> 27;
		return s * 0x2545f4914f6cdd1dull;
	}
	// Uniform in [0, n).
	uint64_t below(uint64_t n) { return next() % n; }
};

// Order-dependent checksum: FNV-1a over the bytes of each value added.
struct digest {
	uint64_t h = 0xcbf29ce484222325ull;
	void add(uint64_t v)
	{
		for (int i = 0; i < 8; i++) {
			h ^= (v >> (8 * i)) & 0xff;
			h *= 0x100000001b3ull;
		}
	}
	void add_bytes(const void *p, size_t n)
	{
		const unsigned char *b = static_cast<const unsigned char *>(p);
		for (size_t i = 0; i < n; i++) {
			h ^= b[i];
			h *= 0x100000001b3ull;
		}
	}
};

// Compilers may delete an allocation whose result goes unused and assume it
// succeeded (clang does); passing the pointer through here keeps the call.
static void *volatile escaped;

static void *escape(void *p)
{
	escaped = p;
	return escaped;
}

static void report(const char *section, uint64_t sum)
{
	printf("%-14s %016llx\n", section, (unsigned long long)sum);
	fflush(stdout);
}

// A size drawn from a spread that covers tiny, small, medium and (rarely)
// multi-MiB requests, the classes an allocator usually handles differently.
static size_t varied_size(rng &r)
{
	uint64_t k = r.below(100);
	if (k < 50)
		return 1 + r.below(64);
	if (k < 80)
		return 64 + r.below(4096);
	if (k < 97)
		return 4096 + r.below(256 * 1024);
	return 1024 * 1024 + r.below(3 * 1024 * 1024);
}

// Fill a block with a pattern derived from (tag, offset) and verify it
// later, possibly on another thread: a block the allocator handed out twice,
// or overlapping another, fails the verification. Only the first and last
// EDGE bytes are patterned (the middle is left as it is): overlaps show at
// the edges, and patterning multi-MiB blocks whole would dominate the run.
static const size_t EDGE = 2048;

static unsigned char pattern_at(uint64_t tag, size_t i)
{
	uint64_t v = (tag + i) * 0x9e3779b97f4a7c15ull;
	return (unsigned char)(v >> 56);
}

static void fill_block(unsigned char *p, size_t n, uint64_t tag)
{
	for (size_t i = 0; i < n; i++) {
		if (i == EDGE && n > 2 * EDGE)
			i = n - EDGE;
		p[i] = pattern_at(tag, i);
	}
}

static bool block_ok(const unsigned char *p, size_t n, uint64_t tag)
{
	for (size_t i = 0; i < n; i++) {
		if (i == EDGE && n > 2 * EDGE)
			i = n - EDGE;
		if (p[i] != pattern_at(tag, i))
			return false;
	}
	return true;
}

static void test_vectors(void)
{
	digest d;
	rng r(1);

	// push_back growth (reallocation at every capacity step), for element
	// types of different sizes.
	for (int round = 0; round < 200; round++) {
		std::vector<uint32_t> a;
		std::vector<std::pair<uint64_t, uint64_t>> b;
		size_t n = 1 + r.below(20000);
		for (size_t i = 0; i < n; i++) {
			a.push_back((uint32_t)r.next());
			if (i % 3 == 0)
				b.emplace_back(r.next(), i);
		}
		a.resize(a.size() / 2);
		a.shrink_to_fit();
		b.insert(b.begin(), b.end() - b.size() / 2, b.end());
		uint64_t s = 0;
		for (uint32_t v : a)
			s = s * 31 + v;
		for (auto &p : b)
			s ^= p.first + p.second;
		d.add(s);
		d.add(a.size() + b.size());
	}

	// One big vector grown to 32 MiB one element at a time, then shrunk.
	std::vector<uint64_t> big;
	for (uint64_t i = 0; i < (4u << 20); i++)
		big.push_back(i * 2654435761u);
	uint64_t s = 0;
	for (size_t i = 0; i < big.size(); i += 4099)
		s += big[i];
	big.resize(1000);
	big.shrink_to_fit();
	d.add(s);
	d.add(big.capacity() >= 1000);

	// Vector of vectors: many small buffers alive at once, freed in
	// shuffled order.
	std::vector<std::vector<uint16_t>> vv(50000);
	for (size_t i = 0; i < vv.size(); i++)
		vv[i].assign(r.below(200), (uint16_t)i);
	for (size_t i = vv.size() - 1; i > 0; i--)
		std::swap(vv[i], vv[r.below(i + 1)]);
	for (size_t i = 0; i < vv.size(); i += 2)
		std::vector<uint16_t>().swap(vv[i]);
	for (auto &v : vv)
		d.add(v.size() ? v[0] + v.size() : 0);
	report("vectors", d.h);
}

static void test_strings(void)
{
	digest d;
	rng r(2);

	// Lengths around the small-string boundary (15) and well past it.
	std::vector<std::string> v;
	for (int i = 0; i < 150000; i++) {
		size_t n = r.below(100) < 90 ? r.below(40) : r.below(5000);
		std::string s(n, (char)('a' + r.below(26)));
		if (n > 3)
			s[n / 2] = (char)('A' + (i % 26));
		v.push_back(std::move(s));
	}
	std::sort(v.begin(), v.end());
	for (size_t i = 0; i < v.size(); i += 97)
		d.add_bytes(v[i].data(), v[i].size());

	// Repeated appends (realloc-like growth) and substrings.
	std::string acc;
	for (int i = 0; i < 200000; i++) {
		acc += std::to_string(r.next() % 1000003);
		acc += ',';
	}
	d.add(acc.size());
	for (size_t pos = 0; pos + 50 < acc.size(); pos += acc.size() / 1000)
		d.add_bytes(acc.substr(pos, 50).data(), 50);

	std::ostringstream os;
	for (int i = 0; i < 100000; i++)
		os << i << ':' << (i * 7919) % 10007 << ';';
	std::string out = os.str();
	d.add_bytes(out.data(), out.size());
	report("strings", d.h);
}

static void test_maps(void)
{
	digest d;

	// unordered_map: 600k inserts, half erased, 300k reinserted; rehashes
	// allocate and free large bucket arrays along the way.
	{
		rng r(3);
		std::unordered_map<uint64_t, uint64_t> m;
		std::vector<uint64_t> keys;
		keys.reserve(600000);
		for (uint64_t i = 0; i < 600000; i++) {
			uint64_t k = r.next();
			keys.push_back(k);
			m[k] = i;
		}
		for (size_t i = 0; i < keys.size(); i += 2)
			m.erase(keys[i]);
		for (size_t i = 0; i < keys.size(); i += 2)
			m.emplace(keys[i] ^ 1, i);
		uint64_t s = 0;
		for (auto &kv : m)
			s += kv.first * 3 + kv.second;
		d.add(m.size());
		d.add(s);
	}

	// std::map with string keys: 200k inserts, erase by range and by key.
	{
		rng r(4);
		std::map<std::string, std::vector<int>> m;
		for (int i = 0; i < 200000; i++) {
			std::string k = "k" + std::to_string(r.next() % 10000000);
			m[k].push_back(i);
		}
		for (auto it = m.begin(); it != m.end();)
			it = (it->second.size() > 1 || it->first.size() % 2) ? m.erase(it) : std::next(it);
		d.add(m.size());
		for (auto &kv : m) {
			d.add_bytes(kv.first.data(), kv.first.size());
			d.add(kv.second[0]);
		}
	}

	// std::set and unordered_set churn: insert/erase interleaved so that
	// freed nodes are reused immediately.
	{
		rng r(5);
		std::set<uint32_t> s;
		std::unordered_set<uint32_t> us;
		for (int i = 0; i < 400000; i++) {
			uint32_t k = (uint32_t)r.below(100000);
			if (!s.insert(k).second)
				s.erase(k);
			if (!us.insert(k * 7).second)
				us.erase(k * 7);
		}
		d.add(s.size());
		d.add(us.size());
		uint64_t sum = 0;
		for (uint32_t k : s)
			sum = sum * 3 + k;
		d.add(sum);
	}
	report("maps", d.h);
}

static void test_lists(void)
{
	digest d;
	rng r(6);
	std::list<std::string> a, b;
	for (int i = 0; i < 150000; i++) {
		std::string s = std::to_string(r.next() % 100000);
		if (i % 2)
			a.push_back(std::move(s));
		else
			b.push_front(std::move(s));
	}
	a.sort();
	b.sort();
	a.merge(b);
	a.unique();
	auto it = a.begin();
	std::advance(it, a.size() / 3);
	std::list<std::string> c;
	c.splice(c.begin(), a, a.begin(), it);
	a.remove_if([](const std::string &s) { return s.size() < 4; });
	d.add(a.size());
	d.add(c.size());
	for (auto &s : a)
		d.add_bytes(s.data(), s.size());

	std::deque<std::vector<int>> q;
	for (int i = 0; i < 200000; i++) {
		q.emplace_back(1 + i % 17, i);
		if (i % 3 == 0)
			q.pop_front();
	}
	d.add(q.size());
	d.add(q.front()[0] + q.back()[0]);
	report("lists", d.h);
}

struct node {
	uint64_t value;
	std::shared_ptr<node> next;
	std::weak_ptr<node> prev;
	explicit node(uint64_t v) : value(v) {}
};

static void test_shared_ptr(void)
{
	digest d;
	rng r(7);

	// A doubly linked chain with shared/weak pointers; dropping the head
	// frees the chain node by node.
	std::shared_ptr<node> head = std::make_shared<node>(0);
	std::shared_ptr<node> tail = head;
	for (uint64_t i = 1; i < 100000; i++) {
		auto n = std::make_shared<node>(r.next());
		n->prev = tail;
		tail->next = n;
		tail = n;
	}
	uint64_t s = 0;
	for (auto p = tail; p; p = p->prev.lock())
		s += p->value;
	d.add(s);
	// Unlink iteratively: a recursive destructor chain this long would
	// overflow the stack.
	tail.reset();
	while (head)
		head = std::move(head->next);

	// Non-make_shared control blocks (separate allocation) with a custom
	// deleter, and aliasing shared_ptrs into an array.
	std::vector<std::shared_ptr<uint64_t>> v;
	for (int i = 0; i < 100000; i++) {
		if (i % 2)
			v.emplace_back(new uint64_t(i), [](uint64_t *p) { delete p; });
		else
			v.push_back(std::make_shared<uint64_t>(i));
	}
	std::shared_ptr<uint64_t[]> arr(new uint64_t[1000]());
	for (int i = 0; i < 1000; i++)
		v.push_back(std::shared_ptr<uint64_t>(arr, &arr[i]));
	arr.reset();
	for (auto &p : v)
		s += *p + p.use_count();
	d.add(s);
	report("shared_ptr", d.h);
}

// A block handed from a producer thread to a consumer thread, which checks
// and frees it: every free in this section is a cross-thread free.
struct handoff {
	enum kinds { MALLOC, NEW_ARRAY, STRING, SHARED } kind;
	void *p;
	std::string str;
	std::shared_ptr<std::vector<unsigned char>> sp;
	size_t size;
	uint64_t tag;
};

// Bounded, so that producers outrunning the consumers cannot pile up
// gigabytes of blocks in flight.
struct handoff_queue {
	static constexpr size_t MAX_QUEUED = 512;
	std::mutex mu;
	std::condition_variable cv;       // signalled when q gains a block
	std::condition_variable cv_space; // signalled when q loses one
	std::deque<handoff> q;
	int producers_left;
};

static void produce(handoff_queue &hq, int id)
{
	rng r(100 + id);
	for (int i = 0; i < 20000; i++) {
		handoff h;
		h.size = varied_size(r);
		if (h.size > 512 * 1024 && i % 8)
			h.size = 1 + r.below(512);  // keep multi-MiB blocks rare
		h.tag = ((uint64_t)id << 32) | (uint64_t)i;
		h.kind = (handoff::kinds)(i % 4);
		unsigned char *buf = nullptr;
		switch (h.kind) {
		case handoff::MALLOC:
			h.p = malloc(h.size);
			buf = static_cast<unsigned char *>(h.p);
			break;
		case handoff::NEW_ARRAY:
			h.p = new unsigned char[h.size];
			buf = static_cast<unsigned char *>(h.p);
			break;
		case handoff::STRING:
			h.str.resize(h.size);
			buf = reinterpret_cast<unsigned char *>(&h.str[0]);
			break;
		case handoff::SHARED:
			h.sp = std::make_shared<std::vector<unsigned char>>(h.size);
			buf = h.sp->data();
			break;
		}
		fill_block(buf, h.size, h.tag);
		std::unique_lock<std::mutex> lock(hq.mu);
		hq.cv_space.wait(lock, [&] { return hq.q.size() < handoff_queue::MAX_QUEUED; });
		hq.q.push_back(std::move(h));
		hq.cv.notify_one();
	}
	std::lock_guard<std::mutex> lock(hq.mu);
	hq.producers_left--;
	hq.cv.notify_all();
}

struct consumed {
	uint64_t sum = 0;
	uint64_t count = 0;
	uint64_t bad = 0;
};

static void consume(handoff_queue &hq, consumed &out)
{
	for (;;) {
		std::unique_lock<std::mutex> lock(hq.mu);
		hq.cv.wait(lock, [&] { return !hq.q.empty() || hq.producers_left == 0; });
		if (hq.q.empty())
			return;
		handoff h = std::move(hq.q.front());
		hq.q.pop_front();
		hq.cv_space.notify_one();
		lock.unlock();

		const unsigned char *buf = nullptr;
		switch (h.kind) {
		case handoff::MALLOC:
		case handoff::NEW_ARRAY:
			buf = static_cast<unsigned char *>(h.p);
			break;
		case handoff::STRING:
			buf = reinterpret_cast<const unsigned char *>(h.str.data());
			break;
		case handoff::SHARED:
			buf = h.sp->data();
			break;
		}
		if (!block_ok(buf, h.size, h.tag))
			out.bad++;
		// Sum is order independent, so interleaving cannot change it.
		out.sum += h.tag * 0x9e3779b97f4a7c15ull + h.size;
		out.count++;
		if (h.kind == handoff::MALLOC)
			free(h.p);
		else if (h.kind == handoff::NEW_ARRAY)
			delete[] static_cast<unsigned char *>(h.p);
		// STRING and SHARED are freed by h's destructor, here.
	}
}

static void test_cross_thread(void)
{
	const int producers = 3, consumers = 2;
	handoff_queue hq;
	hq.producers_left = producers;
	std::vector<consumed> res(consumers);
	std::vector<std::thread> t;
	for (int i = 0; i < producers; i++)
		t.emplace_back(produce, std::ref(hq), i);
	for (int i = 0; i < consumers; i++)
		t.emplace_back(consume, std::ref(hq), std::ref(res[i]));
	for (auto &th : t)
		th.join();

	consumed all;
	for (auto &c : res) {
		all.sum += c.sum;
		all.count += c.count;
		all.bad += c.bad;
	}
	check(all.bad == 0, "cross-thread blocks arrived intact");
	check(all.count == producers * 20000u, "every cross-thread block consumed");

	// Thread churn: short-lived threads whose blocks outlive them and are
	// freed by the next generation (exercises thread-exit cleanup).
	std::vector<void *> carried;
	uint64_t churn = 0;
	for (int gen = 0; gen < 64; gen++) {
		std::vector<std::vector<void *>> made(4);
		std::vector<std::thread> ts;
		for (int k = 0; k < 4; k++) {
			ts.emplace_back([&, k] {
				rng r(1000 + gen * 4 + k);
				for (int i = 0; i < 200; i++) {
					size_t n = 1 + r.below(2048);
					void *p = malloc(n);
					memset(p, k, n);
					made[k].push_back(p);
				}
				// Free half of the previous generation's blocks here.
				for (size_t i = k; i < carried.size(); i += 8)
					free(carried[i]);
			});
		}
		for (auto &th : ts)
			th.join();
		for (size_t i = 0; i < carried.size(); i++)
			if (i % 8 >= 4)
				free(carried[i]);
		carried.clear();
		for (auto &m : made) {
			churn += m.size();
			carried.insert(carried.end(), m.begin(), m.end());
		}
	}
	for (void *p : carried)
		free(p);

	digest d;
	d.add(all.sum);
	d.add(all.count);
	d.add(all.bad);
	d.add(churn);
	report("cross_thread", d.h);
}

struct alignas(64) line64 {
	unsigned char b[64];
};

struct alignas(4096) page4k {
	uint64_t first;
	unsigned char rest[100];
};

struct alignas(256) counted {
	static int live;
	uint64_t v;
	counted() : v(0) { live++; }
	~counted() { live--; }
};
int counted::live;

template <typename T> static bool aligned_to(const T *p, size_t a)
{
	return ((uintptr_t)p & (a - 1)) == 0;
}

// Whether p is non-NULL and align-aligned; the first few misses are named
// on stderr (addresses go there only: they differ from run to run).
static bool aligned_ok(const void *p, size_t align, const char *what, size_t size)
{
	static int shown;
	if (p && aligned_to(static_cast<const char *>(p), align))
		return true;
	if (shown++ < 5)
		fprintf(stderr, "containers: %s of %zu bytes returned %p, not %zu-byte aligned\n",
			what, size, p, align);
	return false;
}

static void test_aligned(void)
{
	digest d;
	rng r(8);
	uint64_t bad = 0;

	// Over-aligned new: scalar, array, and inside containers (which use
	// the align_val_t overloads of operator new/delete).
	std::vector<line64 *> l;
	std::vector<page4k *> pg;
	for (int i = 0; i < 20000; i++) {
		line64 *p = new line64;
		bad += !aligned_ok(p, 64, "new line64", sizeof(*p));
		memset(p->b, i, sizeof(p->b));
		l.push_back(p);
		if (i % 20 == 0) {
			page4k *q = new page4k;
			bad += !aligned_ok(q, 4096, "new page4k", sizeof(*q));
			q->first = i;
			pg.push_back(q);
		}
	}
	for (size_t i = 0; i < l.size(); i++) {
		d.add(l[i]->b[i % 64]);
		delete l[i];
	}
	for (page4k *q : pg) {
		d.add(q->first);
		delete q;
	}
	page4k *pa = new page4k[37];
	bad += !aligned_ok(pa, 4096, "new page4k[]", 37 * sizeof(*pa));
	delete[] pa;
	std::vector<counted *> cs;
	for (int i = 0; i < 1000; i++) {
		cs.push_back(new counted);
		bad += !aligned_ok(cs.back(), 256, "new counted", sizeof(counted));
	}
	for (counted *c : cs)
		delete c;
	counted *ca = new counted[1001];
	bad += !aligned_ok(ca, 256, "new counted[]", 1001 * sizeof(*ca));
	check(counted::live == 1001, "array new ran every constructor");
	delete[] ca;
	check(counted::live == 0, "array delete ran every destructor");
	std::vector<page4k> vp;
	for (int i = 0; i < 300; i++) {
		vp.push_back(page4k{(uint64_t)i, {}});
		bad += !aligned_ok(vp.data(), 4096, "std::vector<page4k>", vp.capacity());
	}
	d.add(vp.back().first);

	// libc aligned entry points. aligned_alloc wants size to be a multiple
	// of the alignment (C11); posix_memalign and memalign do not. The
	// first two sizes tried are align and 2 * align, the commonest.
	for (size_t align = sizeof(void *); align <= (2u << 20); align *= 2) {
		for (int k = 0; k < 8; k++) {
			size_t n = k < 2 ? (k + 1) * align :
					   1 + r.below(align < 65536 ? 3 * align : 4096);
			size_t an = (n + align - 1) / align * align;
			void *a = aligned_alloc(align, an);
			void *b = nullptr;
			int err = posix_memalign(&b, align, n);
			void *c = memalign(align, n);
			bad += !aligned_ok(a, align, "aligned_alloc", an);
			bad += err != 0 || !aligned_ok(b, align, "posix_memalign", n);
			bad += !aligned_ok(c, align, "memalign", n);
			if (b) {
				memset(b, 0x5a, n);
				// realloc of a posix_memalign block must keep its content
				// (it need not keep the alignment).
				unsigned char *g = static_cast<unsigned char *>(realloc(b, n * 3));
				bad += !g;
				for (size_t i = 0; g && i < n; i += 1 + n / 64)
					bad += g[i] != 0x5a;
				b = g;
			}
			free(a);
			free(b);
			free(c);
		}
	}
	long page = sysconf(_SC_PAGESIZE);
	for (int i = 0; i < 50; i++) {
		size_t n = 1 + r.below(20000);
		void *v = valloc(n);
		bad += !aligned_ok(v, (size_t)page, "valloc", n);
		free(v);
	}
	check(bad == 0, "aligned allocations are aligned");
	// Alignments that are not a power of two times sizeof(void *).
	void *unused = nullptr;
	check(posix_memalign(&unused, 24, 16) == EINVAL, "posix_memalign(align 24) is EINVAL");
	check(posix_memalign(&unused, 4, 16) == EINVAL, "posix_memalign(align 4) is EINVAL");
	d.add(bad);
	report("aligned", d.h);
}

// The libc allocation API beyond malloc/free, including the corner cases
// programs rely on glibc for: the glibc manual ("Replacing malloc") asks a
// replacement to provide all of these, and glibc's own functions (strdup,
// getline, asprintf, ...) allocate through whatever malloc is interposed.
static void test_libc_api(void)
{
	digest d;
	rng r(9);
	int failed_before = failures;
	// volatile: keep gcc from folding (and warning about) the huge sizes.
	volatile size_t huge = SIZE_MAX;

	uint64_t null = 0, misaligned = 0, short_usable = 0, dirty_calloc = 0;
	for (int i = 0; i < 3000; i++) {
		size_t n = varied_size(r);
		if (n > 256 * 1024 && i % 4)
			n = 1 + r.below(100);
		unsigned char *p = static_cast<unsigned char *>(malloc(n));
		if (!p) {
			null++;
			continue;
		}
		// alignof(max_align_t) is 16 on x86-64 and glibc aligns every
		// block to it; a smaller block need only fit the types it can hold.
		misaligned += !aligned_ok(p, n >= 16 ? 16 : n >= 8 ? 8 : 1, "malloc", n);
		short_usable += malloc_usable_size(p) < n;
		// Dirty it, free it, and ask calloc for the same size: the block
		// calloc reuses must come back zeroed.
		memset(p, 0xa5, n);
		free(p);
		unsigned char *z = static_cast<unsigned char *>(calloc(1, n));
		if (!z) {
			null++;
			continue;
		}
		for (size_t k = 0; k < n; k++)
			if (z[k]) {
				dirty_calloc++;
				break;
			}
		free(z);
	}
	check(null == 0, "malloc/calloc of ordinary sizes succeed");
	check(misaligned == 0, "malloc(n) is 16-byte aligned for n >= 16, 8 for n >= 8");
	check(short_usable == 0, "malloc_usable_size(p) >= requested size");
	check(dirty_calloc == 0, "calloc returns zeroed memory after reuse");

	// realloc growing one byte at a time, then geometrically, then
	// shrinking; the content must survive every move.
	unsigned char *g = nullptr;
	size_t len = 0;
	for (; len < 20000; len++) {
		g = static_cast<unsigned char *>(realloc(g, len + 1));
		g[len] = (unsigned char)(len * 7);
	}
	for (; len < (64u << 20); len *= 2) {
		g = static_cast<unsigned char *>(realloc(g, len * 2));
		memset(g + len, (int)(len >> 10), len);
	}
	uint64_t lost = 0;
	for (size_t k = 0; k < 20000; k++)
		lost += g[k] != (unsigned char)(k * 7);
	for (; len > 1000; len /= 3) {
		g = static_cast<unsigned char *>(realloc(g, len / 3));
		d.add(g[len / 3 - 1]);
	}
	for (size_t k = 0; k < len; k++)
		lost += g[k] != (unsigned char)(k * 7);
	check(lost == 0, "realloc keeps the content");
	uint32_t *ra = static_cast<uint32_t *>(reallocarray(nullptr, 1000, sizeof(uint32_t)));
	for (uint32_t k = 0; k < 1000; k++)
		ra[k] = k;
	ra = static_cast<uint32_t *>(reallocarray(ra, 100000, sizeof(uint32_t)));
	check(ra[999] == 999, "reallocarray keeps the content");

	// Failure paths: NULL, and the old block untouched. POSIX also wants
	// errno == ENOMEM; glibc sets it every time, but mimalloc 2.0 and
	// tcmalloc miss it for an overflowing calloc and jemalloc for realloc,
	// so the test does not insist.
	check(escape(malloc(huge)) == nullptr, "malloc(SIZE_MAX) fails");
	check(escape(calloc(huge / 2 + 1, 2)) == nullptr, "calloc with an overflowing n*size fails");
	if (void *moved = realloc(g, huge)) {
		check(false, "realloc(p, SIZE_MAX) fails");
		g = static_cast<unsigned char *>(moved);
	} else {
		check(g[0] == 0, "failed realloc keeps the block");
	}
	if (void *moved = reallocarray(ra, huge / 2, 4)) {
		check(false, "overflowing reallocarray fails");
		ra = static_cast<uint32_t *>(moved);
	} else {
		check(ra[500] == 500, "failed reallocarray keeps the block");
	}
	free(g);
	free(ra);
	// glibc returns a unique, freeable pointer for malloc(0).
	void *z0 = escape(malloc(0)), *z1 = escape(malloc(0));
	check(z0 && z1 && z0 != z1, "malloc(0) returns distinct non-NULL pointers");
	free(z0);
	free(z1);
	free(nullptr);

	// libc functions that return malloc'ed memory for the caller to free.
	for (int i = 0; i < 2000; i++) {
		std::string s(1 + r.below(300), (char)('a' + i % 26));
		char *a = strdup(s.c_str());
		char *b = strndup(s.c_str(), 10);
		char *c = nullptr;
		if (asprintf(&c, "%s-%d-%s", a, i, b) < 0) {
			check(false, "asprintf succeeds");
			c = nullptr;
		} else {
			d.add_bytes(c, strlen(c));
		}
		free(a);
		free(b);
		free(c);
	}
	char *ms = nullptr;
	size_t ms_len = 0;
	FILE *f = open_memstream(&ms, &ms_len);
	for (int i = 0; i < 100000; i++)
		fprintf(f, "line %d %llu\n", i, (unsigned long long)r.below(1000000));
	fclose(f);
	FILE *in = fmemopen(ms, ms_len, "r");
	char *line = nullptr;
	size_t cap = 0;
	ssize_t got;
	uint64_t lines = 0;
	while ((got = getline(&line, &cap, in)) > 0) {
		lines++;
		d.add_bytes(line, (size_t)got);
	}
	fclose(in);
	free(line);
	free(ms);
	char *rp = realpath("/", nullptr);
	check(rp && strcmp(rp, "/") == 0, "realpath(path, NULL) allocates its result");
	free(rp);
	d.add(lines);

	d.add((uint64_t)(failures - failed_before));
	report("libc_api", d.h);
}

struct tracked {
	static long live;
	std::string name;
	tracked() : name(40, 'x') { live++; }
	~tracked() { live--; }
};
long tracked::live;

static void test_array_new(void)
{
	digest d;
	rng r(10);
	uint64_t bad = 0;

	// new[] of a type with a destructor stores the element count before
	// the array (the "cookie"): delete[] must get back the same pointer.
	for (int i = 0; i < 20000; i++) {
		size_t n = r.below(64);
		tracked *t = new tracked[n];
		for (size_t k = 0; k < n; k++)
			t[k].name[k % 40] = (char)('a' + k % 26);
		d.add(n ? t[n - 1].name[(n - 1) % 40] : 0);
		delete[] t;
		double *x = new double[1 + r.below(5000)]();
		d.add((uint64_t)x[0]);
		delete[] x;
	}
	bad += tracked::live != 0;
	int *empty = new int[0];
	bad += !empty;
	delete[] empty;

	// Sized delete and the nothrow/throwing forms of operator new.
	for (int i = 0; i < 10000; i++) {
		size_t n = 1 + r.below(1000);
		void *p = ::operator new(n);
		memset(p, 1, n);
#ifdef __cpp_sized_deallocation
		::operator delete(p, n);
#else
		::operator delete(p);
#endif
		void *q = ::operator new(n, std::nothrow);
		bad += !q;
		::operator delete(q);
	}
	// Only the nothrow form is tried with an impossible size: the
	// throwing form must throw std::bad_alloc, but an allocator that
	// replaces operator new from C (mimalloc) aborts instead.
	volatile size_t huge = SIZE_MAX / 2;
	bad += escape(::operator new(huge, std::nothrow)) != nullptr;
	auto u = std::make_unique<std::string[]>(1000);
	for (int i = 0; i < 1000; i++)
		u[i] = std::to_string(i * i);
	d.add_bytes(u[999].data(), u[999].size());

	check(bad == 0, "operator new/delete forms behave");
	d.add(bad);
	report("array_new", d.h);
}

static uint64_t thrower(int i)
{
	switch (i % 4) {
	case 0:
		throw std::runtime_error(std::string((size_t)(i % 300), 'e') + std::to_string(i));
	case 1:
		throw i;
	case 2:
		throw std::vector<int>((size_t)(i % 50), i);
	default:
		try {
			throw std::out_of_range("inner " + std::to_string(i));
		} catch (...) {
			std::throw_with_nested(std::logic_error("outer"));
		}
	}
	return 0;
}

static void test_exceptions(void)
{
	digest d;
	for (int i = 0; i < 50000; i++) {
		try {
			thrower(i);
		} catch (const std::runtime_error &e) {
			d.add(strlen(e.what()));
		} catch (int v) {
			d.add((uint64_t)v);
		} catch (const std::vector<int> &v) {
			d.add(v.size());
		} catch (const std::logic_error &e) {
			try {
				std::rethrow_if_nested(e);
			} catch (const std::out_of_range &inner) {
				d.add(strlen(inner.what()));
			}
		}
	}

	// Exceptions and results crossing threads: the future's shared state
	// and the exception object are allocated in the worker and freed here.
	std::vector<std::future<uint64_t>> fs;
	for (int i = 0; i < 200; i++)
		fs.push_back(std::async(std::launch::async, [i] {
			if (i % 3 == 0)
				thrower(i);
			std::vector<uint64_t> v((size_t)i * 100, (uint64_t)i);
			return v.size() ? v.back() * v.size() : 0;
		}));
	for (auto &f : fs) {
		try {
			d.add(f.get());
		} catch (const std::exception &e) {
			d.add(strlen(e.what()));
		} catch (int v) {
			d.add((uint64_t)v + 1);
		} catch (...) {
			d.add(7);
		}
	}
	report("exceptions", d.h);
}

// fork() while other threads are inside the allocator: an allocator that
// does not take its locks around fork (pthread_atfork) leaves them held in
// the child, and the child's first malloc deadlocks. multiprocessing, popen
// from threaded programs and many servers do exactly this.
static void test_fork(void)
{
	std::atomic<bool> stop{false};
	std::vector<std::thread> busy;
	for (int k = 0; k < 2; k++)
		busy.emplace_back([&stop, k] {
			rng r(2000 + k);
			std::vector<void *> held(64, nullptr);
			while (!stop.load(std::memory_order_relaxed)) {
				size_t slot = r.below(held.size());
				free(held[slot]);
				size_t n = varied_size(r);
				held[slot] = malloc(n > 65536 ? 65536 : n);
			}
			for (void *p : held)
				free(p);
		});

	digest d;
	uint64_t ok = 0, hung = 0, bad = 0;
	const int children = 8;
	for (int i = 0; i < children; i++) {
		// Let the workers get going so the fork lands mid-allocation.
		struct timespec ts = {0, 2000000};
		nanosleep(&ts, nullptr);
		int fds[2];
		if (pipe(fds) != 0) {
			bad++;
			continue;
		}
		pid_t pid = fork();
		if (pid < 0) {
			bad++;
			close(fds[0]);
			close(fds[1]);
			continue;
		}
		if (pid == 0) {
			// Child: only the malloc family and async-signal-safe calls.
			rng r(3000 + i);
			uint64_t sum = 0;
			void *keep[256] = {};
			for (int k = 0; k < 1000; k++) {
				size_t slot = r.below(256);
				free(keep[slot]);
				size_t n = varied_size(r);
				if (n > 65536)
					n = 65536 + k;
				unsigned char *p = static_cast<unsigned char *>(
					k % 3 ? malloc(n) : calloc(n, 1));
				if (!p)
					_exit(3);
				p[n - 1] = (unsigned char)k;
				sum += n + p[n - 1];
				keep[slot] = p;
			}
			for (void *p : keep)
				free(p);
			ssize_t w = write(fds[1], &sum, sizeof(sum));
			_exit(w == (ssize_t)sizeof(sum) ? 0 : 4);
		}
		close(fds[1]);
		// Wait for the answer at most 5 s (a child needs milliseconds): a
		// deadlocked child is killed and reported rather than hanging the
		// whole test. The pipe becomes readable when the child writes or
		// exits.
		uint64_t sum = 0;
		ssize_t got = -1;
		struct pollfd pfd = {fds[0], POLLIN, 0};
		if (poll(&pfd, 1, 5000) == 1)
			got = read(fds[0], &sum, sizeof(sum));
		else
			kill(pid, SIGKILL);
		int st = 0;
		waitpid(pid, &st, 0);
		if (WIFSIGNALED(st) && WTERMSIG(st) == SIGKILL) {
			hung++;
		} else if (got == (ssize_t)sizeof(sum) && WIFEXITED(st) && WEXITSTATUS(st) == 0) {
			ok++;
			d.add(sum);
		} else {
			bad++;
		}
		close(fds[0]);
		if (hung)
			break; // one deadlock proves the point; more only cost time
	}
	stop = true;
	for (auto &t : busy)
		t.join();

	check(hung == 0, "no fork child deadlocked in the allocator");
	check(bad == 0, "every fork child allocated and reported");
	d.add(ok);
	d.add(hung);
	d.add(bad);
	report("fork", d.h);
}

int main(void)
{
	test_vectors();
	test_strings();
	test_maps();
	test_lists();
	test_shared_ptr();
	test_cross_thread();
	test_aligned();
	test_libc_api();
	test_array_new();
	test_exceptions();
	test_fork();
	return failures ? 1 : 0;
}
