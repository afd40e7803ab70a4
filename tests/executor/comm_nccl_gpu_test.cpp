// GPU + MPI tests (label "gpu") of executor/comm_nccl.h. Run as one process (an EP group of one
// rank: exchanges are local copies, and again forced through NCCL sending to itself) or under
// mpirun with one GPU per rank:
//
//   build/tests/test_comm_nccl_gpu
//   mpirun -np 4 --allow-run-as-root build/tests/test_comm_nccl_gpu
//
// Oracles (docs/executor.md): the payload is the source rank, so every received byte must equal
// the rank it came from; zero-byte pairs are skipped symmetrically and nothing hangs; plain and
// de-duplicated dispatch deliver bit-identical expert-major rows, each of them a token that chose
// that expert; a mismatched exchange (a receive nobody sends) ends in NcclError naming the op and
// the rank within the timeout, the communicator aborted. Without a device every test skips with
// the runtime's reason (and MPI is never started).
#include "../gpu_skip.h"
#include "executor/comm_nccl.h"

#include "kernels/cuda_check.h"
#include "kernels/device.h"
#include "kernels/device_buffer.h"

#include <gtest/gtest.h>
#include <mpi.h>

#include <algorithm>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <numeric>
#include <random>
#include <string>
#include <vector>

namespace moeperf::exec {
namespace {

template <class T>
using Buf = kernels::DeviceBuffer<T>;

// Both modes on one rank (local copy, NCCL to self); NCCL only with more ranks.
std::vector<bool> modes(const NcclComm& c) { return c.size() == 1 ? std::vector<bool>{false, true} : std::vector<bool>{true}; }

TEST(NcclCommGpu, CountExchange) {
  SKIP_WITHOUT_GPU();
  NcclComm c(60);
  for (bool force : modes(c)) {
    c.set_force_nccl(force);
    const int64_t width = 3;
    const auto n = static_cast<size_t>(c.size());
    std::vector<int64_t> send(n * width);
    for (size_t p = 0; p < n; ++p)
      for (int64_t j = 0; j < width; ++j) send[p * width + static_cast<size_t>(j)] = c.rank() * 1000 + static_cast<int64_t>(p) * 10 + j + (int64_t{1} << 40);
    A2aTiming t;
    const auto got = c.exchange_counts(send, width, nullptr, &t);
    for (size_t p = 0; p < n; ++p)
      for (int64_t j = 0; j < width; ++j)
        EXPECT_EQ(got[p * width + static_cast<size_t>(j)], static_cast<int64_t>(p) * 1000 + c.rank() * 10 + j + (int64_t{1} << 40));
    EXPECT_EQ(t.local_copy, c.size() == 1 && !force);
  }
}

// Rank a sends f(a, b) bytes to rank b; some pairs are zero.
int64_t pair_bytes(int a, int b) { return ((a + 2 * b + 1) % 3) * 4096; }

TEST(NcclCommGpu, RaggedAlltoallPayloadIsSourceRank) {
  SKIP_WITHOUT_GPU();
  NcclComm c(60);
  for (bool force : modes(c)) {
    c.set_force_nccl(force);
    std::vector<int64_t> sb, rb;
    for (int p = 0; p < c.size(); ++p) sb.push_back(pair_bytes(c.rank(), p)), rb.push_back(pair_bytes(p, c.rank()));
    const int64_t st = std::accumulate(sb.begin(), sb.end(), int64_t{0}), rt = std::accumulate(rb.begin(), rb.end(), int64_t{0});
    Buf<uint8_t> send(std::vector<uint8_t>(static_cast<size_t>(st), static_cast<uint8_t>(c.rank()))),
        recv(std::vector<uint8_t>(static_cast<size_t>(rt), 0xEE));
    const A2aTiming t = c.alltoallv(send.get(), sb, recv.get(), rb, nullptr, "test.alltoallv");
    const auto got = recv.download();
    size_t at = 0;
    for (int p = 0; p < c.size(); ++p)
      for (int64_t i = 0; i < rb[static_cast<size_t>(p)]; ++i, ++at) ASSERT_EQ(got[at], p) << "byte " << i << " from rank " << p;
    std::printf("[rank %d] ragged all-to-all, %s: %lld bytes sent, measured %.1f us, NCCL's estimate %s\n", c.rank(),
                t.local_copy ? "EP group of 1: local device copy" : "NCCL", static_cast<long long>(t.bytes_sent), t.measured_s * 1e6,
                t.nccl_estimate_s >= 0 ? (std::to_string(t.nccl_estimate_s * 1e6) + " us").c_str() : "none given");
    // All pairs empty: nothing posted, nothing hangs.
    const std::vector<int64_t> zeros(static_cast<size_t>(c.size()), 0);
    c.alltoallv(send.get(), zeros, recv.get(), zeros, nullptr, "test.empty");
  }
}

// Rank r's routing: deterministic from r, so every rank can rebuild any rank's choices.
std::vector<int32_t> routing(int rank, int64_t tokens, int k, int64_t experts) {
  std::mt19937_64 rng(1000 + static_cast<uint64_t>(rank));
  std::vector<int32_t> idx;
  std::vector<int32_t> all(static_cast<size_t>(experts));
  for (int64_t t = 0; t < tokens; ++t) {
    std::iota(all.begin(), all.end(), 0);
    std::shuffle(all.begin(), all.end(), rng);
    idx.insert(idx.end(), all.begin(), all.begin() + k);
  }
  return idx;
}

TEST(NcclCommGpu, DispatchPlainAndDedupAgree) {
  SKIP_WITHOUT_GPU();
  NcclComm c(60);
  const int64_t T = 256, H = 64, E = 8 * c.size();
  const int k = 6;
  const auto idx = routing(c.rank(), T, k, E);
  std::vector<float> x(static_cast<size_t>(T * H));
  for (int64_t t = 0; t < T; ++t)
    for (int64_t h = 0; h < H; ++h) x[static_cast<size_t>(t * H + h)] = static_cast<float>(c.rank() * 100000 + t);  // payload: (rank, token)
  Buf<float> dx(x);
  const int64_t cap = T * k * c.size();
  for (bool force : modes(c)) {
    c.set_force_nccl(force);
    Buf<float> out_plain(static_cast<size_t>(cap * H)), out_dedup(static_cast<size_t>(cap * H));
    const DispatchResult p = c.dispatch(dx.get(), T, H, idx, k, E, false, out_plain.get(), cap, nullptr);
    const DispatchResult d = c.dispatch(dx.get(), T, H, idx, k, E, true, out_dedup.get(), cap, nullptr);
    ASSERT_EQ(p.expanded_rows, d.expanded_rows);
    EXPECT_EQ(p.expert_offsets, d.expert_offsets);
    EXPECT_LE(d.sent_rows, p.sent_rows);
    EXPECT_EQ(p.sent_rows, T * k);
    const auto a = out_plain.download(static_cast<size_t>(p.expanded_rows * H));
    EXPECT_EQ(a, out_dedup.download(static_cast<size_t>(d.expanded_rows * H)));
    // Every expanded row is a token, from some rank, that chose this rank's expert.
    const int64_t L = E / c.size();
    for (int64_t x_local = 0; x_local < L; ++x_local)
      for (int64_t i = p.expert_offsets[static_cast<size_t>(x_local)]; i < p.expert_offsets[static_cast<size_t>(x_local) + 1]; ++i) {
        const auto v = static_cast<int64_t>(a[static_cast<size_t>(i * H)]);
        const int src = static_cast<int>(v / 100000);
        const int64_t t = v % 100000;
        const auto src_idx = routing(src, T, k, E);
        const int64_t expert = c.rank() * L + x_local;
        ASSERT_TRUE(std::find(src_idx.begin() + t * k, src_idx.begin() + (t + 1) * k, expert) != src_idx.begin() + (t + 1) * k)
            << "row " << i << " (rank " << src << " token " << t << ") did not choose expert " << expert;
        for (int64_t h = 1; h < H; ++h) ASSERT_EQ(a[static_cast<size_t>(i * H + h)], a[static_cast<size_t>(i * H)]);
      }
    // Dropless: every slot of every rank arrives somewhere.
    int64_t total = p.expanded_rows, all = 0;
    MPI_Allreduce(&total, &all, 1, MPI_INT64_T, MPI_SUM, MPI_COMM_WORLD);
    EXPECT_EQ(all, T * k * c.size());
    const auto us = [](const A2aTiming& t) { return t.measured_s * 1e6; };
    const auto est = [](const A2aTiming& t) { return t.nccl_estimate_s >= 0 ? std::to_string(t.nccl_estimate_s * 1e6) + " us" : std::string("none"); };
    std::printf("[rank %d] dispatch %s: plain %lld rows sent, %.1f us (NCCL estimate %s); dedup %lld rows sent, %.1f us (NCCL estimate %s)\n",
                c.rank(), p.note.empty() ? "over NCCL" : p.note.c_str(), static_cast<long long>(p.sent_rows), us(p.payload),
                est(p.payload).c_str(), static_cast<long long>(d.sent_rows), us(d.payload), est(d.payload).c_str());
  }
}

TEST(NcclCommGpu, MismatchedExchangeTimesOutAndAborts) {
  SKIP_WITHOUT_GPU();
  NcclComm c(3);
  c.set_force_nccl(true);
  // Every rank waits for 1 KiB from itself that it never sends: NCCL can only hang.
  std::vector<int64_t> sb(static_cast<size_t>(c.size()), 0), rb(static_cast<size_t>(c.size()), 0);
  rb[static_cast<size_t>(c.rank())] = 1024;
  Buf<uint8_t> send(16), recv(1024);
  const auto t0 = std::chrono::steady_clock::now();
  try {
    c.alltoallv(send.get(), sb, recv.get(), rb, nullptr, "test.mismatched");
    FAIL() << "a receive nobody sends completed";
  } catch (const NcclError& e) {
    const std::string m = e.what();
    EXPECT_NE(m.find("test.mismatched"), std::string::npos) << m;
    EXPECT_NE(m.find("rank " + std::to_string(c.rank())), std::string::npos) << m;
  }
  EXPECT_LT(std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count(), 30.0);
  EXPECT_THROW(c.alltoallv(send.get(), sb, recv.get(), sb, nullptr, "test.after_abort"), NcclError);
}

}  // namespace
}  // namespace moeperf::exec

// MPI is started lazily by the first NcclComm (never without a device); finalized here.
int main(int argc, char** argv) {
  // CI and the GPU machines run as root; Open MPI's singleton start must not refuse it.
  setenv("OMPI_ALLOW_RUN_AS_ROOT", "1", 0);
  setenv("OMPI_ALLOW_RUN_AS_ROOT_CONFIRM", "1", 0);
  ::testing::InitGoogleTest(&argc, argv);
  const int rc = RUN_ALL_TESTS();
  int inited = 0, finalized = 0;
  MPI_Initialized(&inited);
  MPI_Finalized(&finalized);
  if (inited && !finalized) MPI_Finalize();
  return rc;
}
