// The cases of spark-op-check: every op of the registry at the shapes of Gemma 4's four models
// (E2B hidden 1536, 26B-A4B hidden 2816 with 128 experts of intermediate 704, 31B hidden 5376,
// head dims 256 and 512), small and odd shapes that take the kernels' scalar paths, misaligned
// buffers, in-place calls, one-block grids (every kernel grid-strides), bf16 activations and bf16
// KV caches, split attention and grouped experts. Thresholds are relative to the largest
// reference value of an output: 0 where the kernel must match bit for bit (copies, integer ops,
// elementwise sums and products, the drawn tokens), 1e-5 for f32 math with transcendental
// functions, 1e-4 for long dot products (f32 accumulation in another order than the
// reference's), 8e-3 with bf16 activations (outputs rounded to bf16).
#include <algorithm>
#include <string>
#include <vector>

#include "absl/strings/str_cat.h"
#include "op_check.h"

namespace spark {
namespace op_check {
namespace {

using abi::GridRule;
GridRule PerToken(int64_t work, int64_t divisor = 1) { return {work, 0, divisor}; }
GridRule Fixed(int64_t work, int64_t divisor = 1) { return {0, work, divisor}; }

constexpr double kExact = 0.0;
constexpr double kMath = 1e-5;
constexpr double kDot = 1e-4;
constexpr double kBf16 = 8e-3;

OpCase Make(const std::string& op, int32_t tokens, std::map<std::string, int64_t> ints,
            GridRule grid, double tolerance, std::string label) {
  OpCase c;
  c.op = op;
  c.tokens = tokens;
  c.ints = std::move(ints);
  c.grid = grid;
  c.tolerance = tolerance;
  c.label = std::move(label);
  c.max_length = std::max<int64_t>(c.max_length, tokens);
  return c;
}

// The same case with bf16 activations (outputs rounded to bf16: a looser threshold).
OpCase Bf16(OpCase c) {
  c.bf16 = true;
  c.tolerance = std::max(c.tolerance, kBf16);
  c.label += " act=bf16";
  return c;
}
// The same case on a grid of one block.
OpCase OneBlock(OpCase c) {
  c.grid = Fixed(1);
  c.label += " grid=1";
  return c;
}
OpCase Misaligned(OpCase c, std::set<std::string> args) {
  c.misaligned = std::move(args);
  c.label += " misaligned";
  return c;
}
OpCase InPlace(OpCase c, const std::string& out, const std::string& in) {
  c.aliases[out] = in;
  c.label += " " + out + "=" + in;
  return c;
}

void Add(std::vector<OpCase>* cases, OpCase c, bool one_block_too = true) {
  cases->push_back(c);
  if (one_block_too && c.grid.per_token * c.tokens + c.grid.fixed > c.grid.divisor) {
    cases->push_back(OneBlock(c));
  }
}

void Elementwise(std::vector<OpCase>* cases, bool quick) {
  const struct {
    const char* op;
    double tolerance;
  } ops[] = {{"add", kExact},  {"mul", kExact},      {"scale", kExact},  {"scalar_mul", kExact},
             {"gelu", kMath},  {"gelu_mul", kMath},  {"softcap", kMath}};
  for (const auto& o : ops) {
    for (const auto& [t, cols, mis] : {std::tuple{1, 1536, false}, std::tuple{37, 2816, false},
                                       std::tuple{37, 1001, true}}) {
      OpCase c = Make(o.op, t, {{"cols", cols}}, PerToken(cols, 256), o.tolerance,
                      absl::StrCat("T=", t, " cols=", cols));
      if (std::string(o.op) == "scale") c.floats["factor"] = 0.37f;
      if (std::string(o.op) == "softcap") c.floats["cap"] = 30.0f;
      if (mis) c = Misaligned(c, {std::string(o.op) == "add" || std::string(o.op) == "mul" ||
                                          std::string(o.op) == "gelu_mul"
                                      ? "a"
                                      : "x"});
      Add(cases, c, !mis);
    }
  }
  Add(cases, InPlace(Make("add", 37, {{"cols", 1536}}, PerToken(1536, 256), kExact, "T=37 cols=1536"),
                     "y", "a"),
      false);
  Add(cases,
      InPlace(Make("gelu_mul", 37, {{"cols", 704 * 8}}, PerToken(704 * 8, 256), kMath,
                   "T=37 cols=5632"),
              "y", "a"),
      false);
  OpCase cap = Make("softcap", 3, {{"cols", quick ? 4096 : 65536}}, PerToken(65536, 256), kMath,
                    "T=3 vocab-wide");
  cap.floats["cap"] = 30.0f;
  Add(cases, cap, false);
  OpCase gm = Make("gelu_mul", 17, {{"cols", 2112}}, PerToken(2112, 256), kMath, "T=17 cols=2112");
  Add(cases, Bf16(gm), false);
}

void TokenRows(std::vector<OpCase>* cases, bool quick) {
  for (const auto& [t, a, b, c] : {std::tuple{1, 258880, 258884, 258881},
                                   std::tuple{37, 258880, 258884, 258881},
                                   std::tuple{300, 258880, -1, -1}}) {
    Add(cases,
        Make("mask_tokens", t, {{"token_a", a}, {"token_b", b}, {"token_c", c}, {"replacement", 0}},
             PerToken(1, 256), kExact, absl::StrCat("T=", t)));
  }
  for (const auto& [t, groups, cols, index, mis] :
       {std::tuple{1, 35, 256, 7, false}, std::tuple{37, 35, 256, 34, false},
        std::tuple{37, 5, 257, 2, true}}) {
    OpCase c = Make("select_group", t, {{"groups", groups}, {"cols", cols}, {"index", index}},
                    PerToken(cols, 256), kExact,
                    absl::StrCat("T=", t, " groups=", groups, " cols=", cols, " index=", index));
    if (mis) c = Misaligned(c, {"x", "y"});
    Add(cases, c, !mis);
  }
  for (const auto& [t, n, cols] : {std::tuple{37, 10, 1536}, std::tuple{37, 12, 2816},
                                   std::tuple{37, 9, 1001}}) {
    OpCase c = Make("scatter_rows", t, {{"cols", cols}}, PerToken(1), kExact,
                    absl::StrCat("T=", t, " updates=", n, " cols=", cols));
    c.soft_rows = n;
    Add(cases, c);
  }
  const int vocab = quick ? 4096 : 65536;
  for (const auto& [t, v, dim, mis] : {std::tuple{1, vocab, 1536, false},
                                       std::tuple{37, vocab, 2816, false},
                                       std::tuple{37, 4096, 1001, false},
                                       std::tuple{37, 4096, 1536, true}}) {
    OpCase c = Make("embedding", t, {{"vocab", v}, {"dim", dim}}, PerToken(dim, 256), kExact,
                    absl::StrCat("T=", t, " vocab=", v, " dim=", dim));
    c.floats["scale"] = 39.19183588f;  // sqrt(1536)
    if (mis) c = Misaligned(c, {"y"});
    Add(cases, c, !mis);
  }
  OpCase e = Make("embedding", 9, {{"vocab", 300}, {"dim", 1536}}, PerToken(1536, 256), kExact,
                  "T=9 vocab=300 dim=1536");
  e.floats["scale"] = 39.25f;
  Add(cases, Bf16(e), false);
  Add(cases, Make("copy", 37, {{"cols", 2816}}, {}, kExact, "T=37 cols=2816 (a transfer)"), false);
  Add(cases, Bf16(Make("copy", 5, {{"cols", 1001}}, {}, kExact, "T=5 cols=1001 (a transfer)")),
      false);
  // The collectives of a tensor-parallel plan, here of one rank (the GPU machine has one GPU):
  // on CUDA they go through NCCL (a communicator of one rank), on the host through the reference.
  Add(cases, Make("all_reduce", 37, {{"cols", 2816}, {"ranks", 1}}, {}, kExact,
                  "T=37 cols=2816 ranks=1 (NCCL)"), false);
  Add(cases, Bf16(Make("all_reduce", 5, {{"cols", 1001}, {"ranks", 1}}, {}, kExact,
                       "T=5 cols=1001 ranks=1 (NCCL)")), false);
  Add(cases, Make("all_gather", 37, {{"cols", 2816}, {"ranks", 1}}, {}, kExact,
                  "T=37 cols=2816 ranks=1 (NCCL)"), false);
  Add(cases, Bf16(Make("all_gather", 1, {{"cols", 1001}, {"ranks", 1}}, {}, kExact,
                       "T=1 cols=1001 ranks=1 (NCCL)")), false);
}

void Norms(std::vector<OpCase>* cases) {
  for (const auto& [t, groups, cols, weight, in_place, mis] :
       {std::tuple{1, 1, 1536, true, false, false}, std::tuple{37, 1, 2816, true, false, false},
        std::tuple{37, 8, 256, true, false, false}, std::tuple{1, 8, 512, true, true, false},
        std::tuple{37, 1, 256, false, false, false}, std::tuple{37, 2, 512, false, true, false},
        std::tuple{5, 3, 1001, true, false, true}}) {
    OpCase c = Make("rms_norm", t, {{"groups", groups}, {"cols", cols}}, PerToken(groups), kMath,
                    absl::StrCat("T=", t, " groups=", groups, " cols=", cols,
                                 weight ? "" : " no weight"));
    c.floats["epsilon"] = 1e-6f;
    if (!weight) c.nulls.insert("weight");
    if (in_place) c = InPlace(c, "y", "x");
    if (mis) c = Misaligned(c, {"x", "y"});
    Add(cases, c, !mis && !in_place);
  }
  for (const auto& [t, cols, weight, alias, mis] :
       {std::tuple{1, 1536, true, "", ""}, std::tuple{17, 5376, true, "", ""},
        std::tuple{37, 2816, true, "residual", ""}, std::tuple{17, 1536, true, "x", ""},
        std::tuple{1, 5376, true, "residual", ""}, std::tuple{17, 2816, false, "", ""},
        std::tuple{17, 1536, true, "", "x"}, std::tuple{5, 1001, true, "", "x"},
        std::tuple{3, 7, true, "residual", "x"}}) {
    OpCase c = Make("residual_rms_norm", t, {{"cols", cols}}, PerToken(1), kMath,
                    absl::StrCat("T=", t, " cols=", cols, weight ? "" : " no weight"));
    c.floats["epsilon"] = 1e-6f;
    if (!weight) c.nulls.insert("weight");
    if (std::string(alias) == "residual") c = InPlace(c, "y", "residual");
    if (std::string(alias) == "x") c = InPlace(c, "y", "x");
    if (std::string(mis) == "x") c = Misaligned(c, {"x", "residual", "y"});
    Add(cases, c, std::string(alias).empty() && std::string(mis).empty());
  }
  for (const auto& [t, cols, round] : {std::tuple{1, 5376, 0}, std::tuple{17, 2816, 0},
                                       std::tuple{5, 1001, 0}}) {
    OpCase c = Make("residual_rms_norm_scale", t, {{"cols", cols}, {"round_sum", round}},
                    PerToken(1), kMath, absl::StrCat("T=", t, " cols=", cols));
    c.floats["epsilon"] = 1e-6f;
    Add(cases, c);
  }
  OpCase r = Make("residual_rms_norm", 17, {{"cols", 5376}}, PerToken(1), kMath, "T=17 cols=5376");
  r.floats["epsilon"] = 1e-6f;
  Add(cases, Bf16(r), false);
  OpCase rs = Make("residual_rms_norm_scale", 17, {{"cols", 5376}, {"round_sum", 1}}, PerToken(1),
                   kMath, "T=17 cols=5376 round_sum");
  rs.floats["epsilon"] = 1e-6f;
  Add(cases, Bf16(rs), false);
}

void Linears(std::vector<OpCase>* cases, bool quick) {
  const auto linear = [](const char* op, int t, int out, int in) {
    return Make(op, t, {{"out_features", out}, {"in_features", in}}, Fixed(out, 8), kDot,
                absl::StrCat("T=", t, " out=", out, " in=", in));
  };
  for (const auto& [t, out, in] :
       {std::tuple{1, 2048, 1536}, std::tuple{1, 1536, 2048}, std::tuple{1, 6144, 1536},
        std::tuple{1, 2816, 704},  std::tuple{2, 1536, 2816}, std::tuple{5, 2816, 2112},
        std::tuple{11, 1024, 1536}, std::tuple{16, 300, 1536}, std::tuple{37, 2048, 1536},
        std::tuple{37, 2816, 2112}, std::tuple{37, 1536, 6144}, std::tuple{37, 4096, 2816},
        std::tuple{24, 128, 16},   std::tuple{24, 16, 128},   std::tuple{24, 96, 128},
        std::tuple{24, 128, 64},   std::tuple{100, 520, 704}, std::tuple{3, 257, 1001},
        std::tuple{37, 130, 1001}}) {
    Add(cases, linear("linear", t, out, in), t == 1 || t == 37);
  }
  Add(cases, Misaligned(linear("linear", 37, 1536, 1536), {"x", "y"}), false);
  // The small-batch tensor-core GEMV (2 .. 32 tokens): one, two and four n-tiles, partial ones,
  // row counts not a multiple of 16, input sizes that end inside a warp's chunk quads.
  for (const auto& [t, out, in] :
       {std::tuple{8, 1027, 2816}, std::tuple{9, 2048, 1536}, std::tuple{32, 520, 704},
        std::tuple{17, 1536, 5376}, std::tuple{4, 33, 8}, std::tuple{31, 100, 1000}}) {
    Add(cases, linear("linear", t, out, in), t == 8);
  }
  for (const auto& [t, out, in] : {std::tuple{8, 1027, 2816}, std::tuple{20, 520, 704}}) {
    Add(cases, Bf16(linear("linear", t, out, in)), false);
  }
  // The small batch's m-tiles per block (1, 2 or 4: as many as still give each multiprocessor
  // two blocks; the CPU emulation has one multiprocessor, a 132-SM H100 or H200 takes 4 from
  // 16,896 rows and 2 from 8,448): one m-tile (16 rows), two (a partial second), four on the GPU
  // (f32 and bf16 activations, one and two n-tiles) and two of NVFP4.
  for (const auto& [t, out, in, bf16] :
       {std::tuple{6, 16, 128, false}, std::tuple{3, 40, 64, false},
        std::tuple{8, 20000, 256, false}, std::tuple{12, 20000, 512, true},
        std::tuple{5, 10000, 512, false}}) {
    OpCase c = linear("linear", t, out, in);
    Add(cases, bf16 ? Bf16(c) : c, out < 100);
  }
  if (!quick) Add(cases, linear("linear", 1, 262144, 1536), false);  // the tied LM head
  // bf16 activations: the decode GEMV at one and two tokens (odd row counts) and the tiles.
  for (const auto& [t, out, in] : {std::tuple{1, 2048, 1536}, std::tuple{1, 1027, 1536},
                                   std::tuple{2, 1025, 2816}, std::tuple{5, 1024, 2816},
                                   std::tuple{37, 2048, 1536}, std::tuple{100, 520, 704},
                                   std::tuple{24, 128, 16}, std::tuple{24, 96, 128}}) {
    Add(cases, Bf16(linear("linear", t, out, in)), false);
  }
  // The prefill tiles over several token tiles (128 rows with bf16 activations, 64 with f32) and,
  // on one block, one block's tiles after one another (their shared-memory stages reused).
  Add(cases, Bf16(linear("linear", 300, 520, 704)), false);
  Add(cases, Bf16(OneBlock(linear("linear", 200, 1027, 1536))), false);
  Add(cases, OneBlock(linear("linear", 200, 520, 704)), false);
  // NVFP4 (W4A16): GEMV rows per warp (4 at one token, 2 at two), tiles, scalar paths.
  for (const auto& [t, out, in, bf16] :
       {std::tuple{1, 2048, 1536, false}, std::tuple{3, 704, 2816, false},
        std::tuple{1, 1027, 1536, false}, std::tuple{2, 1025, 2816, false},
        std::tuple{1, 1027, 1536, true},  std::tuple{37, 2048, 1536, false},
        std::tuple{100, 520, 704, false}, std::tuple{24, 128, 16, false},
        std::tuple{1, 1024, 2816, true},  std::tuple{37, 2048, 1536, true},
        std::tuple{8, 1027, 2816, false}, std::tuple{13, 520, 704, true},
        std::tuple{32, 2048, 1536, false}, std::tuple{8, 10000, 512, false}}) {
    OpCase c = linear("linear_nvfp4", t, out, in);
    Add(cases, bf16 ? Bf16(c) : c, !bf16 && (t == 1 || t == 8 || t == 37) && out < 5000);
  }
  Add(cases, Bf16(OneBlock(linear("linear_nvfp4", 150, 520, 704))), true);
  // W4A4 (--fp4-activations): the activation quantizer (byte for byte), and the W4A4 product on the warp-per-row path (up to 8
  // tokens; every call on targets without the FP4 MMA) and the block-scaled FP4 tiles (sm_120a /
  // sm_121a, and the CPU emulation): partial tiles, several k-steps, a one-step K.
  for (const auto& [t, cols, bf16] :
       {std::tuple{1, 5376, false}, std::tuple{37, 2816, false}, std::tuple{5, 64, false},
        std::tuple{37, 2112, true}}) {
    OpCase c = Make("quantize_nvfp4_rows", t,
                    {{"cols", cols}, {"row_words", abi::Nvfp4RowWords(cols)}}, PerToken(1),
                    kExact, absl::StrCat("T=", t, " cols=", cols));
    Add(cases, bf16 ? Bf16(c) : c, t == 37);
  }
  for (const auto& [t, out, in, bf16] :
       {std::tuple{1, 2048, 1536, false}, std::tuple{5, 1027, 2816, false},
        std::tuple{8, 300, 64, false},    std::tuple{37, 2048, 1536, false},
        std::tuple{100, 520, 704, false}, std::tuple{9, 130, 64, false},
        std::tuple{70, 2816, 2112, true}, std::tuple{1, 1024, 2816, true}}) {
    OpCase c = linear("linear_nvfp4_a4", t, out, in);
    c.ints["row_words"] = abi::Nvfp4RowWords(in);
    Add(cases, bf16 ? Bf16(c) : c, !bf16 && (t == 1 || t == 37));
  }
  // Packed rows and outputs one element off alignment: the warp-per-row path's byte loads (the
  // tiles need 16-byte aligned rows).
  for (const int t : {3, 37}) {
    OpCase c = linear("linear_nvfp4_a4", t, 520, 704);
    c.ints["row_words"] = abi::Nvfp4RowWords(704);
    Add(cases, Misaligned(c, {"xq", "y"}), false);
  }
  // FP8 (W8A16): per-tensor and per-row scales.
  for (const auto& [t, out, in, per_row, bf16] :
       {std::tuple{1, 2048, 1536, false, false}, std::tuple{5, 1536, 2816, true, false},
        std::tuple{37, 2048, 1536, false, false}, std::tuple{1, 1023, 2816, true, false},
        std::tuple{40, 512, 1536, true, false},   std::tuple{40, 300, 2112, true, false},
        std::tuple{24, 96, 16, false, false},     std::tuple{7, 64, 24, false, false},
        std::tuple{37, 1024, 1536, true, true},   std::tuple{8, 1023, 2816, true, false},
        std::tuple{24, 520, 704, false, true},    std::tuple{130, 300, 2112, true, true}}) {
    OpCase c = linear("linear_fp8", t, out, in);
    c.ints["scale_count"] = per_row ? out : 1;
    c.label += per_row ? " per-row" : " per-tensor";
    Add(cases, bf16 ? Bf16(c) : c, t == 130 || (!bf16 && (t == 1 || t == 37)));
  }
  // FP8 NaN codes (0x7f, 0xff) in the weights: the output rows they reach are NaN on both sides,
  // through the GEMV (1 token), the small batch (5) and the tiles (37).
  for (const int t : {1, 5, 37}) {
    OpCase c = linear("linear_fp8", t, 1023, 2816);
    c.ints["scale_count"] = 1023;
    c.nan_codes = true;
    c.label += " per-row NaN codes";
    Add(cases, c, false);
  }
}

void Rope(std::vector<OpCase>* cases) {
  for (const auto& [t, heads, hd, rotated, theta, pos0, in_place] :
       {std::tuple{1, 8, 256, 128, 10000.0f, 4095, false},
        std::tuple{37, 8, 256, 128, 10000.0f, 0, false},
        std::tuple{37, 1, 256, 128, 10000.0f, 700, true},
        std::tuple{1, 8, 512, 64, 1000000.0f, 100000, false},
        std::tuple{37, 16, 512, 64, 1000000.0f, 1000, false},
        std::tuple{37, 2, 512, 64, 1000000.0f, 200000, true}}) {
    OpCase c = Make("rope", t, {{"heads", heads}, {"head_dim", hd}, {"rotated_pairs", rotated}},
                    PerToken(heads), kMath,
                    absl::StrCat("T=", t, " heads=", heads, " hd=", hd, " pairs=", rotated,
                                 " pos=", pos0));
    c.floats["theta"] = theta;
    c.floats["factor"] = 1.0f;
    c.first_position = pos0;
    c.max_length = pos0 + t;
    if (in_place) c = InPlace(c, "y", "x");
    Add(cases, c, !in_place);
  }
  for (const auto& [t, heads, hd, rotated, theta, factor, weight, in_place, pos0] :
       {std::tuple{1, 8, 256, 128, 10000.0f, 1.0f, true, false, 8000},
        std::tuple{17, 16, 256, 128, 10000.0f, 1.0f, true, false, 8000},
        std::tuple{37, 32, 256, 128, 10000.0f, 1.0f, true, true, 4000},
        std::tuple{1, 16, 512, 64, 1000000.0f, 1.0f, true, false, 8000},
        std::tuple{17, 32, 512, 64, 1000000.0f, 1.0f, true, false, 8000},
        std::tuple{17, 8, 256, 128, 10000.0f, 1.0f, false, false, 8000},
        std::tuple{5, 3, 102, 20, 10000.0f, 8.0f, true, false, 8000},
        std::tuple{3, 70, 64, 32, 10000.0f, 1.0f, true, true, 8000},
        std::tuple{3, 70, 600, 200, 1000000.0f, 1.0f, true, false, 8000},
        std::tuple{3, 5, 2, 0, 10000.0f, 1.0f, true, true, 100}}) {
    OpCase c = Make("rms_norm_rope", t,
                    {{"heads", heads}, {"head_dim", hd}, {"rotated_pairs", rotated}},
                    PerToken(1), kMath,
                    absl::StrCat("T=", t, " heads=", heads, " hd=", hd, " pairs=", rotated,
                                 weight ? "" : " no weight"));
    c.floats["theta"] = theta;
    c.floats["factor"] = factor;
    c.floats["epsilon"] = 1e-6f;
    c.first_position = pos0;
    c.max_length = pos0 + t;
    if (!weight) c.nulls.insert("weight");
    if (in_place) c = InPlace(c, "y", "x");
    Add(cases, c, !in_place);
  }
  OpCase b = Make("rms_norm_rope", 17, {{"heads", 8}, {"head_dim", 256}, {"rotated_pairs", 128}},
                  PerToken(1), kMath, "T=17 heads=8 hd=256 pairs=128");
  b.floats["theta"] = 10000.0f;
  b.floats["factor"] = 1.0f;
  b.floats["epsilon"] = 1e-6f;
  b.first_position = 8000;
  b.max_length = 8017;
  Add(cases, Bf16(b), false);
}

void KvAndAttention(std::vector<OpCase>* cases, bool quick) {
  // kv_write: the slots of positions p % capacity of the sequence's blocks (a sliding cache wraps).
  for (const auto& [t, kvh, hd, window, pos0, length, bf16] :
       {std::tuple{1, 1, 256, 512, 1000, 1001, false}, std::tuple{37, 1, 256, 512, 530, 567, false},
        std::tuple{37, 8, 256, 1024, 1040, 1077, false}, std::tuple{37, 2, 512, 0, 0, 4096, false},
        std::tuple{5, 3, 126, 4, 38, 43, false},       std::tuple{1, 1, 256, 512, 1000, 1001, true},
        std::tuple{37, 2, 512, 0, 0, 4096, true},      std::tuple{5, 3, 126, 4, 38, 43, true}}) {
    OpCase c = Make("kv_write", t,
                    {{"kv_heads", kvh}, {"head_dim", hd},
                     {"cache_dtype", bf16 ? abi::kCacheBF16 : abi::kCacheF32}},
                    PerToken(kvh * hd, 256),
                    kExact,
                    absl::StrCat("T=", t, " kv_heads=", kvh, " hd=", hd,
                                 window ? absl::StrCat(" window=", window) : " full", " pos=",
                                 pos0, bf16 ? " cache=bf16" : ""));
    c.window = window;
    c.first_position = pos0;
    c.max_length = length;
    c.cache_bf16 = bf16;
    Add(cases, c, !bf16);
  }
  // attention: GQA, sliding / causal, hd 256 / 512; split over the KV length (then with its
  // merge); the vision blocks (last_visible); bf16 caches.
  struct A {
    int t, q, kvh, hd, window, pos0;
    float scale;
    int max_splits, split_rows;
    bool bf16_cache;
    int block_begin, block_end;
    int64_t length;
  };
  const int long_ctx = quick ? 2048 : 8192;
  const A all[] = {
      {1, 8, 1, 256, 512, 1000, 0.1f, 1, 0, false, -1, -1, 1001},
      {37, 8, 1, 256, 512, 700, 0.1f, 1, 0, false, -1, -1, 737},
      {37, 16, 8, 256, 1024, 1500, 0.1f, 1, 0, false, -1, -1, 1537},
      {1, 8, 1, 512, 0, 1500, 0.05f, 1, 0, false, -1, -1, 2048},
      {37, 16, 2, 512, 0, 900, 0.05f, 1, 0, false, -1, -1, 2048},
      {37, 8, 2, 512, 0, 0, 1.0f, 1, 0, false, -1, -1, 64},
      {5, 4, 2, 128, 0, 250, 0.2f, 1, 0, false, -1, -1, 300},
      {5, 4, 2, 200, 64, 250, 0.2f, 1, 0, false, -1, -1, 300},
      {3, 2, 1, 384, 0, 90, 0.1f, 1, 0, false, -1, -1, 100},
      {1, 32, 4, 512, 0, 1023, 0.05f, 8, 512, false, -1, -1, long_ctx},
      {1, 32, 16, 256, 1024, 8000, 0.1f, 8, 512, false, -1, -1, 8001},
      {1, 16, 2, 512, 0, long_ctx - 1, 0.05f, 16, 512, false, -1, -1, long_ctx},
      {1, 4, 2, 128, 0, 0, 0.2f, 64, 64, false, -1, -1, 300},
      {5, 4, 2, 128, 0, 250, 0.2f, 64, 64, false, -1, -1, 300},
      {3, 2, 1, 200, 0, 390, 0.2f, 4, 16, false, -1, -1, 400},
      {2, 4, 2, 384, 100, 500, 0.1f, 8, 8, false, -1, -1, 600},
      {1, 8, 1, 256, 512, 1000, 0.1f, 1, 0, true, -1, -1, 1001},
      {37, 16, 2, 512, 0, 900, 0.05f, 1, 0, true, -1, -1, 2048},
      {5, 4, 2, 200, 64, 250, 0.2f, 1, 0, true, -1, -1, 300},
      {1, 32, 4, 512, 0, 1023, 0.05f, 8, 512, true, -1, -1, long_ctx},
      {3, 2, 1, 200, 0, 390, 0.2f, 4, 16, true, -1, -1, 400},
      {37, 16, 8, 256, 512, 700, 0.1f, 1, 0, false, 5, 30, 737},
      {37, 32, 16, 256, 1024, 1500, 0.1f, 1, 0, false, 0, 37, 1537},
      {20, 4, 2, 128, 8, 100, 0.2f, 1, 0, false, 3, 17, 120},
      {5, 4, 2, 128, 64, 250, 0.2f, 64, 64, false, 1, 4, 300},
      {20, 4, 2, 200, 8, 100, 0.2f, 1, 0, true, 3, 17, 120},
      // The tensor-core path (steps of >= 16 tokens that do not split, head_dim % 16 == 0):
      // the tiny models' head_dim, a tile of exactly 16, an image across two tiles, a window
      // shorter than a tile, a long prefill over a ring (sliding) and over a full cache, and
      // both cache types.
      {24, 4, 2, 32, 8, 0, 1.0f, 1, 0, false, -1, -1, 64},
      {16, 8, 2, 64, 0, 5, 0.3f, 1, 0, false, -1, -1, 64},
      {40, 4, 1, 128, 8, 10, 0.2f, 1, 0, false, 12, 27, 64},
      {40, 4, 1, 128, 8, 10, 0.2f, 1, 0, true, 12, 27, 64},
      {100, 8, 4, 256, 64, 300, 0.1f, 1, 0, false, -1, -1, 400},
      {100, 8, 2, 512, 0, 150, 0.05f, 8, 64, false, -1, -1, 256},
      {100, 8, 2, 512, 0, 150, 0.05f, 1, 0, true, -1, -1, 256},
      // Units of one head where the query heads of a kv head do not pair up (3 per kv head, or
      // no GQA); the cases above with an even group and head_dim <= 256 take two per unit.
      {24, 6, 2, 128, 0, 7, 0.2f, 1, 0, false, -1, -1, 64},
      {24, 4, 4, 256, 16, 30, 0.1f, 1, 0, true, -1, -1, 64},
      // Two heads of head_dim 256 on a bf16 cache (tiles of 32 keys by ldmatrix), across
      // several tiles and a window that is not a multiple of them.
      {64, 8, 4, 256, 48, 20, 0.1f, 1, 0, true, -1, -1, 128},
  };
  for (const A& a : all) {
    const bool split = a.max_splits > 1;
    OpCase c = Make("attention", a.t,
                    {{"q_heads", a.q}, {"kv_heads", a.kvh}, {"head_dim", a.hd},
                     {"window", a.window}, {"max_splits", a.max_splits},
                     {"split_rows", a.split_rows},
                     {"cache_dtype", a.bf16_cache ? abi::kCacheBF16 : abi::kCacheF32}},
                    split ? GridRule{a.q, a.max_splits * a.q, 1} : PerToken(a.q), kDot,
                    absl::StrCat("T=", a.t, " q=", a.q, " kv=", a.kvh, " hd=", a.hd,
                                 a.window ? absl::StrCat(" window=", a.window) : " causal",
                                 " pos=", a.pos0, split ? absl::StrCat(" splits=", a.max_splits) : "",
                                 a.bf16_cache ? " cache=bf16" : "",
                                 a.block_begin >= 0
                                     ? absl::StrCat(" image=", a.block_begin, "..", a.block_end)
                                     : ""));
    c.floats["scale"] = a.scale;
    c.window = a.window;
    c.first_position = a.pos0;
    c.max_length = a.length;
    c.cache_bf16 = a.bf16_cache;
    c.block_begin = a.block_begin;
    c.block_end = a.block_end;
    if (!split) c.nulls.insert("partials");
    if (split) c.then = "attention_merge";
    if (a.block_begin < 0) c.nulls.insert("last_visible");
    // The long prefills also on one block (its units one after another: the shared scores'
    // reuse across units).
    Add(cases, c, a.t >= 100);
  }
  OpCase b = Make("attention", 17,
                  {{"q_heads", 8}, {"kv_heads", 2}, {"head_dim", 256}, {"window", 0},
                   {"max_splits", 1}, {"split_rows", 0}, {"cache_dtype", abi::kCacheF32}},
                  PerToken(8), kDot, "T=17 q=8 kv=2 hd=256 causal");
  b.floats["scale"] = 0.1f;
  b.first_position = 20;
  b.max_length = 64;
  b.nulls = {"partials", "last_visible"};
  Add(cases, Bf16(b), false);
  b.cache_bf16 = true;
  b.ints["cache_dtype"] = abi::kCacheBF16;
  b.label += " cache=bf16";
  Add(cases, Bf16(b), false);
  // bf16 activations on the other unit shapes: four heads of head_dim 128, one of 512 (f32
  // cache: its V rows from global memory; bf16 cache: staged).
  for (const auto& [q, kvh, hd, bf16_cache] :
       {std::tuple{8, 2, 128, false}, std::tuple{8, 2, 512, false}, std::tuple{8, 2, 512, true}}) {
    OpCase d = Make("attention", 40,
                    {{"q_heads", q}, {"kv_heads", kvh}, {"head_dim", hd}, {"window", 0},
                     {"max_splits", 1}, {"split_rows", 0},
                     {"cache_dtype", bf16_cache ? abi::kCacheBF16 : abi::kCacheF32}},
                    PerToken(q), kDot,
                    absl::StrCat("T=40 q=", q, " kv=", kvh, " hd=", hd, " causal",
                                 bf16_cache ? " cache=bf16" : ""));
    d.floats["scale"] = 0.1f;
    d.first_position = 30;
    d.max_length = 96;
    d.cache_bf16 = bf16_cache;
    d.nulls = {"partials", "last_visible"};
    Add(cases, Bf16(d), false);
  }
}

void Moe(std::vector<OpCase>* cases, bool quick) {
  for (const auto& [t, experts, k, bf16] :
       {std::tuple{1, 128, 8, false}, std::tuple{37, 128, 8, false}, std::tuple{5, 200, 3, false},
        std::tuple{3, 1024, 4, false}, std::tuple{2, 16, 16, false}, std::tuple{33, 128, 8, true}}) {
    OpCase c = Make("moe_topk", t, {{"num_experts", experts}, {"top_k", k}}, PerToken(1), kDot,
                    absl::StrCat("T=", t, " experts=", experts, " top_k=", k));
    c.floats["logit_scale"] = 0.0188f;  // 2816^-0.5
    Add(cases, bf16 ? Bf16(c) : c, false);
  }
  const int E = quick ? 16 : 128, H = 2816, I = 704, K = 8;
  struct X {
    int t, hidden, inter, experts, top_k;
    bool workspace, bf16;
  };
  const X shapes[] = {
      {1, H, I, E, K, false, false},        {15, H, I, E, K, false, false},
      {37, H, I, E, K, true, false},        {quick ? 64 : 128, H, I, E, K, true, false},
      // bf16 activations through the grouped tiles: 80 rows per expert (a full 64-row tile and
      // a partial one) at 16 experts; 26B-A4B's 128 experts are the rows above (the host
      // reference of 512 tokens over 128 experts takes minutes).
      {quick ? 64 : 160, H, I, 16, K, true, true},
      {1, H, I, E, K, true, false},         // decode: ungrouped despite a workspace
      {5, 1001, 100, 6, 2, false, false},   {40, 1008, 100, 6, 2, true, false},
      {200, 1008, 104, 6, 2, true, false},  {24, 64, 32, 8, 2, true, false},
      {24, 64, 32, 8, 2, true, true},       {1, 64, 32, 8, 2, false, false},
      // 1100 slots per expert: more than one shared-memory list of an expert's rows (moe.cu
      // kListedRows) and 18 tiles of 64 rows each.
      {1100, 64, 32, 2, 2, true, false}};
  const struct {
    const char* gate_up;
    const char* down;
    const char* what;
    bool quantized;
  } formats[] = {{"moe_gate_up", "moe_down", "bf16", false},
                 {"moe_gate_up_nvfp4", "moe_down_nvfp4", "nvfp4", true},
                 {"moe_gate_up_fp8", "moe_down_fp8", "fp8", true}};
  for (const auto& f : formats) {
    for (const X& x : shapes) {
      const int path = abi::MoePathFor(x.t);
      // NVFP4 blocks of 16: the hidden (gate/up inputs) and intermediate (down inputs) sizes.
      if (std::string(f.what) == "nvfp4" && (x.hidden % 16 != 0 || x.inter % 16 != 0)) continue;
      std::map<std::string, int64_t> sizes = {{"hidden", x.hidden},     {"intermediate", x.inter},
                                              {"num_experts", x.experts}, {"top_k", x.top_k},
                                              {"path", path}};
      const std::string label =
          absl::StrCat("T=", x.t, " H=", x.hidden, " I=", x.inter, " E=", x.experts, " K=",
                       x.top_k, path ? " grouped" : " gemv");
      OpCase gu = Make(f.gate_up, x.t, sizes, PerToken(x.top_k * x.inter, 8), kDot, label);
      if (std::string(f.what) == "fp8") gu.ints["scales_per_matrix"] = x.t % 2 ? 1 : x.inter;
      Add(cases, x.bf16 ? Bf16(gu) : gu, false);
      const bool grouped = path == abi::kMoeGrouped && x.workspace;
      OpCase down = Make(f.down, x.t, sizes, PerToken(x.hidden, 8), kDot,
                         label + (grouped ? " +combine" : ""));
      if (std::string(f.what) == "fp8") down.ints["scales_per_matrix"] = x.t % 2 ? 1 : x.hidden;
      if (!x.workspace) down.nulls.insert("partials");
      if (grouped) down.then = "moe_combine";
      Add(cases, x.bf16 ? Bf16(down) : down, false);
    }
  }
}

void Sample(std::vector<OpCase>* cases, bool quick) {
  // Each row of the call draws with its own parameters (op_check.cc SamplingRow: greedy, a
  // temperature, top-k, top-p, both), so one case covers every path of the kernel.
  for (const auto& [t, vocab] : {std::tuple{8, quick ? 4096 : 262144}, std::tuple{8, 1000},
                                 std::tuple{3, 5}}) {
    Add(cases, Make("sample", t, {{"vocab", vocab}}, PerToken(1), kExact,
                    absl::StrCat("T=", t, " vocab=", vocab, " (a row per sampling mode)")));
  }
  OpCase b = Make("sample", 8, {{"vocab", 4096}}, PerToken(1), kExact,
                  "T=8 vocab=4096 (a row per sampling mode)");
  Add(cases, Bf16(b), false);
}

// The vision tower's ops (31B/26B: hidden 1152, 16 heads x 72; E2B/E4B: 768, 12 x 64; the tiny
// towers' 48 and 4 x 12), patch positions drawn in [0, 64): some outside a smaller position
// table, several patches in one pooled row.
void Vision(std::vector<OpCase>* cases) {
  for (const auto& [t, cols] : {std::tuple{37, 768}, std::tuple{9, 1001}}) {
    OpCase c = Make("shift_scale", t, {{"cols", cols}}, PerToken(cols, 256), kExact,
                    absl::StrCat("T=", t, " cols=", cols));
    c.floats["shift"] = 0.5f;
    c.floats["scale"] = 2.0f;
    Add(cases, c);
    if (cols == 768) Add(cases, Bf16(c), false);
  }
  for (const auto& [t, dim, table] : {std::tuple{37, 1152, 48}, std::tuple{9, 48, 64}}) {
    OpCase c = Make("patch_position_embedding", t, {{"dim", dim}, {"table_size", table}},
                    PerToken(dim, 256), kExact,
                    absl::StrCat("T=", t, " dim=", dim, " table=", table));
    Add(cases, c);
    if (dim == 48) Add(cases, InPlace(c, "y", "x"), false);
  }
  for (const int cols : {1152, 1001}) {
    OpCase c = Make("clamp", 37, {{"cols", cols}}, PerToken(cols, 256), kExact,
                    absl::StrCat("T=37 cols=", cols));
    Add(cases, c);
    if (cols == 1152) Add(cases, InPlace(c, "y", "x"), false);
  }
  for (const auto& [t, heads, dim] : {std::tuple{37, 16, 72}, std::tuple{9, 4, 12},
                                      std::tuple{5, 12, 64}}) {
    OpCase c = Make("rope_2d", t, {{"heads", heads}, {"head_dim", dim}}, PerToken(heads), kMath,
                    absl::StrCat("T=", t, " heads=", heads, " head_dim=", dim));
    c.floats["theta"] = 100.0f;
    Add(cases, c);
    if (dim == 12) Add(cases, InPlace(c, "y", "x"), false);
  }
  for (const auto& [t, q, kv, dim] : {std::tuple{37, 16, 16, 72}, std::tuple{50, 4, 2, 12},
                                      std::tuple{9, 12, 12, 64}}) {
    OpCase c = Make("bidirectional_attention", t,
                    {{"q_heads", q}, {"kv_heads", kv}, {"head_dim", dim}}, PerToken(q, 32), kDot,
                    absl::StrCat("T=", t, " q_heads=", q, " kv_heads=", kv, " head_dim=", dim));
    c.floats["scale"] = 1.0f;
    Add(cases, c);
    if (dim == 12 || dim == 72) Add(cases, Bf16(c), false);
  }
  // Many tiles of 32 queries and keys: the 31B tower's 16 heads of 72 and the E2B tower's 64.
  for (const auto& [t, q, dim] : {std::tuple{300, 16, 72}, std::tuple{130, 12, 64}}) {
    OpCase c = Make("bidirectional_attention", t,
                    {{"q_heads", q}, {"kv_heads", q}, {"head_dim", dim}}, PerToken(q, 32), kDot,
                    absl::StrCat("T=", t, " q_heads=", q, " kv_heads=", q, " head_dim=", dim));
    c.floats["scale"] = 1.0f;
    Add(cases, c);
  }
  for (const auto& [t, cols] : {std::tuple{81, 48}, std::tuple{37, 1152}}) {
    OpCase c = Make("pool_by_position", t, {{"cols", cols}, {"kernel_size", 3}},
                    PerToken((cols + 1023) / 1024), kMath, absl::StrCat("T=", t, " cols=", cols, " k=3"));
    c.floats["scale"] = 33.94f;
    Add(cases, c);
  }
  Add(cases, Make("standardize", 37, {{"cols", 1152}}, PerToken(1152, 256), kExact,
                  "T=37 cols=1152"));
}

}  // namespace

std::vector<OpCase> AllCases(bool quick) {
  std::vector<OpCase> cases;
  Elementwise(&cases, quick);
  TokenRows(&cases, quick);
  Norms(&cases);
  Linears(&cases, quick);
  Rope(&cases);
  KvAndAttention(&cases, quick);
  Moe(&cases, quick);
  Sample(&cases, quick);
  Vision(&cases);
  return cases;
}

std::string GroupKey(const OpCase& c) {
  return absl::StrCat(c.bf16 ? "bf16" : "f32", "_T", c.tokens, "_len", c.max_length, "_pos",
                      c.first_position, c.soft_rows ? absl::StrCat("_soft", c.soft_rows) : "",
                      c.soft_rows ? absl::StrCat("x", c.ints.at("cols")) : "",
                      c.block_begin >= 0 ? absl::StrCat("_img", c.block_begin, "_", c.block_end)
                                         : "");
}

}  // namespace op_check
}  // namespace spark
