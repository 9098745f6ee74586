// SPDX-License-Identifier: (LGPL-2.1 OR BSD-2-Clause)
/* A library the inject workload dlopens after the injection: its calls to
 * malloc and free go through its own GOT, which the interposer must patch
 * as dlopen loads it (tests/inject/run.sh). */
#include <stdlib.h>

void *inject_lib_alloc(size_t n);
void inject_lib_free(void *p);

void *inject_lib_alloc(size_t n)
{
	return malloc(n);
}

void inject_lib_free(void *p)
{
	free(p);
}
