// W1 of ../shared/workloads.md: a 2-layer LSTM (input 300, hidden 512, gate
// order i, f, g, o) over a sequence of any length, written with the builder.
#pragma once

#include <nimble/builder.hpp>

namespace nimble::models {

inline constexpr std::int64_t kLstmInput = 300;
inline constexpr std::int64_t kLstmHidden = 512;

/// Defines @lstm_cell, @reverse and the entry @lstm(xs: f32[?, 1, 300],
/// 8 weights) -> f32[?, 1, 512] in `b`; returns @lstm.
inline Function build_lstm(Builder& b) {
  const std::int64_t H = kLstmHidden;
  const Dim k{"k"};  // the cell's input width: 300 for layer 0, 512 for layer 1
  Adt list = b.list();
  const Constructor nil = list["Nil"], cons = list["Cons"];
  const Type state = f32({1, H});

  // One step of one layer: (x, h, c) -> (h', c').
  Function cell = b.def(
      "lstm_cell",
      {{"x", f32({1, k})}, {"h", state}, {"c", state}, {"w_ih", f32({4 * H, k})},
       {"w_hh", f32({4 * H, H})}, {"b_ih", f32({4 * H})}, {"b_hh", f32({4 * H})}},
      [&](Expr x, Expr h, Expr c, Expr w_ih, Expr w_hh, Expr b_ih, Expr b_hh) {
        Expr gates = dense(x, w_ih, b_ih) + dense(h, w_hh, b_hh);
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

  std::vector<Param> params{{"xs", f32({Any, 1, kLstmInput})}};
  for (int layer = 0; layer < 2; ++layer) {
    const std::int64_t in = layer == 0 ? kLstmInput : H;
    const std::string l = std::to_string(layer);
    params.push_back({"w_ih" + l, f32({4 * H, in})});
    params.push_back({"w_hh" + l, f32({4 * H, H})});
    params.push_back({"b_ih" + l, f32({4 * H})});
    params.push_back({"b_hh" + l, f32({4 * H})});
  }
  Function lstm = b.def("lstm", params, [&](std::span<const Expr> p) {
    Expr xs = p[0];
    Expr length = take(shape_of(xs), scalar(0, DType::i64));
    Expr zero = constant(Tensor::zeros({1, H}, DType::f32));
    auto final_state = foreach_(
        length, std::array<Expr, 5>{zero, zero, zero, zero, nil()},
        [&](Expr t, std::array<Expr, 5> s) {
          Expr x = take(xs, t, /*axis=*/0);  // [1, 300]
          auto [h0, c0] = unpack<2>(cell(x, s[0], s[1], p[1], p[2], p[3], p[4]));
          auto [h1, c1] = unpack<2>(cell(h0, s[2], s[3], p[5], p[6], p[7], p[8]));
          return std::array{h0, c0, h1, c1, cons({h1, s[4]})};
        });
    return stack(reverse(final_state[4], nil()));
  });
  b.entry(lstm);
  return lstm;
}

}  // namespace nimble::models
