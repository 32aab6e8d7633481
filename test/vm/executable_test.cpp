// The Executable outside the VM: the verifier's rules, the binary format
// (round trip, truncation, bit flips), the disassembler's text and the seed
// corpus of the loader fuzzer (fuzz/executable_loader_fuzzer.cpp).
#include "nimble/vm/executable.hpp"

#include <catch2/catch.hpp>
#include <fmt/format.h>
#include <unistd.h>

#include <cstdlib>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <functional>
#include <iterator>
#include <random>

#include "support/tensor_matchers.hpp"
#include "vm/executable_data.hpp"
#include "vm/executable_format.hpp"

using namespace nimble;
using namespace nimble::vm;
namespace fs = std::filesystem;

namespace {

Instruction make(Opcode op, std::uint32_t dst = 0, std::uint32_t a = 0, std::uint32_t b = 0,
                 std::uint32_t c = 0, std::uint32_t d = 0, std::uint8_t aux = 0) {
  return Instruction{.opcode = op, .aux = aux, .dst = dst, .a = a, .b = b, .c = c, .d = d};
}

std::uint8_t code(DType t) { return static_cast<std::uint8_t>(t); }
std::uint8_t code(ScalarOp op) { return static_cast<std::uint8_t>(op); }

DimDesc fixed(std::int64_t n) { return {.kind = DimDesc::Kind::fixed, .value = n}; }
DimDesc any() { return {.kind = DimDesc::Kind::any}; }
DimDesc symbol(std::string name, std::int64_t bound = -1) {
  return {.kind = DimDesc::Kind::symbol, .value = bound, .name = std::move(name)};
}
TypeDesc tensor(DType dtype, std::vector<DimDesc> dims) {
  return {.kind = TypeDesc::Kind::tensor, .dtype = dtype, .dims = std::move(dims)};
}
TypeDesc type_var(std::string name) { return {.kind = TypeDesc::Kind::type_var, .name = name}; }
TypeDesc adt(std::string name, std::vector<TypeDesc> args) {
  return {.kind = TypeDesc::Kind::adt, .fields = std::move(args), .name = std::move(name)};
}

PrimitiveInfo primitive(std::string name, PrimitiveKind kind, std::uint32_t inputs,
                        std::uint32_t outputs, std::string source) {
  PrimitiveInfo p{.name = std::move(name), .kind = kind, .num_inputs = inputs,
                  .num_outputs = outputs, .source = std::move(source)};
  p.hash = content_hash(p.kind, p.source);
  return p;
}

// Adds a function whose code is `code`, appended to data.code.
void add_function(ExecutableData& data, VMFunction f, const std::vector<Instruction>& code) {
  f.code_begin = static_cast<std::uint32_t>(data.code.size());
  f.code_size = static_cast<std::uint32_t>(code.size());
  data.code.insert(data.code.end(), code.begin(), code.end());
  data.functions.push_back(std::move(f));
}

// A small executable that uses every opcode (the VM would not run all of it
// meaningfully: the verifier and the format only care about structure).
//
// Functions: 0 @main (entry), 1 @helper, 2 @kitchen, 3 @fail.
ExecutableData sample() {
  ExecutableData data;
  data.arg_pool = {0, 0, 6,   // 0: add_1($r0, $r0) -> ($r6)
                   0,         // 3: @helper($r0)
                   0, 1};     // 4: ($r0, $r1)
  data.shape_pool = {2, 4, 3,  // 0: [4, 3]
                     0};       // 3: []
  data.constants = {Tensor::from_data<float>({2, 3}, {1, 2, 3, 4, 5, 6.5f}),
                    Tensor::from_data<bool>({3}, {true, false, true}),
                    Tensor::scalar<std::int64_t>(-7),
                    Tensor::from_data<Half>({2}, {Half(1.5f), Half(-2.0f)})};
  data.primitives = {
      primitive("add_1", PrimitiveKind::compute, 2, 1,
                "def @add_1(%a: f32[?, 3], %b: f32[?, 3]) -> f32[?, 3] { add(%a, %b) }"),
      primitive("add_1_shape", PrimitiveKind::shape_function, 2, 1,
                "def @add_1_shape(%a: i64[2], %b: i64[2]) -> i64[2] { %a }")};
  data.strings = {"unreachable: \"fail\"\n"};
  data.adts = {{.name = "List",
                .type_params = {"a"},
                .constructors = {{.name = "Nil"},
                                 {.name = "Cons",
                                  .fields = {type_var("a"), adt("List", {type_var("a")})}}}}};

  const TypeDesc x = tensor(DType::f32, {any(), fixed(3)});
  add_function(data,
               {.name = "main",
                .param_names = {"x", "n"},
                .param_types = {x, tensor(DType::i64, {})},
                .result_type = x,
                .num_registers = 8,
                .is_entry = true},
               {
                   make(Opcode::LoadConsti, 2, 0, 0, 0, 0, code(DType::i64)),
                   make(Opcode::ScalarBinary, 3, 1, 2, 0, 0, code(ScalarOp::gt)),
                   make(Opcode::If, 0, 3, encode_jump(1), encode_jump(6)),
                   make(Opcode::LoadConsti, 4, 48, 0, 0, 0, code(DType::i64)),
                   make(Opcode::AllocStorage, 5, 4, 64, encode_device(Device::cpu()), 0,
                        code(DType::f32)),
                   make(Opcode::AllocTensor, 6, 5, 0, 0, 0, code(DType::f32)),
                   make(Opcode::InvokePacked, 0, 0, 0, 3, 1),
                   make(Opcode::Ret, 0, 6),
                   make(Opcode::TailCall, 0, 1, 3, 1),
               });
  add_function(data,
               {.name = "helper",
                .param_names = {"y"},
                .param_types = {x},
                .result_type = x,
                .num_registers = 3},
               {
                   make(Opcode::LoadConst, 1, 0),
                   make(Opcode::AllocADT, 2, kTupleTag, 4, 2),
                   make(Opcode::GetField, 1, 2, 0),
                   make(Opcode::Goto, 0, encode_jump(1)),
                   make(Opcode::Ret, 0, 1),
               });
  add_function(
      data,
      {.name = "kitchen",
       .param_names = {"a", "b"},
       .param_types = {tensor(DType::f32, {symbol("n", 512), fixed(3)}),
                       adt("List", {tensor(DType::f32, {fixed(2)})})},
       .result_type = x,
       .num_registers = 12},
      {
          make(Opcode::ShapeOf, 2, 0),
          make(Opcode::ReshapeTensor, 3, 0, 2),
          make(Opcode::TensorDim, 4, 0, 1),
          make(Opcode::ScalarUnary, 5, 4, 0, 0, 0, code(ScalarOp::neg)),
          make(Opcode::DeviceCopy, 6, 0, encode_device(Device::cpu()), encode_device(Device::cuda(1))),
          make(Opcode::StorageSize, 7, 5, 0, 0, 0, code(DType::f32)),
          make(Opcode::AllocTensorReg, 8, 7, 0, 2, 0, code(DType::f16)),
          make(Opcode::AllocClosure, 9, 1, 0, 0),
          make(Opcode::InvokeClosure, 10, 9, 3, 1),
          make(Opcode::Invoke, 10, 1, 3, 1),
          make(Opcode::GetTag, 11, 1),
          make(Opcode::AllocADT, 11, 1, 4, 2),
          make(Opcode::KillRegister, 6),
          make(Opcode::Ret, 0, 10),
      });
  add_function(data,
               {.name = "fail",
                .result_type = tensor(DType::f32, {}),
                .num_registers = 0},
               {make(Opcode::Fatal, 0, 0)});
  return data;
}

Executable wrap(ExecutableData data) {
  return Executable(std::make_shared<const ExecutableData>(std::move(data)));
}

std::vector<std::byte> sample_image() { return wrap(sample()).save(); }

bool same_instruction(const Instruction& x, const Instruction& y) {
  return x.opcode == y.opcode && x.aux == y.aux && x.reserved == y.reserved && x.dst == y.dst &&
         x.a == y.a && x.b == y.b && x.c == y.c && x.d == y.d;
}

bool same_tensor(const Tensor& x, const Tensor& y) {
  return x.dtype() == y.dtype() && x.shape() == y.shape() &&
         std::memcmp(x.raw_data(), y.raw_data(), x.nbytes()) == 0;
}

void check_equal(const ExecutableData& x, const ExecutableData& y) {
  CHECK(x.functions == y.functions);
  REQUIRE(x.code.size() == y.code.size());
  for (std::size_t i = 0; i < x.code.size(); ++i) CHECK(same_instruction(x.code[i], y.code[i]));
  CHECK(x.arg_pool == y.arg_pool);
  CHECK(x.shape_pool == y.shape_pool);
  REQUIRE(x.constants.size() == y.constants.size());
  for (std::size_t i = 0; i < x.constants.size(); ++i)
    CHECK(same_tensor(x.constants[i], y.constants[i]));
  REQUIRE(x.primitives.size() == y.primitives.size());
  for (std::size_t i = 0; i < x.primitives.size(); ++i) {
    const PrimitiveInfo& p = x.primitives[i];
    const PrimitiveInfo& q = y.primitives[i];
    CHECK(p.name == q.name);
    CHECK(p.kind == q.kind);
    CHECK(p.num_inputs == q.num_inputs);
    CHECK(p.num_outputs == q.num_outputs);
    CHECK(p.source == q.source);
    CHECK(p.hash == q.hash);
  }
  CHECK(x.strings == y.strings);
  CHECK(x.adts == y.adts);
}

// Loads `image`; it must either load (and then verify, print and save back
// to the same bytes) or throw Error(parse_error).
void load_or_reject(std::span<const std::byte> image) {
  try {
    const Executable e = Executable::load(image);
    CHECK_NOTHROW(verify(e.data()));
    CHECK_NOTHROW(static_cast<void>(e.disassemble()));
    const std::vector<std::byte> again = e.save();
    CHECK(std::equal(again.begin(), again.end(), image.begin(), image.end()));
  } catch (const Error& error) {
    CHECK(error.kind() == ErrorKind::parse_error);
  }
}

std::vector<std::byte> read_bytes(const fs::path& path) {
  std::ifstream in(path, std::ios::binary);
  const std::vector<char> chars((std::istreambuf_iterator<char>(in)), {});
  std::vector<std::byte> bytes(chars.size());
  std::memcpy(bytes.data(), chars.data(), chars.size());
  return bytes;
}

void write_bytes(const fs::path& path, std::span<const std::byte> bytes) {
  std::ofstream out(path, std::ios::binary);
  out.write(reinterpret_cast<const char*>(bytes.data()), static_cast<std::streamsize>(bytes.size()));
}

const fs::path kCorpusDir = fs::path(NIMBLE_TEST_DATA_DIR) / "executable_corpus";

}  // namespace

