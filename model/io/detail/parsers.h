// Internal to model/io: the parsers of each kind of object, shared by the loaders of systems
// (load_hardware.cpp), models (load_model.cpp) and scenarios (load.cpp). Each declares the keys it
// accepts and reports every mistake at its file and JSON path.
#pragma once

#include <utility>
#include <vector>

#include "model/io/detail/refs.h"
#include "model/specs.h"

namespace moeperf::io::detail {

std::pair<int, int> parse_cc(const Node& n);
GpuSpec parse_gpu(const Node& n);
CpuSpec parse_cpu(const Node& n);
NicSpec parse_nic(const Node& n);
SwitchSpec parse_switch(const Node& n);
ComputeTraySpec parse_tray(Refs& refs, const Node& n);
NvlinkDomainSpec parse_domain(Refs& refs, const Node& n);
FatTreeSpec parse_fat_tree(Refs& refs, const Node& n);
SystemSpec parse_system(Refs& refs, const Node& n);

// A calibration profile ({"kind": "calibration", "params": {...}}): the parameters it names, each
// within its range, over `base`; its name (and residual spread, when it has one) for reports.
Calibration parse_calibration(const Node& n, const Calibration& base);
std::vector<Calibration::EndToEndCase> parse_end_to_end(const Node& n);

// A number format ("bf16", "mxfp8", ...) and a list of saved-tensor classes ("q_proj", ...).
Dtype parse_dtype(const Node& n);
// A grouped GEMM's kernel: "ptr_array", "contiguous" or "multi_stream".
GroupedKernel parse_grouped_kernel(const Node& n);
std::vector<TensorClass> parse_tensor_classes(const Node& n);

ModelSpec parse_own_model(const Node& n);
// A Hugging Face config.json as published (keys we do not use are allowed).
ModelSpec parse_hf_model(const Node& n);
bool is_hf(const Node& n);  // a HF config.json: "model_type" and no "kind"
// The keys of a config.json that parse_hf_model reads (the others are the publisher's, ignored).
const std::vector<std::string>& hf_keys();
ModelSpec parse_model_any(const Node& n);

}  // namespace moeperf::io::detail
