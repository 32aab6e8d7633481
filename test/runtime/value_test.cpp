#include "nimble/runtime/value.hpp"

#include <catch2/catch.hpp>

#include <atomic>
#include <functional>
#include <optional>
#include <stdexcept>
#include <string>
#include <thread>
#include <vector>

#include "runtime/value_map.hpp"
#include "support/tensor_matchers.hpp"

using namespace nimble;

TEST_CASE("values hold tensors, tuples and ADT values", "[runtime]") {
  const Tensor t = Tensor::from_data<float>({2}, {1, 2});
  const Value leaf = Value::adt(0, {Value(Tensor::scalar<std::int64_t>(3))});
  const Value node = Value::adt(1, {leaf, leaf});
  const Value pair = Value::tuple({t, node});
  CHECK(pair.kind() == Value::Kind::tuple);
  CHECK(pair[0].is_tensor());
  CHECK(pair[0].tensor().storage() == t.storage());  // shared, not copied
  CHECK(pair[1].tag() == 1);
  CHECK(pair[1][0].tag() == 0);
  CHECK(pair[1][1][0].tensor().at<std::int64_t>({}) == 3);
  CHECK(to_string(Value::tuple({Value::adt(1, {}), Value::adt(0, {Value::tuple({})})})) ==
        "(#1(), #0(()))");
}

TEST_CASE("using a value as the wrong kind is an error", "[runtime]") {
  const Value v = Value::tuple({Tensor::zeros({1}, DType::f32)});
  CHECK_NIMBLE_ERROR(v.tensor(), ErrorKind::type_error, "Value: expected a tensor, got a tuple");
  CHECK_NIMBLE_ERROR(v.tag(), ErrorKind::type_error, "Value: expected an ADT value, got a tuple");
  CHECK_NIMBLE_ERROR(v[1], ErrorKind::out_of_range,
                     "Value: field 1 is out of range for a tuple with 1 fields");
  CHECK_NIMBLE_ERROR(v[0].fields(), ErrorKind::type_error,
                     "Value: expected a tuple or an ADT value, got a tensor");
  CHECK_NIMBLE_ERROR(Value().kind(), ErrorKind::invalid_argument, "Value: the value is undefined");
  CHECK_NIMBLE_ERROR(Value(Tensor()), ErrorKind::invalid_argument,
                     "Value: expected a defined tensor");
  CHECK_NIMBLE_ERROR(Value::tuple({Value()}), ErrorKind::invalid_argument,
                     "Value::tuple: a field is undefined");
}

TEST_CASE("a very long list is destroyed without recursion", "[runtime]") {
  const Value element(Tensor::zeros({1}, DType::f32));
  Value list = Value::adt(0, {});  // Nil
  for (int i = 0; i < 1'000'000; ++i) list = Value::adt(1, {element, list});
  CHECK(list.tag() == 1);
  list = Value();  // would overflow the stack if teardown recursed
  CHECK(element.tensor().storage()->use_count() == 1);
}

namespace {

// Nil, then Cons(element(i), ...) for i = n-1 … 0: a list of n cells.
Value make_list(int n, const std::function<Value(int)>& element) {
  Value list = Value::adt(0, {});
  for (int i = n - 1; i >= 0; --i) list = Value::adt(1, {element(i), list});
  return list;
}

}  // namespace