// ----------------------------------------------------------------------------
// Verifier
// ----------------------------------------------------------------------------

TEST_CASE("the verifier accepts well-formed executables", "[vm]") {
  CHECK_NOTHROW(verify(sample()));
  CHECK_NOTHROW(verify(ExecutableData{}));
  CHECK(wrap(sample()).entry_points() == std::vector<std::string>{"main"});
}

TEST_CASE("the verifier rejects each kind of malformed executable", "[vm]") {
  const auto rejects = [](const std::function<void(ExecutableData&)>& mutate,
                          const std::string& message) {
    ExecutableData data = sample();
    mutate(data);
    CHECK_NIMBLE_ERROR(verify(data), ErrorKind::parse_error, message);
  };
  // Instruction i of function f (indices as in sample()).
  const auto at = [](ExecutableData& d, std::size_t f, std::size_t i) -> Instruction& {
    return d.code[d.functions[f].code_begin + i];
  };

  SECTION("opcodes and unused fields") {
    rejects([&](ExecutableData& d) { at(d, 0, 0).opcode = static_cast<Opcode>(200); },
            "@main, instruction 0: opcode 200 out of range (there are 29)");
    rejects([&](ExecutableData& d) { at(d, 1, 4).b = 5; },
            "@helper, instruction 4 (Ret): field b must be 0, got 5");
    rejects([&](ExecutableData& d) { at(d, 1, 4).dst = 1; },
            "@helper, instruction 4 (Ret): field dst must be 0, got 1");
    rejects([&](ExecutableData& d) { at(d, 1, 4).aux = 1; },
            "@helper, instruction 4 (Ret): field aux must be 0, got 1");
    rejects([&](ExecutableData& d) { at(d, 1, 4).reserved = 2; },
            "@helper, instruction 4 (Ret): the reserved bits must be 0, got 0x2");
  }
  SECTION("registers") {
    rejects([&](ExecutableData& d) { at(d, 0, 6).a = 0, d.arg_pool[2] = 17; },
            "@main, instruction 6 (InvokePacked): argument 2: register 17 out of range (the "
            "function has 8)");
    rejects([&](ExecutableData& d) { at(d, 0, 1).b = 8; },
            "@main, instruction 1 (ScalarBinary): register 8 out of range (the function has 8)");
    rejects([&](ExecutableData& d) { at(d, 2, 0).dst = 12; },
            "@kitchen, instruction 0 (ShapeOf): register 12 out of range (the function has 12)");
  }
  SECTION("table indices") {
    rejects([&](ExecutableData& d) { at(d, 0, 8).a = 4; },
            "@main, instruction 8 (TailCall): function 4 out of range (the executable has 4)");
    rejects([&](ExecutableData& d) { at(d, 1, 0).a = 4; },
            "@helper, instruction 0 (LoadConst): constant 4 out of range (the executable has 4)");
    rejects([&](ExecutableData& d) { at(d, 0, 6).a = 2; },
            "@main, instruction 6 (InvokePacked): primitive 2 out of range (the executable has "
            "2)");
    rejects([&](ExecutableData& d) { at(d, 3, 0).a = 1; },
            "@fail, instruction 0 (Fatal): string 1 out of range (the executable has 1)");
  }
  SECTION("shapes") {
    rejects([&](ExecutableData& d) { at(d, 0, 5).c = 4; },
            "@main, instruction 5 (AllocTensor): shape 4 out of range (the shape pool has 4 "
            "entries)");
    rejects([&](ExecutableData& d) { d.shape_pool[0] = -1; },
            "@main, instruction 5 (AllocTensor): shape 0 has the negative rank -1");
    rejects([&](ExecutableData& d) { d.shape_pool[0] = 4; },
            "@main, instruction 5 (AllocTensor): shape 0 of rank 4 runs past the end of the "
            "shape pool (4 entries)");
    rejects([&](ExecutableData& d) { d.shape_pool[2] = -3; },
            "@main, instruction 5 (AllocTensor): shape 0: dim 1 is -3, but dims must be >= 0");
  }
  SECTION("argument lists") {
    rejects([&](ExecutableData& d) { at(d, 1, 1).b = 5; },
            "@helper, instruction 1 (AllocADT): arguments [5, 7) run past the end of the "
            "argument pool (6 entries)");
    rejects([&](ExecutableData& d) { at(d, 1, 1).c = 0xFFFFFFFF; },
            "@helper, instruction 1 (AllocADT): arguments [4, 4294967299) run past the end of the "
            "argument pool (6 entries)");
    rejects([&](ExecutableData& d) { at(d, 0, 6).d = 4; },
            "@main, instruction 6 (InvokePacked): 4 outputs out of 3 arguments");
  }
  SECTION("arities") {
    rejects([&](ExecutableData& d) { at(d, 0, 6).c = 2; },
            "@main, instruction 6 (InvokePacked): primitive add_1 takes 2 inputs and 1 outputs, "
            "got 2 arguments");
    rejects([&](ExecutableData& d) { at(d, 0, 6).d = 2; },
            "@main, instruction 6 (InvokePacked): primitive add_1 has 1 outputs, got 2");
    rejects([&](ExecutableData& d) { at(d, 0, 8).c = 2; },
            "@main, instruction 8 (TailCall): @helper takes 1 arguments, got 2");
    rejects([&](ExecutableData& d) { at(d, 2, 9).b = 4, at(d, 2, 9).c = 2; },
            "@kitchen, instruction 9 (Invoke): @helper takes 1 arguments, got 2");
    rejects([&](ExecutableData& d) { at(d, 2, 7).b = 4, at(d, 2, 7).c = 2; },
            "@kitchen, instruction 7 (AllocClosure): captures 2 values, but @helper takes only "
            "1 arguments");
  }
  SECTION("jumps") {
    rejects([&](ExecutableData& d) { at(d, 0, 2).c = encode_jump(7); },
            "@main, instruction 2 (If): jump to 9 is outside the function (instructions 0 to 8)");
    rejects([&](ExecutableData& d) { at(d, 0, 2).b = encode_jump(-3); },
            "@main, instruction 2 (If): jump to -1 is outside the function (instructions 0 to "
            "8)");
    rejects([&](ExecutableData& d) { at(d, 1, 3).a = encode_jump(2); },
            "@helper, instruction 3 (Goto): jump to 5 is outside the function (instructions 0 to "
            "4)");
  }
  SECTION("devices, dtypes and scalar ops") {
    rejects([&](ExecutableData& d) { at(d, 2, 4).c = 2; },
            "@kitchen, instruction 4 (DeviceCopy): field c: invalid device code 0x2");
    rejects([&](ExecutableData& d) { at(d, 0, 4).c = 0x100; },
            "@main, instruction 4 (AllocStorage): field c: invalid device code 0x100");
    rejects([&](ExecutableData& d) { at(d, 0, 0).aux = 8; },
            "@main, instruction 0 (LoadConsti): invalid dtype code 8");
    rejects([&](ExecutableData& d) { at(d, 0, 1).aux = kNumScalarOps; },
            "@main, instruction 1 (ScalarBinary): invalid scalar op code 18");
    rejects([&](ExecutableData& d) { at(d, 0, 1).aux = code(ScalarOp::neg); },
            "@main, instruction 1 (ScalarBinary): neg is a unary op");
    rejects([&](ExecutableData& d) { at(d, 2, 3).aux = code(ScalarOp::add); },
            "@kitchen, instruction 3 (ScalarUnary): add is a binary op");
  }
  SECTION("functions") {
    rejects([](ExecutableData& d) { d.code[d.functions[1].code_begin + 4] = make(Opcode::Move, 1, 0); },
            "@helper: the last instruction (4, Move) is not Ret, TailCall, Goto or Fatal");
    rejects([](ExecutableData& d) { d.functions[3].code_size = 0; },
            "@fail: the function has no code");
    rejects([](ExecutableData& d) { d.functions[3].code_size = 2; },
            "@fail: code [28, 30) is outside the executable's 29 instructions");
    rejects([](ExecutableData& d) { d.functions[3].code_begin = 0xFFFFFFFF; },
            "@fail: code [4294967295, 4294967296) is outside the executable's 29 instructions");
    rejects([](ExecutableData& d) { d.functions[1].num_registers = 0; },
            "@helper: 0 registers cannot hold its 1 parameters");
    rejects([](ExecutableData& d) { d.functions[3].param_names.push_back("z"); },
            "@fail: 1 parameter names but 0 parameter types");
    rejects([](ExecutableData& d) { d.functions[3].name = "helper"; },
            "functions 1 and 3 are both named @helper");
  }
  SECTION("types") {
    rejects([](ExecutableData& d) { d.functions[0].param_types[0].dims[1].value = -2; },
            "@main: the type of parameter 0 (%x) is malformed: dim 1 is -2, but dims must be >= "
            "0");
    rejects([](ExecutableData& d) { d.functions[2].param_types[0].dims[0].value = -5; },
            "@kitchen: the type of parameter 0 (%a) is malformed: dim 0 (n) has the bound -5, but "
            "bounds must be >= 0");
    rejects([](ExecutableData& d) { d.functions[2].param_types[0].dims[0].name.clear(); },
            "@kitchen: the type of parameter 0 (%a) is malformed: dim 0 is a symbol without a "
            "name");
    rejects([](ExecutableData& d) { d.functions[0].result_type.dtype = static_cast<DType>(9); },
            "@main: the result type is malformed: invalid dtype code 9");
    rejects([](ExecutableData& d) { d.functions[0].result_type = {.kind = TypeDesc::Kind::func}; },
            "@main: the result type is malformed: a function type without a result");
    rejects(
        [](ExecutableData& d) {
          TypeDesc t = tensor(DType::f32, {});
          for (int i = 0; i < 64; ++i) t = {.kind = TypeDesc::Kind::tuple, .fields = {t}};
          d.functions[0].result_type = t;
        },
        "@main: the result type is malformed: it nests deeper than 64 levels");
    rejects([](ExecutableData& d) { d.adts[0].constructors[1].fields[0].kind = static_cast<TypeDesc::Kind>(7); },
            "type List: field 0 of constructor Cons is malformed: invalid type kind 7");
  }
  SECTION("tables") {
    const std::uint64_t actual =
        content_hash(PrimitiveKind::shape_function, sample().primitives[1].source);
    rejects([](ExecutableData& d) { d.primitives[1].hash = 0x1234; },
            fmt::format("primitive 1 (add_1_shape): hash 0x0000000000001234 does not match its "
                        "content ({:#018x})",
                        actual));
    rejects([](ExecutableData& d) { d.primitives[1].kind = static_cast<PrimitiveKind>(2); },
            "primitive 1 (add_1_shape): invalid kind 2");
    rejects([](ExecutableData& d) { d.constants[2] = Tensor(); }, "constant 2 is undefined");
  }
}

