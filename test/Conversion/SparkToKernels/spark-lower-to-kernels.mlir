// RUN: spark-opt %s --spark-lower-to-kernels=max-tokens=4 --spark-plan-arena --spark-outline-kernel-entries -split-input-file | FileCheck %s
// RUN: spark-opt %s --spark-lower-to-kernels=max-tokens=16 --spark-plan-arena --spark-outline-kernel-entries -split-input-file | FileCheck %s --check-prefix=GROUPED

// spark-lower-to-kernels: @forward becomes a spark.program (arena, buffers, weights, launches
// in kernel_abi.h argument order) plus one gpu.func entry per distinct (op, literals) in
// gpu.module @kernels.

// A one-layer dense decoder: every dense op lowers to its kernel, reshapes are views, a writing
// attention gets kv_write + attention, a kv_shared one only attention, and launches with the
// same literals share one entry. Each launch's grid is a rule of the call's token count
// (kernel_abi.h GridRule): per token for row-wise ops (the embedding: 16 elements a row, 256 a
// block), fixed for a linear (16 outputs, 8 a block), both for a split attention.
// CHECK: module attributes {gpu.container_module}
// CHECK: spark.kv_cache @kv.layers.0 sliding
// CHECK: spark.kv_cache @kv.layers.1 full
// CHECK-LABEL: spark.program @forward
// CHECK-SAME: arena_bytes = {{[1-9][0-9]*}} : i64
// CHECK-SAME: buffers = [#spark.buffer<name = "%ids", dtype = i32, row_shape = [], offset = 0>, #spark.buffer<name = "%positions", dtype = i32, row_shape = [], offset = {{[0-9]+}}>, #spark.buffer<name = "embedding", dtype = f32, row_shape = [16], offset = {{[0-9]+}}>,
// CHECK-SAME: inputs = #spark.inputs<ids = 0, positions = 1, sampling = [[SAMPLING:[0-9]+]], sequences = [[SEQ:[0-9]+]]>
// CHECK-SAME: max_tokens = 4 : i64
// CHECK-SAME: outputs = #spark.outputs<logits = [[LOGITS:[0-9]+]], tokens = [[TOKENS:[0-9]+]]>
// CHECK-SAME: weights = [#spark.weight<name = "model.embed_tokens.weight", dtype = bf16, shape = [32, 16]>, #spark.weight<name = "model.layers.0.input_layernorm.weight", dtype = bf16, shape = [16]>, #spark.weight<name = "model.layers.0.self_attn.q_proj.weight", dtype = bf16, shape = [16, 16]>, #spark.weight<name = "model.layers.0.self_attn.k_proj.weight", dtype = bf16, shape = [8, 16]>, #spark.weight<name = "model.layers.0.self_attn.o_proj.weight", dtype = bf16, shape = [16, 16]>, #spark.weight<name = "model.layers.0.pre_feedforward_layernorm.weight", dtype = bf16, shape = [16]>, #spark.weight<name = "model.layers.0.mlp.gate_proj.weight", dtype = bf16, shape = [32, 16]>, #spark.weight<name = "model.layers.0.mlp.up_proj.weight", dtype = bf16, shape = [32, 16]>, #spark.weight<name = "model.layers.0.mlp.down_proj.weight", dtype = bf16, shape = [16, 32]>, #spark.weight<name = "model.layers.0.layer_scalar", dtype = bf16, shape = [1]>]} {
// CHECK-NEXT: spark.launch "embedding" @kernels::@spark_embedding__{{[a-z0-9_]+}} grid(per_token = 16, fixed = 0, divisor = 256) block [256, 1, 1] args [buffer 0, weight 0, buffer [[EMB:[0-9]+]], num_tokens, i32 32, i32 16, f32 4.000000e+00] {source = "embedding"}
// CHECK-NEXT: spark.launch "rms_norm" @kernels::@spark_rms_norm__{{[a-z0-9_]+}} grid({{[^)]+}}) block [256, 1, 1] args [buffer [[EMB]], weight 1, buffer [[A:[0-9]+]], num_tokens, i32 1, i32 16, f32 9.99999997E-7]
// CHECK-NEXT: spark.launch "linear" @kernels::@spark_linear__{{[a-z0-9_]+}} grid(per_token = 0, fixed = 16, divisor = 8) block [256, 1, 1] args [buffer [[A]], weight 2, buffer [[Q:[0-9]+]], num_tokens, i32 16, i32 16]
// CHECK-NEXT: spark.launch "linear" @kernels::@spark_linear__{{[a-z0-9_]+}} grid({{[^)]+}}) block [256, 1, 1] args [buffer [[A]], weight 3, buffer [[K:[0-9]+]], num_tokens, i32 8, i32 16]
// The reshapes of q and k launch nothing: the next launches read the linear outputs directly.
// CHECK-NEXT: spark.launch "rms_norm" @kernels::@spark_rms_norm__{{[a-z0-9_]+}} grid({{[^)]+}}) block [256, 1, 1] args [buffer [[K]], null, buffer [[V:[0-9]+]], num_tokens, i32 1, i32 8, f32 9.99999997E-7]
// CHECK-NEXT: spark.launch "rope" @kernels::@spark_rope__{{[a-z0-9_]+}} grid({{[^)]+}}) block [256, 1, 1] args [buffer [[Q]], buffer 1, buffer [[QR:[0-9]+]], num_tokens, i32 2, i32 8, i32 4, f32 1.000000e+04, f32 1.000000e+00]
// CHECK-NEXT: spark.launch "rope" @kernels::@spark_rope__{{[a-z0-9_]+}} grid({{[^)]+}}) block [256, 1, 1] args [buffer [[K]], buffer 1, buffer [[KR:[0-9]+]], num_tokens, i32 1, i32 8, i32 4, f32 1.000000e+04, f32 1.000000e+00]
// CHECK-NEXT: spark.launch "kv_write" @kernels::@spark_kv_write__{{[a-z0-9_]+}} grid(per_token = 8, fixed = 0, divisor = 256) block [256, 1, 1] args [buffer [[KR]], buffer [[V]], buffer 1, buffer [[SEQ]], kv_block_table 0, k_cache 0, v_cache 0, num_tokens, i32 1, i32 8, kv_capacity 0, i32 0] {source = "layers.0.self_attn.kv_write"}
// CHECK-NEXT: spark.launch "attention" @kernels::@spark_attention__{{[a-z0-9_]+}} grid(per_token = 2, fixed = 0, divisor = 1) block [128, 1, 1] args [buffer [[QR]], buffer 1, buffer [[SEQ]], kv_block_table 0, k_cache 0, v_cache 0, buffer [[O0:[0-9]+]], null, num_tokens, i32 2, i32 1, i32 8, kv_capacity 0, i32 16, f32 1.000000e+00, i32 1, i32 0, i32 0, null] {source = "layers.0.self_attn"}
// The kv_shared attention writes nothing and reuses the entry of the first one.
// CHECK-NEXT: spark.launch "attention" @kernels::@spark_attention__{{[a-z0-9_]+}} grid({{[^)]+}}) block [128, 1, 1] args [buffer [[QR]], buffer 1, buffer [[SEQ]], kv_block_table 0, k_cache 0, v_cache 0, buffer [[O1:[0-9]+]], null, num_tokens, i32 2, i32 1, i32 8, kv_capacity 0, i32 16, f32 1.000000e+00, i32 1, i32 0, i32 0, null] {source = "layers.1.self_attn"}
// The logits tail (plan.h Step::logits_tail): every launch after the last attention feeds
// only the logits, row by row, so a step that needs the last row only runs them on it.
// CHECK-NEXT: spark.launch "add" @kernels::@spark_add__{{[a-z0-9_]+}} grid({{[^)]+}}) block [256, 1, 1] args [buffer [[O0]], buffer [[O1]], buffer [[O:[0-9]+]], num_tokens, i32 16]
// CHECK-SAME: logits_tail
// CHECK-NEXT: spark.launch "linear" @kernels::@spark_linear__{{[a-z0-9_]+}} grid({{[^)]+}}) block [256, 1, 1] args [buffer [[O]], weight 4, buffer [[ATTN:[0-9]+]], num_tokens, i32 16, i32 16]
// CHECK-NEXT: spark.launch "add" @kernels::@spark_add__{{[a-z0-9_]+}} grid({{[^)]+}}) block [256, 1, 1] args [buffer [[EMB]], buffer [[ATTN]], buffer [[H:[0-9]+]], num_tokens, i32 16]
// The second weighted rms_norm has the first one's literals: same entry, other weight. Entries
// are named after their literals (entry_point.h): groups 1, cols 16, epsilon 1e-6.
// CHECK-NEXT: spark.launch "rms_norm" @kernels::@spark_rms_norm__i1_i16_f358637bd grid({{[^)]+}}) block [256, 1, 1] args [buffer [[H]], weight 5, buffer [[N:[0-9]+]], num_tokens, i32 1, i32 16, f32 9.99999997E-7]
// CHECK-NEXT: spark.launch "linear" @kernels::@spark_linear__{{[a-z0-9_]+}} grid({{[^)]+}}) block [256, 1, 1] args [buffer [[N]], weight 6, buffer [[GATE:[0-9]+]], num_tokens, i32 32, i32 16]
// CHECK-NEXT: spark.launch "linear" @kernels::@spark_linear__{{[a-z0-9_]+}} grid({{[^)]+}}) block [256, 1, 1] args [buffer [[N]], weight 7, buffer [[UP:[0-9]+]], num_tokens, i32 32, i32 16]
// CHECK-NEXT: spark.launch "gelu_mul" @kernels::@spark_gelu_mul__{{[a-z0-9_]+}} grid({{[^)]+}}) block [256, 1, 1] args [buffer [[GATE]], buffer [[UP]], buffer [[GM:[0-9]+]], num_tokens, i32 32]
// CHECK-NEXT: spark.launch "linear" @kernels::@spark_linear__{{[a-z0-9_]+}} grid({{[^)]+}}) block [256, 1, 1] args [buffer [[GM]], weight 8, buffer [[MLP:[0-9]+]], num_tokens, i32 16, i32 32]
// CHECK-NEXT: spark.launch "scalar_mul" @kernels::@spark_scalar_mul__{{[a-z0-9_]+}} grid({{[^)]+}}) block [256, 1, 1] args [buffer [[MLP]], weight 9, buffer [[H2:[0-9]+]], num_tokens, i32 16]
// The tied LM head reads weight 0, the embedding table.
// CHECK-NEXT: spark.launch "linear" @kernels::@spark_linear__{{[a-z0-9_]+}} grid({{[^)]+}}) block [256, 1, 1] args [buffer [[H2]], weight 0, buffer [[LG:[0-9]+]], num_tokens, i32 32, i32 16]
// CHECK-NEXT: spark.launch "softcap" @kernels::@spark_softcap__{{[a-z0-9_]+}} grid({{[^)]+}}) block [256, 1, 1] args [buffer [[LG]], buffer [[LOGITS]], num_tokens, i32 32, f32 3.000000e+01]
// CHECK-SAME: logits_tail
// The last launch draws each row's next token from the logits with the runtime's sampling
// parameters (kernel_ops.def sample): one block of 1024 threads per row.
// CHECK-NEXT: spark.launch "sample" @kernels::@spark_sample__i32 grid(per_token = 1, fixed = 0, divisor = 1) block [1024, 1, 1] args [buffer [[LOGITS]], buffer [[SAMPLING]], buffer [[TOKENS]], num_tokens, i32 32] {source = "sample"} logits_tail
// CHECK-NEXT: {{^ *}$}}
// CHECK-NOT: func.func
// CHECK: gpu.module @kernels {
// CHECK-DAG: llvm.func @spark_rms_norm(!llvm.ptr, !llvm.ptr, !llvm.ptr, i32, i32, i32, f32)
// CHECK-DAG: llvm.func @spark_kv_write(!llvm.ptr, !llvm.ptr, !llvm.ptr, !llvm.ptr, !llvm.ptr, !llvm.ptr, !llvm.ptr, i32, i32, i32, i32, i32)
// CHECK-DAG: llvm.func @spark_attention(!llvm.ptr, !llvm.ptr, !llvm.ptr, !llvm.ptr, !llvm.ptr, !llvm.ptr, !llvm.ptr, !llvm.ptr, i32, i32, i32, i32, i32, i32, f32, i32, i32, i32, !llvm.ptr)
// CHECK: gpu.func @spark_rms_norm__{{[a-z0-9_]+}}(%[[X:[a-z0-9]+]]: !llvm.ptr, %[[W:[a-z0-9]+]]: !llvm.ptr, %[[Y:[a-z0-9]+]]: !llvm.ptr, %[[T:[a-z0-9]+]]: i32) kernel attributes {known_block_size = array<i32: 256, 1, 1>} {
// CHECK-DAG: %[[GROUPS:.*]] = llvm.mlir.constant(1 : i32) : i32
// CHECK-DAG: %[[COLS:.*]] = llvm.mlir.constant(16 : i32) : i32
// CHECK-DAG: %[[EPS:.*]] = llvm.mlir.constant(9.99999997E-7 : f32) : f32
// CHECK: llvm.call @spark_rms_norm(%[[X]], %[[W]], %[[Y]], %[[T]], %[[GROUPS]], %[[COLS]], %[[EPS]])
// CHECK-NEXT: gpu.return
// CHECK: gpu.func @spark_rms_norm__{{[a-z0-9_]+}}(%{{.*}}) kernel attributes {known_block_size = array<i32: 256, 1, 1>} {
// CHECK: llvm.mlir.constant(8 : i32) : i32
// CHECK: gpu.func @spark_kv_write__{{[a-z0-9_]+}}(%[[K:[a-z0-9]+]]: !llvm.ptr, %[[V:[a-z0-9]+]]: !llvm.ptr, %[[P:[a-z0-9]+]]: !llvm.ptr, %[[S:[a-z0-9]+]]: !llvm.ptr, %[[BT:[a-z0-9]+]]: !llvm.ptr, %[[KC:[a-z0-9]+]]: !llvm.ptr, %[[VC:[a-z0-9]+]]: !llvm.ptr, %[[T:[a-z0-9]+]]: i32, %[[CAP:[a-z0-9]+]]: i32) kernel attributes {known_block_size = array<i32: 256, 1, 1>} {
// CHECK-DAG: %[[KVH:.*]] = llvm.mlir.constant(1 : i32) : i32
// CHECK-DAG: %[[HD:.*]] = llvm.mlir.constant(8 : i32) : i32
// CHECK-DAG: %[[DT:.*]] = llvm.mlir.constant(0 : i32) : i32
// CHECK: llvm.call @spark_kv_write(%[[K]], %[[V]], %[[P]], %[[S]], %[[BT]], %[[KC]], %[[VC]], %[[T]], %[[KVH]], %[[HD]], %[[CAP]], %[[DT]])
// CHECK-NEXT: gpu.return
// CHECK: gpu.func @spark_attention__{{[a-z0-9_]+}}(%[[Q:[a-z0-9]+]]: !llvm.ptr, %[[P:[a-z0-9]+]]: !llvm.ptr, %[[S:[a-z0-9]+]]: !llvm.ptr, %[[BT:[a-z0-9]+]]: !llvm.ptr, %[[KC:[a-z0-9]+]]: !llvm.ptr, %[[VC:[a-z0-9]+]]: !llvm.ptr, %[[Y:[a-z0-9]+]]: !llvm.ptr, %[[PART:[a-z0-9]+]]: !llvm.ptr, %[[T:[a-z0-9]+]]: i32, %[[CAP:[a-z0-9]+]]: i32, %[[LV:[a-z0-9]+]]: !llvm.ptr) kernel attributes {known_block_size = array<i32: 128, 1, 1>} {
// CHECK-DAG: %[[QH:.*]] = llvm.mlir.constant(2 : i32) : i32
// CHECK-DAG: %[[KVH:.*]] = llvm.mlir.constant(1 : i32) : i32
// CHECK-DAG: %[[HD:.*]] = llvm.mlir.constant(8 : i32) : i32
// CHECK-DAG: %[[WIN:.*]] = llvm.mlir.constant(16 : i32) : i32
// CHECK-DAG: %[[SCALE:.*]] = llvm.mlir.constant(1.000000e+00 : f32) : f32
// CHECK-DAG: %[[NOSPLIT:.*]] = llvm.mlir.constant(1 : i32) : i32
// CHECK-DAG: %[[ROWS:.*]] = llvm.mlir.constant(0 : i32) : i32
// CHECK-DAG: %[[ADT:.*]] = llvm.mlir.constant(0 : i32) : i32
// CHECK: llvm.call @spark_attention(%[[Q]], %[[P]], %[[S]], %[[BT]], %[[KC]], %[[VC]], %[[Y]], %[[PART]], %[[T]], %[[QH]], %[[KVH]], %[[HD]], %[[CAP]], %[[WIN]], %[[SCALE]], %[[NOSPLIT]], %[[ROWS]], %[[ADT]], %[[LV]])
// CHECK-NEXT: gpu.return
// CHECK-NOT: gpu.func @spark_rms_norm__{{[a-z0-9_]+}}
// CHECK-NOT: gpu.func @spark_attention__{{[a-z0-9_]+}}
// CHECK: {{^// -{5}$}}

