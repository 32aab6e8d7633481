#include "nimble/runtime/value.hpp"

#include <catch2/catch.hpp>

#include <thread>
#include <vector>

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
