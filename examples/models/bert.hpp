// W3 of bench/README.md: a BERT-base encoder (12 layers, hidden 768,
// 12 heads x 64, FFN 3072, erf GELU, post-LN, eps 1e-12) over a sequence of
// any length, written with the builder.
#pragma once

#include <nimble/builder.hpp>

namespace nimble::models {

inline constexpr std::int64_t kBertHidden = 768;
inline constexpr std::int64_t kBertHeads = 12;
inline constexpr std::int64_t kBertFfn = 3072;
inline constexpr int kBertLayers = 12;

/// The 16 weights of one layer, in workloads.md order.
inline std::vector<Param> bert_layer_weights() {
  const std::int64_t D = kBertHidden, F = kBertFfn;
  return {{"wq", f32({D, D})}, {"bq", f32({D})},     {"wk", f32({D, D})}, {"bk", f32({D})},
          {"wv", f32({D, D})}, {"bv", f32({D})},     {"wo", f32({D, D})}, {"bo", f32({D})},
          {"ln1_gamma", f32({D})}, {"ln1_beta", f32({D})}, {"w1", f32({F, D})}, {"b1", f32({F})},
          {"w2", f32({D, F})}, {"b2", f32({D})},     {"ln2_gamma", f32({D})}, {"ln2_beta", f32({D})}};
}

/// Defines @bert_layer(x: f32[n, 768], 16 weights) -> f32[n, 768] in `b`.
inline Function build_bert_layer(Builder& b) {
  const Dim n{"n"};
  std::vector<Param> params{{"x", f32({n, kBertHidden})}};
  for (Param& w : bert_layer_weights()) params.push_back(std::move(w));
  return b.def("bert_layer", params, [&](std::span<const Expr> w) {
    Expr x = w[0];
    // [n, 768] -> [12, n, 64]
    auto heads = [&](Expr t) {
      return transpose(reshape(t, {0, kBertHeads, kBertHidden / kBertHeads}), {1, 0, 2});
    };
    Expr q = heads(dense(x, w[1], w[2]));
    Expr k = heads(dense(x, w[3], w[4]));
    Expr v = heads(dense(x, w[5], w[6]));
    Expr p = softmax(batch_matmul(q, k, false, /*transpose_b=*/true) * 0.125);
    Expr ctx = reshape(transpose(batch_matmul(p, v), {1, 0, 2}), {0, kBertHidden});
    Expr x1 = layer_norm(x + dense(ctx, w[7], w[8]), w[9], w[10], 1e-12);
    Expr ffn = dense(gelu(dense(x1, w[11], w[12])), w[13], w[14]);
    return layer_norm(x1 + ffn, w[15], w[16], 1e-12);
  });
}

/// Defines @bert_layer and the entry @bert(x: f32[n, 768], layers: List<16-tuple
/// of weights>) -> f32[n, 768], which applies the layers in list order.
inline Function build_bert(Builder& b) {
  const Dim n{"n"};
  Function layer = build_bert_layer(b);
  Adt list = b.list();
  std::vector<Type> weight_types;
  for (const Param& w : bert_layer_weights()) weight_types.push_back(w.type);
  const Type layers = list.type({tuple_t(weight_types)});
  const Type hidden = f32({n, kBertHidden});
  Function bert = b.declare("bert", {{"x", hidden}, {"layers", layers}}, hidden);
  b.define(bert, [&](Expr x, Expr ws) -> Expr {
    return Match(ws)
        .case_(list["Nil"], [&] { return x; })
        .case_(list["Cons"], [&](Expr w, Expr rest) {
          std::vector<Expr> args{x};
          for (std::uint32_t i = 0; i < weight_types.size(); ++i) args.push_back(get(w, i));
          return bert(layer(args), rest);
        });
  });
  b.entry(bert);
  return bert;
}

}  // namespace nimble::models