spark.kv_cache @kv.layers.0 sliding {window = 16 : i64, kv_heads = 1 : i64, head_dim = 8 : i64}
spark.kv_cache @kv.layers.1 full {window = 0 : i64, kv_heads = 1 : i64, head_dim = 8 : i64}

func.func @forward(%ids: tensor<?xi32> {spark.input = "ids"}, %pos: tensor<?xi32> {spark.input = "positions"}) -> tensor<?x32xf32> {
  %table = spark.weight "model.embed_tokens.weight" : tensor<32x16xbf16>
  %e = spark.embedding %ids, %table {scale = 4.0 : f32} : (tensor<?xi32>, tensor<32x16xbf16>) -> tensor<?x16xf32>
  %nw0 = spark.weight "model.layers.0.input_layernorm.weight" : tensor<16xbf16>
  %a = spark.rms_norm %e, %nw0 {epsilon = 1.0e-6 : f32} : (tensor<?x16xf32>, tensor<16xbf16>) -> tensor<?x16xf32>
  %wq = spark.weight "model.layers.0.self_attn.q_proj.weight" : tensor<16x16xbf16>
  %wk = spark.weight "model.layers.0.self_attn.k_proj.weight" : tensor<8x16xbf16>
  %q = spark.linear %a, %wq : (tensor<?x16xf32>, tensor<16x16xbf16>) -> tensor<?x16xf32>
  %k = spark.linear %a, %wk : (tensor<?x16xf32>, tensor<8x16xbf16>) -> tensor<?x8xf32>
  %q3 = spark.reshape %q : tensor<?x16xf32> to tensor<?x2x8xf32>
  %k3 = spark.reshape %k : tensor<?x8xf32> to tensor<?x1x8xf32>
  %v3 = spark.rms_norm %k3 {epsilon = 1.0e-6 : f32} : (tensor<?x1x8xf32>) -> tensor<?x1x8xf32>
  %qr = spark.rope %q3, %pos {theta = 10000.0 : f32, rotated_pairs = 4 : i64, factor = 1.0 : f32} : (tensor<?x2x8xf32>, tensor<?xi32>) -> tensor<?x2x8xf32>
  %kr = spark.rope %k3, %pos {theta = 10000.0 : f32, rotated_pairs = 4 : i64, factor = 1.0 : f32} : (tensor<?x1x8xf32>, tensor<?xi32>) -> tensor<?x1x8xf32>
  %o0 = spark.attention %qr, %kr, %v3, %pos {cache = @kv.layers.0, window = 16 : i64, scale = 1.0 : f32} : (tensor<?x2x8xf32>, tensor<?x1x8xf32>, tensor<?x1x8xf32>, tensor<?xi32>) -> tensor<?x2x8xf32> loc("layers.0.self_attn")
  %o1 = spark.attention %qr, %kr, %v3, %pos {cache = @kv.layers.0, window = 16 : i64, scale = 1.0 : f32, kv_shared} : (tensor<?x2x8xf32>, tensor<?x1x8xf32>, tensor<?x1x8xf32>, tensor<?xi32>) -> tensor<?x2x8xf32> loc("layers.1.self_attn")
  %o = spark.add %o0, %o1 : tensor<?x2x8xf32>
  %o2 = spark.reshape %o : tensor<?x2x8xf32> to tensor<?x16xf32>
  %wo = spark.weight "model.layers.0.self_attn.o_proj.weight" : tensor<16x16xbf16>
  %attn = spark.linear %o2, %wo : (tensor<?x16xf32>, tensor<16x16xbf16>) -> tensor<?x16xf32>
  %h = spark.add %e, %attn : tensor<?x16xf32>
  %nw1 = spark.weight "model.layers.0.pre_feedforward_layernorm.weight" : tensor<16xbf16>
  %n = spark.rms_norm %h, %nw1 {epsilon = 1.0e-6 : f32} : (tensor<?x16xf32>, tensor<16xbf16>) -> tensor<?x16xf32>
  %wg = spark.weight "model.layers.0.mlp.gate_proj.weight" : tensor<32x16xbf16>
  %wu = spark.weight "model.layers.0.mlp.up_proj.weight" : tensor<32x16xbf16>
  %gate = spark.linear %n, %wg : (tensor<?x16xf32>, tensor<32x16xbf16>) -> tensor<?x32xf32>
  %up = spark.linear %n, %wu : (tensor<?x16xf32>, tensor<32x16xbf16>) -> tensor<?x32xf32>
  %gm = spark.gelu_mul %gate, %up : tensor<?x32xf32>
  %wd = spark.weight "model.layers.0.mlp.down_proj.weight" : tensor<16x32xbf16>
  %mlp = spark.linear %gm, %wd : (tensor<?x32xf32>, tensor<16x32xbf16>) -> tensor<?x16xf32>
  %ls = spark.weight "model.layers.0.layer_scalar" : tensor<1xbf16>
  %h2 = spark.scalar_mul %mlp, %ls : (tensor<?x16xf32>, tensor<1xbf16>) -> tensor<?x16xf32>
  %logits = spark.linear %h2, %table : (tensor<?x16xf32>, tensor<32x16xbf16>) -> tensor<?x32xf32>
  %capped = spark.softcap %logits {cap = 30.0 : f32} : tensor<?x32xf32>
  return %capped : tensor<?x32xf32>
}

