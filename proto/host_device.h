// PETDAQ_HD: a function both backends compile, for the host and, under nvcc, for the device
// (STYLE.md, "Same code on CPU and GPU"). Here in proto/, the lowest layer, because the byte
// order helpers (proto/bytes.h) are such functions too.
#pragma once

#if defined(__CUDACC__)
#define PETDAQ_HD __host__ __device__ __forceinline__
#else
#define PETDAQ_HD inline
#endif
