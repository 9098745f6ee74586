/* SPDX-License-Identifier: (LGPL-2.1 OR BSD-2-Clause) */
/*
 * The attach cookie of bpf/cuda.bpf.c's programs: what a driver entry point
 * does (its kind, low bits) and, for launches, which one it is (enum
 * tally_gpu_api, above CUDA_API_SHIFT). Shared with the loader, user/probes/cuda.c.
 */
#ifndef TALLY_CUDA_API_H
#define TALLY_CUDA_API_H

#define CUDA_KIND_MASK 0xffULL
#define CUDA_API_SHIFT 8

enum cuda_kind {
	CUDA_KIND_LAUNCH = 1,	     /* a kernel launch: the CUresult decides */
	CUDA_KIND_GRAPH = 2,	     /* a graph launch */
	CUDA_KIND_DEV_ALLOC = 3,     /* (CUdeviceptr *out, size_t size, ...) */
	CUDA_KIND_DEV_PITCH = 4,     /* (CUdeviceptr *out, size_t *pitch, width, height, ...) */
	CUDA_KIND_DEV_FREE = 5,	     /* (CUdeviceptr p, ...) */
	CUDA_KIND_HOST_ALLOC = 6,    /* (void **out, size_t size, ...) */
	CUDA_KIND_HOST_REGISTER = 7, /* (void *p, size_t size, ...) */
	CUDA_KIND_HOST_FREE = 8,     /* (void *p) */
	CUDA_KIND_IMAGE = 9,	     /* (CUmodule *out, const void *image, ...) */
	CUDA_KIND_IMAGE_FREE = 10,   /* (CUmodule m) */
};

#endif /* TALLY_CUDA_API_H */
