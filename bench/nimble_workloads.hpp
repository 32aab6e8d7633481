// W1, W2 and W3 as nimble's benches run them: the model (examples/models/)
// and the entry's arguments at one size, from the generator of
// examples/models/workloads.hpp. Shared by nimble_bench (the workload rows)
// and jit_bench (JIT/compile), so that both run the same modules on the same
// data. Weights are generated once per process, on first use (the statics
// below are thread-safe to initialize; the tensors are then read-only).
#pragma once

#include <cstdint>
#include <vector>

#include <nimble/nimble.hpp>

#include "models/bert.hpp"
#include "models/lstm.hpp"
#include "models/tree_lstm.hpp"
#include "models/workloads.hpp"

namespace nimble::bench {

/// Defines a model in a Builder and returns its entry (models::build_lstm, ...).
using BuildFn = Function (*)(Builder&);

inline const std::vector<Tensor>& w1_weights() {
  static const std::vector<Tensor> w = workloads::w1_weights();
  return w;
}
inline const std::vector<Tensor>& w2_weights() {
  static const std::vector<Tensor> w = workloads::w2_weights();
  return w;
}
inline const std::vector<std::vector<Tensor>>& w3_weights() {
  static const std::vector<std::vector<Tensor>> w = workloads::w3_weights();
  return w;
}

/// W1 (models::build_lstm) at sequence length `length`: x [L, 1, 300], then
/// the 8 weights.
[[nodiscard]] inline std::vector<Value> w1_args(std::int64_t length) {
  std::vector<Value> args{workloads::w1_input(length)};
  args.insert(args.end(), w1_weights().begin(), w1_weights().end());
  return args;
}

/// The host-side value of a generated tree, in `tree` (the module's Tree ADT).
[[nodiscard]] inline Value tree_value(const workloads::TreeShape& t, const Adt& tree) {
  if (t.leaf >= 0) return tree["Leaf"].value({Tensor::scalar(t.leaf)});
  return tree["Node"].value({tree_value(*t.left, tree), tree_value(*t.right, tree)});
}

/// W2 (models::build_tree_lstm, built into `module`) with `leaves` leaves: the
/// tree, the leaf inputs X [n, 300], then the 4 weights.
[[nodiscard]] inline std::vector<Value> w2_args(const ir::Module& module, std::int64_t leaves) {
  const Adt tree(module.find_adt("Tree"));
  std::vector<Value> args{tree_value(*workloads::w2_tree(leaves), tree),
                          workloads::w2_leaves(leaves)};
  args.insert(args.end(), w2_weights().begin(), w2_weights().end());
  return args;
}

/// W3 (models::build_bert, built into `module`) at length `length`: x [L, 768]
/// and the List of the 12 layers' weight tuples.
[[nodiscard]] inline std::vector<Value> w3_args(const ir::Module& module, std::int64_t length) {
  const Adt list(module.find_adt("List"));
  Value layers = list["Nil"].value();
  for (auto it = w3_weights().rbegin(); it != w3_weights().rend(); ++it)
    layers = list["Cons"].value({Value::tuple(std::vector<Value>(it->begin(), it->end())), layers});
  return {workloads::w3_input(length), layers};
}

}  // namespace nimble::bench
