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

  // The leaves' input projections X·Wxᵀ + bx are one matrix product for all
  // leaves (Wx read once, not once per leaf); the recursion takes row j at
  // leaf j. Each output is the same dot product as leaf by leaf.
  const std::vector<Param> node_params{
      {"tree", tree.type()}, {"px", f32({n, 3 * M})}, {"u", f32({5 * M, 2 * M})}, {"bu", f32({5 * M})}};
  // Recursion needs a declared signature.
  Function node = b.declare("tree_lstm_node", node_params, tuple_t({memory, memory}));
  b.define(node, [&](std::span<const Expr> p) -> Expr {
    Expr px = p[1], u = p[2], bu = p[3];
    return Match(p[0])
        .case_(tree["Leaf"],
               [&](Expr j) {
                 auto [i, o, g] = split<3>(take(px, j), 0);
                 Expr c = let("c", sigmoid(i) * tanh(g));
                 Expr h = let("h", sigmoid(o) * tanh(c));
                 return std::array{h, c};
               })
        .case_(tree["Node"], [&](Expr left, Expr right) {
          auto [hl, cl] = unpack<2>(node(left, px, u, bu));
          auto [hr, cr] = unpack<2>(node(right, px, u, bu));
          Expr gates = dense(concatenate({hl, hr}, 0), u, bu);
          auto [i, fl, fr, o, g] = split<5>(gates, 0);
          Expr c = let("c", sigmoid(i) * tanh(g) + sigmoid(fl) * cl + sigmoid(fr) * cr);
          Expr h = let("h", sigmoid(o) * tanh(c));
          return std::array{h, c};
        });
  });

  const std::vector<Param> params{{"tree", tree.type()}, {"x", f32({n, kTreeInput})},
                                  {"wx", f32({3 * M, kTreeInput})}, {"bx", f32({3 * M})},
                                  {"u", f32({5 * M, 2 * M})},      {"bu", f32({5 * M})}};
  Function main = b.def("tree_lstm", params, [&](std::span<const Expr> p) {
    return node(p[0], dense(p[1], p[2], p[3]), p[4], p[5]);
  });
  b.entry(main);
  return main;
}

}  // namespace nimble::models
