// The largest values moeperf accepts in its input files, each far above any model or cluster built
// or announced (DeepSeek-V3: 61 layers, hidden 7,168, 256 experts, vocabulary 129,280; the largest
// training clusters announced hold a few hundred thousand GPUs), and low enough that the step stays
// cheap to build and simulate and no product of them leaves the range doubles hold exactly
// (2^53). A value above one is an input error that names the limit, never a silent overflow, a
// truncation or a prediction that runs for hours. Raise one here when a real model needs it.
#pragma once

#include <cstdint>

namespace moeperf::limits {

inline constexpr int64_t kLayers = 4096;          // transformer layers (and MTP, dense layers)
inline constexpr int64_t kHidden = 1 << 20;       // hidden size, head dims, LoRA ranks
inline constexpr int64_t kFfn = 1 << 22;          // FFN (dense or per expert) width
inline constexpr int64_t kExperts = 1 << 20;      // routed experts: a million fits
inline constexpr int64_t kHeads = 1 << 16;        // attention heads
inline constexpr int64_t kVocab = 1 << 24;        // vocabulary
inline constexpr int64_t kSeqLen = 1 << 24;       // tokens per sequence (16.8 M)
inline constexpr int64_t kGlobalBatch = 1 << 24;  // sequences per step
inline constexpr int64_t kGpus = 1 << 24;         // GPUs in a job (16.8 M)
// Micro-batches a pipeline rank runs per step times the layers it holds: the simulated step has a
// few dozen ops per (micro-batch, layer): at this bound a prediction takes about 15 s and 1 GB
// (8x the largest published setup, a few thousand).
inline constexpr int64_t kLayerPasses = 1 << 15;

}  // namespace moeperf::limits
