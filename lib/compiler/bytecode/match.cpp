// `match` compiled to tag tests and jumps: each clause tests its pattern
// (GetTag, compare, If) and on the first failing test jumps to the next
// clause; fields are read with GetField and bound as the pattern's variables
// (those the function reads: a field bound and never read is not loaded).
// A clause whose constructor is the only one earlier clauses leave (each of
// the others matched whatever its fields hold) tests no tag: a value of the
// ADT has one of its constructors' (the VM checks an entry's arguments). If
// no clause matches, Fatal.
#include <algorithm>

#include "support/check.hpp"
#include "compiler/bytecode/compiler.hpp"
#include "support/stack_guard.hpp"

namespace nimble::vm {

namespace {

bool is_wildcard(const ir::Pattern& p) { return p.kind() == ir::PatternKind::wildcard; }

// A field pattern that needs no load: a wildcard, or a variable never read.
bool loads_nothing(const FunctionCompiler& fc, const ir::Pattern& p) {
  if (is_wildcard(p)) return true;
  const auto* v = p.as<ir::PatternVarNode>();
  return v != nullptr && !fc.is_read(v->var.as<ir::VarNode>());
}

// Whether `p` matches every value of its type.
bool irrefutable(const ir::Pattern& p) {
  check_stack("the bytecode compiler (patterns)");
  switch (p.kind()) {
    case ir::PatternKind::wildcard:
    case ir::PatternKind::var: return true;
    case ir::PatternKind::constructor: {
      const auto* c = p.as<ir::PatternConstructorNode>();
      if (c->ctor.as<ir::ConstructorNode>()->adt->constructors.size() > 1) return false;
      return std::all_of(c->fields.begin(), c->fields.end(), irrefutable);
    }
    case ir::PatternKind::tuple: {
      const auto* t = p.as<ir::PatternTupleNode>();
      return std::all_of(t->fields.begin(), t->fields.end(), irrefutable);
    }
  }
  return false;
}

// Emits the tests of `p` against register `value`; the If of each failing
// test is added to `fails`, to be pointed at the next clause.
// `test_tag` false: the value is known to have p's constructor.
void compile_pattern(FunctionCompiler& fc, const ir::Pattern& p, std::uint32_t value,
                     std::vector<std::size_t>& fails, bool test_tag = true) {
  check_stack("the bytecode compiler (patterns)");
  switch (p.kind()) {
    case ir::PatternKind::wildcard: return;
    case ir::PatternKind::var:
      fc.bind(p.as<ir::PatternVarNode>()->var.as<ir::VarNode>(),
              {.reg = value, .func = -1, .captured = {}});
      return;
    case ir::PatternKind::constructor: {
      const auto* c = p.as<ir::PatternConstructorNode>();
      const auto* ctor = c->ctor.as<ir::ConstructorNode>();
      if (test_tag && ctor->adt->constructors.size() > 1) {
        const std::uint32_t tag = fc.new_reg();
        fc.emit({.opcode = Opcode::GetTag, .dst = tag, .a = value});
        const std::uint32_t expected = fc.new_reg();
        fc.emit({.opcode = Opcode::LoadConsti, .aux = static_cast<std::uint8_t>(DType::i64),
                 .dst = expected, .a = ctor->tag});
        const std::uint32_t same = fc.new_reg();
        fc.emit({.opcode = Opcode::ScalarBinary, .aux = static_cast<std::uint8_t>(ScalarOp::eq),
                 .dst = same, .a = tag, .b = expected});
        fails.push_back(fc.emit({.opcode = Opcode::If, .a = same, .b = encode_jump(1)}));
      }
      for (std::size_t i = 0; i < c->fields.size(); ++i) {
        if (loads_nothing(fc, c->fields[i])) continue;
        const std::uint32_t field = fc.new_reg();
        fc.emit({.opcode = Opcode::GetField, .dst = field, .a = value,
                 .b = static_cast<std::uint32_t>(i)});
        compile_pattern(fc, c->fields[i], field, fails);
      }
      return;
    }
    case ir::PatternKind::tuple: {
      const auto* t = p.as<ir::PatternTupleNode>();
      for (std::size_t i = 0; i < t->fields.size(); ++i) {
        if (loads_nothing(fc, t->fields[i])) continue;
        const std::uint32_t field = fc.new_reg();
        fc.emit({.opcode = Opcode::GetField, .dst = field, .a = value,
                 .b = static_cast<std::uint32_t>(i)});
        compile_pattern(fc, t->fields[i], field, fails);
      }
      return;
    }
  }
}

}  // namespace

std::uint32_t FunctionCompiler::compile_match(const ir::MatchNode& match, bool tail) {
  const std::uint32_t value = compile_value(match.value);
  const std::uint32_t dst = tail ? kNoReg : new_reg();
  std::vector<std::size_t> ends;
  // Per constructor of the matched ADT: an earlier clause takes all of its values.
  std::vector<bool> taken;
  for (const ir::Clause& clause : match.clauses) {
    std::vector<std::size_t> fails;
    bool test_tag = true;
    const auto* pattern = clause.pattern.as<ir::PatternConstructorNode>();
    const ir::ConstructorNode* ctor = pattern ? pattern->ctor.as<ir::ConstructorNode>() : nullptr;
    if (ctor) {
      taken.resize(ctor->adt->constructors.size());
      test_tag = false;
      for (std::size_t t = 0; t < taken.size(); ++t) test_tag = test_tag || (t != ctor->tag && !taken[t]);
    }
    compile_pattern(*this, clause.pattern, value, fails, test_tag);
    if (ctor && std::all_of(pattern->fields.begin(), pattern->fields.end(), irrefutable)) taken[ctor->tag] = true;
    if (tail) {
      compile_tail(clause.body);
    } else {
      emit({.opcode = Opcode::Move, .dst = dst, .a = compile_value(clause.body)});
      ends.push_back(emit({.opcode = Opcode::Goto}));
    }
    for (std::size_t f : fails) patch_jump(f, 2, pc());
  }
  emit({.opcode = Opcode::Fatal,
        .a = module_compiler().string("match: no clause matches the value")});
  for (std::size_t e : ends) patch_jump(e, 0, pc());
  return dst;
}

}  // namespace nimble::vm
