#include "executor/host_memory.h"

#include <climits>

#if defined(__GLIBC__)
#include <malloc.h>
#endif

// Under a sanitizer its own allocator serves malloc and mallopt changes nothing.
#if defined(__SANITIZE_ADDRESS__) || defined(__SANITIZE_THREAD__)
#define MOEPERF_SANITIZED_ALLOCATOR 1
#elif defined(__has_feature)
#if __has_feature(address_sanitizer) || __has_feature(thread_sanitizer) || __has_feature(memory_sanitizer)
#define MOEPERF_SANITIZED_ALLOCATOR 1
#endif
#endif

namespace moeperf::exec {

bool keep_freed_host_memory() {
#if defined(__GLIBC__) && !defined(MOEPERF_SANITIZED_ALLOCATOR)
  // M_MMAP_MAX 0: every block from the heap, which free never unmaps; M_TRIM_THRESHOLD: the heap's
  // free top is kept up to 2 GiB (its most) instead of 128 KiB.
  return mallopt(M_MMAP_MAX, 0) == 1 && mallopt(M_TRIM_THRESHOLD, INT_MAX) == 1;
#else
  return false;
#endif
}

}  // namespace moeperf::exec
