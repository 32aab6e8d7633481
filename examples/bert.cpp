// W3 of bench/README.md: the 12-layer BERT-base encoder
// (examples/models/bert.hpp) over sequences of the given lengths; the layers'
// weights are passed as a List of 16-tuples. Prints one checksum line per length.
#include "models/bert.hpp"
#include "models/example_main.hpp"

int main(int argc, char** argv) {
  using namespace nimble;
  const std::vector<std::vector<Tensor>> layers = workloads::w3_weights();
  return models::example_main(
      argc, argv,
      {"W3", models::build_bert, workloads::kW3Sizes,
       [&](const ir::Module& m, std::int64_t length) {
         const Adt list(m.find_adt("List"));
         Value weights = list["Nil"].value();
         for (auto it = layers.rbegin(); it != layers.rend(); ++it)
           weights = list["Cons"].value(
               {Value::tuple(std::vector<Value>(it->begin(), it->end())), weights});
         return std::vector<Value>{workloads::w3_input(length), weights};
       }});
}
