// executor/host_memory.h: a freed large block stays with the process, so touching a block of the
// same size again costs no page faults (MPI's per-call collective buffers are such blocks).
#include <gtest/gtest.h>
#include <sys/resource.h>

#include <cstdlib>

#include "executor/host_memory.h"

namespace {

long minor_faults() {
  rusage u{};
  getrusage(RUSAGE_SELF, &u);
  return u.ru_minflt;
}

// malloc, write every page, free: what an MPI reduce-scatter does with its temporary buffer.
void touch_and_free(size_t bytes) {
  auto* p = static_cast<volatile char*>(std::malloc(bytes));
  ASSERT_NE(p, nullptr);
  for (size_t i = 0; i < bytes; i += 4096) p[i] = 1;
  std::free(const_cast<char*>(p));
}

TEST(HostMemory, AFreedLargeBlockIsNotFaultedInAgain) {
  if (!moeperf::exec::keep_freed_host_memory())
    GTEST_SKIP() << "not glibc's allocator (a sanitizer's serves malloc here): mallopt does not apply";
  constexpr size_t kBytes = size_t{64} << 20;  // above glibc's largest mmap threshold (32 MiB)
  constexpr long kPages = static_cast<long>(kBytes / 4096);
  touch_and_free(kBytes);  // the first time its pages come in
  const long before = minor_faults();
  for (int i = 0; i < 4; ++i) touch_and_free(kBytes);
  const long faults = minor_faults() - before;
  // Handed back on free, each of the four would fault every page in again (4 x 16,384 with 4 KiB
  // pages); kept, none needs to.
  EXPECT_LT(faults, kPages / 10) << faults << " page faults in 4 passes over a 64 MiB block freed and allocated again";
}

}  // namespace

#include <cstdint>
#include <cstring>
#include <set>

#include "executor/backend.h"

namespace {

// The plain copy the suite's memory reference times: every byte arrives, nothing past the end.
TEST(CpuBackend, CopyMovesEveryByteAndNoMore) {
  auto be = moeperf::exec::make_backend("cpu");
  const size_t n = (size_t{1} << 20) + 3;
  auto* a = static_cast<unsigned char*>(be->alloc(n));
  auto* b = static_cast<unsigned char*>(be->alloc(n + 1));
  for (size_t i = 0; i < n; ++i) a[i] = static_cast<unsigned char>(i * 7 + 1);
  b[n] = 0xAB;
  be->copy(b, a, n);
  be->synchronize();
  EXPECT_EQ(std::memcmp(a, b, n), 0);
  EXPECT_EQ(b[n], 0xAB);
  be->copy(b, a, 0);  // nothing to copy: nothing changes
  EXPECT_EQ(std::memcmp(a, b, n), 0);
  be->release(a);
  be->release(b);
}

// The CPU backend's buffers: 64-byte aligned, large ones at distinct offsets within their pages (so
// a streaming copy between two never stalls on 4K aliasing), small ones usable too; all released.
TEST(CpuBackend, LargeBuffersStartAtStaggeredPageOffsets) {
  auto be = moeperf::exec::make_backend("cpu");
  std::set<uintptr_t> offsets;
  std::vector<void*> bufs;
  for (int i = 0; i < 4; ++i) {
    void* p = be->alloc(size_t{1} << 20);
    bufs.push_back(p);
    const auto at = reinterpret_cast<uintptr_t>(p);
    EXPECT_EQ(at % 64, 0u);
    offsets.insert(at % 4096);
    std::memset(p, i, size_t{1} << 20);  // the whole size is usable
  }
  EXPECT_EQ(offsets.size(), 4u) << "two large buffers at the same page offset";
  for (uintptr_t a : offsets)
    for (uintptr_t b : offsets) {
      if (a != b) {
        EXPECT_GE(a > b ? a - b : b - a, 512u);
      }
    }
  void* small = be->alloc(8);
  EXPECT_EQ(reinterpret_cast<uintptr_t>(small) % 64, 0u);
  std::memset(small, 0, 8);
  be->release(small);
  for (void* p : bufs) be->release(p);
  be->release(nullptr);  // as operator delete: nothing to do
}

}  // namespace