// -----

// Attention over a full cache (or a long window) is split over the KV length: a scratch buffer of
// partial records (ceil(split_rows / max_tokens) x q_heads x (head_dim + 4) floats per row),
// attention with max_splits = min(ceil(256 / q_heads), 64; sliding: ceil(window / 64)) and
// split_rows = max(max_tokens, max_splits x min(32, max_tokens)), then attention_merge into the result. A short window
// (64 keys) is not split.
// CHECK-LABEL: spark.program @forward
// CHECK-SAME: #spark.buffer<name = "layers.0.self_attn.partials", dtype = f32, row_shape = [64, 2, 12], offset = {{[0-9]+}}>
// CHECK-SAME: #spark.buffer<name = "layers.1.self_attn.partials", dtype = f32, row_shape = [4, 2, 12], offset = {{[0-9]+}}>
// CHECK-SAME: sequences = [[SEQ:[0-9]+]]>
// CHECK: spark.launch "attention" @kernels::@spark_attention__{{[a-z0-9_]+}} grid(per_token = 2, fixed = 128, divisor = 1) block [128, 1, 1] args [buffer [[Q:[0-9]+]], buffer 1, buffer [[SEQ]], kv_block_table 0, k_cache 0, v_cache 0, buffer [[Y0:[0-9]+]], buffer [[P0:[0-9]+]], num_tokens, i32 2, i32 1, i32 8, kv_capacity 0, i32 0, f32 1.000000e+00, i32 64, i32 256, i32 0, null] {source = "layers.0.self_attn"}
// CHECK-NEXT: spark.launch "attention_merge" @kernels::@spark_attention_merge__{{[a-z0-9_]+}} grid(per_token = 2, fixed = 0, divisor = 1) block [128, 1, 1] args [buffer [[P0]], buffer [[Y0]], num_tokens, i32 2, i32 8, i32 64, i32 256] {source = "layers.0.self_attn.merge"}
// CHECK: spark.launch "attention" @kernels::@spark_attention__{{[a-z0-9_]+}} grid({{[^)]+}}) block [128, 1, 1] args [buffer [[Q]], buffer 1, buffer [[SEQ]], kv_block_table 1, k_cache 1, v_cache 1, buffer [[Y1:[0-9]+]], buffer [[P1:[0-9]+]], num_tokens, i32 2, i32 1, i32 8, kv_capacity 1, i32 200, f32 1.000000e+00, i32 4, i32 16, i32 0, null] {source = "layers.1.self_attn"}
// CHECK-NEXT: spark.launch "attention_merge" @kernels::@spark_attention_merge__{{[a-z0-9_]+}} grid({{[^)]+}}) block [128, 1, 1] args [buffer [[P1]], buffer [[Y1]], num_tokens, i32 2, i32 8, i32 4, i32 16] {source = "layers.1.self_attn.merge"}
// CHECK: spark.launch "attention" @kernels::@spark_attention__{{[a-z0-9_]+}} {{.*}} null, num_tokens, i32 2, i32 1, i32 8, kv_capacity 2, i32 64, f32 1.000000e+00, i32 1, i32 0, i32 0, null] {source = "layers.2.self_attn"}
// CHECK-NOT: attention_merge
// CHECK: gpu.module @kernels {
// CHECK-DAG: llvm.func @spark_attention_merge(!llvm.ptr, !llvm.ptr, i32, i32, i32, i32, i32)

