#!/bin/sh
# ctest's calibration checks (run from the build tree's bin folder, $1 = moeperf):
#  - the shipped profiles are what a fresh fit of calibration/published/ gives, byte for byte
#    (a fit is deterministic, and the profiles are current);
#  - moeperf accuracy's MAPE is at or below the pinned ceiling (a change that makes the model
#    worse fails; one that improves it lowers the ceiling in the same commit);
#  - calibration/accuracy/end-to-end.json (the bands' end-to-end term) is what accuracy --out gives now;
#  - calibrate on bad files exits 2, names the file and JSON path, and writes nothing.
set -eu
bin=$1
root=$(cd "$(dirname "$0")/.." && pwd)
cd "$root"
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
# 1. profiles current and deterministic
scripts/fit-profiles.sh "$(dirname "$(dirname "$bin")")" "$tmp" > /dev/null
for g in hopper blackwell blackwell-ultra; do
  cmp "$tmp/$g.json" "calibration/profiles/$g.json" || { echo "calibration/profiles/$g.json is not what scripts/fit-profiles.sh gives: rerun it and commit"; exit 1; }
done
# 2. accuracy ceiling
ceiling=48.4    # MAPE in %, pinned: lower it when the model improves (lowered 48.5 -> 48.4 (MAPE 48.33 %) when
                # a lookup's backward made the embedding table's whole dense gradient (zeroed, accumulated
                # over micro-batches as a weight gradient), the loss's backward read its FP32 statistics,
                # and the MTP module got its TP, FSDP and cross-stage table traffic (a review's findings):
                # H800 DualPipe +2.2 -> -0.2 %; with MaxText's zeroed exchange outputs filled before
                # each call (stack.a2a_zero_fill) the JAX baseline +15.5 -> +15.1 %; the rest moved under
                # 0.1 %; raised 48.3 -> 48.5 (MAPE 48.47 %) when
                # MLA's K/V up projection got its own width, each head's no-rope K and V (128 x 256, not
                # 128 x 320: the rope part comes from the down projection), a review's finding: 20 % fewer
                # bytes in its GEMMs and quantizations, every DeepSeek-V3 case 0.1-0.3 % faster (away);
                # lowered 50.7 -> 48.3 (MAPE 48.2 %) when
                # the fused EP kernels' NVLink rate got a per-peer term (ep_peer_cost, deepep_peer_cost:
                # rate / (1 + cost x (ranks - 1)), dispatch and combine alike), fitted on HybridEP's dispatch
                # rows from EP 8 to 36 and DeepEP's EP32 dispatch beside its EP8 rows (Blackwell EP worst
                # fitted 41 -> 34 %, held back 24 -> 18 %; Megatron's EP32 DeepEP dispatch +13 -> -1.5 %):
                # ladder steps 4-10 -3 % (toward 566-830), 11-13 -0.9 %, GB300 optimized +1.4 % (away:
                # HybridEP's EP8 rows, which it is priced at, now fit 5-9 % faster), H800 0 %;
                # raised 50.3 -> 50.7 (MAPE 50.64 %) when
                # the EP kernels' rows got their SM time (ep_row_sm_s, deepep_row_sm_s), fitted on the FP8
                # dispatch rows of HybridEP's and DeepEP's published runs beside their BF16 rows (24 records
                # more; FP8 rows move at 0.68-0.93 of BF16's byte rate), the LM solver held parameters at
                # bounds the descent pushes out of, and a record outside the fitted records' range of a
                # parameter's sensitivity stays fitted (DeepEP's EP32 combine): GB300 optimized -0.6 %,
                # ladder steps 11-13 -1.8 % (toward 944-970), DeepEP steps 4-10 +1.1-1.7 % (away: its fitted
                # EP32 dispatch and combine come out 13 % and 21 % fast with the per-row form), H800 0 %;
                # raised 49.8 -> 50.3 (MAPE 50.25 %) when
                # calibrate held back the n/4 records whose ids hash lowest, not every fourth in id order,
                # which held back one kind of EP row alone (every HybridEP dispatch_torch row on Blackwell),
                # and a borrowed GEMM level became a fixed point: the profiles refitted on a split chosen for
                # its independence of id order, not for its MAPE (a hash mod 4, which could hold back none of
                # a small class, gave 49.56 %); GB300 optimized -0.1 %, H800 -0.2 %, ladder steps +0.2 % to
                # +1.1 %; raised 49.7 -> 49.8 (MAPE 49.79 %) when
                # the Megatron ladder took the distributed optimizer its FP8 primary weights and parameter
                # prefetch require (--fp8-param-gather and --overlap-param-gather assert
                # --use-distributed-optimizer): each rank's optimizer step over its shard (ladder steps
                # +0.1 %, away from the published figures: a truer configuration moving it the wrong way);
                # lowered 50.0 -> 49.7 (MAPE 49.65 %) when
                # MLA's down projections quantized their hidden-wide input, weights and latent gradient, not in
                # an autograd recompute of the up projections, which runs the up projections' FLOPs alone,
                # and a data gradient after its GEMM's recompute reused that recompute's weight copies
                # (GB300 optimized -0.9 %, ladder steps 1-4 -0.1 %, H800 0 %); lowered 50.2 -> 50.0 (MAPE 49.98 %) when
                # JAX's remat quantized each FP8/MXFP8 GEMM's input again for its weight gradient (GB300
                # optimized +1.8 % step); lowered 50.3 -> 50.2 (MAPE 50.13 %) when
                # Transformer Engine's multi-stream grouped GEMM waited on the host for its row counts
                # after HybridEP's exchange (ladder steps 11-13 -0.3 %); raised 50.0 -> 50.3 (MAPE 50.20 %) when
                # Megatron's AlltoAll dispatcher's count gather went beside the permute, as its preprocess
                # runs before it (ladder steps 1-3 +0.6-0.8 %, away from 494: a truer placement moving it
                # the wrong way); lowered 51.2 -> 50.0 (MAPE 49.92 %) when
                # Megatron's flex dispatcher permuted the received rows after the exchange, with the block
                # waiting for the combine (ladder steps 4-13 -1.3 to -1.7 %, end +23.8 -> +21.7 %);
                # lowered 51.6 -> 51.2 (MAPE 51.16 %) when
                # Megatron's AlltoAll dispatcher gathered its per-expert counts (ladder steps 1-3 -0.9 %),
                # MLA's backward took its own work ratio in the head-dim term, and DeepEP's RDMA rows at
                # EP 32/64 fitted Hopper's network fraction (H800 +2.2 -> +2.4 %); lowered 53.9 -> 51.6 (MAPE 51.51 %) when
                # the Megatron ladder took its published FP8 primary weights and the 24 DeepEP SMs its doc
                # names for EP32 (step 7 +9.5 -> +4.0 %, published +4.3 %), MLA's attention backward its
                # 2.6 x FLOPs, DeepSeek's H800 run block-scaled FP8 at Hopper's block-scaled GEMM fraction
                # and DualPipe's atomic pairs (+1.4 -> +2.5 %: truer mechanisms moving it the wrong way);
                # lowered 54.1 -> 53.9 (MAPE 53.83 %) when
                # DeepSeek's own H800 run took its report's mechanisms (FP8 gradients before the MoE
                # down-projections, the dispatched rows kept rather than dispatched again, SwiGLU's output
                # recomputed) and every shared expert's backward its SwiGLU backward: H800 -3.6 -> +1.5 %;
                # and a fused EP kernel held to its SMs stopped halving what else shares its links
                # (GB300 optimized +35.0 -> +35.7 %: its NVLink exchanges leave room to the FSDP rings);
                # raised 54.0 -> 54.1 (MAPE 54.06 %) when a
                # GEMM dtype no record of a generation measures borrowed the median of the generation's fitted
                # fractions instead of the default 0.8 (Hopper BF16: 0.706): DeepSeek's H800 run, whose head and
                # router GEMMs are BF16, -1.6 -> -3.6 %; raised 53.2 -> 54.0 (MAPE 53.93 %) when the
                # calibration stopped holding back the one record that identifies a parameter (Hopper's head-dim-256
                # FlashAttention-3 record): attention_hd_half fits 58 dims instead of sitting at 0, so MLA's mean head
                # dim 160 runs 7 % faster forward than head dim 128 (GPT-OSS's 64: 23 % slower); the ladder and
                # the GB300 runs move 0.5-1 % further too fast - a truer fit of parts, not a step toward the cases;
                # 53.3 -> 53.2 (MAPE 53.17 %) when the
                # API's buffer copies moved every row a rank handles (n/(n-1) of the exchange's size, as fitted);
                # raised 53.2 -> 53.3 (MAPE 53.22 %) when a
                # de-duplicating dispatch's busiest rank was sized by its distinct tokens, not its rows (under
                # uniform routing a hair below the rows' ratio; Zipf 0.5 on the GB300 study 16 -> 13 % slower);
                # kept at 53.2 (MAPE 53.20 %) when
                # group-limited routing got DeepSeek's rule's own law of picks per kept group (3.95 of 4 groups
                # hit, not 3.63): a truer mechanism, DeepSeek's H800 run -0.0 -> -2.1 %; 54.3 -> 53.2 (MAPE 53.10 %) when the
                # ladder's forced load balancing became uniform routing (Megatron's --moe-router-force-load-balancing
                # draws random logits: balanced on average, not exactly): steps 1.0-1.4 % slower; 55.5 -> 54.3 (MAPE 54.24 %) when HybridEP
                # under Megatron-Core paid its PyTorch API's buffer copies (ep_api_copy_passes, 3.1 HBM passes fitted
                # on HybridEP's torch-API rows against its kernel-only rows): the ladder's last three steps +33 -> +25 %;
                # raised 52.4 -> 55.5 (MAPE 55.42 %) when
                # Megatron-Core's MXFP8 weights were quantized once per step (Transformer Engine's is_first_microbatch
                # cache, which Megatron's schedules set) instead of in every micro-batch: a truer mechanism, the
                # ladder 2.5-2.9 % faster, and it was already too fast; 52.6 -> 52.4 (MAPE 52.35 %) when RDMA EP
                # records were read as rows per node hit, own node included, and HybridEP's NIC rate followed its SMs x
                # remote nodes: ep_network_fraction 1.0 (its bound) -> 0.90, the H800 case 1,586 -> 1,543; 58.3 -> 52.6 (MAPE 52.51 %) when a pipeline
                # hand-off was priced between the stages it joins: the ladder's 32-GPU stages on 64-GPU racks cross
                # InfiniBand at every other boundary, priced at NVLink speed before; and NCCL's step latencies
                # stopped being fitted; 59.0 -> 58.3 (MAPE 58.24 %) when a masked
                # edge of attention got the GPU kernels' 128-key tile instead of none; 59.9 -> 59.0 (MAPE 58.90 %) when Megatron's
                # MoE block added the shared expert's output and summed its input gradients in kernels of their own;
                # 60.7 -> 59.9 (MAPE 59.80 %) when Megatron's residual adds and autograd's skip-gradient sums became kernels of their own; raised 60.5 -> 60.7 (MAPE 60.69 %) when the
                # ladder's first four steps got their published recompute modules, mlp + mla_up_proj without moe_act:
                # autograd keeps the expert activation there, a truer input, and those steps were already too fast;
                # 60.6 -> 60.5 (MAPE 60.42 %) when the router's
                # score function got its backward kernels, twelve of them unfused on the ladder's first steps;
                # 64.0 -> 59.0 when RoPE got its pass:
                # 58.9 %; raised to 60.6 (MAPE 60.52 %) when two B300 GEMM records of other kernels stopped setting
                # B300's GEMM rates to half of B200's: a truer input, the GB300 cases were too slow for
                # the wrong reason; 16 cases since DeepSeek's own H800 run joined,
                # 68.0 -> 64.0 for that case alone at +5.3 %; 15 cases since the ladder's 13 steps joined;
                # raised from 75.0 to 79.0 when the ladder got its published layout Et|(tt|)*30L instead of an even
                # split: a truer input, and the ladder was already too fast; lowered to 68.0 when a fused EP
                # combine got its own fitted rate: DeepEP's combine at EP 32 runs at half its dispatch)