// ----------------------------------------------------------------------------
// Binary format
// ----------------------------------------------------------------------------

namespace {

// The message of the Error(parse_error) that loading `image` raises.
std::string load_error(std::span<const std::byte> image) {
  try {
    static_cast<void>(Executable::load(image));
  } catch (const Error& e) {
    CHECK(e.kind() == ErrorKind::parse_error);
    return e.message();
  }
  FAIL_CHECK("the image loaded");
  return "";
}

std::uint64_t read_u64(std::span<const std::byte> image, std::size_t at) {
  std::uint64_t v = 0;
  for (std::size_t i = 0; i < 8; ++i) v |= static_cast<std::uint64_t>(image[at + i]) << (8 * i);
  return v;
}

// Offset of the contents of section `tag` (after its tag and size).
std::size_t section_offset(std::span<const std::byte> image, std::string_view tag) {
  std::size_t at = format::kHeaderSize;
  while (at + 12 <= image.size()) {
    if (std::memcmp(&image[at], tag.data(), 4) == 0) return at + 12;
    at += 12 + read_u64(image, at + 4);
  }
  FAIL("no section " << tag);
  return 0;
}

}  // namespace

TEST_CASE("save and load round-trip every field", "[vm]") {
  const ExecutableData original = sample();
  const std::vector<std::byte> image = wrap(original).save();
  CHECK(std::memcmp(image.data(), "NIMBLEVM\x02\0\0\0\0\0\0\0", 16) == 0);
  CHECK(read_u64(image, 16) == image.size() - format::kHeaderSize);
  const Executable loaded = Executable::load(image);
  check_equal(loaded.data(), original);
  CHECK(loaded.save() == image);  // the encoding is canonical
  CHECK(loaded.disassemble() == wrap(original).disassemble());

  const ExecutableData empty;
  check_equal(Executable::load(wrap(empty).save()).data(), empty);
}