spark.kv_cache @kv.layers.0 full {window = 0 : i64, kv_heads = 1 : i64, head_dim = 8 : i64}
spark.kv_cache @kv.layers.1 sliding {window = 200 : i64, kv_heads = 1 : i64, head_dim = 8 : i64}
spark.kv_cache @kv.layers.2 sliding {window = 64 : i64, kv_heads = 1 : i64, head_dim = 8 : i64}

func.func @forward(%ids: tensor<?xi32> {spark.input = "ids"}, %pos: tensor<?xi32> {spark.input = "positions"}) -> tensor<?x16xf32> {
  %table = spark.weight "model.embed_tokens.weight" : tensor<32x16xbf16>
  %e = spark.embedding %ids, %table {scale = 4.0 : f32} : (tensor<?xi32>, tensor<32x16xbf16>) -> tensor<?x16xf32>
  %q = spark.reshape %e : tensor<?x16xf32> to tensor<?x2x8xf32>
  %wk = spark.weight "model.layers.0.self_attn.k_proj.weight" : tensor<8x16xbf16>
  %k0 = spark.linear %e, %wk : (tensor<?x16xf32>, tensor<8x16xbf16>) -> tensor<?x8xf32>
  %k = spark.reshape %k0 : tensor<?x8xf32> to tensor<?x1x8xf32>
  %o0 = spark.attention %q, %k, %k, %pos {cache = @kv.layers.0, window = 0 : i64, scale = 1.0 : f32} : (tensor<?x2x8xf32>, tensor<?x1x8xf32>, tensor<?x1x8xf32>, tensor<?xi32>) -> tensor<?x2x8xf32> loc("layers.0.self_attn")
  %o1 = spark.attention %q, %k, %k, %pos {cache = @kv.layers.1, window = 200 : i64, scale = 1.0 : f32} : (tensor<?x2x8xf32>, tensor<?x1x8xf32>, tensor<?x1x8xf32>, tensor<?xi32>) -> tensor<?x2x8xf32> loc("layers.1.self_attn")
  %o2 = spark.attention %q, %k, %k, %pos {cache = @kv.layers.2, window = 64 : i64, scale = 1.0 : f32} : (tensor<?x2x8xf32>, tensor<?x1x8xf32>, tensor<?x1x8xf32>, tensor<?xi32>) -> tensor<?x2x8xf32> loc("layers.2.self_attn")
  %s0 = spark.add %o0, %o1 : tensor<?x2x8xf32>
  %s1 = spark.add %s0, %o2 : tensor<?x2x8xf32>
  %r = spark.reshape %s1 : tensor<?x2x8xf32> to tensor<?x16xf32>
  return %r : tensor<?x16xf32>
}

