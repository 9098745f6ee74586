/* SPDX-License-Identifier: (LGPL-2.1 OR BSD-2-Clause) */
/* The OS layer (os.c): every mapping, discard and clock read of the allocator. */
#ifndef TALLY_ALLOC_OS_H
#define TALLY_ALLOC_OS_H

#include <stddef.h>
#include <stdint.h>
#include <sys/uio.h>

void *os_map(size_t len);
void *os_map_flags(size_t len, int flags);
void *os_map_aligned(size_t len, size_t align);
void *os_reserve(size_t len, size_t align);
int os_commit(void *p, size_t len);
int os_unmap(void *p, size_t len);
int os_move(void *dst, void *src, size_t len);
void os_discard_many(const struct iovec *iov, unsigned n);
void os_touch(void *p, size_t len);
uint64_t os_now_ms(void);
uint64_t os_resident(const void *p, size_t len);
uint32_t os_gettid(void);
void tally_fatal(const char *what, const void *ptr) __attribute__((noreturn));

#endif /* TALLY_ALLOC_OS_H */