"$bin" accuracy --format json --out "$tmp/end-to-end.json" > "$tmp/accuracy.json"
mape=$(sed -n 's/^  "mape": \([0-9.e+-]*\).*/\1/p' "$tmp/accuracy.json")
ok=$(awk -v m="$mape" -v c="$ceiling" 'BEGIN { print (100 * m <= c) ? 1 : 0 }')
[ "$ok" = 1 ] || { echo "accuracy MAPE $(awk -v m="$mape" 'BEGIN{printf "%.1f", 100*m}') % above the ceiling $ceiling %"; exit 1; }
# 3. the end-to-end errors every band uses are this model's (moeperf accuracy --out, built into the binary)
cmp "$tmp/end-to-end.json" calibration/accuracy/end-to-end.json || {
  echo "calibration/accuracy/end-to-end.json is not what this model's accuracy gives: run"
  echo "  moeperf accuracy --out calibration/accuracy/end-to-end.json   (from the repository root) and commit"; exit 1; }
# 4. bad input
bad() {  # name, JSON text, expected message part
  printf '%s' "$2" > "$tmp/$1.json"
  set +e
  "$bin" calibrate "$tmp/$1.json" --out "$tmp/out-$1.json" > "$tmp/stdout" 2> "$tmp/stderr"
  rc=$?
  set -e
  [ $rc = 2 ] || { echo "$1: exit $rc, expected 2"; cat "$tmp/stderr"; exit 1; }
  grep -q "$1.json" "$tmp/stderr" || { echo "$1: message does not name the file"; cat "$tmp/stderr"; exit 1; }
  grep -q "$3" "$tmp/stderr" || { echo "$1: message lacks '$3'"; cat "$tmp/stderr"; exit 1; }
  [ ! -e "$tmp/out-$1.json" ] || { echo "$1: wrote a profile"; exit 1; }
}
g='"gpus": {"h100": "'"$root"'/topologies/gpus/h100-sxm.json"}'
rec='"id": "a", "gpu": "h100", "shape": {"m": 64, "n": 64, "k": 64}, "dtype": "bf16", "source": "s", "confidence": "high"'
bad nan_time '{"kind": "measurements", '"$g"', "records": [{'"$rec"', "op": "gemm", "measured": "NaN us"}]}' '/records/0/measured'
bad missing_field '{"kind": "measurements", '"$g"', "records": [{'"$rec"', "op": "gemm"}]}' '/records/0'
bad unknown_op '{"kind": "measurements", '"$g"', "records": [{'"$rec"', "op": "gemmm", "measured": "1 us"}]}' 'unknown op'
bad wrong_unit '{"kind": "measurements", '"$g"', "records": [{'"$rec"', "op": "gemm", "measured": "400 GB/s"}]}' 'FLOP rate'
mem='"id": "b", "gpu": "h100", "op": "memory.copy", "source": "s", "confidence": "high", "measured": "1 ms"'
bad negative_rows '{"kind": "measurements", '"$g"', "records": [{'"$mem"', "shape": {"bytes": "1 GB", "rows": -4}}]}' '/records/0/shape/rows'
echo "profiles current, end-to-end errors current, accuracy MAPE $(awk -v m="$mape" 'BEGIN{printf "%.1f", 100*m}') % <= $ceiling %, bad input refused"