// -----

// MoE and soft tokens: inputs are found by their spark.input name, mask_tokens pads its ids with
// -1, a scatter_nd whose dest has one use works in place (no copy), moe_router becomes rms_norm +
// linear + moe_topk, moe_experts becomes moe_gate_up + moe_down through a scratch buffer.
// CHECK-LABEL: spark.program @forward
// CHECK-SAME: #spark.buffer<name = "moe_router", dtype = i32, row_shape = [2], offset = {{[0-9]+}}>, #spark.buffer<name = "moe_experts.act", dtype = f32, row_shape = [2, 8], offset = {{[0-9]+}}>
// CHECK-SAME: inputs = #spark.inputs<ids = 0, positions = 3, soft_embeddings = 2, soft_indices = 1, sampling = [[SAMPLING:[0-9]+]]>
// CHECK-SAME: max_tokens = 4 : i64
// CHECK-SAME: outputs = #spark.outputs<logits = [[LOGITS:[0-9]+]], tokens = [[TOKENS:[0-9]+]]>
// CHECK-NEXT: spark.launch "mask_tokens" @kernels::@spark_mask_tokens__{{[a-z0-9_]+}} grid({{[^)]+}}) block [256, 1, 1] args [buffer 0, buffer [[M:[0-9]+]], num_tokens, i32 30, i32 31, i32 -1, i32 0]
// CHECK-NEXT: spark.launch "embedding" @kernels::@spark_embedding__{{[a-z0-9_]+}} grid({{[^)]+}}) block [256, 1, 1] args [buffer [[M]], weight 0, buffer [[E:[0-9]+]], num_tokens, i32 32, i32 16, f32 4.000000e+00]
// CHECK-NEXT: spark.launch "scatter_rows" @kernels::@spark_scatter_rows__{{[a-z0-9_]+}} grid({{[^)]+}}) block [256, 1, 1] args [buffer [[E]], buffer 1, buffer 2, num_tokens, num_soft_tokens, i32 16] {source = "scatter_nd"}
// With max-tokens >= 16 (kMoeGroupMinTokens) the experts get a GEMV launch pair (path 0, for
// calls of 1..15 tokens) and a grouped pair (path 1, for 16 or more: separate entries), the
// grouped moe_down a workspace of top_k x hidden floats per token, and moe_combine sums its rows.
// GROUPED: #spark.buffer<name = "moe_experts.partials", dtype = f32, row_shape = [2, 16], offset = {{[0-9]+}}>
// GROUPED: spark.launch "moe_gate_up" @kernels::@spark_moe_gate_up__{{[a-z0-9_]+}} {{.*}} i32 0] {source = "moe_experts.gate_up"}
// GROUPED-NEXT: spark.launch "moe_gate_up" @kernels::@spark_moe_gate_up__{{[a-z0-9_]+}} {{.*}} i32 1] {source = "moe_experts.gate_up_grouped"}
// GROUPED-NEXT: spark.launch "moe_down" @kernels::@spark_moe_down__{{[a-z0-9_]+}} {{.*}} buffer [[Y:[0-9]+]], null, {{.*}} i32 0] {source = "moe_experts.down"}
// GROUPED-NEXT: spark.launch "moe_down" @kernels::@spark_moe_down__{{[a-z0-9_]+}} {{.*}} buffer [[Y]], buffer [[P:[0-9]+]], {{.*}} i32 1] {source = "moe_experts.down_grouped"}
// GROUPED-NEXT: spark.launch "moe_combine" @kernels::@spark_moe_combine__{{[a-z0-9_]+}} grid({{[^)]+}}) block [256, 1, 1] args [buffer [[P]], buffer [[Y]], num_tokens, i32 16, i32 2] {source = "moe_experts.combine"}
// The router: rms_norm with the router scale as weight, the logits as a linear over proj, then
// moe_topk with logit_scale = hidden^-0.5 (16^-0.5).
// CHECK-NEXT: spark.launch "rms_norm" @kernels::@spark_rms_norm__{{[a-z0-9_]+}} grid({{[^)]+}}) block [256, 1, 1] args [buffer [[E]], weight 1, buffer [[RN:[0-9]+]], num_tokens, i32 1, i32 16, f32 9.99999997E-7] {source = "moe_router.norm"}
// CHECK-NEXT: spark.launch "linear" @kernels::@spark_linear__{{[a-z0-9_]+}} grid({{[^)]+}}) block [256, 1, 1] args [buffer [[RN]], weight 2, buffer [[RL:[0-9]+]], num_tokens, i32 4, i32 16] {source = "moe_router.logits"}
// CHECK-NEXT: spark.launch "moe_topk" @kernels::@spark_moe_topk__{{[a-z0-9_]+}} grid({{[^)]+}}) block [128, 1, 1] args [buffer [[RL]], weight 3, buffer [[RW:[0-9]+]], buffer [[RI:[0-9]+]], num_tokens, i32 4, i32 2, f32 2.500000e-01] {source = "moe_router"}
// CHECK-NEXT: spark.launch "moe_gate_up" @kernels::@spark_moe_gate_up__{{[a-z0-9_]+}} grid({{[^)]+}}) block [256, 1, 1] args [buffer [[E]], weight 4, buffer [[RI]], buffer [[ACT:[0-9]+]], num_tokens, i32 16, i32 8, i32 4, i32 2, i32 0] {source = "moe_experts.gate_up"}
// CHECK-NEXT: spark.launch "moe_down" @kernels::@spark_moe_down__{{[a-z0-9_]+}} grid({{[^)]+}}) block [256, 1, 1] args [buffer [[ACT]], weight 5, buffer [[RW]], buffer [[RI]], buffer [[Y:[0-9]+]], null, num_tokens, i32 16, i32 8, i32 4, i32 2, i32 0] {source = "moe_experts.down"}
// CHECK-NEXT: spark.launch "add" @kernels::@spark_add__{{[a-z0-9_]+}} grid({{[^)]+}}) block [256, 1, 1] args [buffer [[E]], buffer [[Y]], buffer [[LOGITS]], num_tokens, i32 16]
// CHECK-NEXT: spark.launch "sample" @kernels::@spark_sample__i16 {{.*}} args [buffer [[LOGITS]], buffer [[SAMPLING]], buffer [[TOKENS]], num_tokens, i32 16]
// CHECK-NEXT: {{^ *}$}}
// CHECK-NOT: func.func
// CHECK: gpu.module @kernels {
// CHECK-DAG: llvm.func @spark_moe_gate_up(!llvm.ptr, !llvm.ptr, !llvm.ptr, !llvm.ptr, i32, i32, i32, i32, i32, i32)
// CHECK-DAG: llvm.func @spark_moe_down(!llvm.ptr, !llvm.ptr, !llvm.ptr, !llvm.ptr, !llvm.ptr, !llvm.ptr, i32, i32, i32, i32, i32, i32)
// CHECK-DAG: llvm.func @spark_moe_topk(!llvm.ptr, !llvm.ptr, !llvm.ptr, !llvm.ptr, i32, i32, i32, f32)
// CHECK: gpu.func @spark_moe_topk__{{[a-z0-9_]+}}(%{{.*}}) kernel attributes {known_block_size = array<i32: 128, 1, 1>}
// CHECK: gpu.func @spark_moe_gate_up__{{[a-z0-9_]+}}(%{{.*}}) kernel attributes {known_block_size = array<i32: 256, 1, 1>}
// CHECK: gpu.func @spark_moe_down__{{[a-z0-9_]+}}(%{{.*}}) kernel attributes {known_block_size = array<i32: 256, 1, 1>}
// CHECK: {{^// -{5}$}}

