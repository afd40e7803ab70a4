// Host memory the executor frees stays with the process, as a GPU framework's caching allocator
// keeps device memory: MPI's collectives allocate their temporary buffers per call, and glibc hands
// a block of 32 MiB or more back to the kernel on free (mmap / munmap), so every call of a large
// reduce-scatter or all-reduce faults its buffers in again, page by page. Measured on this project's
// 2-core VM (Open MPI 4.1, 2 ranks, 64 MiB): MPI_Reduce_scatter_block 410 ms -> 31 ms,
// MPI_Allreduce 237 ms -> 28 ms once freed memory is kept; the cost model prices a device whose
// collective buffers are resident (NCCL's are registered once), so the executor runs as one.
//
//   exec::keep_freed_host_memory();   // first thing in main, before MPI_Init
#pragma once

namespace moeperf::exec {

// Large blocks from the heap (no mmap) and no trimming of its top on free. False where the
// allocator is not glibc's (a sanitizer's, another libc): nothing is changed then.
bool keep_freed_host_memory();

}  // namespace moeperf::exec
