// Measurements of parts as records for `moeperf calibrate`: one format for the published
// microbenchmarks the project ships (calibration/published/*.json) and for the executor's own
// output (moeperf run --out), read into the same PartRecord with the same op names.
//
//   {"kind": "measurements",
//    "gpus": {"h100": "../../topologies/gpus/h100-sxm.json"},         GPU files, by a short name
//    "systems": {"dgx-h100": "../../topologies/dgx-h100-cluster.json"}, systems (collectives, EP, host copies)
//    "records": [{"id": "...", "op": "gemm", "gpu": "h100", "shape": {"m": 4096, "n": 7168, "k": 16384},
//                 "dtype": "fp8", "measured": "1426 TFLOP/s", "library": "...", "source": "...",
//                 "confidence": "high"}, ...]}
//
// A "memory.copy" record's shape is {"bytes": ...} and, for a row gather (a permute), "rows", which
// memory_row_s prices beside the bytes. An attention record's shape names "causal" and "window":
// its masked edges (1 causal, 2 with a window), which attention_tile_rows prices.
//
// An executor file ("ops" instead of "records") gives one record per timed compute op: "gemm"
// with its FLOPs, "memory.copy" with its bytes (and "rows_per_call" for its row gathers), an attention
// core with {"keys", "head_dim", "backward", "masked_edges"} (older files: no edges, read as 0), on a
// GPU described by the machine's measured peak and copy bandwidth. Every mistake throws SpecError naming the file and JSON path.
#pragma once

#include <nlohmann/json.hpp>
#include <optional>
#include <string>
#include <vector>

#include "model/study/calibrate.h"

namespace moeperf::io {

std::vector<PartRecord> load_parts(const std::string& path);
// A measurements file's "calibration" (what the measuring tool knows of its library, e.g. the
// GEMM tile it was built with) over `base`, or nullopt when it has none: the fit of the file's
// records starts from it.
std::optional<Calibration> parts_calibration(const std::string& path, const Calibration& base);
// The same from a document in memory (a trace's records, model/io/measured_trace.h); relative
// file references resolve against shown_path's folder, errors name shown_path.
std::vector<PartRecord> parts_from_document(const nlohmann::json& doc, const std::string& shown_path);

// `v` to `digits` significant digits: files written by a fit or a test run read well, and a rerun
// gives the same bytes on any machine.
double round_sig(double v, int digits = 6);

// A calibration profile for a fit: every parameter, the files and, per parameter, the records it
// was fitted on; per class the errors before and after and the residual spread (the band).
std::string calibration_profile_json(const FitReport& f, const std::vector<std::string>& files,
                                     const std::string& name, const std::string& start_name);

// The shipped profile of a GPU's generation (calibration/profiles/<generation>.json, built into
// the binary), or the defaults when none is shipped for it.
Calibration builtin_profile(const GpuSpec& gpu);
// The shipped profile named `generation` (hopper, blackwell, blackwell-ultra), as a scenario's
// "calibration" names it; nullopt for another name.
std::optional<Calibration> builtin_profile_named(const std::string& generation);
// Their names, comma-separated, for messages: "blackwell-ultra, blackwell, hopper".
std::string builtin_profile_names();
// Names of the shipped profiles and their JSON text.
const std::vector<std::pair<std::string, std::string>>& builtin_profiles();

// End-to-end errors (`moeperf accuracy --out`, "kind": "end_to_end"): each published case's stack
// and measured step over predicted step. The shipped file (calibration/accuracy/end-to-end.json,
// built into the binary) is what a scenario's band uses unless it names another or "none".
struct EndToEndErrors {
  std::vector<Calibration::EndToEndCase> cases;
  std::string source;
};
EndToEndErrors load_end_to_end(const std::string& path);
EndToEndErrors builtin_end_to_end();

}  // namespace moeperf::io
