// SPDX-License-Identifier: (LGPL-2.1 OR BSD-2-Clause)
/*
 * A C++ program whose code tests/test_symbols.c looks up, for demangled
 * names: a function in a namespace, and a return address in it (as
 * tests/symbols/fixture.c prints them), then waits for its stdin to close.
 */
#include <cstdio>
#include <unistd.h>

static volatile int sink;

__attribute__((noinline)) static void report(const char *fn, int line)
{
	std::printf("ret %s %p %d\n", fn, __builtin_return_address(0), line);
	sink++;
}

namespace ns
{
__attribute__((noinline)) int fn(int x)
{
	report("ns::fn(int)", __LINE__);
	sink += x;
	return x + sink;
}
} // namespace ns

int main()
{
	char buf[64];

	std::printf("fn ns::fn(int) %p\n", (void *)ns::fn);
	ns::fn(3);
	std::printf("ready\n");
	std::fflush(stdout);
	while (read(0, buf, sizeof(buf)) > 0)
		;
	return 0;
}