TEST_CASE("a damaged header or checksum is an error naming what is wrong", "[vm]") {
  const std::vector<std::byte> good = sample_image();
  const std::size_t payload = good.size() - format::kHeaderSize;

  CHECK_NIMBLE_ERROR(Executable::load({}), ErrorKind::parse_error,
                     "truncated executable: the header needs 32 bytes at offset 0, 0 left");
  CHECK_NIMBLE_ERROR(Executable::load(std::span(good).first(31)), ErrorKind::parse_error,
                     "truncated executable: the header needs 32 bytes at offset 0, 31 left");
  std::vector<std::byte> image = good;
  image[0] = std::byte{'X'};
  CHECK(load_error(image) == "not a nimble executable: it does not start with \"NIMBLEVM\"");
  image = good;
  image[8] = std::byte{1};
  CHECK(load_error(image) == "unsupported executable format version 1 (this build reads version 2)");
  image = good;
  image[12] = std::byte{4};
  CHECK(load_error(image) == "unsupported executable flags 0x4 (none are defined)");
  CHECK(load_error(std::span(good).first(good.size() - 1)) ==
        fmt::format("truncated executable: the header announces a payload of {} bytes, {} follow",
                    payload, payload - 1));
  image = good;
  image.push_back(std::byte{0});
  CHECK(load_error(image) ==
        fmt::format("corrupt executable: 1 bytes after the payload of {} bytes", payload));
  image = good;
  image[100] ^= std::byte{0x10};
  CHECK(load_error(image) ==
        fmt::format("corrupt executable: the payload's checksum is {:#018x}, the header says "
                    "{:#018x}",
                    format::fnv1a64(std::span(image).subspan(32)), read_u64(good, 24)));
}

