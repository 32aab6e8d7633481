// W2 of bench/README.md: a binary Tree-LSTM (Tai et al. 2015, N = 2;
// input 300, memory 150) over a tree of any shape, written with the builder.
// The tree is an input value built by the host: Leaf(j) is the j-th row of X.
//
// Where the time goes: each internal node multiplies [h_l; h_r] by U
// [750, 300], whose 900 KB stream from L2 at the cache's bandwidth; one node
// at a time, that is the machine's limit. So the model runs the tree two
// ways, both computing every output with the same dot products as node by
// node:
//  - by levels (from kTreeLevelsFrom leaves): a breadth-first walk over the
//    tree value collects, depth by depth, the rows of each node's children
//    (a leaf's row, or one among the nodes of the depth below), and one product per
//    depth runs all its nodes ([m, 300] x [750, 300]^T reads U once, not m
//    times), deepest first;
//  - by recursion (smaller trees, whose depths hold a node or two: there
//    the walk, its lists and the per-depth kernels cost what the products
//    save).
// Either way the leaves' projections X·Wxᵀ + bx and cells are one batch.
#pragma once

#include <nimble/builder.hpp>

namespace nimble::models {

inline constexpr std::int64_t kTreeInput = 300;
inline constexpr std::int64_t kTreeMemory = 150;
/// Trees with at least this many leaves run by levels (measured in one
/// sitting, by levels against by recursion: 0.210 / 0.345 / 0.521 ms against
/// 0.265 / 0.439 / 0.705 at 19 / 32 / 50 leaves, 0.106 against 0.104 at 8;
/// README, Performance).
inline constexpr std::int64_t kTreeLevelsFrom = 16;

/// Defines `type Tree { Leaf(i64[]), Node(Tree, Tree) }`, the List ADT,
/// the recursive @tree_lstm_node, the level-by-level @tree_lstm_level (with
/// @tree_walk, @tree_depth_of_leaves and @tree_depth) and the
/// entry @tree_lstm(tree, x: f32[n, 300], wx, bx, u, bu) -> (h: f32[150],
/// c: f32[150]) in `b`; returns @tree_lstm.
inline Function build_tree_lstm(Builder& b) {
  const std::int64_t M = kTreeMemory;
  const Dim n{"n"};  // number of leaves
  Adt tree = b.adt("Tree", {}, {{"Leaf", {i64({})}}, {"Node", {adt_t("Tree"), adt_t("Tree")}}});
  Adt list = b.list();
  const Constructor nil = list["Nil"], cons = list["Cons"];
  const Type memory = f32({M}), row = i64({});
  const Type trees = list.type({tree.type()}), rows = list.type({row});
  const Type u_type = f32({5 * M, 2 * M}), bu_type = f32({5 * M});

  // A node's cell from its gates and its children's memories (any leading
  // dims: one node, or a depth's nodes as rows).
  const auto cell = [&](Expr gates, Expr cl, Expr cr, std::int64_t axis) -> Expr {
    auto [i, fl, fr, o, g] = split<5>(gates, axis);
    Expr c = let("c", sigmoid(i) * tanh(g) + sigmoid(fl) * cl + sigmoid(fr) * cr);
    Expr h = let("h", sigmoid(o) * tanh(c));
    return tuple({h, c});
  };

  // --- By recursion: a node's (h, c) from its children's.
  Function node = b.declare("tree_lstm_node",
                            {{"tree", tree.type()}, {"hleaf", f32({n, M})}, {"cleaf", f32({n, M})},
                             {"u", u_type}, {"bu", bu_type}},
                            tuple_t({memory, memory}));
  b.define(node, [&](std::span<const Expr> p) -> Expr {
    Expr hleaf = p[1], cleaf = p[2], u = p[3], bu = p[4];
    return Match(p[0])
        .case_(tree["Leaf"], [&](Expr j) { return std::array{take(hleaf, j), take(cleaf, j)}; })
        .case_(tree["Node"], [&](Expr left, Expr right) -> Expr {
          auto [hl, cl] = unpack<2>(node(left, hleaf, cleaf, u, bu));
          auto [hr, cr] = unpack<2>(node(right, hleaf, cleaf, u, bu));
          return cell(dense(concatenate({hl, hr}, 0), u, bu), cl, cr, 0);
        });
  });

  // --- By levels.
  // One depth's nodes (a List, the frontier) -> their children's rows in
  // the table [leaves; next depth's nodes] (two Lists), the next depth's
  // nodes and their count. Leaf(j) is row j; a node is row n + its place
  // among the next depth's nodes, which it joins. Rows and nodes are listed
  // newest first: stacked, the next depth's node numbered k is the k-th row
  // of its results. A node's two children are matched in place (no call
  // per child: the walk is most of what this path adds to the products).
  Function walk = b.declare("tree_walk",
                            {{"f", trees}, {"count", row}, {"n", row}, {"ll", rows}, {"rr", rows}, {"next", trees}},
                            tuple_t({rows, rows, trees, row}));
  b.define(walk, [&](std::span<const Expr> p) -> Expr {
    Expr f = p[0], count = p[1], leaves = p[2], ll = p[3], rr = p[4], next = p[5];
    const Expr one = scalar(1, DType::i64);
    return Match(f)
        .case_(nil, [&] { return tuple({ll, rr, next, count}); })
        .case_(cons, [&](Expr t, Expr rest) -> Expr {
          return Match(t)
              .case_(tree["Leaf"], [&](Expr) -> Expr { return walk(rest, count, leaves, ll, rr, next); })
              .case_(tree["Node"], [&](Expr l, Expr r) -> Expr {
                return Match(l)
                    .case_(tree["Leaf"], [&](Expr jl) -> Expr {
                      return Match(r)
                          .case_(tree["Leaf"], [&](Expr jr) -> Expr {
                            return walk(rest, count, leaves, cons({jl, ll}), cons({jr, rr}), next);
                          })
                          .case_(tree["Node"], [&](Expr, Expr) -> Expr {
                            return walk(rest, count + one, leaves, cons({jl, ll}), cons({leaves + count, rr}),
                                        cons({r, next}));
                          });
                    })
                    .case_(tree["Node"], [&](Expr, Expr) -> Expr {
                      Expr row_l = leaves + count;
                      return Match(r)
                          .case_(tree["Leaf"], [&](Expr jr) -> Expr {
                            return walk(rest, count + one, leaves, cons({row_l, ll}), cons({jr, rr}),
                                        cons({l, next}));
                          })
                          .case_(tree["Node"], [&](Expr, Expr) -> Expr {
                            return walk(rest, count + scalar(2, DType::i64), leaves, cons({row_l, ll}),
                                        cons({row_l + one, rr}), cons({r, cons({l, next})}));
                          });
                    });
              });
        });
  });
  // One depth's m nodes, their children at rows il, ir of the table (the
  // dims stay symbolic, so that no shape function runs): the leaves alone,
  // or the leaves and the r nodes of the depth below.
  const Dim m{"m"}, r{"r"};
  const auto depth = [&](Expr il, Expr ir, Expr th, Expr tc, Expr u, Expr bu) -> Expr {
    Expr gates = dense(concatenate({take(th, il), take(th, ir)}, 1), u, bu);
    return cell(gates, take(tc, il), take(tc, ir), 1);
  };
  Function depth_of_leaves = b.def(
      "tree_depth_of_leaves",
      {{"il", i64({m})}, {"ir", i64({m})}, {"hleaf", f32({n, M})}, {"cleaf", f32({n, M})}, {"u", u_type},
       {"bu", bu_type}},
      [&](std::span<const Expr> p) { return depth(p[0], p[1], p[2], p[3], p[4], p[5]); });
  // Above the leaves, a child's row is in the leaves' table (j < n) or the
  // depth below's (n + k): read from each, clamped, and select. Not from
  // one table [leaves; depth below]: building it copies all n leaves at
  // every depth, which made a deep, narrow tree quadratic.
  const auto rows_of = [&](Expr index, Expr leaf_rows, Expr node_rows, Expr leaves) -> Expr {
    const Expr zero = scalar(0, DType::i64), one = scalar(1, DType::i64);
    Expr from_leaves = take(leaf_rows, minimum(index, leaves - one));
    Expr from_nodes = take(node_rows, maximum(index - leaves, zero));
    return where(expand_dims(index < leaves, 1), from_leaves, from_nodes);
  };
  Function depth_above = b.def(
      "tree_depth",
      {{"il", i64({m})}, {"ir", i64({m})}, {"n", row}, {"hleaf", f32({n, M})}, {"cleaf", f32({n, M})},
       {"h", f32({r, M})}, {"c", f32({r, M})}, {"u", u_type}, {"bu", bu_type}},
      [&](std::span<const Expr> p) {
        Expr il = p[0], ir = p[1], leaves = p[2], hleaf = p[3], cleaf = p[4], h = p[5], c = p[6];
        Expr gates = dense(concatenate({rows_of(il, hleaf, h, leaves), rows_of(ir, hleaf, h, leaves)}, 1),
                           p[7], p[8]);
        return cell(gates, rows_of(il, cleaf, c, leaves), rows_of(ir, cleaf, c, leaves), 1);
      });
  // The (h, c) rows of a depth's nodes (the List f), after those of every
  // depth below it.
  Function level = b.declare("tree_lstm_level",
                             {{"f", trees}, {"n", row}, {"hleaf", f32({n, M})}, {"cleaf", f32({n, M})},
                              {"u", u_type}, {"bu", bu_type}},
                             tuple_t({f32({Any, M}), f32({Any, M})}));
  b.define(level, [&](std::span<const Expr> p) -> Expr {
    Expr f = p[0], leaves = p[1], hleaf = p[2], cleaf = p[3], u = p[4], bu = p[5];
    auto [ll, rr, next, count] = unpack<4>(walk(f, scalar(0, DType::i64), leaves, nil(), nil(), nil()));
    Expr il = let("il", stack(ll)), ir = let("ir", stack(rr));
    return if_(
        equal(count, scalar(0, DType::i64)), [&] { return depth_of_leaves(il, ir, hleaf, cleaf, u, bu); },
        [&] {
          auto [h, c] = unpack<2>(level(next, leaves, hleaf, cleaf, u, bu));
          return depth_above(il, ir, leaves, hleaf, cleaf, h, c, u, bu);
        });
  });

  const std::vector<Param> params{{"tree", tree.type()}, {"x", f32({n, kTreeInput})},
                                  {"wx", f32({3 * M, kTreeInput})}, {"bx", f32({3 * M})},
                                  {"u", u_type},                   {"bu", bu_type}};
  Function main = b.def("tree_lstm", params, [&](std::span<const Expr> p) -> Expr {
    Expr tree_value = p[0], x = p[1], u = p[4], bu = p[5];
    auto [i, o, g] = split<3>(dense(x, p[2], p[3]), 1);
    Expr cleaf = let("cleaf", sigmoid(i) * tanh(g));
    Expr hleaf = let("hleaf", sigmoid(o) * tanh(cleaf));
    Expr leaves = take(shape_of(x), scalar(0, DType::i64));
    return if_(
        leaves < scalar(kTreeLevelsFrom, DType::i64),
        [&]() -> Expr { return node(tree_value, hleaf, cleaf, u, bu); },
        [&]() -> Expr {
          return Match(tree_value)
              .case_(tree["Leaf"], [&](Expr j) { return std::array{take(hleaf, j), take(cleaf, j)}; })
              .case_(tree["Node"], [&](Expr, Expr) -> Expr {
                auto [h, c] = unpack<2>(level(cons({tree_value, nil()}), leaves, hleaf, cleaf, u, bu));
                Expr root = scalar(0, DType::i64);
                return tuple({take(h, root), take(c, root)});
              });
        });
  });
  b.entry(main);
  return main;
}

}  // namespace nimble::models
