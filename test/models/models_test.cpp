// The three models, built with the builder and run by the reference
// interpreter and by the VM with JIT-compiled kernels (the default engine),
// against the naive implementations of naive_models.hpp.
#include <catch2/catch.hpp>

#include <array>
#include <memory>
#include <string>
#include <vector>

#include "models/bert.hpp"
#include "models/lstm.hpp"
#include "models/naive_models.hpp"
#include "models/tree_lstm.hpp"
#include "models/workloads.hpp"
#include "nimble/compile.hpp"
#include "nimble/interpreter.hpp"
#include "nimble/vm/virtual_machine.hpp"
#include "support/tensor_matchers.hpp"

using namespace nimble;
using nimble::testing::IsCloseTo;

namespace {
const Tolerance kModelTolerance{.rtol = 1e-4, .atol = 1e-5};

// `entry` on `args` by both engines: the interpreter's result, then the VM's.
std::array<Value, 2> run_both(const ir::Module& m, const std::string& entry,
                              const std::vector<Value>& args) {
  vm::VirtualMachine machine(compile(m));
  return {evaluate(m, entry, args), machine.invoke(entry, args)};
}

Value tree_value(const workloads::TreeShape& t, const Adt& tree) {
  if (t.leaf >= 0) return tree["Leaf"].value({Tensor::scalar(t.leaf)});
  return tree["Node"].value({tree_value(*t.left, tree), tree_value(*t.right, tree)});
}
}  // namespace

TEST_CASE("W1: the LSTM matches a naive implementation", "[eval]") {
  Builder b;
  models::build_lstm(b);
  const ir::Module m = b.build();
  const std::vector<Tensor> w = workloads::w1_weights();
  for (std::int64_t length : {1, 3}) {
    std::vector<Value> args{workloads::w1_input(length)};
    args.insert(args.end(), w.begin(), w.end());
    const Tensor expected = naive::lstm(workloads::w1_input(length), w);
    for (const Value& out : run_both(m, "lstm", args))
      CHECK_THAT(out.tensor(), IsCloseTo(expected, kModelTolerance));
  }
}

namespace {
// A tree over leaves lo..hi-1 whose every right child is a leaf: one node a
// depth, the deepest tree of hi - lo leaves.
std::unique_ptr<workloads::TreeShape> left_chain(std::int64_t lo, std::int64_t hi) {
  auto t = std::make_unique<workloads::TreeShape>();
  if (hi - lo == 1) {
    t->leaf = lo;
    return t;
  }
  t->left = left_chain(lo, hi - 1);
  t->right = left_chain(hi - 1, hi);
  return t;
}
}  // namespace

TEST_CASE("W2: the Tree-LSTM matches a naive implementation", "[eval]") {
  // By recursion below models::kTreeLevelsFrom leaves, by levels from it:
  // the workload's trees, a chain (a depth per node) and a lone leaf with
  // more rows of x than it reads.
  Builder b;
  models::build_tree_lstm(b);
  const ir::Module m = b.build();
  const Adt tree(m.find_adt("Tree"));
  const std::vector<Tensor> w = workloads::w2_weights();
  struct Case {
    std::string name;
    std::unique_ptr<workloads::TreeShape> shape;
    std::int64_t rows;
  };
  std::vector<Case> cases;
  for (const std::int64_t n : std::initializer_list<std::int64_t>{1, 8, models::kTreeLevelsFrom, 19, 32})
    cases.push_back({"workload tree, " + std::to_string(n) + " leaves", workloads::w2_tree(n), n});
  cases.push_back({"chain of 20 leaves", left_chain(0, 20), 20});
  auto lone = std::make_unique<workloads::TreeShape>();
  lone->leaf = 5;
  cases.push_back({"Leaf(5) over 17 rows", std::move(lone), 17});
  for (const Case& c : cases) {
    INFO(c.name);
    const Tensor x = workloads::w2_leaves(c.rows);
    std::vector<Value> args{tree_value(*c.shape, tree), x};
    args.insert(args.end(), w.begin(), w.end());
    const auto [h, cell] = naive::tree_lstm(*c.shape, x, w);
    for (const Value& out : run_both(m, "tree_lstm", args)) {
      CHECK_THAT(out[0].tensor(), IsCloseTo(naive::to_tensor({h}, {150}), kModelTolerance));
      CHECK_THAT(out[1].tensor(), IsCloseTo(naive::to_tensor({cell}, {150}), kModelTolerance));
    }
  }
}

TEST_CASE("W3: BERT layers match a naive implementation", "[eval]") {
  Builder b;
  models::build_bert(b);
  const ir::Module m = b.build();
  const Adt list(m.find_adt("List"));
  const auto layers = workloads::w3_weights(2);
  Value weights = list["Nil"].value();
  for (auto it = layers.rbegin(); it != layers.rend(); ++it)
    weights = list["Cons"].value({Value::tuple(std::vector<Value>(it->begin(), it->end())), weights});
  const Tensor x = workloads::w3_input(5);
  const Tensor expected = naive::bert(x, layers);
  for (const Value& out : run_both(m, "bert", {x, weights}))
    CHECK_THAT(out.tensor(), IsCloseTo(expected, kModelTolerance));
}
