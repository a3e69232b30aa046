// Runtime choice of the distance kernels: made once, on first use, from what the CPU
// (and the OS, for AVX-512 state) supports. Never reassigned afterwards.
#pragma once

#include "kira/distance.hpp"

namespace kira {

// The kernel table for this machine. The first call picks it (thread-safe static
// initialisation); the environment variable KIRA_SIMD=scalar|avx2|avx512 may lower the
// choice for testing, never raise it above what the CPU supports.
const Kernels& kernels();

// Name of the chosen kernel set: "avx512", "avx2" or "scalar".
const char* simd_level();

}  // namespace kira