TEST_CASE("a corrupt payload is an error naming the section and offset", "[vm]") {
  const std::vector<std::byte> good = sample_image();
  std::vector<std::byte> image;
  const auto corrupt = [&](std::size_t at, std::initializer_list<std::uint8_t> bytes) {
    image = good;
    for (std::uint8_t b : bytes) image[at++] = std::byte{b};
    format::reseal(image);
    return load_error(image);
  };

  // A count far beyond the bytes left is rejected before anything is allocated.
  const std::size_t func = section_offset(good, "FUNC");
  const std::size_t func_size = read_u64(good, func - 8);
  CHECK(corrupt(func, {0xFF, 0xFF, 0xFF, 0xFF}) ==
        fmt::format("truncated executable: section FUNC: the function count claims 4294967295 "
                    "entries of at least 35 bytes, {} left (at offset {})",
                    func_size - 4, func));
  // The name of function 0 claims more bytes than the section holds.
  CHECK(corrupt(func + 4, {0xF0, 0x01, 0, 0}) ==
        fmt::format("truncated executable: section FUNC: function 0: the name needs 496 bytes at "
                    "offset {}, {} left",
                    func + 8, func_size - 8));
  // A section that claims more bytes than the payload holds.
  CHECK(corrupt(func - 8, {0xFF, 0xFF, 0xFF, 0xFF, 0xFF, 0xFF, 0xFF, 0x7F}) ==
        fmt::format("truncated executable: section FUNC needs 9223372036854775807 bytes at offset "
                    "{}, {} left",
                    func, good.size() - func));
  const std::size_t code = section_offset(good, "CODE");
  CHECK(corrupt(code - 12, {'C', 'O', 'D', 'F'}) ==
        fmt::format("corrupt executable: expected section CODE (at offset {})", code - 12));
  CHECK(corrupt(code + 4, {200}) == "@main, instruction 0: opcode 200 out of range (there are 29)");
  CHECK(corrupt(code + 4 + 24 + 4, {9}) ==
        "@main, instruction 1 (ScalarBinary): register 9 out of range (the function has 8)");

  // Constant 0 is f32[2, 3] (45 bytes); constant 1 is bool[3] {1, 0, 1}.
  const std::size_t cnst = section_offset(good, "CNST") + 4;
  CHECK(corrupt(cnst, {9}) ==
        fmt::format("section CNST: constant 0: invalid dtype code 9 (at offset {})", cnst));
  CHECK(corrupt(cnst + 45 + 1 + 4 + 8 + 1, {2}) ==
        fmt::format("section CNST: constant 1: a bool constant holds the byte 2; bools must be 0 "
                    "or 1 (at offset {})",
                    cnst + 59));
  CHECK(corrupt(cnst + 5, {0xFF, 0xFF, 0xFF, 0xFF, 0xFF, 0xFF, 0xFF, 0xFF}) ==
        fmt::format("section CNST: constant 0: a constant's dim is -1, but dims must be >= 0 (at "
                    "offset {})",
                    cnst + 5));
  CHECK(corrupt(cnst + 13, {0, 0, 0, 0, 0, 0, 0, 0x40}) ==
        fmt::format("section CNST: constant 0: a constant's element count overflows int64 (at "
                    "offset {})",
                    cnst + 13));
  CHECK(corrupt(cnst + 5, {0, 0, 0, 0, 0, 0, 0, 0x10}) ==
        fmt::format("truncated executable: section CNST: constant 0: a constant's data needs "
                    "13835058055282163712 bytes at offset {}, {} left",
                    cnst + 21, section_offset(good, "PRIM") - 12 - cnst - 21));

  // Types nest at most 64 deep, so that reading them cannot exhaust the stack.
  ExecutableData deep = sample();
  TypeDesc t = tensor(DType::f32, {});
  for (int i = 0; i < 70; ++i) t = {.kind = TypeDesc::Kind::tuple, .fields = {t}};
  deep.functions[0].result_type = t;
  CHECK_THAT(load_error(wrap(std::move(deep)).save()),
             Catch::StartsWith("section FUNC: function 0: a type nests deeper than 64 levels (at "
                               "offset "));
}

