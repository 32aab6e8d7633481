#include "codegen/simplify_index.hpp"

#include <optional>
#include <utility>
#include <vector>

namespace nimble::codegen {

namespace {

using te::BinaryOp;
using te::Expr;

// c·atom; an atom is anything but +, -, and × by a constant.
struct Term {
  Expr atom;
  std::int64_t coef = 0;
};

// Σ terms + constant.
struct Linear {
  std::vector<Term> terms;
  std::int64_t constant = 0;
};

// n / d rounded toward -inf, for d > 0 (so that n - q·d lies in [0, d)).
std::int64_t floor_div(std::int64_t n, std::int64_t d) {
  const std::int64_t q = n / d;
  return (n % d != 0 && n < 0) ? q - 1 : q;
}

class Simplifier {
 public:
  explicit Simplifier(const VarBounds& bounds) : bounds_(bounds) {}

  Expr run(const Expr& e) {
    if (const auto* b = e.as<te::BinaryNode>();
        b != nullptr && (b->op == BinaryOp::floordiv || b->op == BinaryOp::floormod) && e.dtype() == DType::i64)
      if (const std::optional<std::int64_t> c = te::as_int(b->b); c && *c > 0)
        if (std::optional<Expr> s = divide(*b, *c)) return *s;
    return te::map_children(e, [&](const Expr& child) { return run(child); });
  }

 private:
  // floordiv or floormod of `b` by c > 0, or nullopt if a is not linear
  // (or its coefficients overflow).
  std::optional<Expr> divide(const te::BinaryNode& b, std::int64_t c) {
    Linear a;
    if (!linear(b.a, 1, a)) return std::nullopt;
    Linear quotient, rest;
    for (const Term& t : a.terms) {
      const std::int64_t q = floor_div(t.coef, c);
      if (q != 0) quotient.terms.push_back({t.atom, q});
      if (t.coef - q * c != 0) rest.terms.push_back({t.atom, t.coef - q * c});
    }
    quotient.constant = floor_div(a.constant, c);
    rest.constant = a.constant - quotient.constant * c;
    const DType dtype = b.a.dtype();
    // R in [0, c): the division leaves it whole.
    const std::optional<std::int64_t> max = upper_bound(rest);
    const bool whole = max && *max < c;
    // Nothing to take out of the division: it stays as it is (the same
    // node, where its operands do not simplify).
    if (!whole && quotient.terms.empty() && quotient.constant == 0) return std::nullopt;
    if (b.op == BinaryOp::floormod) {
      if (whole) return rebuild(rest, dtype);
      return te::floormod(rebuild(rest, dtype), te::int_imm(c, dtype));
    }
    if (whole) return rebuild(quotient, dtype);
    return add(rebuild(quotient, dtype), te::floordiv(rebuild(rest, dtype), te::int_imm(c, dtype)));
  }

  // Adds scale·e to `out`; false on overflow.
  bool linear(const Expr& e, std::int64_t scale, Linear& out) {
    // i64 only: index math, where nothing wraps (a narrower type's wrapping
    // is not linear).
    if (e.dtype() != DType::i64) return false;
    if (const std::optional<std::int64_t> v = te::as_int(e)) {
      std::int64_t product = 0;
      return !__builtin_mul_overflow(*v, scale, &product) && !__builtin_add_overflow(out.constant, product, &out.constant);
    }
    if (const auto* b = e.as<te::BinaryNode>(); b != nullptr && !b->checked) {
      switch (b->op) {
        case BinaryOp::add: return linear(b->a, scale, out) && linear(b->b, scale, out);
        case BinaryOp::sub: {
          std::int64_t negated = 0;
          return !__builtin_sub_overflow(std::int64_t{0}, scale, &negated) && linear(b->a, scale, out) &&
                 linear(b->b, negated, out);
        }
        case BinaryOp::mul: {
          std::int64_t scaled = 0;
          if (const std::optional<std::int64_t> k = te::as_int(b->b))
            return !__builtin_mul_overflow(scale, *k, &scaled) && linear(b->a, scaled, out);
          if (const std::optional<std::int64_t> k = te::as_int(b->a))
            return !__builtin_mul_overflow(scale, *k, &scaled) && linear(b->b, scaled, out);
          break;
        }
        default: break;
      }
    }
    const Expr atom = run(e);
    for (Term& t : out.terms)
      if (t.atom.same_as(atom)) return !__builtin_add_overflow(t.coef, scale, &t.coef);
    out.terms.push_back({atom, scale});
    return true;
  }

  // The largest value of `l` if every atom is bounded below by 0 and above,
  // and every coefficient is positive (as R's are); else nullopt.
  std::optional<std::int64_t> upper_bound(const Linear& l) const {
    if (l.constant < 0) return std::nullopt;
    std::int64_t max = l.constant;
    for (const Term& t : l.terms) {
      const std::optional<std::int64_t> atom = atom_bound(t.atom);
      std::int64_t product = 0;
      if (t.coef <= 0 || !atom || __builtin_mul_overflow(t.coef, *atom, &product) ||
          __builtin_add_overflow(max, product, &max))
        return std::nullopt;
    }
    return max;
  }

  // An atom's largest value where it lies in [0, bound]: a bounded var, or
  // a floormod by a positive constant.
  std::optional<std::int64_t> atom_bound(const Expr& atom) const {
    if (const auto* v = atom.as<te::VarNode>()) {
      const auto it = bounds_.find(v);
      if (it != bounds_.end()) return it->second;
      return std::nullopt;
    }
    if (const auto* b = atom.as<te::BinaryNode>(); b != nullptr && b->op == BinaryOp::floormod)
      if (const std::optional<std::int64_t> c = te::as_int(b->b); c && *c > 0) return *c - 1;
    return std::nullopt;
  }

  static Expr add(const Expr& a, const Expr& b) {
    if (te::as_int(a) == 0) return b;
    if (te::as_int(b) == 0) return a;
    return te::binary(BinaryOp::add, a, b);
  }

  // Σ c·atom + constant, in the order of the terms.
  static Expr rebuild(const Linear& l, DType dtype) {
    Expr sum = te::int_imm(0, dtype);
    for (const Term& t : l.terms)
      sum = add(sum, t.coef == 1 ? t.atom : te::binary(BinaryOp::mul, t.atom, te::int_imm(t.coef, dtype)));
    return add(sum, te::int_imm(l.constant, dtype));
  }

  const VarBounds& bounds_;
};

}  // namespace

Expr simplify_index(const Expr& index, const VarBounds& bounds) { return Simplifier(bounds).run(index); }

Expr simplify_load_indices(const Expr& e, const VarBounds& bounds) {
  if (const auto* l = e.as<te::LoadNode>()) {
    std::vector<Expr> indices;
    bool changed = false;
    for (const Expr& i : l->indices) {
      indices.push_back(simplify_index(i, bounds));
      changed = changed || !indices.back().same_as(i);
    }
    if (!changed) return e;
    return l->checked ? te::checked_load(l->tensor, std::move(indices)) : te::load(l->tensor, std::move(indices));
  }
  if (const auto* r = e.as<te::ReduceNode>()) {
    VarBounds inside = bounds;
    for (const te::IterVar& axis : r->axes)
      if (const std::optional<std::int64_t> n = te::as_int(axis.extent); n && *n >= 1) inside[axis.var.node()] = *n - 1;
    return te::map_children(e, [&](const Expr& child) { return simplify_load_indices(child, inside); });
  }
  return te::map_children(e, [&](const Expr& child) { return simplify_load_indices(child, bounds); });
}

}  // namespace nimble::codegen