func.func @forward(%ids: tensor<?xi32> {spark.input = "ids"}, %soft_idx: tensor<?xi32> {spark.input = "soft_indices"}, %soft: tensor<?x16xf32> {spark.input = "soft_embeddings"}, %pos: tensor<?xi32> {spark.input = "positions"}) -> tensor<?x16xf32> {
  %masked = spark.mask_tokens %ids {token_ids = array<i32: 30, 31>, replacement = 0 : i32} : tensor<?xi32>
  %table = spark.weight "model.embed_tokens.weight" : tensor<32x16xbf16>
  %e = spark.embedding %masked, %table {scale = 4.0 : f32} : (tensor<?xi32>, tensor<32x16xbf16>) -> tensor<?x16xf32>
  %h = spark.scatter_nd %e, %soft_idx, %soft : (tensor<?x16xf32>, tensor<?xi32>, tensor<?x16xf32>) -> tensor<?x16xf32>
  %rscale = spark.weight "model.layers.0.router.scale" : tensor<16xbf16>
  %rproj = spark.weight "model.layers.0.router.proj.weight" : tensor<4x16xbf16>
  %rpes = spark.weight "model.layers.0.router.per_expert_scale" : tensor<4xbf16>
  %w, %i = spark.moe_router %h, %rscale, %rproj, %rpes {top_k = 2 : i64, epsilon = 1.0e-6 : f32} : (tensor<?x16xf32>, tensor<16xbf16>, tensor<4x16xbf16>, tensor<4xbf16>) -> (tensor<?x2xf32>, tensor<?x2xi32>)
  %gu = spark.weight "model.layers.0.experts.gate_up_proj" : tensor<4x16x16xbf16>
  %down = spark.weight "model.layers.0.experts.down_proj" : tensor<4x16x8xbf16>
  %y = spark.moe_experts %h, %gu, %down, %w, %i : (tensor<?x16xf32>, tensor<4x16x16xbf16>, tensor<4x16x8xbf16>, tensor<?x2xf32>, tensor<?x2xi32>) -> tensor<?x16xf32>
  %out = spark.add %h, %y : tensor<?x16xf32>
  return %out : tensor<?x16xf32>
}