TEST_CASE("every truncation of an image is rejected", "[vm]") {
  const std::vector<std::byte> good = sample_image();
  for (std::size_t n = 0; n < good.size(); ++n) {
    const std::span<const std::byte> prefix = std::span(good).first(n);
    CHECK_THROWS_AS(Executable::load(prefix), Error);
    if (n < format::kHeaderSize) continue;
    // Resealed, the truncated payload reaches the section reader.
    std::vector<std::byte> resealed(prefix.begin(), prefix.end());
    format::reseal(resealed);
    const std::string message = load_error(resealed);
    if (n > format::kHeaderSize)
      CHECK_THAT(message, Catch::Contains("truncated executable") || Catch::Contains("corrupt"));
  }
}

TEST_CASE("bit flips are rejected or load something that verifies", "[vm]") {
  const std::vector<std::byte> good = sample_image();
  // Every bit of the header matters.
  for (std::size_t bit = 0; bit < format::kHeaderSize * 8; ++bit) {
    std::vector<std::byte> image = good;
    image[bit / 8] ^= std::byte{static_cast<std::uint8_t>(1u << (bit % 8))};
    CHECK_THROWS_AS(Executable::load(image), Error);
  }
  std::mt19937_64 rng(20260601);
  std::uniform_int_distribution<std::size_t> any_bit(format::kHeaderSize * 8, good.size() * 8 - 1);
  std::size_t loaded = 0;
  for (int i = 0; i < 2000; ++i) {
    std::vector<std::byte> image = good;
    const std::size_t bit = any_bit(rng);
    image[bit / 8] ^= std::byte{static_cast<std::uint8_t>(1u << (bit % 8))};
    CHECK_THROWS_AS(Executable::load(image), Error);  // the checksum catches it
    format::reseal(image);  // the parser and the verifier must catch it
    try {
      static_cast<void>(Executable::load(image));
      ++loaded;
    } catch (const Error&) {
    }
    load_or_reject(image);
  }
  // Some flips hit bytes where any value is valid (tensor data, immediates).
  CHECK(loaded > 0);
  // Bytes overwritten with random values, a few at a time.
  std::uniform_int_distribution<std::size_t> any_byte(format::kHeaderSize, good.size() - 1);
  for (int i = 0; i < 1000; ++i) {
    std::vector<std::byte> image = good;
    for (int k = 0; k < 4; ++k) image[any_byte(rng)] = static_cast<std::byte>(rng());
    format::reseal(image);
    load_or_reject(image);
  }
}

