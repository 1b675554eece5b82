// Device-only translation unit for run_kernel_checks.sh's SASS inspection: the kernel library
// with one __global__ entry per op (`nvcc -arch=sm_121a -cubin sass_entries.cu`).
#include "test/gpu/kernel_wrappers.cuh"
