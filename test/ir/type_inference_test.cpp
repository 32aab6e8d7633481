// Type inference: golden tests (IR text in, the same text with inferred types
// out) and the folder of programs that must fail, each with its message.
#include <catch2/catch.hpp>

#include <deque>
#include <filesystem>
#include <fstream>
#include <sstream>

#include "nimble/ir/module.hpp"
#include "support/tensor_matchers.hpp"

using namespace nimble;

namespace {

// Parses, verifies and type-checks `text`; returns it printed with types.
std::string typed(std::string_view text) {
  ir::Module m = ir::parse(text);
  ir::verify(m);
  ir::infer_types(m);
  return ir::print(m, {.show_types = true});
}

}  // namespace

TEST_CASE("broadcasting with static, Any and symbolic dims", "[types]") {
  CHECK(typed("def @f(%x: f32[n, 768], %b: f32[768], %y: f32[?, 1], %s: f32[]) {\n"
              "  let %a = add(%x, %b);\n"
              "  let %c = mul(%y, %b);\n"
              "  let %d = sub(%a, %y);\n"
              "  let %e = div(%d, %s);\n"
              "  %e\n"
              "}\n") ==
        "def @f(%x: f32[n, 768], %b: f32[768], %y: f32[?, 1], %s: f32[]) {  "
        "// fn(f32[n, 768], f32[768], f32[?, 1], f32[]) -> f32[?, 768]\n"
        "  let %a = add(%x, %b);  // f32[n, 768]\n"
        "  let %c = mul(%y, %b);  // f32[?, 768]\n"
        "  let %d = sub(%a, %y);  // f32[?, 768]\n"
        "  let %e = div(%d, %s);  // f32[?, 768]\n"
        "  %e\n"
        "}\n");
}

TEST_CASE("if and match join differing dims to Any", "[types]") {
  CHECK(typed("type Option<T> { None, Some(T) }\n\n"
              "def @f(%c: bool[], %x: f32[2, 3], %y: f32[5, 3], %o: Option<f32[n]>) {\n"
              "  let %a = if (%c) {\n"
              "    %x\n"
              "  } else {\n"
              "    %y\n"
              "  };\n"
              "  let %b = match (%o) {\n"
              "    Some(%v) => {\n"
              "      %v\n"
              "    },\n"
              "    None => {\n"
              "      const f32[2] [0, 0]\n"
              "    }\n"
              "  };\n"
              "  (%a, %b)\n"
              "}\n")
            .find("-> (f32[?, 3], f32[?])") != std::string::npos);
}

TEST_CASE("calls bind the callee's symbols to the caller's dims", "[types]") {
  const std::string out =
      typed("def @double(%x: f32[n, k]) -> f32[n, k] {\n"
            "  add(%x, %x)\n"
            "}\n\n"
            "def @f(%a: f32[7, 4], %b: f32[?, 4], %c: f32[m, 2]) {\n"
            "  let %p = @double(%a);\n"
            "  let %q = @double(%b);\n"
            "  let %r = @double(%c);\n"
            "  (%p, %q, %r)\n"
            "}\n");
  CHECK(out.find("let %p = @double(%a);  // f32[7, 4]") != std::string::npos);
  CHECK(out.find("let %q = @double(%b);  // f32[?, 4]") != std::string::npos);
  CHECK(out.find("let %r = @double(%c);  // f32[m, 2]") != std::string::npos);
}

TEST_CASE("ADT type arguments are inferred from constructor fields", "[types]") {
  const std::string out =
      typed("type List<T> { Nil, Cons(T, List<T>) }\n\n"
            "def @f(%x: f32[1, 512], %y: f32[?, 512]) {\n"
            "  let %one = Cons(%x, Nil);\n"
            "  let %two = Cons(%y, %one);\n"
            "  let %s = stack(%two);\n"
            "  %s\n"
            "}\n");
  CHECK(out.find("let %one = Cons(%x, Nil);  // List<f32[1, 512]>") != std::string::npos);
  CHECK(out.find("let %two = Cons(%y, %one);  // List<f32[?, 512]>") != std::string::npos);
  CHECK(out.find("let %s = stack(%two);  // f32[?, ?, 512]") != std::string::npos);
}

TEST_CASE("recursion with a declared return type, closures and tuples", "[types]") {
  const std::string out =
      typed("def @sum_to(%n: i64[], %acc: i64[]) -> i64[] {\n"
            "  if (less(%n, 1i64)) {\n"
            "    %acc\n"
            "  } else {\n"
            "    @sum_to(sub(%n, 1i64), add(%acc, %n))\n"
            "  }\n"
            "}\n\n"
            "def @g(%x: f32[3]) {\n"
            "  let %f = fn (%y: f32[3]) {\n"
            "    mul(%x, %y)\n"
            "  };\n"
            "  let %t = (%f(%x), @sum_to(10i64, 0i64));\n"
            "  %t.0\n"
            "}\n");
  CHECK(out.find("// fn(i64[], i64[]) -> i64[]") != std::string::npos);
  CHECK(out.find("  };  // fn(f32[3]) -> f32[3]") != std::string::npos);
  CHECK(out.find("// fn(f32[3]) -> f32[3]\n") != std::string::npos);
}

TEST_CASE("ill-typed and ill-formed programs fail with their messages", "[types]") {
  namespace fs = std::filesystem;
  static std::deque<std::string> file_names;  // parse() keeps a pointer to the name
  int count = 0;
  for (const auto& entry : fs::directory_iterator(fs::path(NIMBLE_TEST_DATA_DIR) / "ill_typed")) {
    if (entry.path().extension() != ".nir") continue;
    ++count;
    std::ifstream in(entry.path());
    std::stringstream text;
    text << in.rdbuf();
    const std::string program = text.str();
    const std::string first = program.substr(0, program.find('\n'));
    const std::string prefix = "// error: ";
    REQUIRE(first.starts_with(prefix));
    const std::string expected = first.substr(prefix.size());
    file_names.push_back(entry.path().filename().string());
    INFO("program " << file_names.back());
    try {
      ir::Module m = ir::parse(program, file_names.back().c_str());
      ir::verify(m);
      ir::infer_types(m);
      FAIL_CHECK("expected an error: " << expected);
    } catch (const Error& e) {
      CHECK(std::string(to_string(e.kind())) + ": " + e.message() == expected);
    }
  }
  CHECK(count >= 15);
}

TEST_CASE("function-typed arguments and bounded symbols", "[types]") {
  // A function value's own symbols are unrelated to the call's.
  CHECK(typed("def @apply(%g: fn(f32[5]) -> f32[5], %x: f32[n]) -> f32[n] {\n"
              "  %x\n"
              "}\n\n"
              "def @f(%h: fn(f32[m]) -> f32[m], %y: f32[7]) {\n"
              "  @apply(%h, %y)\n"
              "}\n")
            .find("// fn(fn(f32[m]) -> f32[m], f32[7]) -> f32[7]") != std::string::npos);
  // A value beyond a symbol's upper bound does not fit.
  CHECK_THROWS_WITH(typed("def @g(%x: f32[n<=4]) -> f32[n<=4] {\n"
                          "  %x\n"
                          "}\n\n"
                          "def @f(%y: f32[5]) {\n"
                          "  @g(%y)\n"
                          "}\n"),
                    Catch::Matchers::StartsWith(
                        "call of @g: argument 1 must be f32[n<=4], got f32[5]"));
}