TEST_CASE("save_file and load_file", "[vm]") {
  const fs::path dir = fs::temp_directory_path() / fmt::format("nimble_vm_test_{}", ::getpid());
  fs::create_directories(dir);
  const std::string path = (dir / "sample.nvm").string();
  wrap(sample()).save_file(path);
  check_equal(Executable::load_file(path).data(), sample());

  std::vector<std::byte> bytes = read_bytes(path);
  bytes.resize(20);
  write_bytes(path, bytes);
  CHECK_NIMBLE_ERROR(Executable::load_file(path), ErrorKind::parse_error,
                     fmt::format("'{}': truncated executable: the header needs 32 bytes at offset "
                                 "0, 20 left",
                                 path));
  const std::string missing = (dir / "missing.nvm").string();
  CHECK_NIMBLE_ERROR(Executable::load_file(missing), ErrorKind::invalid_argument,
                     fmt::format("cannot open executable '{}': No such file or directory", missing));
  CHECK_NIMBLE_ERROR(Executable::load_file(dir.string()), ErrorKind::invalid_argument,
                     fmt::format("cannot read executable '{}': Is a directory", dir.string()));
  CHECK_NIMBLE_ERROR(wrap(sample()).save_file((dir / "no" / "such" / "dir").string()),
                     ErrorKind::invalid_argument,
                     fmt::format("cannot write executable '{}': No such file or directory",
                                 (dir / "no" / "such" / "dir").string()));
  fs::remove_all(dir);
}

// ----------------------------------------------------------------------------
// Disassembler
// ----------------------------------------------------------------------------

