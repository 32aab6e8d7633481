// The arguments of W1-W3 (bench/README.md) at one size, built with
// the runtime library alone: the List and Tree arguments take their
// constructor tags from the Executable, so a host that only loads an
// artifact (no ir::Module, no builder) builds them too. Shared by the
// exporter and the runner of this example.
#pragma once

#include <nimble/runtime.hpp>
#include <nimble/vm.hpp>

#include <cstdint>
#include <cstring>
#include <string_view>
#include <vector>

#include "models/workloads.hpp"

namespace nimble::deploy {

struct Workload {
  const char* name;   ///< "w1": the artifact is <dir>/w1.nimble
  const char* entry;  ///< the function to invoke
  std::vector<std::int64_t> sizes;
};

/// The sizes the exporter runs (so that their buckets are exported
/// specialized) and the runner checks.
inline const std::vector<Workload>& workloads() {
  static const std::vector<Workload> all{
      {"w1", "lstm", {8, 37}}, {"w2", "tree_lstm", {8, 19}}, {"w3", "bert", {16, 37}}};
  return all;
}

inline Value tree_value(const vm::Executable& exe, const workloads::TreeShape& t) {
  if (t.leaf >= 0) return Value::adt(exe.constructor_tag("Tree", "Leaf"), {Value(Tensor::scalar(t.leaf))});
  return Value::adt(exe.constructor_tag("Tree", "Node"), {tree_value(exe, *t.left), tree_value(exe, *t.right)});
}

/// The entry's arguments for `workload` at `size` (weights made once).
inline std::vector<Value> workload_args(const vm::Executable& exe, std::string_view workload, std::int64_t size) {
  if (workload == "w1") {
    static const std::vector<Tensor> w = workloads::w1_weights();
    std::vector<Value> args{workloads::w1_input(size)};
    args.insert(args.end(), w.begin(), w.end());
    return args;
  }
  if (workload == "w2") {
    static const std::vector<Tensor> w = workloads::w2_weights();
    std::vector<Value> args{tree_value(exe, *workloads::w2_tree(size)), workloads::w2_leaves(size)};
    args.insert(args.end(), w.begin(), w.end());
    return args;
  }
  static const std::vector<std::vector<Tensor>> w = workloads::w3_weights();
  Value layers = Value::adt(exe.constructor_tag("List", "Nil"), {});
  for (auto it = w.rbegin(); it != w.rend(); ++it)
    layers = Value::adt(exe.constructor_tag("List", "Cons"),
                        {Value::tuple(std::vector<Value>(it->begin(), it->end())), layers});
  return {workloads::w3_input(size), layers};
}

/// FNV-1a 64 of the bytes of every tensor in `v`, depth first: equal only
/// for bit-identical results.
inline std::uint64_t result_hash(const Value& v, std::uint64_t h = 0xcbf29ce484222325ull) {
  if (v.is_tensor()) {
    const Tensor& t = v.tensor();  // always contiguous
    const auto* bytes = static_cast<const unsigned char*>(t.raw_data());
    for (std::size_t i = 0; i < t.nbytes(); ++i) h = (h ^ bytes[i]) * 0x100000001b3ull;
    return h;
  }
  for (const Value& f : v.fields()) h = result_hash(f, h);
  return h;
}

/// Σ x and Σ |x| over every f32 element of `v` (added to `c`).
inline workloads::Checksum result_checksum(const Value& v, workloads::Checksum c = {}) {
  if (v.is_tensor()) {
    c.add(v.tensor());
    return c;
  }
  for (const Value& f : v.fields()) c = result_checksum(f, c);
  return c;
}

}  // namespace nimble::deploy
