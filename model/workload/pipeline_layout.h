// Pipeline layouts: Megatron's --pipeline-model-parallel-layout strings, and the layout a scenario
// runs (its own, or the even split), as the report shows it.
#pragma once

#include <string>
#include <string_view>
#include <vector>

#include "model/specs.h"

namespace moeperf {

// Parses Megatron's layout syntax: virtual stages separated by '|', each a run of 'E' (embedding),
// 't' (decoder layer), 'm' (MTP module), 'L' (loss); "X*n" repeats one letter and "(...)*n" a
// group, spaces are ignored: "Et|(tt|)*30L" is 32 virtual stages, the embedding and layer 0 on
// the first, two layers on each of the next 30, the loss alone on the last. Throws
// std::invalid_argument saying what is wrong and where.
std::vector<VirtualStageLayout> parse_pipeline_layout(std::string_view text);

// The layout the scenario runs: its explicit one, or the even split of the layers over
// virtual_stages() with the embedding first, the MTP modules (when trained) and the loss last.
std::vector<VirtualStageLayout> effective_layout(const Scenario& s);

// What is wrong with an explicit layout for this scenario ("" when nothing): virtual stage count,
// layer and MTP counts, the embedding first and the loss last.
std::string pipeline_layout_problem(const Scenario& s);

// "E 0", "1-2", "59-60 m L", "L", "-" (empty): one virtual stage, its layers numbered from
// first_layer, "m" (or "2m") for its MTP modules.
std::string describe_virtual_stage(const VirtualStageLayout& v, int first_layer);

// Per pipeline stage, what each of its chunks holds (describe_virtual_stage), chunk order.
std::vector<std::vector<std::string>> stage_layout_descriptions(const Scenario& s);

// A layout in Megatron's syntax, runs of equal virtual stages written as "(tt|)*30":
// parse_pipeline_layout(format_pipeline_layout(x)) == x for every layout parse_pipeline_layout
// can give (not an empty one, nor a single stage holding nothing, which write as "").
std::string format_pipeline_layout(const std::vector<VirtualStageLayout>& layout);

// The split of consecutive layers over `virtual_stages` stages: layer l costs layer_cost[l], the
// embedding `embedding_cost` on the first stage, the loss and the `mtp` MTP modules `tail_cost`
// together on the last; stages may hold no layer (Megatron's "L" alone).
// - One virtual stage per GPU (gpu_stages empty, or one stage each): the split whose costliest
//   stage costs least, and of those (within a relative 1e-9) the least sum of squared stage costs;
//   ties to the fuller earlier stages. Exact (dynamic programming, O(stages x layers^2)).
// - Several per GPU (gpu_stages[g]: the virtual stages GPU g runs; interleaved, DualPipe,
//   DualPipeV): the busiest GPU's sum sets the pace, so the GPUs' sums from the largest down, then
//   the stages' costs, are lowered by steepest descent over single-layer moves from three starts
//   (the split above, the even split, the layers water-filled over the GPUs at their mean cost).
//   A heuristic: on small cases enumerated it is within a few percent of the least busiest GPU,
//   whose exact splits often leave stages nearly empty.
// paired (DualPipe, DualPipeV): a GPU runs one chunk's forward beside another's backward as one
//   unit that waits for both (dualpipe.py's overlapped pairs), the backward about twice the
//   forward: a GPU of chunks a and b costs about a + b + max(a, b) per micro-batch, not a + b, so
//   a split that balances the sums with a heavy chunk beside a light one is no better.
// max_layers (empty, or one per virtual stage): the most layers each may hold (memory).
// Throws std::invalid_argument for no stage, a cost that is negative or not finite, a GPU's stage
// out of range, or caps no split keeps.
std::vector<VirtualStageLayout> balance_pipeline_layout(const std::vector<double>& layer_cost, double embedding_cost,
                                                        double tail_cost, int mtp, int virtual_stages,
                                                        const std::vector<std::vector<int>>& gpu_stages = {},
                                                        const std::vector<int>& max_layers = {}, bool paired = false);

// A GPU's cost per micro-batch from the costs of the virtual stages it runs: their sum, plus the
// costliest when its chunks run as overlapped pairs (paired).
double pipeline_gpu_cost(const std::vector<int>& stages, const std::vector<double>& stage_cost, bool paired);

}  // namespace moeperf