// -----

// A scatter_nd whose dest is read again copies it first (a transfer: the runtime copies the
// call's rows, no kernel); gelu, mul, scale and select_group lower to their kernels, the reshape
// between them to nothing.
// CHECK-LABEL: spark.program @forward
// CHECK-SAME: outputs = #spark.outputs<logits = [[LOGITS:[0-9]+]], tokens = [[TOKENS:[0-9]+]]>
// CHECK-NEXT: spark.launch "embedding" @kernels::@spark_embedding__{{[a-z0-9_]+}} grid(per_token = 16, fixed = 0, divisor = 256) block [256, 1, 1] args [buffer 0, weight 0, buffer [[E:[0-9]+]], num_tokens, i32 32, i32 16, f32 4.000000e+00]
// CHECK-NEXT: spark.transfer "copy" args [buffer [[E]], buffer [[S:[0-9]+]], num_tokens, i32 16] {source = "scatter_nd.copy"}
// CHECK-NEXT: spark.launch "scatter_rows" @kernels::@spark_scatter_rows__{{[a-z0-9_]+}} grid({{[^)]+}}) block [256, 1, 1] args [buffer [[S]], buffer 3, buffer 2, num_tokens, num_soft_tokens, i32 16] {source = "scatter_nd"}
// CHECK-NEXT: spark.launch "gelu" @kernels::@spark_gelu__{{[a-z0-9_]+}} grid({{[^)]+}}) block [256, 1, 1] args [buffer [[S]], buffer [[G:[0-9]+]], num_tokens, i32 16]
// CHECK-NEXT: spark.launch "mul" @kernels::@spark_mul__{{[a-z0-9_]+}} grid({{[^)]+}}) block [256, 1, 1] args [buffer [[G]], buffer [[E]], buffer [[M:[0-9]+]], num_tokens, i32 16]
// CHECK-NEXT: spark.launch "scale" @kernels::@spark_scale__{{[a-z0-9_]+}} grid({{[^)]+}}) block [256, 1, 1] args [buffer [[M]], buffer [[SC:[0-9]+]], num_tokens, i32 16, f32 5.000000e-01]
// CHECK-NEXT: spark.launch "select_group" @kernels::@spark_select_group__{{[a-z0-9_]+}} grid({{[^)]+}}) block [256, 1, 1] args [buffer [[SC]], buffer [[P:[0-9]+]], num_tokens, i32 4, i32 4, i32 3]
// CHECK-NEXT: spark.launch "linear" @kernels::@spark_linear__{{[a-z0-9_]+}} grid({{[^)]+}}) block [256, 1, 1] args [buffer [[P]], weight 1, buffer [[LOGITS]], num_tokens, i32 16, i32 4]
// CHECK-NEXT: spark.launch "sample" {{.*}} args [buffer [[LOGITS]], {{.*}}, buffer [[TOKENS]]
// CHECK-NEXT: {{^ *}$}}
// CHECK: {{^// -{5}$}}

func.func @forward(%ids: tensor<?xi32> {spark.input = "ids"}, %pos: tensor<?xi32> {spark.input = "positions"}, %soft: tensor<?x16xf32> {spark.input = "soft_embeddings"}, %soft_idx: tensor<?xi32> {spark.input = "soft_indices"}) -> tensor<?x16xf32> {
  %table = spark.weight "model.embed_tokens.weight" : tensor<32x16xbf16>
  %e = spark.embedding %ids, %table {scale = 4.0 : f32} : (tensor<?xi32>, tensor<32x16xbf16>) -> tensor<?x16xf32>
  %h = spark.scatter_nd %e, %soft_idx, %soft : (tensor<?x16xf32>, tensor<?xi32>, tensor<?x16xf32>) -> tensor<?x16xf32>
  %g = spark.gelu %h : tensor<?x16xf32>
  %m = spark.mul %g, %e : tensor<?x16xf32>
  %s = spark.scale %m {factor = 0.5 : f32} : tensor<?x16xf32>
  %r = spark.reshape %s : tensor<?x16xf32> to tensor<?x4x4xf32>
  %p = spark.select_group %r {index = 3 : i64} : tensor<?x4x4xf32> to tensor<?x4xf32>
  %w = spark.weight "model.lm_head.weight" : tensor<16x4xbf16>
  %l = spark.linear %p, %w : (tensor<?x4xf32>, tensor<16x4xbf16>) -> tensor<?x16xf32>
  return %l : tensor<?x16xf32>
}

// -----

// Arena planning: a buffer's offset is reused once its last reader has run (first fit, 256-byte
// aligned, max-tokens rows); inputs (the sampling parameters too) and the logits stay live; the
// sampled tokens take bytes free by the time the last launch runs.
// CHECK-LABEL: spark.program @forward
// CHECK-SAME: arena_bytes = 1280 : i64
// CHECK-SAME: buffers = [#spark.buffer<name = "%ids", dtype = i32, row_shape = [], offset = 0>, #spark.buffer<name = "%positions", dtype = i32, row_shape = [], offset = 256>, #spark.buffer<name = "embedding", dtype = f32, row_shape = [16], offset = 768>, #spark.buffer<name = "gelu", dtype = f32, row_shape = [16], offset = 1024>, #spark.buffer<name = "gelu", dtype = f32, row_shape = [16], offset = 768>, #spark.buffer<name = "gelu", dtype = f32, row_shape = [16], offset = 1024>, #spark.buffer<name = "gelu", dtype = f32, row_shape = [16], offset = 768>, #spark.buffer<name = "%sampling", dtype = i32, row_shape = [8], offset = 512>, #spark.buffer<name = "tokens", dtype = i32, row_shape = [], offset = 1024>]
// CHECK-SAME: outputs = #spark.outputs<logits = 6, tokens = 8>
// CHECK: {{^// -{5}$}}

