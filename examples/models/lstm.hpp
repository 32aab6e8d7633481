// W1 of bench/README.md: a 2-layer LSTM (input 300, hidden 512, gate
// order i, f, g, o) over a sequence of any length, written with the builder.
//
// Layer by layer, as cuDNN and hand-written LSTMs run: the input projection
// of every step is one matrix product per layer (x·W_ihᵀ for all L steps at
// once, W_ih read once instead of L times), and only the recurrence — h·W_hhᵀ
// and the gates — runs step by step, with one layer's W_hh (4 MiB) hot in
// the cache instead of both layers' four matrices (14 MiB) per step. The
// arithmetic of each output is the same as step by step.
#pragma once

#include <nimble/builder.hpp>

namespace nimble::models {

inline constexpr std::int64_t kLstmInput = 300;
inline constexpr std::int64_t kLstmHidden = 512;

/// Defines @lstm_cell, @reverse, @lstm_layer and the entry @lstm(xs: f32[?, 1, 300],
/// w_ih0, w_hh0, b_ih0, b_hh0, w_ih1, w_hh1, b_ih1, b_hh1) -> f32[?, 1, 512]
/// (the top layer's h at every step) in `b`; returns @lstm.
inline Function build_lstm(Builder& b) {
  const std::int64_t H = kLstmHidden;
  const Dim k{"k"};  // a layer's input width: 300 for layer 0, 512 for layer 1
  Adt list = b.list();
  const Constructor nil = list["Nil"], cons = list["Cons"];
  const Type state = f32({1, H});

  // One step of one layer: (p, h, c) -> (h', c'), where p = x·W_ihᵀ + b_ih
  // is the step's row of the layer's input projection.
  Function cell = b.def(
      "lstm_cell", {{"p", f32({1, 4 * H})}, {"h", state}, {"c", state}, {"w_hh", f32({4 * H, H})}, {"b_hh", f32({4 * H})}},
      [&](Expr p, Expr h, Expr c, Expr w_hh, Expr b_hh) {
        Expr gates = p + dense(h, w_hh, b_hh);
        auto [i, f, g, o] = split<4>(gates, /*axis=*/1);
        Expr c2 = let("c", sigmoid(f) * c + sigmoid(i) * tanh(g));
        Expr h2 = let("h", sigmoid(o) * tanh(c2));
        return std::array{h2, c2};
      });

  // The outputs are collected newest-first in a List (O(1) per step); this
  // puts them back in order before they are stacked.
  const Type outputs = list.type({state});
  Function reverse = b.declare("reverse", {{"xs", outputs}, {"acc", outputs}}, outputs);
  b.define(reverse, [&](Expr xs, Expr acc) -> Expr {
    return Match(xs)
        .case_(nil, [&] { return acc; })
        .case_(cons, [&](Expr head, Expr tail) { return reverse(tail, cons({head, acc})); });
  });

  // One layer over the sequence: xs [L, 1, k] -> h of every step [L, 1, 512]
  // (the shapes stay symbolic in L, so that no shape function runs).
  const Dim n{"n"};
  Function layer = b.def(
      "lstm_layer",
      {{"xs", f32({n, 1, k})}, {"w_ih", f32({4 * H, k})}, {"w_hh", f32({4 * H, H})}, {"b_ih", f32({4 * H})},
       {"b_hh", f32({4 * H})}},
      [&](Expr xs, Expr w_ih, Expr w_hh, Expr b_ih, Expr b_hh) {
        Expr projected = let("projected", dense(xs, w_ih, b_ih));  // [L, 1, 2048]
        Expr length = take(shape_of(xs), scalar(0, DType::i64));
        Expr zero = constant(Tensor::zeros({1, H}, DType::f32));
        auto final_state =
            foreach_(length, std::array<Expr, 3>{zero, zero, nil()}, [&](Expr t, std::array<Expr, 3> s) {
              auto [h, c] = unpack<2>(cell(take(projected, t, /*axis=*/0), s[0], s[1], w_hh, b_hh));
              return std::array{h, c, cons({h, s[2]})};
            });
        return stack(reverse(final_state[2], nil()));
      });

  std::vector<Param> params{{"xs", f32({Any, 1, kLstmInput})}};
  for (int l = 0; l < 2; ++l) {
    const std::int64_t in = l == 0 ? kLstmInput : H;
    const std::string suffix = std::to_string(l);
    params.push_back({"w_ih" + suffix, f32({4 * H, in})});
    params.push_back({"w_hh" + suffix, f32({4 * H, H})});
    params.push_back({"b_ih" + suffix, f32({4 * H})});
    params.push_back({"b_hh" + suffix, f32({4 * H})});
  }
  Function lstm = b.def("lstm", params, [&](std::span<const Expr> p) {
    Expr h0 = layer(p[0], p[1], p[2], p[3], p[4]);  // [L, 1, 512]
    return layer(h0, p[5], p[6], p[7], p[8]);
  });
  b.entry(lstm);
  return lstm;
}

}  // namespace nimble::models
