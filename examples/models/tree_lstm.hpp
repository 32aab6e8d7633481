// W2 of ../shared/workloads.md: a binary Tree-LSTM (Tai et al. 2015, N = 2;
// input 300, memory 150) over a tree of any shape, written with the builder.
// The tree is an input value built by the host: Leaf(j) is the j-th row of X.
#pragma once

#include <nimble/builder.hpp>

namespace nimble::models {

inline constexpr std::int64_t kTreeInput = 300;
inline constexpr std::int64_t kTreeMemory = 150;

/// Defines `type Tree { Leaf(i64[]), Node(Tree, Tree) }`, the recursive
/// @tree_lstm_node and the entry @tree_lstm(tree, x: f32[n, 300], wx, bx, u,
/// bu) -> (h: f32[150], c: f32[150]) in `b`; returns @tree_lstm.
inline Function build_tree_lstm(Builder& b) {
  const std::int64_t M = kTreeMemory;
  const Dim n{"n"};  // number of leaves
  Adt tree = b.adt("Tree", {}, {{"Leaf", {i64({})}}, {"Node", {adt_t("Tree"), adt_t("Tree")}}});
  const Type memory = f32({M});
  const std::vector<Param> weights{{"wx", f32({3 * M, kTreeInput})},
                                   {"bx", f32({3 * M})},
                                   {"u", f32({5 * M, 2 * M})},
                                   {"bu", f32({5 * M})}};
  std::vector<Param> params{{"tree", tree.type()}, {"x", f32({n, kTreeInput})}};
  params.insert(params.end(), weights.begin(), weights.end());

  // Recursion needs a declared signature.
  Function node = b.declare("tree_lstm_node", params, tuple_t({memory, memory}));
  b.define(node, [&](std::span<const Expr> p) -> Expr {
    Expr x = p[1], wx = p[2], bx = p[3], u = p[4], bu = p[5];
    return Match(p[0])
        .case_(tree["Leaf"],
               [&](Expr j) {
                 auto [i, o, g] = split<3>(dense(take(x, j), wx, bx), 0);
                 Expr c = let("c", sigmoid(i) * tanh(g));
                 Expr h = let("h", sigmoid(o) * tanh(c));
                 return std::array{h, c};
               })
        .case_(tree["Node"], [&](Expr left, Expr right) {
          auto [hl, cl] = unpack<2>(node(left, x, wx, bx, u, bu));
          auto [hr, cr] = unpack<2>(node(right, x, wx, bx, u, bu));
          Expr gates = dense(concatenate({hl, hr}, 0), u, bu);
          auto [i, fl, fr, o, g] = split<5>(gates, 0);
          Expr c = let("c", sigmoid(i) * tanh(g) + sigmoid(fl) * cl + sigmoid(fr) * cr);
          Expr h = let("h", sigmoid(o) * tanh(c));
          return std::array{h, c};
        });
  });

  Function main = b.def("tree_lstm", params, [&](std::span<const Expr> p) {
    return node(std::vector<Expr>(p.begin(), p.end()));
  });
  b.entry(main);
  return main;
}

}  // namespace nimble::models
