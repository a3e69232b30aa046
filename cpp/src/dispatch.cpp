// Picks the kernel table once, on first use, and never changes it afterwards.
#include "kira/dispatch.hpp"

#include <cstdlib>
#include <cstring>

namespace kira {
namespace {

bool cpu_has_avx2() {
#if defined(KIRA_X86)
  // __builtin_cpu_supports also checks that the OS saves the wide registers (XCR0).
  return __builtin_cpu_supports("avx2") && __builtin_cpu_supports("fma") &&
         __builtin_cpu_supports("f16c");
#else
  return false;
#endif
}

bool cpu_has_avx512() {
#if defined(KIRA_X86)
  return cpu_has_avx2() && __builtin_cpu_supports("avx512f") && __builtin_cpu_supports("avx512bw") &&
         __builtin_cpu_supports("avx512dq") && __builtin_cpu_supports("avx512vl");
#else
  return false;
#endif
}

bool cpu_has_avx512_vnni() {
#if defined(KIRA_X86)
  return cpu_has_avx512() && __builtin_cpu_supports("avx512vnni");
#else
  return false;
#endif
}

const Kernels& choose() {
  // KIRA_SIMD lowers the ceiling (for tests and benchmarks of the slower paths).
  int ceiling = 2;
  if (const char* env = std::getenv("KIRA_SIMD")) {
    if (std::strcmp(env, "scalar") == 0) ceiling = 0;
    else if (std::strcmp(env, "avx2") == 0) ceiling = 1;
  }
  if (ceiling >= 2 && cpu_has_avx512_vnni() && detail::avx512_vnni_kernels()) return *detail::avx512_vnni_kernels();
  if (ceiling >= 2 && cpu_has_avx512() && detail::avx512_kernels()) return *detail::avx512_kernels();
  if (ceiling >= 1 && cpu_has_avx2() && detail::avx2_kernels()) return *detail::avx2_kernels();
  return detail::scalar_kernels();
}

}  // namespace

const Kernels& kernels() {
  static const Kernels& chosen = choose();
  return chosen;
}

const char* simd_level() { return kernels().level; }

}  // namespace kira
