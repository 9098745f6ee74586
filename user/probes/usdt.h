/* SPDX-License-Identifier: (LGPL-2.1 OR BSD-2-Clause) */
/*
 * USDT probe sites read from a file's .note.stapsdt, for uprobe_multi links
 * (uprobe_multi.h): where each site and its semaphore are in the file, and
 * its arguments as libbpf's BPF side reads them (bpf_usdt_arg() in
 * <bpf/usdt.bpf.h>, which finds its site's spec by the attach cookie).
 * libbpf's own USDT attach makes a perf-event uprobe per site, which
 * costs ~70 ms each to let go; this is the part of it a multi link needs.
 */
#ifndef TALLY_USDT_H
#define TALLY_USDT_H

#include <stdbool.h>
#include <stdint.h>

/* libbpf's struct __bpf_usdt_arg_spec and __bpf_usdt_spec, field for
 * field: the value of the __bpf_usdt_specs map. */
#define USDT_MAX_ARGS 12
enum usdt_arg_type { USDT_ARG_CONST, USDT_ARG_REG, USDT_ARG_REG_DEREF };
struct usdt_arg {
	uint64_t val_off; /* the constant, or the offset from the register */
	int32_t type;	  /* enum usdt_arg_type */
	int16_t reg_off;  /* the register's offset in struct pt_regs */
	bool is_signed;	  /* sign-extended from its size */
	int8_t bitshift;  /* 64 - its size in bits */
};
struct usdt_spec {
	struct usdt_arg args[USDT_MAX_ARGS];
	uint64_t cookie; /* bpf_usdt_cookie(): unused by tally, 0 */
	int16_t nargs;
};
_Static_assert(sizeof(struct usdt_spec) == 208, "libbpf's struct __bpf_usdt_spec");

struct usdt_site {
	uint64_t off;	   /* the site's file offset, as uprobes take it */
	uint64_t sema_off; /* its semaphore's file offset, or 0: none */
	struct usdt_spec spec;
};

/* Whether this build reads the arguments of this machine's probes (x86-64). */
bool usdt_supported(void);
/* The sites of provider:name in the ELF file at path, up to max into out:
 * how many (0: none), or a negative errno (-EINVAL: an argument not
 * understood). */
int usdt_sites(const char *path, const char *provider, const char *name, struct usdt_site *out,
	       unsigned max);

#endif /* TALLY_USDT_H */
