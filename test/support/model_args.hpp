// The workloads' arguments as the models' entries take them (the generator
// is examples/models/workloads.hpp).
#pragma once

#include <cstdint>
#include <vector>

#include "models/workloads.hpp"
#include "nimble/nimble.hpp"

namespace nimble::testing {

/// BERT's (models::build_bert, entry @bert) arguments: W3's input of
/// `length` tokens and the first `layers` layers' weights as a List of tuples.
inline std::vector<Value> bert_args(const ir::Module& module, int layers, std::int64_t length) {
  const Adt list(module.find_adt("List"));
  const std::vector<std::vector<Tensor>> weights = workloads::w3_weights(layers);
  Value value = list["Nil"].value();
  for (auto it = weights.rbegin(); it != weights.rend(); ++it)
    value = list["Cons"].value({Value::tuple(std::vector<Value>(it->begin(), it->end())), value});
  return {workloads::w3_input(length), value};
}

}  // namespace nimble::testing
