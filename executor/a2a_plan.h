// Pure host-side planning of the MoE dispatch all-to-all, shared by the NCCL communicator
// (executor/comm_nccl.h) and tested on the CPU: which token rows go to which rank, the byte layout
// of a ragged exchange, and the receiver's map from received rows to expert-major rows.
//
// Experts are split evenly and contiguously over `ranks`: rank r owns experts
// [r * local, (r + 1) * local), local = experts / ranks.
//
// Plain dispatch: one row per (token, slot); rows to a rank ordered by (local expert, token, slot);
// the count exchange carries, per peer, `local` counts (rows per local expert).
// De-duplicating dispatch: one row per (token, destination rank) however many of the token's k
// experts live there, in token order, plus a meta row of k int32 (the local experts of that copy,
// ascending, -1 padded); the count exchange carries one count per peer (rows). The receiver expands
// each received row into one row per local expert it names.
// Both end in the same expert-major layout on the receiver: local expert x, then peer, then the
// sender's token order, so plain and de-duplicated dispatch produce identical expanded rows.
#pragma once

#include <cstdint>
#include <vector>

namespace moeperf::exec {

struct DispatchPlan {
  int ranks = 1;
  int64_t local_experts = 0;
  int top_k = 1;
  bool dedup = false;
  // Per destination rank: `width` counts (plain: rows per local expert; dedup: one, the rows).
  int64_t width = 1;
  std::vector<int64_t> send_counts;  // [ranks x width]
  std::vector<int64_t> send_rows;    // [ranks] rows to each rank (sum of its counts)
  std::vector<int64_t> send_token;   // [sum send_rows] source token of each send row, rank-major
  std::vector<int32_t> send_meta;    // dedup: [sum send_rows x top_k] local experts of the copy, -1 padded
};

// idx [tokens x top_k] global expert ids in [0, experts); experts % ranks == 0.
// Throws std::invalid_argument on bad ids or shapes.
DispatchPlan plan_dispatch(const int32_t* idx, int64_t tokens, int top_k, int64_t experts, int ranks, bool dedup);

// Ragged exchange layout in bytes: rows per peer times row_bytes, exclusive prefix offsets
// (size ranks + 1). Pairs with zero bytes are skipped by both sides: this rank's send_bytes[p]
// equals peer p's recv_bytes[this rank] because the receive side is built from the exchanged counts.
struct A2aLayout {
  std::vector<int64_t> send_bytes, recv_bytes, send_off, recv_off;
};
A2aLayout a2a_layout(const std::vector<int64_t>& send_rows, const std::vector<int64_t>& recv_rows, int64_t row_bytes);

// Rows per peer from exchanged counts [ranks x width] (sum over the width).
std::vector<int64_t> rows_per_peer(const std::vector<int64_t>& counts, int ranks, int64_t width);

// Receiver side: src_row[i] = the received (peer-major) row that becomes expert-major row i;
// expert_offsets [local + 1].
struct ExpandMap {
  std::vector<int64_t> src_row;
  std::vector<int64_t> expert_offsets;
};
// Plain dispatch: recv_counts [ranks x local] rows per (peer, local expert), rows arrive peer-major
// and within a peer expert-major.
ExpandMap expand_plain(const std::vector<int64_t>& recv_counts, int ranks, int64_t local_experts);
// De-duplicated dispatch: meta [recv_rows x top_k] as sent (local ids, -1 padded), rows peer-major.
ExpandMap expand_dedup(const std::vector<int32_t>& meta, int64_t recv_rows, int top_k, int64_t local_experts);

}  // namespace moeperf::exec
