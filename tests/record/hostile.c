// SPDX-License-Identifier: (LGPL-2.1 OR BSD-2-Clause)
/*
 * A target whose names are hostile (docs/STYLE.md rule 10): a thread named with a
 * terminal escape sequence, a double quote and a backslash (15 bytes at most,
 * the kernel's limit), and a resource group named likewise, entered and left
 * by that thread. tests/record/run.sh checks that the trace reads them back
 * byte for byte. Built by run.sh: cc hostile.c -l:libtally.so.
 */
#include <pthread.h>
#include <string.h>
#include <time.h>

#include "../../alloc/include/tally.h"

/* ESC [ 3 1 m " q \ b: 9 bytes */
#define HOSTILE "\x1b[31m\"q\\b"

static void nap_ms(long ms)
{
	struct timespec ts = { ms / 1000, (ms % 1000) * 1000000 };

	nanosleep(&ts, NULL);
}

static void *named(void *arg)
{
	(void)arg;
	pthread_setname_np(pthread_self(), HOSTILE);
	nap_ms(50);
	struct tally_group_guard g = tally_group_enter(tally_group_register(HOSTILE "\n}"));
	nap_ms(100);
	tally_group_exit(g);
	nap_ms(50);
	return NULL;
}

int main(void)
{
	pthread_t t;

	if (pthread_create(&t, NULL, named, NULL))
		return 1;
	pthread_join(t, NULL);
	nap_ms(150);
	return 0;
}
