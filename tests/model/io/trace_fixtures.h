// Small profiler traces the tests write themselves, in the formats moeperf reads
// (docs/traces.md): a PyTorch profiler (Kineto) Chrome-trace JSON and, where SQLite is built in,
// an Nsight Systems SQLite export with the tables and columns moeperf relies on.
//
// The Kineto fixture: two ProfilerStep ranges of 10 ms on device 0 (NVIDIA H100 80GB HBM3), each
// with a BF16 GEMM (aten::mm 4096 x 4096 x 14336: a cuBLAS kernel and its split-K reduce), causal
// flash attention forward and backward (1 x 32 heads x 4096 x 128), an NCCL all-gather of 8 ranks
// (record_param_comms around the launch), an all-to-all (SendRecv kernel carrying its own
// collective fields), an elementwise add, a host-to-device copy, and two kernels no pattern
// knows. One kernel of device 1 that device 0's counts must not see.
#pragma once

#include <fstream>
#include <nlohmann/json.hpp>
#include <string>

namespace moeperf::test {

struct KinetoFixture {
  // Per step, microseconds.
  static constexpr double gemm_us = 1200, splitk_us = 20, attn_fwd_us = 800, attn_bwd_us = 2000 + 50 + 30, allgather_us = 500,
                          a2a_us = 300, add_us = 60, h2d_us = 1500, rope_us = 40, dropout_us = 25;
  static nlohmann::json build() {
    using nlohmann::json;
    json ev = json::array();
    int corr = 1000, ext = 1;
    auto op = [&](double ts, double dur, const std::string& name, json args) {
      args["External id"] = ext++;
      ev.push_back({{"ph", "X"}, {"cat", "cpu_op"}, {"name", name}, {"pid", 1}, {"tid", 100}, {"ts", ts}, {"dur", dur}, {"args", args}});
    };
    auto kernel = [&](double launch_ts, double ts, double dur, const std::string& name, json args = json::object(), int device = 0,
                      const char* cat = "kernel") {
      const int c = corr++;
      ev.push_back({{"ph", "X"}, {"cat", "cuda_runtime"}, {"name", "cudaLaunchKernel"}, {"pid", 1}, {"tid", 100}, {"ts", launch_ts},
                    {"dur", 3}, {"args", {{"correlation", c}}}});
      args["correlation"] = c, args["device"] = device, args["stream"] = 7;
      ev.push_back({{"ph", "X"}, {"cat", cat}, {"name", name}, {"pid", device}, {"tid", 7}, {"ts", ts}, {"dur", dur}, {"args", args}});
    };
    for (int step = 0; step < 2; ++step) {
      const double t0 = 10000.0 * step;
      const std::string sname = "ProfilerStep#" + std::to_string(step + 1);
      ev.push_back({{"ph", "X"}, {"cat", "user_annotation"}, {"name", sname}, {"pid", 1}, {"tid", 100}, {"ts", t0}, {"dur", 9990}});
      ev.push_back({{"ph", "X"}, {"cat", "gpu_user_annotation"}, {"name", sname}, {"pid", 0}, {"tid", 7}, {"ts", t0}, {"dur", 10000}});
      // aten::linear -> aten::mm: the innermost op with a GEMM shape owns both kernels.
      op(t0 + 10, 60, "aten::linear", {{"Input Dims", {{4096, 4096}, {14336, 4096}, json::array()}}, {"Input type", {"c10::BFloat16", "c10::BFloat16", ""}}});
      op(t0 + 20, 40, "aten::mm", {{"Input Dims", {{4096, 4096}, {4096, 14336}}}, {"Input type", {"c10::BFloat16", "c10::BFloat16"}}});
      kernel(t0 + 25, t0 + 100, gemm_us, "sm90_xmma_gemm_bf16bf16_bf16f32_f32_tn_n_tilesize128x128x64_warpgroupsize1x1x1_execute_segment_k_off_kernel__5x_cublas");
      kernel(t0 + 30, t0 + 100 + gemm_us, splitk_us, "void cublasLt::splitKreduce_kernel<32, 16, int, float, __nv_bfloat16, float, __nv_bfloat16, true, false, false>(cublasLt::cublasSplitKParams<float>, float const*, __nv_bfloat16 const*, __nv_bfloat16*, float const*, float const*, __nv_bfloat16 const*, float const*, __nv_bfloat16*, void*, long, float*, int*)");
      op(t0 + 100, 50, "aten::_scaled_dot_product_flash_attention",
         {{"Input Dims", {{1, 32, 4096, 128}, {1, 32, 4096, 128}, {1, 32, 4096, 128}, json::array(), json::array(), json::array(), json::array()}},
          {"Input type", {"c10::BFloat16", "c10::BFloat16", "c10::BFloat16", "Scalar", "Scalar", "Scalar", ""}},
          {"Concrete Inputs", {"", "", "", "0.", "True", "False", ""}}});
      kernel(t0 + 110, t0 + 1400, attn_fwd_us, "void pytorch_flash::flash_fwd_kernel<Flash_fwd_kernel_traits<128, 128, 64, 4, false, false, cutlass::bfloat16_t>, false, true, false, false, true, true, false, false>(pytorch_flash::Flash_fwd_params)");
      op(t0 + 200, 50, "aten::_scaled_dot_product_flash_attention_backward",
         {{"Input Dims", {{1, 32, 4096, 128}, {1, 32, 4096, 128}, {1, 32, 4096, 128}, {1, 32, 4096, 128}, {1, 32, 4096, 128}, {1, 32, 4096},
                          json::array(), json::array(), json::array(), json::array(), json::array(), json::array(), json::array()}},
          {"Input type", {"c10::BFloat16", "c10::BFloat16", "c10::BFloat16", "c10::BFloat16", "c10::BFloat16", "float", "", "", "Scalar", "Scalar", "Scalar", "Scalar", ""}},
          {"Concrete Inputs", {"", "", "", "", "", "", "", "", "4096", "4096", "0.", "True", ""}}});
      kernel(t0 + 205, t0 + 2300, 50, "void pytorch_flash::flash_bwd_dot_do_o_kernel<true, Flash_bwd_kernel_traits<128, 64, 128, 8, 2, 4, 2, false, false, cutlass::bfloat16_t>>(pytorch_flash::Flash_bwd_params)");
      kernel(t0 + 210, t0 + 2400, 2000, "void pytorch_flash::flash_bwd_dq_dk_dv_loop_seqk_parallel_kernel<Flash_bwd_kernel_traits<128, 64, 128, 8, 2, 4, 2, false, false, cutlass::bfloat16_t>, false, true, false, false, false, true, false>(pytorch_flash::Flash_bwd_params)");
      kernel(t0 + 215, t0 + 4450, 30, "void pytorch_flash::flash_bwd_convert_dq_kernel<Flash_bwd_kernel_traits<128, 64, 128, 8, 2, 4, 2, false, false, cutlass::bfloat16_t>>(pytorch_flash::Flash_bwd_params, int)");
      op(t0 + 300, 40, "record_param_comms",
         {{"Collective name", "_allgather_base"}, {"dtype", "BFloat16"}, {"In msg nelems", 1048576}, {"Out msg nelems", 8388608}, {"Group size", 8}});
      kernel(t0 + 310, t0 + 4600, allgather_us, "ncclDevKernel_AllGather_RING_LL(ncclDevKernelArgsStorage<4096ul>)");
      op(t0 + 400, 40, "c10d::alltoall_", json::object());
      kernel(t0 + 410, t0 + 5200, a2a_us, "ncclDevKernel_SendRecv(ncclDevKernelArgsStorage<4096ul>)",
             {{"Collective name", "all_to_allv"}, {"dtype", "BFloat16"}, {"In msg nelems", 2097152}, {"Out msg nelems", 2097152}, {"Group size", 8}});
      op(t0 + 500, 20, "aten::add", {{"Input Dims", {{8192, 4096}, {8192, 4096}, json::array()}}, {"Input type", {"c10::BFloat16", "c10::BFloat16", "Scalar"}}});
      kernel(t0 + 505, t0 + 5600, add_us, "void at::native::vectorized_elementwise_kernel<4, at::native::CUDAFunctor_add<c10::BFloat16>, at::detail::Array<char*, 3> >(int, at::native::CUDAFunctor_add<c10::BFloat16>, at::detail::Array<char*, 3>)");
      op(t0 + 600, 20, "aten::copy_", json::object());
      kernel(t0 + 605, t0 + 5700, h2d_us, "Memcpy HtoD (Pinned -> Device)", {{"bytes", 67108864}, {"memory bandwidth (GB/s)", 44.7}}, 0, "gpu_memcpy");
      op(t0 + 700, 20, "my_ext::rope", json::object());
      kernel(t0 + 705, t0 + 7300, rope_us, "my_custom_rope_kernel(float*, int)");
      kernel(t0 + 710, t0 + 7400, dropout_us, "void at::native::(anonymous namespace)::fused_dropout_kernel_vec<c10::BFloat16, float, unsigned int, 1, 4, bool>(at::cuda::detail::TensorInfo<c10::BFloat16, unsigned int>)");
      kernel(t0 + 720, t0 + 7500, 999, "sm90_xmma_gemm_bf16bf16_bf16f32_f32_tn_n_other_device", json::object(), 1);
    }
    return {{"schemaVersion", 1},
            {"deviceProperties", {{{"id", 0}, {"name", "NVIDIA H100 80GB HBM3"}, {"computeMajor", 9}, {"computeMinor", 0}, {"numSms", 132}}}},
            {"distributedInfo", {{"backend", "nccl"}, {"rank", 0}, {"world_size", 8}}},
            {"traceEvents", ev},
            {"displayTimeUnit", "ms"},
            {"traceName", "fixture"}};
  }
  static void write(const std::string& path, const nlohmann::json& j) {
    std::ofstream(path) << j.dump(1);
  }
};

}  // namespace moeperf::test