func.func @forward(%ids: tensor<?xi32> {spark.input = "ids"}, %pos: tensor<?xi32> {spark.input = "positions"}) -> tensor<?x16xf32> {
  %table = spark.weight "model.embed_tokens.weight" : tensor<32x16xbf16>
  %e = spark.embedding %ids, %table {scale = 1.0 : f32} : (tensor<?xi32>, tensor<32x16xbf16>) -> tensor<?x16xf32>
  %g1 = spark.gelu %e : tensor<?x16xf32>
  %g2 = spark.gelu %g1 : tensor<?x16xf32>
  %g3 = spark.gelu %g2 : tensor<?x16xf32>
  %g4 = spark.gelu %g3 : tensor<?x16xf32>
  return %g4 : tensor<?x16xf32>
}

// -----

// Does not apply outside the entry: other functions and the KV caches are left as they are.
// CHECK: spark.kv_cache @kv.layers.0 full
// CHECK-LABEL: func.func @helper
// CHECK-NEXT: spark.gelu
// CHECK-NEXT: return
// CHECK-LABEL: spark.program @forward
// CHECK-NEXT: spark.launch "embedding"
// CHECK-NEXT: spark.launch "sample"
// CHECK-NEXT: {{^ *}$}}
// CHECK-NOT: func.func @forward
// CHECK: gpu.module @kernels
spark.kv_cache @kv.layers.0 full {window = 0 : i64, kv_heads = 1 : i64, head_dim = 8 : i64}

func.func @helper(%x: tensor<?x16xf32>) -> tensor<?x16xf32> {
  %0 = spark.gelu %x : tensor<?x16xf32>
  return %0 : tensor<?x16xf32>
}

func.func @forward(%ids: tensor<?xi32> {spark.input = "ids"}, %pos: tensor<?xi32> {spark.input = "positions"}) -> tensor<?x16xf32> {
  %table = spark.weight "model.embed_tokens.weight" : tensor<32x16xbf16>
  %e = spark.embedding %ids, %table {scale = 1.0 : f32} : (tensor<?xi32>, tensor<32x16xbf16>) -> tensor<?x16xf32>
  return %e : tensor<?x16xf32>
}

// -----

// A scatter_nd into a reshape view of a value that is read later copies first (in place it would
// clobber %e, which the add reads).
// CHECK-LABEL: spark.program @forward
// CHECK: spark.launch "embedding" {{.*}} args [buffer {{[0-9]+}}, weight 0, buffer [[E:[0-9]+]]
// CHECK: spark.transfer "copy" args [buffer [[E]], buffer [[COPY:[0-9]+]]
// CHECK: spark.launch "scatter_rows" {{.*}} args [buffer [[COPY]]
// CHECK: spark.launch "add" {{.*}} args [buffer [[COPY]], buffer [[E]]
spark.kv_cache @kv.layers.0 full {window = 0 : i64, kv_heads = 1 : i64, head_dim = 8 : i64}
func.func @forward(%ids: tensor<?xi32> {spark.input = "ids"}, %pos: tensor<?xi32> {spark.input = "positions"}, %soft: tensor<?x16xf32> {spark.input = "soft_embeddings"}, %sidx: tensor<?xi32> {spark.input = "soft_indices"}) -> tensor<?x16xf32> {
  %table = spark.weight "model.embed_tokens.weight" : tensor<32x16xbf16>
  %e = spark.embedding %ids, %table {scale = 1.0 : f32} : (tensor<?xi32>, tensor<32x16xbf16>) -> tensor<?x16xf32>
  %v = spark.reshape %e : tensor<?x16xf32> to tensor<?x2x8xf32>
  %v2 = spark.reshape %v : tensor<?x2x8xf32> to tensor<?x16xf32>
  %h = spark.scatter_nd %v2, %sidx, %soft : (tensor<?x16xf32>, tensor<?xi32>, tensor<?x16xf32>) -> tensor<?x16xf32>
  %y = spark.add %h, %e : tensor<?x16xf32>
  return %y : tensor<?x16xf32>
}

// -----

// The fused norms (spark-fuse-norms): residual_rms_norm and rms_norm_rope lower to one launch
// each, arguments in kernel_abi.h order (a weight-less norm passes null).
// CHECK-LABEL: spark.program @forward
// CHECK: spark.launch "rms_norm_rope" @kernels::@spark_rms_norm_rope__{{[a-z0-9_]+}} grid({{[^)]+}}) block [256, 1, 1] args [buffer [[Q:[0-9]+]], weight {{[0-9]+}}, buffer 1, buffer [[QR:[0-9]+]], num_tokens, i32 2, i32 8, i32 4, f32 1.000000e+04, f32 1.000000e+00, f32 9.99999997E-7]
// CHECK: spark.launch "residual_rms_norm" @kernels::@spark_residual_rms_norm__{{[a-z0-9_]+}} grid({{[^)]+}}) block [256, 1, 1] args [buffer [[X:[0-9]+]], null, buffer [[R:[0-9]+]], buffer [[Y:[0-9]+]], num_tokens, i32 16, f32 9.99999997E-7]
// CHECK: gpu.func @spark_rms_norm_rope__{{[a-z0-9_]+}}(
// CHECK: llvm.call @spark_rms_norm_rope(
// CHECK: gpu.func @spark_residual_rms_norm__{{[a-z0-9_]+}}(
// CHECK: llvm.call @spark_residual_rms_norm(

func.func @forward(%ids: tensor<?xi32> {spark.input = "ids"}, %pos: tensor<?xi32> {spark.input = "positions"}) -> tensor<?x16xf32> {
  %w = spark.weight "model.layers.0.self_attn.q_norm.weight" : tensor<8xbf16>
  %table = spark.weight "model.embed_tokens.weight" : tensor<32x16xbf16>
  %e = spark.embedding %ids, %table {scale = 4.0 : f32} : (tensor<?xi32>, tensor<32x16xbf16>) -> tensor<?x16xf32>
  %q3 = spark.reshape %e : tensor<?x16xf32> to tensor<?x2x8xf32>
  %qr = spark.rms_norm_rope %q3, %pos, %w {epsilon = 1.0e-6 : f32, theta = 10000.0 : f32, rotated_pairs = 4 : i64, factor = 1.0 : f32} : (tensor<?x2x8xf32>, tensor<?xi32>, tensor<8xbf16>) -> tensor<?x2x8xf32>
  %q2 = spark.reshape %qr : tensor<?x2x8xf32> to tensor<?x16xf32>
  %h = spark.residual_rms_norm %q2, %e {epsilon = 1.0e-6 : f32} : (tensor<?x16xf32>, tensor<?x16xf32>) -> tensor<?x16xf32>
  return %h : tensor<?x16xf32>
}