TEST_CASE("the disassembler lists functions, instructions and tables", "[vm]") {
  const std::string expected = R"(def @main(%x: f32[?, 3], %n: i64[]) -> f32[?, 3]  // entry, registers: 8
     0  LoadConsti      $r2, 0, 0, i64
     1  ScalarBinary    $r3, $r1, $r2, gt
     2  If              $r3, → 3, → 8
     3  LoadConsti      $r4, 48, 0, i64
     4  AllocStorage    $r5, $r4, 64, cpu, f32
     5  AllocTensor     $r6, $r5, 0, [4, 3], f32
     6  InvokePacked    add_1, ($r0, $r0) -> ($r6)
     7  Ret             $r6
     8  TailCall        @helper, ($r0)

def @helper(%y: f32[?, 3]) -> f32[?, 3]  // registers: 3
     0  LoadConst       $r1, const#0, cpu
     1  AllocADT        $r2, tuple, ($r0, $r1)
     2  GetField        $r1, $r2, 0
     3  Goto            → 4
     4  Ret             $r1

def @kitchen(%a: f32[n<=512, 3], %b: List<f32[2]>) -> f32[?, 3]  // registers: 12
     0  ShapeOf         $r2, $r0
     1  ReshapeTensor   $r3, $r0, $r2
     2  TensorDim       $r4, $r0, 1
     3  ScalarUnary     $r5, $r4, neg
     4  DeviceCopy      $r6, $r0, cpu, cuda:1
     5  StorageSize     $r7, $r5, f32
     6  AllocTensorReg  $r8, $r7, 0, $r2, f16
     7  AllocClosure    $r9, @helper, ()
     8  InvokeClosure   $r10, $r9, ($r0)
     9  Invoke          $r10, @helper, ($r0)
    10  GetTag          $r11, $r1
    11  AllocADT        $r11, tag 1, ($r0, $r1)
    12  KillRegister    $r6
    13  Ret             $r10

def @fail() -> f32[]  // registers: 0
     0  Fatal           "unreachable: \"fail\"\n"

constants:
  const#0  f32[2, 3]
  const#1  bool[3]
  const#2  i64[]
  const#3  f16[2]

primitives:
  #0  add_1  compute  hash 0x3edcf568600b300c  inputs 2, outputs 1
  #1  add_1_shape  shape_function  hash 0xc11d79319c1580dc  inputs 2, outputs 1

strings:
  #0  "unreachable: \"fail\"\n"

types:
  type List<a> = Nil | Cons(a, List<a>)
)";
  CHECK(wrap(sample()).disassemble() == expected);
}

// ----------------------------------------------------------------------------
// Seed corpus of fuzz/executable_loader_fuzzer.cpp
// ----------------------------------------------------------------------------

namespace {

// Small valid and damaged images for the fuzzer to start from.
std::vector<std::pair<std::string, std::vector<std::byte>>> seed_images() {
  std::vector<std::pair<std::string, std::vector<std::byte>>> seeds;
  const std::vector<std::byte> good = sample_image();
  seeds.emplace_back("valid_sample", good);
  seeds.emplace_back("valid_empty", wrap(ExecutableData{}).save());
  ExecutableData one;
  add_function(one, {.name = "main", .num_registers = 1, .is_entry = true},
               {make(Opcode::LoadConsti, 0, 1, 0, 0, 0, code(DType::i64)), make(Opcode::Ret, 0, 0)});
  seeds.emplace_back("valid_one_function", wrap(one).save());

  seeds.emplace_back("truncated_header", std::vector<std::byte>(good.begin(), good.begin() + 20));
  std::vector<std::byte> cut(good.begin(), good.begin() + static_cast<std::ptrdiff_t>(good.size() / 2));
  format::reseal(cut);
  seeds.emplace_back("truncated_payload_resealed", cut);
  std::vector<std::byte> bad_sum = good;
  bad_sum.back() ^= std::byte{1};
  seeds.emplace_back("bad_checksum", bad_sum);
  std::mt19937_64 rng(7);
  for (int i = 0; i < 4; ++i) {
    std::vector<std::byte> flipped = good;
    const std::size_t bit = format::kHeaderSize * 8 + rng() % ((good.size() - format::kHeaderSize) * 8);
    flipped[bit / 8] ^= std::byte{static_cast<std::uint8_t>(1u << (bit % 8))};
    format::reseal(flipped);
    seeds.emplace_back(fmt::format("bitflip_resealed_{}", i), flipped);
  }
  return seeds;
}

}  // namespace

// Writes the seeds when NIMBLE_WRITE_EXECUTABLE_CORPUS names a directory
// (run from the repository root after a format change):
//   NIMBLE_WRITE_EXECUTABLE_CORPUS=test/data/executable_corpus
//   build/release/test/nimble_tests "executable corpus seeds can be regenerated"
TEST_CASE("executable corpus seeds can be regenerated", "[vm]") {
  const char* dir = std::getenv("NIMBLE_WRITE_EXECUTABLE_CORPUS");
  if (!dir) return;
  for (const auto& [name, bytes] : seed_images()) write_bytes(fs::path(dir) / name, bytes);
}

TEST_CASE("every file of the executable corpus loads or is rejected", "[vm]") {
  REQUIRE(fs::is_directory(kCorpusDir));
  std::size_t files = 0;
  for (const fs::directory_entry& entry : fs::directory_iterator(kCorpusDir)) {
    if (!entry.is_regular_file()) continue;
    ++files;
    INFO(entry.path().filename().string());
    const std::vector<std::byte> bytes = read_bytes(entry.path());
    // Seeds named valid_* are current images: a format change must regenerate them.
    if (entry.path().filename().string().starts_with("valid_"))
      CHECK_NOTHROW(static_cast<void>(Executable::load(bytes)));
    else
      load_or_reject(bytes);
  }
  CHECK(files >= 5);
}
