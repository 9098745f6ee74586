// SPDX-License-Identifier: (LGPL-2.1 OR BSD-2-Clause)
// The image fixtures of test_cupti.c: built with nvcc as PTX, a cubin and a
// fatbin by cupti/build.sh, and sized by cupti/image_size.c.
extern "C" __global__ void tally_fixture_add(float *x, float v)
{
	x[threadIdx.x] += v;
}

template <typename T> __global__ void tally_fixture_scale(T *x, T v)
{
	x[threadIdx.x] *= v;
}
template __global__ void tally_fixture_scale<float>(float *, float);
template __global__ void tally_fixture_scale<double>(double *, double);