TEST_CASE("a very long list is moved, mapped and printed without recursion", "[runtime]") {
  const Value element(Tensor::zeros({1}, DType::f32));
  const Value list = make_list(1'000'000, [&](int) { return element; });
  // Nothing to move: the same value, not a copy.
  const Value same = list.to(Device::cpu());
  CHECK(same[1].fields().data() == list[1].fields().data());
  // Each cell rebuilt: a million cells deep, one map call (the element is one node).
  int calls = 0;
  const std::optional<Value> mapped = detail::map_tensors(list, [&](const Tensor& t) -> std::optional<Tensor> {
    ++calls;
    return Tensor::full(t.shape(), 2, t.dtype());
  });
  REQUIRE(mapped);
  CHECK(calls == 1);
  Value cell = *mapped;
  int length = 0;
  for (; cell.tag() == 1; cell = cell[1], ++length)
    if (length % 99'999 == 0) CHECK(cell[0].tensor().data<float>()[0] == 2.0f);
  CHECK(length == 1'000'000);
  CHECK(element.tensor().data<float>()[0] == 0.0f);  // the input is untouched
  const std::string text = to_string(make_list(300'000, [&](int) { return element; }));
  CHECK(text.starts_with("#1(Tensor<f32>[1]"));
  CHECK(text.ends_with(", #0()" + std::string(300'000, ')')));
}

TEST_CASE("mapping a value's tensors keeps what it shares, and what it does not change", "[runtime]") {
  const Value a(Tensor::from_data<float>({2}, {1, 2}));
  const Value b(Tensor::scalar<std::int64_t>(7));
  const Value subtree = Value::adt(1, {a, Value::adt(0, {})});
  const Value tree = Value::tuple({subtree, b, subtree, Value::object(make_ref<Object>())});
  std::vector<const void*> seen;
  const auto negate_floats = [&](const Tensor& t) -> std::optional<Tensor> {
    seen.push_back(t.storage().get());
    if (t.dtype() != DType::f32) return std::nullopt;
    Tensor n = Tensor::empty(t.shape(), t.dtype());
    for (std::int64_t i = 0; i < t.numel(); ++i) n.data<float>()[i] = -t.data<float>()[i];
    return n;
  };
  const std::optional<Value> mapped = detail::map_tensors(tree, negate_floats);
  REQUIRE(mapped);
  CHECK(seen.size() == 2);  // a once (its subtree twice), b once
  CHECK_THAT((*mapped)[0][0].tensor(), testing::IsCloseTo(Tensor::from_data<float>({2}, {-1, -2})));
  CHECK((*mapped)[0].fields().data() == (*mapped)[2].fields().data());  // still one subtree
  CHECK((*mapped)[1].tensor().storage() == b.tensor().storage());       // unchanged: kept
  CHECK((*mapped)[3].object() == tree[3].object());
  CHECK(to_string(*mapped).starts_with("(#1(Tensor<f32>[2]"));
  // Nothing mapped: nullopt, the caller keeps the value.
  CHECK_FALSE(detail::map_tensors(tree, [](const Tensor&) -> std::optional<Tensor> { return std::nullopt; }));
  CHECK_FALSE(detail::map_tensors(Value(), negate_floats));
  // What the map throws leaves the walk.
  CHECK_THROWS_AS(detail::map_tensors(tree, [](const Tensor&) -> std::optional<Tensor> {
                    throw std::runtime_error("no");
                  }),
                  std::runtime_error);
}

TEST_CASE("values and storages made on one thread can die on another, after it exits", "[runtime]") {
  // Their memory comes from thread-local free lists (runtime/object_pool):
  // a block freed on another thread joins that thread's lists, and a thread
  // that exits gives its lists back.
  auto make = [](int n) {
    std::vector<Value> values;
    for (int i = 0; i < n; ++i)
      values.push_back(Value::tuple({Tensor::full({4}, i, DType::f32), Tensor::scalar(std::int64_t{i})}));
    return values;
  };
  std::vector<Value> from_worker;
  std::thread([&] { from_worker = make(1000); }).join();
  std::vector<Value> from_main = make(1000);
  std::thread([moved = std::move(from_main)]() mutable { moved.clear(); }).join();
  for (int round = 0; round < 3; ++round) {
    std::vector<Value> again = make(1000);  // reuses what the main thread freed
    CHECK(again[999][1].tensor().data<std::int64_t>()[0] == 999);
  }
  CHECK(from_worker[7][0].tensor().data<float>()[3] == 7.0f);
  from_worker.clear();
}

namespace {

// Counts its destructions.
class Counted final : public RefCounted {
 public:
  explicit Counted(std::atomic<int>& destroyed) : destroyed_(destroyed) {}
  ~Counted() { destroyed_.fetch_add(1); }

 private:
  std::atomic<int>& destroyed_;
};

}  // namespace

TEST_CASE("a reference count: a fresh object's first reference, sharing, and the last release on any thread",
          "[runtime]") {
  std::atomic<int> destroyed{0};
  {
    Ref<Counted> a = make_ref<Counted>(destroyed);  // adopted: a plain store
    CHECK(a->use_count() == 1);
    Ref<Counted> b = a;
    CHECK(a->use_count() == 2);
    b.reset();  // one of two: the atomic path
    CHECK(a->use_count() == 1);
    CHECK(destroyed == 0);
    Ref<Counted> c(a.get());  // a raw pointer already held: counted, not adopted
    CHECK(a->use_count() == 2);
  }  // c then a: the sole owner's release destroys without a read-modify-write
  CHECK(destroyed == 1);

  // Copies released on several threads at once: destroyed exactly once, by
  // whichever release is last.
  for (int round = 0; round < 50; ++round) {
    destroyed = 0;
    Ref<Counted> shared = make_ref<Counted>(destroyed);
    std::atomic<bool> shared_while_held{true};  // Catch's CHECK is for the main thread only
    std::vector<std::thread> threads;
    for (int t = 0; t < 4; ++t)
      threads.emplace_back([copy = shared, &shared_while_held]() mutable {
        for (int i = 0; i < 100; ++i) {
          const Ref<Counted> another = copy;
          if (another->use_count() < 2) shared_while_held = false;
        }
        copy.reset();
      });
    shared.reset();
    for (std::thread& t : threads) t.join();
    CHECK(shared_while_held);
    CHECK(destroyed == 1);
  }
}
