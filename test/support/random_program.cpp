#include "support/random_program.hpp"

#include <fmt/format.h>

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <map>
#include <numeric>
#include <optional>
#include <random>
#include <set>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

#include "ir/op.hpp"

namespace nimble::testing {
namespace {

// The unary ops a floating-point value may go through: neg, abs and every
// element-wise op of one floating-point operand in the registry.
const std::vector<std::string>& float_unary_ops() {
  static const std::vector<std::string> names = [] {
    std::vector<std::string> out = {"neg", "abs"};
    for (const ir::OpDef* op : ir::all_ops())
      if (op->float_inputs) out.emplace_back(op->name);
    return out;
  }();
  return names;
}

/// Generated intermediates stay this small, so that hundreds of programs run
/// in seconds (also under sanitizers).
constexpr std::int64_t kMaxNumel = 96;
constexpr std::size_t kMaxRank = 4;

const std::vector<std::string> kFeatures = {
    // dims and shapes
    "any_dim", "symbolic_dim", "bounded_symbol", "zero_extent", "broadcast_one",
    // ops
    "unary", "binary", "compare", "where", "cast", "reduce", "reduce_keepdims", "argmax", "softmax",
    "layer_norm", "dense", "matmul", "batch_matmul", "reshape", "transpose", "expand_dims",
    "squeeze", "concatenate", "split", "strided_slice", "take", "shape_of_full", "arange",
    "nonzero", "dynamic_update_slice",
    // control flow
    "if", "if_tuple", "tail_loop_global", "tail_loop_closure", "growing_loop", "nontail_recursion",
    "recursion_depth_50", "mutual_recursion", "shape_polymorphic_call",
    // closures
    "closure_let", "closure_to_global", "closure_from_global", "closure_if", "closure_in_tuple",
    "closure_curried",
    // tuples
    "tuple_projection", "tuple_global", "tuple_pattern",
    // ADTs
    "list_input", "list_literal", "list_build_loop", "long_list", "list_build_nontail", "list_sum",
    "list_length", "list_stack", "list_map", "list_pairs", "option", "tree", "nested_match",
    "wildcard", "match_tuple_of_adts", "adt_result",
    // inputs
    "loop_count_input"};

// --- Static dims: what type inference knows -----------------------------------------

/// A dim as the type checker sees it. The generator's SDims are never more
/// specific than the checker's (a dim it cannot predict exactly is Any), so
/// that an annotation it writes never claims more than is true.
struct SDim {
  enum class Kind : std::uint8_t { fixed, symbol, any };
  Kind kind = Kind::any;
  std::int64_t value = 0;
  std::string name;

  static SDim fixed(std::int64_t v) { return {Kind::fixed, v, {}}; }
  static SDim symbol(std::string n) { return {Kind::symbol, 0, std::move(n)}; }
  static SDim any() { return {}; }
  [[nodiscard]] bool is_fixed() const { return kind == Kind::fixed; }
  [[nodiscard]] bool is_one() const { return kind == Kind::fixed && value == 1; }
  friend bool operator==(const SDim&, const SDim&) = default;
};
using SDims = std::vector<SDim>;

// ops/broadcast.hpp, on SDims (two different constants cannot meet: the
// run-time extents broadcast, and a constant is its run-time extent).
SDim broadcast_dim(const SDim& a, const SDim& b) {
  if (a == b) return a;
  if (a.is_one()) return b;
  if (b.is_one()) return a;
  if (a.is_fixed()) return a;
  if (b.is_fixed()) return b;
  return SDim::any();
}

// relation_util.hpp's merge_equal_dim: the more specific of two dims that are
// equal at run time (two different symbols: Any, which is never more specific).
SDim merge_equal(const SDim& a, const SDim& b) {
  if (a == b) return a;
  if (a.is_fixed()) return a;
  if (b.is_fixed()) return b;
  return SDim::any();
}

// The join of two branches: dims that differ become Any.
SDims join(const SDims& a, const SDims& b) {
  SDims out;
  for (std::size_t i = 0; i < a.size(); ++i) out.push_back(a[i] == b[i] ? a[i] : SDim::any());
  return out;
}

// A type written in a helper's signature has no symbols (inside the helper
// they would be rigid; at the call site unbound symbols become Any).
SDims without_symbols(SDims dims) {
  for (SDim& d : dims)
    if (d.kind == SDim::Kind::symbol) d = SDim::any();
  return dims;
}

// --- Values ------------------------------------------------------------------------------

using Extents = std::vector<std::int64_t>;

std::int64_t numel(const Extents& s) {
  return std::accumulate(s.begin(), s.end(), std::int64_t{1}, std::multiplies<>());
}

/// A tensor in scope: how to name it, its dtype, static dims and run-time
/// extents (under the program's `args`).
struct TVal {
  std::string name;  ///< "%v3", or a literal ("1.5f32")
  DType dtype = DType::f32;
  SDims sdims;
  Extents shape;
  std::optional<std::int64_t> known;  ///< the value of an i64 scalar, when known

  [[nodiscard]] std::size_t rank() const { return shape.size(); }
  [[nodiscard]] std::int64_t size() const { return numel(shape); }
};

bool is_float(DType d) {
  return d == DType::f32 || d == DType::f64;
}
bool is_int(DType d) {
  return d == DType::i32 || d == DType::i64;
}

std::optional<Extents> broadcast_extents(const Extents& a, const Extents& b) {
  const std::size_t r = std::max(a.size(), b.size());
  Extents out(r);
  for (std::size_t d = 0; d < r; ++d) {
    const std::int64_t ea = d + a.size() >= r ? a[d + a.size() - r] : 1;
    const std::int64_t eb = d + b.size() >= r ? b[d + b.size() - r] : 1;
    if (ea == eb || eb == 1)
      out[d] = ea;
    else if (ea == 1)
      out[d] = eb;
    else
      return std::nullopt;
  }
  return out;
}

SDims broadcast_sdims(const SDims& a, const SDims& b) {
  const std::size_t r = std::max(a.size(), b.size());
  SDims out(r);
  for (std::size_t d = 0; d < r; ++d) {
    const SDim da = d + a.size() >= r ? a[d + a.size() - r] : SDim::fixed(1);
    const SDim db = d + b.size() >= r ? b[d + b.size() - r] : SDim::fixed(1);
    out[d] = broadcast_dim(da, db);
  }
  return out;
}

// Whether some dim of 1 meets a different extent (a real broadcast).
bool broadcasts_a_one(const Extents& a, const Extents& b) {
  const std::size_t r = std::max(a.size(), b.size());
  for (std::size_t d = 0; d < r; ++d) {
    const std::int64_t ea = d + a.size() >= r ? a[d + a.size() - r] : 1;
    const std::int64_t eb = d + b.size() >= r ? b[d + b.size() - r] : 1;
    if (ea != eb && (ea == 1 || eb == 1)) return true;
  }
  return false;
}

// --- Text ------------------------------------------------------------------------------

std::string pad(int indent) {
  return std::string(static_cast<std::size_t>(2 * indent), ' ');
}

std::string dim_text(const SDim& d, const std::map<std::string, std::int64_t>& bounds) {
  switch (d.kind) {
    case SDim::Kind::fixed:
      return std::to_string(d.value);
    case SDim::Kind::any:
      return "?";
    case SDim::Kind::symbol: {
      auto it = bounds.find(d.name);
      return it == bounds.end() ? d.name : fmt::format("{} <= {}", d.name, it->second);
    }
  }
  return "?";
}

std::string type_text(DType dtype, const SDims& dims,
                      const std::map<std::string, std::int64_t>& bounds = {}) {
  std::string out = fmt::format("{}[", to_string(dtype));
  for (std::size_t i = 0; i < dims.size(); ++i) {
    if (i) out += ", ";
    out += dim_text(dims[i], bounds);
  }
  return out + "]";
}

/// The type a helper's signature gives `v`.
std::string annot(const TVal& v) {
  return type_text(v.dtype, without_symbols(v.sdims));
}

std::string ints_text(const std::vector<std::int64_t>& v) {
  std::string out = "[";
  for (std::size_t i = 0; i < v.size(); ++i) {
    if (i) out += ", ";
    out += std::to_string(v[i]);
  }
  return out + "]";
}

std::string literal(DType dtype, double v) {
  if (dtype == DType::boolean) return v != 0 ? "true" : "false";
  if (is_int(dtype)) return fmt::format("{}{}", static_cast<std::int64_t>(v), to_string(dtype));
  return fmt::format("{}{}", v, to_string(dtype));
}

std::string join_names(const std::vector<std::string>& names) {
  std::string out;
  for (std::size_t i = 0; i < names.size(); ++i) {
    if (i) out += ", ";
    out += names[i];
  }
  return out;
}

// A tuple expression or type: "(a, b)", and "(a,)" for one field.
std::string tuple_text(const std::vector<std::string>& fields) {
  return fields.size() == 1 ? "(" + fields[0] + ",)" : "(" + join_names(fields) + ")";
}

// --- Program state ------------------------------------------------------------------------

/// A body under construction: its let-statements, the tensors in scope, and
/// how deeply structures (if, loops, closures) nest here.
struct Ctx {
  std::string text;
  int indent = 1;
  std::vector<TVal> vals;
  int depth = 0;
  bool in_main = false;  ///< main's parameters are in scope
  /// The body of a helper called with arguments of different extents: only
  /// ops that fit any extents (no constants shaped like a value, no max/min
  /// that need elements).
  bool poly = false;
  std::vector<std::string> adt_results;  ///< ADT values main may return
  std::vector<std::string> results;      ///< the structures' results, which main returns
};

/// An entry parameter and how to make its argument.
struct Param {
  enum class Kind : std::uint8_t { tensor, count, list } kind = Kind::tensor;
  std::string name;
  DType dtype = DType::f32;
  SDims sdims;
  Extents shape;           ///< tensor / list element, under `args`
  std::int64_t value = 0;  ///< count value / list length
};

/// A List value: its variable, what its elements look like, and its length.
struct ListVal {
  std::string name;
  TVal elem;  ///< runtime shape and the static element type (its name is unused)
  std::int64_t length = 0;
};

struct Count {
  std::string text;
  std::int64_t value = 0;
};

class Generator {
 public:
  explicit Generator(std::uint64_t seed)
      : rng_(seed * 0x9E3779B97F4A7C15ull + 0x1234567ull), seed_(seed) {}
  RandomProgram generate();

 private:
  // --- randomness
  int uniform(int lo, int hi) { return std::uniform_int_distribution<int>(lo, hi)(rng_); }
  bool chance(double p) { return std::bernoulli_distribution(p)(rng_); }
  template <class T>
  const T& pick(const std::vector<T>& v) {
    return v[static_cast<std::size_t>(uniform(0, static_cast<int>(v.size()) - 1))];
  }
  std::string pick_str(std::initializer_list<const char*> options) {
    std::vector<std::string> v(options.begin(), options.end());
    return pick(v);
  }
  double value_for(DType dtype) {
    if (dtype == DType::boolean) return uniform(0, 1);
    if (is_int(dtype)) return uniform(-4, 4);
    return uniform(-16, 16) / 8.0;
  }

  std::string fresh(std::string_view prefix) { return fmt::format("%{}{}", prefix, next_id_++); }
  std::string fresh_global(std::string_view prefix) {
    return fmt::format("@{}{}", prefix, next_id_++);
  }
  void use(const std::string& feature) { features_.insert(feature); }

  // --- emitting
  TVal emit(Ctx& c, const std::string& value, TVal v) {
    v.name = fresh("v");
    c.text += fmt::format("{}let {} = {};\n", pad(c.indent), v.name, value);
    if (v.size() == 0) use("zero_extent");
    c.vals.push_back(v);
    return v;
  }
  // A let of a non-tensor value (a tuple, a list, a closure).
  std::string emit_other(Ctx& c, std::string_view prefix, const std::string& value) {
    std::string name = fresh(prefix);
    c.text += fmt::format("{}let {} = {};\n", pad(c.indent), name, value);
    return name;
  }
  static Ctx child(const Ctx& c, int indent) {
    Ctx k;
    k.indent = indent;
    k.vals = c.vals;
    k.depth = c.depth + 1;
    k.in_main = c.in_main;
    k.poly = c.poly;
    return k;
  }
  // "{ lets; result }" closing at `indent`.
  static std::string braced(const Ctx& inner, const std::string& result, int indent) {
    return "{\n" + inner.text + pad(inner.indent) + result + "\n" + pad(indent) + "}";
  }
  struct Clause {
    std::string pattern;
    Ctx body;
    std::string result;
  };
  static std::string match_text(const std::string& value, const std::vector<Clause>& clauses,
                                int indent) {
    std::string out = "match (" + value + ") {\n";
    for (std::size_t i = 0; i < clauses.size(); ++i) {
      out += pad(indent + 1) + clauses[i].pattern + " => " +
             braced(clauses[i].body, clauses[i].result, indent + 1);
      out += i + 1 < clauses.size() ? ",\n" : "\n";
    }
    return out + pad(indent) + "}";
  }
  // A helper's parameter standing for argument `v`.
  TVal param_for(const TVal& v, std::string_view prefix) {
    TVal p = v;
    p.name = fresh(prefix);
    p.sdims = without_symbols(v.sdims);
    p.known.reset();
    return p;
  }
  // A call's result: as declared (`like`'s annotation).
  static TVal call_result(const TVal& like) {
    TVal r = like;
    r.sdims = without_symbols(like.sdims);
    r.known.reset();
    return r;
  }

  // --- picking values
  template <class Pred>
  std::optional<TVal> pick_val(const Ctx& c, Pred pred) {
    std::vector<std::size_t> ok;
    for (std::size_t i = 0; i < c.vals.size(); ++i)
      if (pred(c.vals[i])) ok.push_back(i);
    if (ok.empty()) return std::nullopt;
    if (ok.size() > 3 && chance(0.5)) return c.vals[ok[ok.size() - 1 - uniform(0, 2)]];
    return c.vals[pick(ok)];
  }
  TVal pick_float(const Ctx& c, std::int64_t max_numel = kMaxNumel) {
    auto v = pick_val(c, [&](const TVal& t) {
      return is_float(t.dtype) && t.size() <= max_numel && t.name[0] == '%';
    });
    if (v) return *v;
    // Scopes always hold a float tensor (main's first parameter, a loop's
    // accumulator); a tiny constant keeps this total.
    return TVal{"1.5f32", DType::f32, {}, {}, {}};
  }
  Count count(const Ctx& c, int max);

  // --- ops: each returns nullopt where it does not apply to x
  TVal const_tensor(Ctx& c, DType dtype, const Extents& shape);
  TVal partner(Ctx& c, const TVal& x, bool into);
  TVal unary(Ctx& c, const TVal& x);
  TVal binary(Ctx& c, const TVal& x, const TVal& y, bool compare);
  std::optional<TVal> where(Ctx& c, const TVal& x, bool into);
  std::optional<TVal> reduce(Ctx& c, const TVal& x, bool keepdims_only);
  std::optional<TVal> softmax(Ctx& c, const TVal& x);
  std::optional<TVal> layer_norm(Ctx& c, const TVal& x);
  std::optional<TVal> dense(Ctx& c, const TVal& x);
  std::optional<TVal> matmul(Ctx& c, const TVal& x);
  std::optional<TVal> batch_matmul(Ctx& c, const TVal& x);
  std::optional<TVal> reshape(Ctx& c, const TVal& x);
  std::optional<TVal> transpose(Ctx& c, const TVal& x);
  std::optional<TVal> expand_squeeze(Ctx& c, const TVal& x);
  std::optional<TVal> concatenate(Ctx& c, const TVal& x);
  std::optional<TVal> split(Ctx& c, const TVal& x);
  std::optional<TVal> strided_slice(Ctx& c, const TVal& x);
  std::optional<TVal> take(Ctx& c, const TVal& x);
  std::optional<TVal> cast(Ctx& c, const TVal& x);
  std::optional<TVal> shape_of_full(Ctx& c, const TVal& x);
  std::optional<TVal> arange(Ctx& c);
  std::optional<TVal> nonzero(Ctx& c, const TVal& x);
  std::optional<TVal> dynamic_update_slice(Ctx& c, const TVal& x);

  /// One random op on some value in scope.
  TVal gen_op(Ctx& c);
  /// A value with `target`'s dtype and run-time shape, computed from it and
  /// the values in scope in `steps` shape-preserving ops.
  TVal gen_like(Ctx& c, const TVal& target, int steps);
  /// `n` statements: mostly ops, sometimes (not too deep) a structure.
  void gen_block(Ctx& c, int n);

  // --- structures
  void gen_structure(Ctx& c);
  void gen_structure_kind(Ctx& c);
  std::string gen_cond(Ctx& c);
  void gen_if(Ctx& c);
  void gen_mutual(Ctx& c);
  std::pair<std::string, TVal> closure_text(const Ctx& c, const TVal& y, int indent,
                                            bool declare_ret);
  /// A second call of a shape-polymorphic helper: on another value of
  /// `like`'s dtype and rank, if there is one.
  void call_again(Ctx& c, const std::string& callee, const std::string& leading, const TVal& like);
  void gen_tail_loop(Ctx& c, bool as_closure);
  void gen_growing_loop(Ctx& c);
  void gen_nontail(Ctx& c);
  void gen_closure(Ctx& c);
  void gen_tuple(Ctx& c);
  void gen_list(Ctx& c);
  ListVal build_list(Ctx& c);
  void consume_list(Ctx& c, const ListVal& list);
  void gen_tree(Ctx& c);

  std::mt19937_64 rng_;
  std::uint64_t seed_;
  int next_id_ = 0;
  std::vector<std::string> defs_;
  std::set<std::string> features_;
  std::vector<Param> params_;
  std::map<std::string, std::int64_t> bounds_;
  std::optional<TVal> list_input_;  ///< main's List parameter (its element), if any
  std::string list_input_name_;
  std::int64_t list_input_length_ = 0;
};

// --- ops -----------------------------------------------------------------------------------

Count Generator::count(const Ctx& c, int max) {
  auto known = pick_val(c, [&](const TVal& t) {
    return t.known && *t.known >= 0 && *t.known <= max && t.name[0] == '%';
  });
  if (known && chance(0.6)) {
    if (known->name.rfind("%k", 0) == 0) use("loop_count_input");
    return {known->name, *known->known};
  }
  const int v = uniform(0, max);
  return {fmt::format("{}i64", v), v};
}

TVal Generator::const_tensor(Ctx& c, DType dtype, const Extents& shape) {
  std::string values;
  for (std::int64_t i = 0; i < numel(shape); ++i) {
    if (i) values += ", ";
    const double v = value_for(dtype);
    values += dtype == DType::boolean ? (v != 0 ? "true" : "false")
              : is_int(dtype)         ? std::to_string(static_cast<std::int64_t>(v))
                                      : fmt::format("{}", v);
  }
  SDims sdims;
  for (std::int64_t e : shape) sdims.push_back(SDim::fixed(e));
  return emit(c, fmt::format("const {} [{}]", type_text(dtype, sdims), values),
              TVal{{}, dtype, sdims, shape, {}});
}

// A value of x's dtype whose run-time shape broadcasts with x's (into x's
// shape exactly when `into`): one in scope, a scalar literal, or a constant
// whose dims are x's or 1.
TVal Generator::partner(Ctx& c, const TVal& x, bool into) {
  if (c.poly) {
    if (chance(0.5) || x.dtype == DType::boolean)
      return x.dtype == DType::boolean
                 ? TVal{"true", x.dtype, {}, {}, {}}
                 : TVal{literal(x.dtype, value_for(x.dtype)), x.dtype, {}, {}, {}};
    return const_tensor(
        c, x.dtype, Extents(static_cast<std::size_t>(uniform(0, static_cast<int>(x.rank()))), 1));
  }
  if (chance(0.5)) {
    auto v = pick_val(c, [&](const TVal& t) {
      if (t.dtype != x.dtype || t.name == x.name) return false;
      const auto b = broadcast_extents(x.shape, t.shape);
      if (!b || numel(*b) > kMaxNumel || b->size() > kMaxRank) return false;
      if (!into) return true;
      if (*b != x.shape) return false;
      // Where x's dim is a static 1, so must t's be: broadcasting 1 with a
      // dynamic dim gives a dynamic dim, and a value shaped like x is often
      // passed back where x's type is declared (a loop's accumulator). With
      // other extents the dynamic dim may then break the declared 1.
      for (std::size_t d = 0; d < t.rank(); ++d)
        if (x.sdims[x.rank() - t.rank() + d].is_one() && !t.sdims[d].is_fixed()) return false;
      return true;
    });
    if (v) return *v;
  }
  if (chance(0.35) || x.dtype == DType::boolean) {
    if (x.dtype == DType::boolean) return TVal{chance(0.5) ? "true" : "false", x.dtype, {}, {}, {}};
    return TVal{literal(x.dtype, value_for(x.dtype)), x.dtype, {}, {}, {}};
  }
  Extents shape;
  const std::size_t drop = static_cast<std::size_t>(uniform(0, static_cast<int>(x.rank())));
  if (!into && x.rank() < kMaxRank && chance(0.2)) shape.push_back(uniform(1, 3));
  for (std::size_t i = drop; i < x.rank(); ++i) {
    const bool dynamic = !x.sdims[i].is_fixed();
    shape.push_back(chance(dynamic ? 0.3 : 0.6) ? x.shape[i] : 1);
  }
  const auto b = broadcast_extents(x.shape, shape);
  if (numel(shape) > kMaxNumel || !b || numel(*b) > kMaxNumel) shape.assign(1, 1);
  return const_tensor(c, x.dtype, shape);
}

TVal Generator::unary(Ctx& c, const TVal& x) {
  use("unary");
  std::string op;
  if (is_float(x.dtype))
    op = pick(float_unary_ops());
  else if (x.dtype == DType::boolean)
    op = "logical_not";
  else
    op = pick_str({"neg", "abs"});
  TVal r = x;
  r.known.reset();
  return emit(c, fmt::format("{}({})", op, x.name), r);
}

TVal Generator::binary(Ctx& c, const TVal& x, const TVal& y, bool compare) {
  std::string op;
  DType dtype = x.dtype;
  if (compare) {
    use("compare");
    op = pick_str({"equal", "not_equal", "less", "less_equal", "greater", "greater_equal"});
    dtype = DType::boolean;
  } else {
    use("binary");
    if (is_float(x.dtype))
      op = pick_str({"add", "sub", "mul", "div", "maximum", "minimum", "power", "add", "mul"});
    else if (x.dtype == DType::boolean)
      op = pick_str({"logical_and", "logical_or"});
    else
      op = pick_str({"add", "sub", "mul", "maximum", "minimum"});
  }
  if (broadcasts_a_one(x.shape, y.shape)) use("broadcast_one");
  const bool swap = chance(0.4);
  const TVal& a = swap ? y : x;
  const TVal& b = swap ? x : y;
  TVal r{{}, dtype, broadcast_sdims(a.sdims, b.sdims), *broadcast_extents(a.shape, b.shape), {}};
  return emit(c, fmt::format("{}({}, {})", op, a.name, b.name), r);
}

std::optional<TVal> Generator::where(Ctx& c, const TVal& x, bool into) {
  if (x.dtype == DType::boolean) return std::nullopt;
  use("where");
  const TVal cond = binary(c, x, partner(c, x, true), true);
  const TVal y = partner(c, x, into);
  const TVal& first = chance(0.5) ? x : y;
  const TVal& second = first.name == x.name ? y : x;
  TVal r{{},
         x.dtype,
         broadcast_sdims(broadcast_sdims(cond.sdims, first.sdims), second.sdims),
         *broadcast_extents(*broadcast_extents(cond.shape, first.shape), second.shape),
         {}};
  return emit(c, fmt::format("where({}, {}, {})", cond.name, first.name, second.name), r);
}

std::optional<TVal> Generator::reduce(Ctx& c, const TVal& x, bool keepdims_only) {
  if (x.dtype == DType::boolean) return std::nullopt;
  const std::size_t rank = x.rank();
  if (chance(0.2) && rank >= 1 && x.size() > 0 && !keepdims_only && !c.poly) {
    use("argmax");
    const std::size_t axis = static_cast<std::size_t>(uniform(0, static_cast<int>(rank) - 1));
    const bool keep = chance(0.4);
    TVal r{{}, DType::i64, {}, {}, {}};
    for (std::size_t i = 0; i < rank; ++i) {
      if (i != axis) {
        r.sdims.push_back(x.sdims[i]);
        r.shape.push_back(x.shape[i]);
      } else if (keep) {
        r.sdims.push_back(SDim::fixed(1));
        r.shape.push_back(1);
      }
    }
    const int written =
        chance(0.3) ? static_cast<int>(axis) - static_cast<int>(rank) : static_cast<int>(axis);
    return emit(c, fmt::format("argmax({}, axis={}, keepdims={})", x.name, written, keep), r);
  }
  use("reduce");
  // The reduced axes ([] = all) and the op: max and min need elements.
  std::vector<std::int64_t> axes;
  std::vector<bool> reduced(rank, false);
  if (rank > 0 && chance(0.8)) {
    for (std::size_t i = 0; i < rank; ++i)
      if (chance(0.5)) reduced[i] = true;
    if (std::none_of(reduced.begin(), reduced.end(), [](bool b) { return b; }))
      reduced[static_cast<std::size_t>(uniform(0, static_cast<int>(rank) - 1))] = true;
    for (std::size_t i = 0; i < rank; ++i)
      if (reduced[i])
        axes.push_back(chance(0.25) ? static_cast<std::int64_t>(i) - static_cast<std::int64_t>(rank)
                                    : static_cast<std::int64_t>(i));
  } else {
    reduced.assign(rank, true);
  }
  std::int64_t reduced_count = 1;
  for (std::size_t i = 0; i < rank; ++i)
    if (reduced[i]) reduced_count *= x.shape[i];
  std::vector<std::string> ops = {"sum"};
  if (is_float(x.dtype)) ops.push_back("mean");
  if (reduced_count > 0 && x.size() > 0 && !c.poly) {
    ops.push_back("max");
    ops.push_back("min");
  }
  const bool keep = keepdims_only || chance(0.4);
  if (keep) use("reduce_keepdims");
  TVal r{{}, x.dtype, {}, {}, {}};
  for (std::size_t i = 0; i < rank; ++i) {
    if (!reduced[i]) {
      r.sdims.push_back(x.sdims[i]);
      r.shape.push_back(x.shape[i]);
    } else if (keep) {
      r.sdims.push_back(SDim::fixed(1));
      r.shape.push_back(1);
    }
  }
  return emit(
      c, fmt::format("{}({}, axes={}, keepdims={})", pick(ops), x.name, ints_text(axes), keep), r);
}

std::optional<TVal> Generator::softmax(Ctx& c, const TVal& x) {
  if (!is_float(x.dtype) || x.rank() == 0) return std::nullopt;
  use("softmax");
  const int axis = uniform(-static_cast<int>(x.rank()), static_cast<int>(x.rank()) - 1);
  TVal r = x;
  r.known.reset();
  return emit(
      c, fmt::format("{}({}, axis={})", chance(0.5) ? "softmax" : "log_softmax", x.name, axis), r);
}

std::optional<TVal> Generator::layer_norm(Ctx& c, const TVal& x) {
  if (!is_float(x.dtype) || x.rank() == 0 || x.shape.back() == 0 || x.shape.back() > 8)
    return std::nullopt;
  use("layer_norm");
  const std::int64_t d = x.shape.back();
  const TVal gamma = const_tensor(c, x.dtype, {d});
  const TVal beta = const_tensor(c, x.dtype, {d});
  TVal r = x;
  r.known.reset();
  r.sdims.back() = merge_equal(x.sdims.back(), SDim::fixed(d));
  return emit(c, fmt::format("layer_norm({}, {}, {})", x.name, gamma.name, beta.name), r);
}

std::optional<TVal> Generator::dense(Ctx& c, const TVal& x) {
  if (!is_float(x.dtype) || x.rank() == 0 || x.rank() > 3) return std::nullopt;
  const std::int64_t k = x.shape.back();
  const std::int64_t n = uniform(1, 4);
  if (x.size() / std::max<std::int64_t>(k, 1) * n > kMaxNumel || k * n > 32) return std::nullopt;
  use("dense");
  const TVal w = const_tensor(c, x.dtype, {n, k});
  const TVal b = const_tensor(c, x.dtype, {n});
  TVal r = x;
  r.known.reset();
  r.sdims.back() = SDim::fixed(n);
  r.shape.back() = n;
  return emit(c, fmt::format("dense({}, {}, {})", x.name, w.name, b.name), r);
}

std::optional<TVal> Generator::matmul(Ctx& c, const TVal& x) {
  if (!is_float(x.dtype) || x.rank() != 2) return std::nullopt;
  const bool ta = chance(0.3);
  const bool tb = chance(0.3);
  const std::size_t mi = ta ? 1 : 0;
  const std::int64_t m = x.shape[mi];
  const std::int64_t k = x.shape[1 - mi];
  // b: another value in scope with a matching k, or a constant.
  auto other = pick_val(c, [&](const TVal& t) {
    return t.dtype == x.dtype && t.rank() == 2 && t.shape[tb ? 1 : 0] == k &&
           m * t.shape[tb ? 0 : 1] <= kMaxNumel && t.name[0] == '%';
  });
  TVal b;
  if (other && chance(0.6)) {
    b = *other;
  } else {
    const std::int64_t n = uniform(1, 4);
    if (m * n > kMaxNumel || k * n > 32) return std::nullopt;
    b = const_tensor(c, x.dtype, tb ? Extents{n, k} : Extents{k, n});
  }
  use("matmul");
  const std::size_t ni = tb ? 0 : 1;
  TVal r{{}, x.dtype, {x.sdims[mi], b.sdims[ni]}, {m, b.shape[ni]}, {}};
  return emit(
      c, fmt::format("matmul({}, {}, transpose_a={}, transpose_b={})", x.name, b.name, ta, tb), r);
}

std::optional<TVal> Generator::batch_matmul(Ctx& c, const TVal& x) {
  if (!is_float(x.dtype) || x.rank() != 3) return std::nullopt;
  const std::int64_t batch = x.shape[0], m = x.shape[1], k = x.shape[2];
  const std::int64_t n = uniform(1, 3);
  const std::int64_t b_batch = chance(0.3) ? 1 : batch;
  if (batch * m * n > kMaxNumel || b_batch * k * n > 48) return std::nullopt;
  use("batch_matmul");
  const TVal b = const_tensor(c, x.dtype, {b_batch, k, n});
  TVal r{{},
         x.dtype,
         {broadcast_dim(x.sdims[0], b.sdims[0]), x.sdims[1], SDim::fixed(n)},
         {batch, m, n},
         {}};
  return emit(c, fmt::format("batch_matmul({}, {})", x.name, b.name), r);
}

std::optional<TVal> Generator::reshape(Ctx& c, const TVal& x) {
  const std::int64_t total = x.size();
  // A random factorization of the element count into 1..3 dims.
  Extents shape;
  const int rank = uniform(1, 3);
  std::int64_t rest = total;
  for (int i = 0; i + 1 < rank; ++i) {
    std::vector<std::int64_t> divisors;
    for (std::int64_t d = 1; d <= std::max<std::int64_t>(rest, 1) && d <= 6; ++d)
      if (rest == 0 || rest % d == 0) divisors.push_back(d);
    const std::int64_t d = rest == 0 && chance(0.3) ? 0 : pick(divisors);
    shape.push_back(d);
    rest = d == 0 ? 0 : rest / d;
  }
  if (numel(shape) == 0)
    shape.push_back(chance(0.5) ? 0 : uniform(1, 3));
  else
    shape.push_back(rest);
  if (numel(shape) != total) return std::nullopt;
  use("reshape");
  std::vector<std::int64_t> newshape = shape;
  SDims sdims;
  for (std::int64_t e : shape) sdims.push_back(SDim::fixed(e));
  // -1 where the others' count is not 0 (else it would be ambiguous).
  if (total > 0 && chance(0.6)) {
    const std::size_t i = static_cast<std::size_t>(uniform(0, static_cast<int>(shape.size()) - 1));
    newshape[i] = -1;
    const bool all_fixed =
        std::all_of(x.sdims.begin(), x.sdims.end(), [](const SDim& d) { return d.is_fixed(); });
    if (!all_fixed) sdims[i] = SDim::any();
  }
  // A 0 in newshape copies x's dim unless allow_zero.
  const bool zero = std::find(newshape.begin(), newshape.end(), 0) != newshape.end();
  return emit(c,
              fmt::format("reshape({}, newshape={}{})", x.name, ints_text(newshape),
                          zero ? ", allow_zero=true" : ""),
              TVal{{}, x.dtype, sdims, shape, {}});
}

std::optional<TVal> Generator::transpose(Ctx& c, const TVal& x) {
  if (x.rank() < 2) return std::nullopt;
  use("transpose");
  std::vector<std::int64_t> axes(x.rank());
  std::iota(axes.begin(), axes.end(), 0);
  const bool reverse = chance(0.25);
  if (reverse)
    std::reverse(axes.begin(), axes.end());
  else
    std::shuffle(axes.begin(), axes.end(), rng_);
  TVal r{{}, x.dtype, {}, {}, {}};
  for (std::int64_t a : axes) {
    r.sdims.push_back(x.sdims[static_cast<std::size_t>(a)]);
    r.shape.push_back(x.shape[static_cast<std::size_t>(a)]);
  }
  return emit(
      c,
      fmt::format("transpose({}, axes={})", x.name, reverse ? std::string("[]") : ints_text(axes)),
      r);
}

std::optional<TVal> Generator::expand_squeeze(Ctx& c, const TVal& x) {
  std::vector<std::int64_t> ones;
  for (std::size_t i = 0; i < x.rank(); ++i)
    if (x.shape[i] == 1) ones.push_back(static_cast<std::int64_t>(i));
  if (!ones.empty() && chance(0.5)) {
    use("squeeze");
    std::vector<std::int64_t> axes;
    for (std::int64_t a : ones)
      if (chance(0.6)) axes.push_back(a);
    if (axes.empty()) axes.push_back(ones.front());
    TVal r{{}, x.dtype, {}, {}, {}};
    for (std::size_t i = 0; i < x.rank(); ++i)
      if (std::find(axes.begin(), axes.end(), static_cast<std::int64_t>(i)) == axes.end()) {
        r.sdims.push_back(x.sdims[i]);
        r.shape.push_back(x.shape[i]);
      }
    return emit(c, fmt::format("squeeze({}, axes={})", x.name, ints_text(axes)), r);
  }
  if (x.rank() >= kMaxRank) return std::nullopt;
  use("expand_dims");
  const int axis = uniform(-static_cast<int>(x.rank()) - 1, static_cast<int>(x.rank()));
  const std::size_t at =
      static_cast<std::size_t>(axis < 0 ? axis + static_cast<int>(x.rank()) + 1 : axis);
  TVal r = x;
  r.known.reset();
  r.sdims.insert(r.sdims.begin() + static_cast<std::ptrdiff_t>(at), SDim::fixed(1));
  r.shape.insert(r.shape.begin() + static_cast<std::ptrdiff_t>(at), 1);
  return emit(c, fmt::format("expand_dims({}, axis={})", x.name, axis), r);
}

std::optional<TVal> Generator::concatenate(Ctx& c, const TVal& x) {
  if (x.rank() == 0) return std::nullopt;
  const std::size_t axis = static_cast<std::size_t>(uniform(0, static_cast<int>(x.rank()) - 1));
  std::vector<TVal> fields = {x};
  const int more = uniform(1, 2);
  for (int i = 0; i < more; ++i) {
    auto other = pick_val(c, [&](const TVal& t) {
      if (t.dtype != x.dtype || t.rank() != x.rank() || t.name[0] != '%') return false;
      for (std::size_t d = 0; d < x.rank(); ++d)
        if (d != axis && t.shape[d] != x.shape[d]) return false;
      return true;
    });
    fields.push_back(other && chance(0.6) ? *other : chance(0.5) ? unary(c, x) : x);
  }
  Extents shape = x.shape;
  shape[axis] = 0;
  for (const TVal& f : fields) shape[axis] += f.shape[axis];
  if (numel(shape) > kMaxNumel) return std::nullopt;
  use("concatenate");
  SDims sdims = x.sdims;
  std::int64_t fixed_total = 0;
  bool all_fixed = true;
  std::vector<std::string> names;
  for (const TVal& f : fields) {
    names.push_back(f.name);
    for (std::size_t d = 0; d < x.rank(); ++d)
      if (d != axis) sdims[d] = merge_equal(sdims[d], f.sdims[d]);
    if (f.sdims[axis].is_fixed())
      fixed_total += f.sdims[axis].value;
    else
      all_fixed = false;
  }
  sdims[axis] = all_fixed ? SDim::fixed(fixed_total) : SDim::any();
  const int written =
      chance(0.3) ? static_cast<int>(axis) - static_cast<int>(x.rank()) : static_cast<int>(axis);
  return emit(c, fmt::format("concatenate({}, axis={})", tuple_text(names), written),
              TVal{{}, x.dtype, sdims, shape, {}});
}

std::optional<TVal> Generator::split(Ctx& c, const TVal& x) {
  if (x.rank() == 0) return std::nullopt;
  use("split");
  const std::size_t axis = static_cast<std::size_t>(uniform(0, static_cast<int>(x.rank()) - 1));
  const std::int64_t extent = x.shape[axis];
  const SDim& sextent = x.sdims[axis];
  std::vector<std::int64_t> parts;
  SDims sparts;
  std::string attrs;
  if (chance(0.5)) {
    std::vector<std::int64_t> sections;
    for (std::int64_t s = 1; s <= 4; ++s)
      if (extent % s == 0) sections.push_back(s);
    const std::int64_t s = pick(sections);
    attrs = fmt::format("sections={}", s);
    parts.assign(static_cast<std::size_t>(s), extent / s);
    sparts.assign(static_cast<std::size_t>(s), sextent.is_fixed() ? SDim::fixed(sextent.value / s)
                                               : s == 1           ? sextent
                                                                  : SDim::any());
  } else {
    std::vector<std::int64_t> indices;
    const int count = uniform(1, 3);
    for (int i = 0; i < count; ++i) indices.push_back(uniform(0, static_cast<int>(extent)));
    std::sort(indices.begin(), indices.end());
    attrs = fmt::format("indices={}", ints_text(indices));
    std::int64_t start = 0;
    for (std::int64_t index : indices) {
      parts.push_back(index - start);
      sparts.push_back(SDim::fixed(index - start));
      start = index;
    }
    parts.push_back(extent - start);
    sparts.push_back(sextent.is_fixed() ? SDim::fixed(sextent.value - start)
                     : start == 0       ? sextent
                                        : SDim::any());
  }
  const int written =
      chance(0.3) ? static_cast<int>(axis) - static_cast<int>(x.rank()) : static_cast<int>(axis);
  const std::string tuple =
      emit_other(c, "t", fmt::format("split({}, {}, axis={})", x.name, attrs, written));
  use("tuple_projection");
  std::optional<TVal> last;
  const int taken = uniform(1, std::min<int>(2, static_cast<int>(parts.size())));
  for (int i = 0; i < taken; ++i) {
    const std::size_t p = static_cast<std::size_t>(uniform(0, static_cast<int>(parts.size()) - 1));
    TVal r = x;
    r.known.reset();
    r.shape[axis] = parts[p];
    r.sdims[axis] = sparts[p];
    last = emit(c, fmt::format("{}.{}", tuple, p), r);
  }
  return last;
}

std::optional<TVal> Generator::strided_slice(Ctx& c, const TVal& x) {
  if (x.rank() == 0) return std::nullopt;
  use("strided_slice");
  const int k = uniform(1, static_cast<int>(x.rank()));
  const bool explicit_axes = chance(0.4);
  const bool with_strides = chance(0.6);
  std::vector<std::int64_t> axes(x.rank());
  std::iota(axes.begin(), axes.end(), 0);
  if (explicit_axes) std::shuffle(axes.begin(), axes.end(), rng_);
  axes.resize(static_cast<std::size_t>(k));
  std::vector<std::int64_t> begin, end, strides;
  TVal r = x;
  r.known.reset();
  for (std::int64_t a : axes) {
    const std::size_t ai = static_cast<std::size_t>(a);
    const std::int64_t d = x.shape[ai];
    const std::int64_t b = uniform(-3, 4), e = uniform(-2, 6), s = with_strides ? uniform(1, 2) : 1;
    begin.push_back(b);
    end.push_back(e);
    strides.push_back(s);
    // numpy: negative bounds count from the end, then clamp to [0, d].
    const auto bound = [d](std::int64_t v) {
      return std::clamp(v < 0 ? v + d : v, std::int64_t{0}, d);
    };
    const std::int64_t lo = bound(b), hi = bound(e);
    r.shape[ai] = hi > lo ? (hi - lo - 1) / s + 1 : 0;
    r.sdims[ai] = x.sdims[ai].is_fixed() ? SDim::fixed(r.shape[ai]) : SDim::any();
  }
  std::string attrs = fmt::format("begin={}, end={}", ints_text(begin), ints_text(end));
  if (with_strides) attrs += fmt::format(", strides={}", ints_text(strides));
  if (explicit_axes) attrs += fmt::format(", axes={}", ints_text(axes));
  return emit(c, fmt::format("strided_slice({}, {})", x.name, attrs), r);
}

std::optional<TVal> Generator::take(Ctx& c, const TVal& x) {
  if (x.rank() == 0) return std::nullopt;
  const std::size_t axis = static_cast<std::size_t>(uniform(0, static_cast<int>(x.rank()) - 1));
  const std::int64_t extent = x.shape[axis];
  if (extent == 0) return std::nullopt;
  const DType index_dtype = chance(0.7) ? DType::i64 : DType::i32;
  Extents ishape;
  const int irank = uniform(0, 2);
  for (int i = 0; i < irank; ++i) ishape.push_back(uniform(1, 3));
  TVal r{{}, x.dtype, {}, {}, {}};
  for (std::size_t i = 0; i < axis; ++i) {
    r.sdims.push_back(x.sdims[i]);
    r.shape.push_back(x.shape[i]);
  }
  for (std::int64_t e : ishape) {
    r.sdims.push_back(SDim::fixed(e));
    r.shape.push_back(e);
  }
  for (std::size_t i = axis + 1; i < x.rank(); ++i) {
    r.sdims.push_back(x.sdims[i]);
    r.shape.push_back(x.shape[i]);
  }
  if (r.size() > kMaxNumel || r.rank() > kMaxRank) return std::nullopt;
  use("take");
  std::string indices;
  if (ishape.empty()) {
    indices = literal(index_dtype, uniform(0, static_cast<int>(extent) - 1));
  } else {
    std::string values;
    for (std::int64_t i = 0; i < numel(ishape); ++i)
      values += fmt::format("{}{}", i ? ", " : "", uniform(0, static_cast<int>(extent) - 1));
    SDims sdims;
    for (std::int64_t e : ishape) sdims.push_back(SDim::fixed(e));
    indices = fmt::format("const {} [{}]", type_text(index_dtype, sdims), values);
  }
  return emit(c, fmt::format("take({}, {}, axis={})", x.name, indices, axis), r);
}

std::optional<TVal> Generator::cast(Ctx& c, const TVal& x) {
  use("cast");
  std::vector<DType> to = {DType::f32, DType::i64, DType::i32, DType::f64, DType::boolean};
  to.erase(std::remove(to.begin(), to.end(), x.dtype), to.end());
  // Mostly back to f32, so that later float ops have something to work on.
  const DType dtype = !is_float(x.dtype) && chance(0.6) ? DType::f32 : pick(to);
  TVal r = x;
  r.known.reset();
  r.dtype = dtype;
  return emit(c, fmt::format("cast({}, dtype={})", x.name, to_string(dtype)), r);
}

std::optional<TVal> Generator::shape_of_full(Ctx& c, const TVal& x) {
  use("shape_of_full");
  const TVal s = emit(c, fmt::format("shape_of({})", x.name),
                      TVal{{},
                           DType::i64,
                           {SDim::fixed(static_cast<std::int64_t>(x.rank()))},
                           {static_cast<std::int64_t>(x.rank())},
                           {}});
  TVal r{{}, DType::f32, SDims(x.rank(), SDim::any()), x.shape, {}};
  switch (uniform(0, 2)) {
    case 0:
      r.dtype = chance(0.5) ? DType::f32 : DType::i64;
      return emit(c, fmt::format("zeros({}, dtype={})", s.name, to_string(r.dtype)), r);
    case 1:
      return emit(c, fmt::format("ones({}, dtype=f32)", s.name), r);
    default:
      return emit(c,
                  fmt::format("full({}, {}, dtype=f32)", s.name,
                              literal(DType::f32, value_for(DType::f32))),
                  r);
  }
}

std::optional<TVal> Generator::arange(Ctx& c) {
  use("arange");
  const bool floating = chance(0.6);
  const DType dtype = floating ? DType::f32 : DType::i64;
  const double start = uniform(-3, 3);
  const double step = floating ? pick(std::vector<double>{0.5, 1, 2}) : uniform(1, 2);
  const double stop = start + uniform(-1, 6);
  const std::int64_t n =
      stop > start ? static_cast<std::int64_t>(std::ceil((stop - start) / step)) : 0;
  return emit(c,
              fmt::format("arange({}, {}, {})", literal(dtype, start), literal(dtype, stop),
                          literal(dtype, step)),
              TVal{{}, dtype, {SDim::any()}, {n}, {}});
}

std::optional<TVal> Generator::nonzero(Ctx& c, const TVal& x) {
  if (x.rank() == 0) return std::nullopt;
  use("nonzero");
  // The row count depends on the data: reduce it away at once.
  const std::string nz = emit_other(c, "nz", fmt::format("nonzero({})", x.name));
  const std::int64_t rank = static_cast<std::int64_t>(x.rank());
  if (chance(0.5))
    return emit(c, fmt::format("sum({}, axes=[0], keepdims=false)", nz),
                TVal{{}, DType::i64, {SDim::fixed(rank)}, {rank}, {}});
  return emit(c, fmt::format("shape_of({})", nz), TVal{{}, DType::i64, {SDim::fixed(2)}, {2}, {}});
}

std::optional<TVal> Generator::dynamic_update_slice(Ctx& c, const TVal& x) {
  if (x.rank() == 0 || x.shape[0] == 0) return std::nullopt;
  use("dynamic_update_slice");
  const std::int64_t rows = x.shape[0];
  const std::int64_t u = uniform(0, static_cast<int>(rows));
  const std::int64_t from = uniform(0, static_cast<int>(rows - u));
  TVal update = x;
  update.known.reset();
  update.shape[0] = u;
  update.sdims[0] = x.sdims[0].is_fixed() ? SDim::fixed(u) : SDim::any();
  update = emit(c, fmt::format("strided_slice({}, begin=[{}], end=[{}])", x.name, from, from + u),
                update);
  if (x.dtype != DType::boolean) update = unary(c, update);
  const std::int64_t offset = uniform(0, static_cast<int>(rows - u));
  TVal r = x;
  r.known.reset();
  return emit(c, fmt::format("dynamic_update_slice({}, {}, {}i64)", x.name, update.name, offset),
              r);
}

TVal Generator::gen_op(Ctx& c) {
  for (int attempt = 0; attempt < 20; ++attempt) {
    const int op = uniform(0, 24);
    // Ops that need a particular operand look for one first.
    const auto wanted = [op](const TVal& t) {
      switch (op) {
        case 13:
          return is_float(t.dtype) && (t.rank() == 2 || t.rank() == 3);
        case 16:
          return std::find(t.shape.begin(), t.shape.end(), 1) != t.shape.end();
        default:
          return true;
      }
    };
    auto picked = pick_val(
        c, [&](const TVal& t) { return t.name[0] == '%' && t.size() <= kMaxNumel && wanted(t); });
    if (!picked)
      picked = pick_val(c, [](const TVal& t) { return t.name[0] == '%' && t.size() <= kMaxNumel; });
    if (!picked) break;
    const TVal x = *picked;
    std::optional<TVal> r;
    switch (op) {
      case 0:
      case 1:
      case 2:
        r = unary(c, x);
        break;
      case 3:
      case 4:
      case 5:
        r = binary(c, x, partner(c, x, false), false);
        break;
      case 6:
        r = binary(c, x, partner(c, x, false), true);
        break;
      case 7:
        r = where(c, x, false);
        break;
      case 8:
      case 9:
        r = reduce(c, x, false);
        break;
      case 10:
        r = softmax(c, x);
        break;
      case 11:
        r = layer_norm(c, x);
        break;
      case 12:
        r = dense(c, x);
        break;
      case 13:
        r = x.rank() == 2 ? matmul(c, x) : batch_matmul(c, x);
        break;
      case 14:
        r = reshape(c, x);
        break;
      case 15:
        r = transpose(c, x);
        break;
      case 16:
        r = expand_squeeze(c, x);
        break;
      case 17:
        r = concatenate(c, x);
        break;
      case 18:
        r = split(c, x);
        break;
      case 19:
        r = strided_slice(c, x);
        break;
      case 20:
        r = take(c, x);
        break;
      case 21:
        r = cast(c, x);
        break;
      case 22:
        r = chance(0.5) ? shape_of_full(c, x) : arange(c);
        break;
      case 23:
        r = nonzero(c, x);
        break;
      default:
        r = dynamic_update_slice(c, x);
        break;
    }
    if (r) return *r;
  }
  return unary(c, pick_float(c));
}

TVal Generator::gen_like(Ctx& c, const TVal& target, int steps) {
  TVal cur = target;
  for (int i = 0; i < steps; ++i) {
    std::optional<TVal> next;
    switch (uniform(0, 5)) {
      case 0:
        next = unary(c, cur);
        break;
      case 1:
      case 2:
        next = binary(c, cur, partner(c, cur, true), false);
        break;
      case 3:
        next = where(c, cur, true);
        break;
      case 4: {
        // x - reduce(x, keepdims): a reduction broadcast back.
        auto red = cur.rank() > 0 ? reduce(c, cur, true) : std::nullopt;
        if (red && cur.dtype != DType::boolean) next = binary(c, cur, *red, false);
        break;
      }
      default:
        next = softmax(c, cur);
        break;
    }
    if (next) cur = *next;
  }
  if (cur.name == target.name || cur.name[0] != '%') cur = unary(c, cur);
  return cur;
}

void Generator::gen_block(Ctx& c, int n) {
  if (c.poly) return;
  for (int i = 0; i < n; ++i) {
    if (c.depth < 2 && chance(0.15))
      gen_structure(c);
    else
      gen_op(c);
  }
}

// --- structures -----------------------------------------------------------------------------

void Generator::gen_structure(Ctx& c) {
  const std::size_t before = c.vals.size();
  gen_structure_kind(c);
  if (c.vals.size() > before && c.vals.back().name[0] == '%' && c.vals.back().size() <= kMaxNumel)
    c.results.push_back(c.vals.back().name);
}

void Generator::gen_structure_kind(Ctx& c) {
  switch (uniform(0, 11)) {
    case 0:
    case 1:
      gen_if(c);
      break;
    case 2:
      gen_tail_loop(c, false);
      break;
    case 3:
      gen_tail_loop(c, true);
      break;
    case 4:
      gen_growing_loop(c);
      break;
    case 5:
      chance(0.7) ? gen_nontail(c) : gen_mutual(c);
      break;
    case 6:
    case 7:
      gen_closure(c);
      break;
    case 8:
      gen_tuple(c);
      break;
    case 9:
    case 10:
      gen_list(c);
      break;
    default:
      gen_tree(c);
      break;
  }
}

std::string Generator::gen_cond(Ctx& c) {
  // A scalar comparison, of a known count or of a reduced tensor.
  std::string cond;
  auto known = pick_val(c, [](const TVal& t) { return t.known.has_value() && t.name[0] == '%'; });
  if (known && chance(0.4)) {
    cond = fmt::format("{}({}, {}i64)", pick_str({"less", "greater", "equal", "greater_equal"}),
                       known->name, uniform(0, 4));
  } else {
    const TVal x = pick_float(c);
    const std::string reducer = x.size() > 0 && chance(0.5) ? "max" : "sum";
    const TVal s = emit(c, fmt::format("{}({}, axes=[], keepdims=false)", reducer, x.name),
                        TVal{{}, x.dtype, {}, {}, {}});
    const TVal b =
        binary(c, s, TVal{literal(x.dtype, value_for(x.dtype)), x.dtype, {}, {}, {}}, true);
    cond = b.name;
    if (chance(0.2)) cond = unary(c, b).name;  // logical_not
  }
  return cond;
}

void Generator::gen_if(Ctx& c) {
  use("if");
  const std::string cond = gen_cond(c);
  const bool pair = chance(0.3);
  const TVal target = pick_float(c, 48);
  const TVal target2 =
      pair ? pick_val(c, [](const TVal& t) { return t.name[0] == '%'; }).value() : target;
  Ctx t = child(c, c.indent + 1), e = child(c, c.indent + 1);
  gen_block(t, uniform(0, 2));
  gen_block(e, uniform(0, 2));
  const TVal r1 = gen_like(t, target, uniform(1, 2));
  const TVal r2 = gen_like(e, target, uniform(1, 2));
  TVal r = target;
  r.known.reset();
  r.sdims = join(r1.sdims, r2.sdims);
  if (!pair) {
    emit(c,
         fmt::format("if ({}) {} else {}", cond, braced(t, r1.name, c.indent),
                     braced(e, r2.name, c.indent)),
         r);
    return;
  }
  use("if_tuple");
  use("tuple_projection");
  const TVal s1 = gen_like(t, target2, 1);
  const TVal s2 = gen_like(e, target2, 1);
  const std::string tuple = emit_other(
      c, "t",
      fmt::format("if ({}) {} else {}", cond, braced(t, tuple_text({r1.name, s1.name}), c.indent),
                  braced(e, tuple_text({r2.name, s2.name}), c.indent)));
  emit(c, tuple + ".0", r);
  TVal r_2 = target2;
  r_2.known.reset();
  r_2.sdims = join(s1.sdims, s2.sdims);
  emit(c, tuple + ".1", r_2);
}

// def @loop(%i: i64[], %acc: A, extras...) -> A {
//   if (less_equal(%i, 0i64)) { %acc } else { ...; @loop(sub(%i, 1i64), next, extras...) }
// }
// or the same as a let-bound closure that calls itself and captures main's values.
void Generator::gen_tail_loop(Ctx& c, bool as_closure) {
  use(as_closure ? "tail_loop_closure" : "tail_loop_global");
  const TVal acc = pick_float(c, 48);
  const Count n = count(c, 8);
  const std::string fname = as_closure ? fresh("loop") : fresh_global("loop");
  const int indent = as_closure ? c.indent + 1 : 1;
  Ctx body = as_closure ? child(c, indent + 1) : Ctx{};
  body.indent = indent + 1;
  body.depth = c.depth + 1;
  const TVal i{fresh("i"), DType::i64, {}, {}, {}};
  const bool poly = !as_closure && chance(0.4);
  TVal a = param_for(acc, "acc");
  if (poly) a.sdims.assign(a.rank(), SDim::any());
  body.poly = poly;
  std::vector<std::string> params = {i.name + ": i64[]", a.name + ": " + annot(a)};
  std::vector<TVal> extras, extra_params;
  if (!as_closure && !poly) {
    const int nextra = uniform(0, 2);
    for (int k = 0; k < nextra; ++k) {
      const TVal x = pick_val(c, [](const TVal& t) { return t.name[0] == '%'; }).value();
      extras.push_back(x);
      extra_params.push_back(param_for(x, "e"));
      params.push_back(extra_params.back().name + ": " + annot(x));
      body.vals.push_back(extra_params.back());
    }
  }
  body.vals.push_back(a);
  if (chance(0.6))
    emit(body, fmt::format("cast({}, dtype={})", i.name, to_string(acc.dtype)),
         TVal{{}, acc.dtype, {}, {}, {}});
  gen_block(body, uniform(0, 2));
  const TVal next = gen_like(body, a, uniform(1, 3));
  const std::string j = emit_other(body, "j", fmt::format("sub({}, 1i64)", i.name));
  std::vector<std::string> args = {j, next.name};
  for (const TVal& p : extra_params) args.push_back(p.name);
  const std::string text = fmt::format(
      "fn ({}) -> {} {{\n{}if (less_equal({}, 0i64)) {{\n{}{}\n{}}} else "
      "{{\n{}{}{}({})\n{}}}\n{}}}",
      join_names(params), annot(a), pad(indent), i.name, pad(indent + 1), a.name, pad(indent),
      body.text, pad(indent + 1), fname, join_names(args), pad(indent), pad(indent - 1));
  std::vector<std::string> call_args = {n.text, acc.name};
  for (const TVal& x : extras) call_args.push_back(x.name);
  if (as_closure) {
    c.text += fmt::format("{}let {} = {};\n", pad(c.indent), fname, text);
  } else {
    // "fn (params) -> A {" becomes "def @loop(params) -> A {".
    defs_.push_back(fmt::format("def {}{}\n", fname, text.substr(3)));
  }
  emit(c, fmt::format("{}({})", fname, join_names(call_args)), call_result(a));
  if (poly) call_again(c, fname, n.text, a);
}

// A loop whose accumulator grows by a row block per step (concatenate).
void Generator::gen_growing_loop(Ctx& c) {
  auto init = pick_val(c, [](const TVal& t) {
    return t.name[0] == '%' && t.rank() >= 1 && t.rank() <= 3 && t.dtype != DType::boolean &&
           t.size() <= 24;
  });
  if (!init) return gen_tail_loop(c, false);
  use("growing_loop");
  use("concatenate");
  const Count n = count(c, 4);
  // The block added per step: a slice of the first rows of `init`.
  const std::int64_t block = std::min<std::int64_t>(init->shape[0], uniform(1, 2));
  TVal row = *init;
  row.known.reset();
  row.shape[0] = block;
  row.sdims[0] = init->sdims[0].is_fixed() ? SDim::fixed(block) : SDim::any();
  row = emit(c, fmt::format("strided_slice({}, begin=[0], end=[{}])", init->name, block), row);
  const std::string fname = fresh_global("grow");
  TVal a = param_for(*init, "acc");
  a.sdims[0] = SDim::any();
  const TVal r = param_for(row, "row");
  const TVal i{fresh("i"), DType::i64, {}, {}, {}};
  Ctx body;
  body.indent = 2;
  body.depth = c.depth + 1;
  body.vals = {r};  // not the accumulator: its extent changes per step
  const TVal step = gen_like(body, r, uniform(1, 2));
  const std::string next =
      emit_other(body, "next", fmt::format("concatenate(({}, {}), axis=0)", a.name, step.name));
  defs_.push_back(fmt::format(
      "def {}({}: i64[], {}: {}, {}: {}) -> {} {{\n  if (less_equal({}, 0i64)) {{\n    {}\n  }} "
      "else {{\n{}    {}(sub({}, 1i64), {}, {})\n  }}\n}}\n",
      fname, i.name, a.name, annot(a), r.name, annot(r), annot(a), i.name, a.name, body.text, fname,
      i.name, next, r.name));
  TVal out = call_result(a);
  out.shape[0] = init->shape[0] + n.value * block;
  if (out.size() > kMaxNumel * 2) {  // too big to keep using: reduce it
    out = emit(c, fmt::format("{}({}, {}, {})", fname, n.text, init->name, row.name), out);
    reduce(c, out, false);
    c.vals.erase(c.vals.end() - 2);
    return;
  }
  emit(c, fmt::format("{}({}, {}, {})", fname, n.text, init->name, row.name), out);
}

// def @rec(%i: i64[], %x: X) -> X {
//   if (less_equal(%i, 0i64)) { f(x) } else { let %r = @rec(sub(%i, 1i64), g(x)); h(r, x) }
// }
void Generator::gen_nontail(Ctx& c) {
  use("nontail_recursion");
  const TVal x = pick_float(c, 32);
  const int depth = chance(0.25) ? 50 : uniform(0, 6);
  if (depth == 50) use("recursion_depth_50");
  const std::string fname = fresh_global("rec");
  const TVal i{fresh("i"), DType::i64, {}, {}, {}};
  const bool poly = chance(0.4);
  TVal p = param_for(x, "x");
  if (poly) p.sdims.assign(p.rank(), SDim::any());
  Ctx base;
  base.indent = 2;
  base.depth = c.depth + 1;
  base.poly = poly;
  base.vals = {p};
  const TVal b = gen_like(base, p, 1);
  Ctx step;
  step.indent = 2;
  step.depth = c.depth + 1;
  step.poly = poly;
  step.vals = {p};
  if (chance(0.5)) gen_block(step, 1);
  const TVal y = gen_like(step, p, 1);
  const TVal rec =
      emit(step, fmt::format("{}(sub({}, 1i64), {})", fname, i.name, y.name), call_result(p));
  const TVal out = gen_like(step, rec, 1);
  defs_.push_back(fmt::format(
      "def {}({}: i64[], {}: {}) -> {} {{\n  if (less_equal({}, 0i64)) {}\n  else {}\n}}\n", fname,
      i.name, p.name, annot(p), annot(p), i.name, braced(base, b.name, 1),
      braced(step, out.name, 1)));
  TVal result = call_result(p);
  emit(c, fmt::format("{}({}i64, {})", fname, depth, x.name), result);
  if (poly) call_again(c, fname, fmt::format("{}i64", depth), p);
}

void Generator::call_again(Ctx& c, const std::string& callee, const std::string& leading,
                           const TVal& like) {
  // Preferably one of other extents.
  const auto fits = [&](const TVal& t) {
    return t.name[0] == '%' && t.dtype == like.dtype && t.rank() == like.rank() &&
           t.size() <= kMaxNumel;
  };
  auto other = pick_val(c, [&](const TVal& t) { return fits(t) && t.shape != like.shape; });
  if (!other) other = pick_val(c, fits);
  if (!other) return;
  if (other->shape != like.shape) use("shape_polymorphic_call");
  TVal r = *other;
  r.known.reset();
  r.sdims.assign(r.rank(), SDim::any());
  emit(c, fmt::format("{}({}, {})", callee, leading, other->name), r);
}

// def @ping(%i: i64[], %x: X) -> X { if (i <= 0) { %x } else { @pong(sub(%i, 1i64), f(x)) } }
// def @pong(%i: i64[], %x: X) -> X { if (i <= 0) { g(x) } else { @ping(sub(%i, 1i64), h(x)) } }
void Generator::gen_mutual(Ctx& c) {
  use("mutual_recursion");
  const TVal x = pick_float(c, 32);
  const Count n = chance(0.3) ? Count{"20i64", 20} : count(c, 8);
  const std::string names[2] = {fresh_global("ping"), fresh_global("pong")};
  const TVal p = param_for(x, "x");
  for (int k = 0; k < 2; ++k) {
    const std::string i = fresh("i");
    TVal q = p;
    q.name = fresh("x");
    Ctx base;
    base.indent = 2;
    base.depth = c.depth + 1;
    base.vals = {q};
    const std::string done = k == 0 ? q.name : gen_like(base, q, 1).name;
    Ctx step = base;
    step.text.clear();
    step.vals = {q};
    const TVal y = gen_like(step, q, uniform(1, 2));
    defs_.push_back(fmt::format(
        "def {}({}: i64[], {}: {}) -> {} {{\n  if (less_equal({}, 0i64)) {}\n  else {}\n}}\n",
        names[k], i, q.name, annot(q), annot(q), i, braced(base, done, 1),
        braced(step, fmt::format("{}(sub({}, 1i64), {})", names[1 - k], i, y.name), 1)));
  }
  emit(c, fmt::format("{}({}, {})", names[0], n.text, x.name), call_result(x));
}

std::pair<std::string, TVal> Generator::closure_text(const Ctx& c, const TVal& y, int indent,
                                                     bool declare_ret) {
  const TVal p = param_for(y, "y");
  Ctx body = child(c, indent + 1);
  body.vals.push_back(p);
  const TVal r = gen_like(body, p, uniform(1, 2));
  // The result of a call: as declared, or the body's type with main's
  // symbols (unbound at the call) as Any.
  TVal out = declare_ret ? p : r;
  out.name.clear();
  out.sdims = without_symbols(out.sdims);
  out.known.reset();
  return {
      fmt::format("fn ({}: {}){} {}", p.name, annot(p),
                  declare_ret ? " -> " + annot(p) : std::string(), braced(body, r.name, indent)),
      out};
}

void Generator::gen_closure(Ctx& c) {
  const TVal y = pick_float(c, 48);
  const int kind = uniform(0, 5);
  if (kind == 3) {
    // let %f = if (c) { fn ... } else { fn ... }; %f(y)
    use("closure_if");
    use("closure_let");
    const std::string cond = gen_cond(c);
    auto [t1, r1] = closure_text(c, y, c.indent + 1, false);
    auto [t2, r2] = closure_text(c, y, c.indent + 1, false);
    Ctx b1, b2;
    b1.indent = b2.indent = c.indent + 1;
    const std::string f =
        emit_other(c, "f",
                   fmt::format("if ({}) {} else {}", cond, braced(b1, t1, c.indent),
                               braced(b2, t2, c.indent)));
    TVal out = r1;
    out.sdims = join(r1.sdims, r2.sdims);
    emit(c, fmt::format("{}({})", f, y.name), out);
    return;
  }
  if (kind == 4) {
    // A closure in a tuple, called through projections: %t.0(%t.1).
    use("closure_in_tuple");
    use("closure_let");
    use("tuple_projection");
    auto [text, r] = closure_text(c, y, c.indent, chance(0.5));
    const std::string f = emit_other(c, "f", text);
    const std::string t = emit_other(c, "t", tuple_text({f, y.name}));
    emit(c, fmt::format("{}.0({}.1)", t, t), r);
    return;
  }
  if (kind == 5) {
    // Curried: fn (%a: A) { fn (%y: Y) { ... } }, applied as %g(a)(y).
    use("closure_curried");
    use("closure_let");
    auto cap = pick_val(c, [&](const TVal& t) {
      return t.name[0] == '%' && t.dtype == y.dtype &&
             broadcast_extents(y.shape, t.shape) == y.shape;
    });
    const TVal captured = cap ? *cap : y;
    const TVal a = param_for(captured, "a");
    Ctx outer = child(c, c.indent + 1);
    outer.vals.push_back(a);
    auto [inner, r] = closure_text(outer, y, c.indent + 1, false);
    const std::string g = emit_other(c, "g",
                                     fmt::format("fn ({}: {}) {{\n{}{}\n{}}}", a.name, annot(a),
                                                 pad(c.indent + 1), inner, pad(c.indent)));
    if (chance(0.5)) {
      emit(c, fmt::format("{}({})({})", g, captured.name, y.name), r);
    } else {
      const std::string h = emit_other(c, "h", fmt::format("{}({})", g, captured.name));
      emit(c, fmt::format("{}({})", h, y.name), r);
    }
    return;
  }
  if (kind == 0) {
    // let %f = fn (%y: Y) { ... captures ... }; %f(a); maybe %f(%f(a)).
    use("closure_let");
    const TVal p = param_for(y, "y");
    Ctx body = child(c, c.indent + 1);
    body.vals.push_back(p);
    gen_block(body, uniform(0, 1));
    const TVal r = gen_like(body, p, uniform(1, 2));
    const std::string f = emit_other(
        c, "f", fmt::format("fn ({}: {}) {}", p.name, annot(p), braced(body, r.name, c.indent)));
    TVal out = r;  // the closure's inferred result; main's symbols are unbound at the call
    out.sdims = without_symbols(r.sdims);
    out.known.reset();
    const TVal once = emit(c, fmt::format("{}({})", f, y.name), out);
    if (chance(0.4)) emit(c, fmt::format("{}({})", f, once.name), out);
    return;
  }
  if (kind == 1) {
    // A closure passed to a global that applies it twice.
    use("closure_let");
    use("closure_to_global");
    const TVal p = param_for(y, "y");
    Ctx body = child(c, c.indent + 1);
    body.vals.push_back(p);
    const TVal r = gen_like(body, p, uniform(1, 2));
    const std::string f = emit_other(c, "f",
                                     fmt::format("fn ({}: {}) -> {} {}", p.name, annot(p), annot(p),
                                                 braced(body, r.name, c.indent)));
    const std::string fname = fresh_global("apply");
    const std::string g = fresh("g"), v = fresh("v");
    const std::string ty = annot(p);
    defs_.push_back(fmt::format(
        "def {}({}: fn ({}) -> {}, {}: {}) -> {} {{\n  let {} = {}({});\n  {}({})\n}}\n", fname, g,
        ty, ty, v, ty, ty, v + "a", g, v, g, v + "a"));
    emit(c, fmt::format("{}({}, {})", fname, f, y.name), call_result(y));
    return;
  }
  // A global that returns a closure capturing its argument.
  use("closure_from_global");
  auto cap = pick_val(c, [&](const TVal& t) {
    return t.name[0] == '%' && t.dtype == y.dtype && broadcast_extents(y.shape, t.shape) == y.shape;
  });
  const TVal captured = cap ? *cap : y;
  const std::string fname = fresh_global("make");
  const TVal cp = param_for(captured, "c");
  const TVal p = param_for(y, "y");
  Ctx body;
  body.indent = 2;
  body.depth = c.depth + 1;
  body.vals = {cp, p};
  const TVal r = gen_like(body, p, uniform(1, 2));
  defs_.push_back(fmt::format("def {}({}: {}) -> fn ({}) -> {} {{\n  fn ({}: {}) {}\n}}\n", fname,
                              cp.name, annot(cp), annot(p), annot(p), p.name, annot(p),
                              braced(body, r.name, 1)));
  const std::string f = emit_other(c, "f", fmt::format("{}({})", fname, captured.name));
  emit(c, fmt::format("{}({})", f, y.name), call_result(y));
}

void Generator::gen_tuple(Ctx& c) {
  std::vector<TVal> fields;
  const int n = uniform(2, 3);
  for (int i = 0; i < n; ++i)
    fields.push_back(pick_val(c, [](const TVal& t) { return t.name[0] == '%'; }).value());
  std::vector<std::string> names, types;
  for (const TVal& f : fields) {
    names.push_back(f.name);
    types.push_back(annot(f));
  }
  const std::string t = emit_other(c, "t", tuple_text(names));
  switch (uniform(0, 2)) {
    case 0: {
      use("tuple_projection");
      const std::size_t k = static_cast<std::size_t>(uniform(0, n - 1));
      TVal r = fields[k];
      r.known.reset();
      emit(c, fmt::format("{}.{}", t, k), r);
      return;
    }
    case 1: {
      // Through a global that reverses it.
      use("tuple_global");
      use("tuple_projection");
      const std::string fname = fresh_global("rev");
      const std::string p = fresh("p");
      std::vector<std::string> rev_types(types.rbegin(), types.rend());
      std::vector<std::string> rev_fields;
      for (int i = n - 1; i >= 0; --i) rev_fields.push_back(fmt::format("{}.{}", p, i));
      defs_.push_back(fmt::format("def {}({}: {}) -> {} {{\n  {}\n}}\n", fname, p,
                                  tuple_text(types), tuple_text(rev_types),
                                  tuple_text(rev_fields)));
      const std::string u = emit_other(c, "t", fmt::format("{}({})", fname, t));
      const int k = uniform(0, n - 1);
      emit(c, fmt::format("{}.{}", u, k), call_result(fields[static_cast<std::size_t>(n - 1 - k)]));
      return;
    }
    default: {
      // match (%t) { (%a, _, %b) => { ... } }
      use("tuple_pattern");
      Clause clause{"", child(c, c.indent + 2), ""};
      std::vector<std::string> pattern;
      std::optional<TVal> bound;
      for (const TVal& f : fields) {
        if (chance(0.3) && (bound || &f != &fields.back())) {
          pattern.push_back("_");
          use("wildcard");
          continue;
        }
        TVal v = f;
        v.name = fresh("q");
        v.known.reset();
        clause.body.vals.push_back(v);
        pattern.push_back(v.name);
        if (!bound || (is_float(v.dtype) && !is_float(bound->dtype))) bound = v;
      }
      clause.pattern = tuple_text(pattern);
      const TVal r = gen_like(clause.body, *bound, uniform(1, 2));
      clause.result = r.name;
      TVal out = r;
      out.known.reset();
      emit(c, match_text(t, {clause}, c.indent), out);
      return;
    }
  }
}

// --- lists -------------------------------------------------------------------------------

ListVal Generator::build_list(Ctx& c) {
  if (list_input_ && c.in_main && chance(0.4)) {
    use("list_input");
    return {list_input_name_, *list_input_, list_input_length_};
  }
  const TVal x = pick_float(c, 24);
  const TVal e = param_for(x, "x");
  const std::string list_type = "List<" + annot(e) + ">";
  switch (uniform(0, 2)) {
    case 0: {
      use("list_literal");
      const int n = uniform(1, 3);
      std::string text = "Nil";
      SDims sdims;
      for (int k = 0; k < n; ++k) {
        const TVal el = gen_like(c, x, 1);
        sdims = k == 0 ? el.sdims : join(sdims, el.sdims);
        text = fmt::format("Cons({}, {})", el.name, text);
      }
      // The element type is the join of the elements' types.
      TVal elem = x;
      elem.known.reset();
      elem.sdims = sdims;
      return {emit_other(c, "l", text), elem, n};
    }
    case 1: {
      // Tail-recursive: build(%i, Cons(e(i), %acc), %x) from Nil.
      use("list_build_loop");
      const Count n = chance(0.3) ? Count{"30i64", 30} : count(c, 5);
      if (n.value >= 20) use("long_list");
      const std::string fname = fresh_global("build");
      const TVal i{fresh("i"), DType::i64, {}, {}, {}};
      const std::string acc = fresh("acc");
      Ctx body;
      body.indent = 2;
      body.depth = c.depth + 1;
      body.vals = {e};
      emit(body, fmt::format("cast({}, dtype={})", i.name, to_string(e.dtype)),
           TVal{{}, e.dtype, {}, {}, {}});
      const TVal el = gen_like(body, e, uniform(1, 2));
      defs_.push_back(fmt::format(
          "def {}({}: i64[], {}: {}, {}: {}) -> {} {{\n  if (less_equal({}, 0i64)) {{\n    {}\n  "
          "}} else {{\n{}    {}(sub({}, 1i64), Cons({}, {}), {})\n  }}\n}}\n",
          fname, i.name, acc, list_type, e.name, annot(e), list_type, i.name, acc, body.text, fname,
          i.name, el.name, acc, e.name));
      const std::string name =
          emit_other(c, "l", fmt::format("{}({}, Nil, {})", fname, n.text, x.name));
      return {name, call_result(x), n.value};
    }
    default: {
      // Non-tail: build(%i, %x) = Cons(e(x), build(i - 1, e'(x))), Nil at 0.
      use("list_build_nontail");
      const int n = uniform(0, 5);
      const std::string fname = fresh_global("build");
      const TVal i{fresh("i"), DType::i64, {}, {}, {}};
      Ctx body;
      body.indent = 2;
      body.depth = c.depth + 1;
      body.vals = {e};
      const TVal el = gen_like(body, e, 1);
      const TVal next = gen_like(body, e, 1);
      const std::string rest =
          emit_other(body, "rest", fmt::format("{}(sub({}, 1i64), {})", fname, i.name, next.name));
      defs_.push_back(fmt::format(
          "def {}({}: i64[], {}: {}) -> {} {{\n  if (less_equal({}, 0i64)) {{\n    Nil\n  }} else "
          "{}\n}}\n",
          fname, i.name, e.name, annot(e), list_type, i.name,
          braced(body, fmt::format("Cons({}, {})", el.name, rest), 1)));
      const std::string name = emit_other(c, "l", fmt::format("{}({}i64, {})", fname, n, x.name));
      return {name, call_result(x), n};
    }
  }
}

void Generator::consume_list(Ctx& c, const ListVal& list) {
  const TVal& elem = list.elem;
  const std::string ty = annot(elem);
  const std::string list_type = "List<" + ty + ">";
  // A value shaped like the elements, for empty lists and accumulators.
  TVal z = elem;
  z.name.clear();
  z.known.reset();
  // z is passed where the element type is declared: where that has a static
  // dim, so must z (else other extents could break the declared type, which
  // nothing checks at the call).
  auto like = pick_val(c, [&](const TVal& t) {
    if (t.name[0] != '%' || t.dtype != elem.dtype || t.shape != elem.shape) return false;
    for (std::size_t d = 0; d < t.rank(); ++d)
      if (elem.sdims[d].is_fixed() && !t.sdims[d].is_fixed()) return false;
    return true;
  });
  if (like) {
    z = *like;
  } else {
    z = const_tensor(c, elem.dtype, elem.shape);
  }
  int kind = uniform(0, 6);
  if (kind == 2 && list.length == 0) kind = 1;  // stack needs an element
  switch (kind) {
    case 0: {
      // Tail-recursive sum with an accumulator.
      use("list_sum");
      const std::string fname = fresh_global("lsum");
      const std::string xs = fresh("xs"), acc = fresh("acc"), h = fresh("h"), t = fresh("t");
      defs_.push_back(fmt::format(
          "def {0}({1}: {2}, {3}: {4}) -> {4} {{\n  match ({1}) {{\n    Nil => {{\n      {3}\n    "
          "}},\n    Cons({5}, {6}) => {{\n      let {3}_2 = add({3}, {5});\n      {0}({6}, "
          "{3}_2)\n "
          "   }}\n  }}\n}}\n",
          fname, xs, list_type, acc, ty, h, t));
      TVal r = call_result(elem);
      emit(c, fmt::format("{}({}, {})", fname, list.name, z.name), r);
      return;
    }
    case 1: {
      // Length (non-tail, wildcard head), then used as a loop count later.
      use("list_length");
      use("wildcard");
      const std::string fname = fresh_global("len");
      const std::string xs = fresh("xs"), t = fresh("t");
      defs_.push_back(fmt::format(
          "def {0}({1}: {2}) -> i64[] {{\n  match ({1}) {{\n    Nil => {{\n      0i64\n    }},\n "
          "   Cons(_, {3}) => {{\n      add({0}({3}), 1i64)\n    }}\n  }}\n}}\n",
          fname, xs, list_type, t));
      emit(c, fmt::format("{}({})", fname, list.name), TVal{{}, DType::i64, {}, {}, list.length});
      return;
    }
    case 2: {
      use("list_stack");
      const int axis = uniform(0, static_cast<int>(elem.rank()));
      TVal r = elem;
      r.name.clear();
      r.known.reset();
      r.sdims.insert(r.sdims.begin() + axis, SDim::any());
      r.shape.insert(r.shape.begin() + axis, list.length);
      emit(c, fmt::format("stack({}, axis={})", list.name, axis), r);
      return;
    }
    case 3: {
      // Pairs: nested constructor patterns and a wildcard.
      use("list_pairs");
      use("nested_match");
      use("wildcard");
      const std::string fname = fresh_global("pairs");
      const std::string xs = fresh("xs");
      const TVal zp = param_for(z, "z");
      TVal a = param_for(elem, "a"), b = param_for(elem, "b");
      const std::string rest = fresh("rest");
      Ctx both;
      both.indent = 3;
      both.depth = c.depth + 1;
      both.vals = {zp, a, b};
      const TVal s = binary(both, a, b, false);
      const TVal rec =
          emit(both, fmt::format("{}({}, {})", fname, rest, zp.name), call_result(elem));
      const TVal sum = binary(both, s, rec, false);
      Ctx one;
      one.indent = 3;
      one.vals = {zp, a};
      const TVal o = binary(one, a, zp, false);
      Ctx none;
      none.indent = 3;
      defs_.push_back(fmt::format(
          "def {}({}: {}, {}: {}) -> {} {}\n", fname, xs, list_type, zp.name, ty, ty,
          "{\n  " +
              match_text(
                  xs,
                  {{fmt::format("Cons({}, Cons({}, {}))", a.name, b.name, rest), both, sum.name},
                   {fmt::format("Cons({}, _)", a.name), one, o.name},
                   {"_", none, zp.name}},
                  1) +
              "\n}"));
      emit(c, fmt::format("{}({}, {})", fname, list.name, z.name), call_result(elem));
      return;
    }
    case 4: {
      // Map a closure over the list (non-tail), then sum the result.
      use("list_map");
      use("closure_let");
      use("closure_to_global");
      const TVal p = param_for(elem, "y");
      Ctx body = child(c, c.indent + 1);
      body.vals.push_back(p);
      const TVal r = gen_like(body, p, uniform(1, 2));
      const std::string f = emit_other(
          c, "f",
          fmt::format("fn ({}: {}) -> {} {}", p.name, ty, ty, braced(body, r.name, c.indent)));
      const std::string fname = fresh_global("map");
      const std::string g = fresh("g"), xs = fresh("xs"), h = fresh("h"), t = fresh("t");
      defs_.push_back(fmt::format(
          "def {0}({1}: fn ({2}) -> {2}, {3}: {4}) -> {4} {{\n  match ({3}) {{\n    Nil => {{\n  "
          "    Nil\n    }},\n    Cons({5}, {6}) => {{\n      let {5}_2 = {1}({5});\n      let "
          "{6}_2 = {0}({1}, {6});\n      Cons({5}_2, {6}_2)\n    }}\n  }}\n}}\n",
          fname, g, ty, xs, list_type, h, t));
      const std::string mapped = emit_other(c, "l", fmt::format("{}({}, {})", fname, f, list.name));
      if (c.depth == 0 && chance(0.3)) {
        use("adt_result");
        c.adt_results.push_back(mapped);
      }
      return consume_list(c, {mapped, call_result(elem), list.length});
    }
    case 5: {
      // Option: the head, matched with Some/None.
      use("option");
      use("wildcard");
      const std::string fname = fresh_global("head");
      const std::string xs = fresh("xs"), h = fresh("h");
      defs_.push_back(fmt::format(
          "def {0}({1}: {2}) -> Option<{3}> {{\n  match ({1}) {{\n    Cons({4}, _) => {{\n      "
          "Some({4})\n    }},\n    Nil => {{\n      None\n    }}\n  }}\n}}\n",
          fname, xs, list_type, ty, h));
      const std::string o = emit_other(c, "o", fmt::format("{}({})", fname, list.name));
      TVal v = call_result(elem);
      v.name = fresh("s");
      Clause some{fmt::format("Some({})", v.name), child(c, c.indent + 2), ""};
      some.body.vals.push_back(v);
      const TVal r = gen_like(some.body, v, 1);
      some.result = r.name;
      Clause none{"None", child(c, c.indent + 2), z.name};
      TVal out = elem;
      out.known.reset();
      out.sdims = join(r.sdims, z.sdims);
      emit(c, match_text(o, {some, none}, c.indent), out);
      if (c.depth == 0 && chance(0.3)) {
        use("adt_result");
        c.adt_results.push_back(o);
      }
      return;
    }
    default: {
      // A match on a tuple of ADTs: (list, list) with nested patterns.
      use("match_tuple_of_adts");
      use("nested_match");
      use("wildcard");
      TVal a = call_result(elem), b = call_result(elem);
      a.name = fresh("a");
      b.name = fresh("b");
      Clause two{fmt::format("(Cons({}, _), Cons(_, Cons({}, _)))", a.name, b.name),
                 child(c, c.indent + 2), ""};
      two.body.vals.push_back(a);
      two.body.vals.push_back(b);
      const TVal r2 = binary(two.body, a, b, false);
      two.result = r2.name;
      Clause one{fmt::format("(Cons({}, _), _)", a.name), child(c, c.indent + 2), ""};
      one.body.vals.push_back(a);
      const TVal r1 = gen_like(one.body, a, 1);
      one.result = r1.name;
      Clause rest{"(Nil, _)", child(c, c.indent + 2), z.name};
      TVal out = elem;
      out.known.reset();
      out.sdims = join(join(r2.sdims, r1.sdims), z.sdims);
      emit(c, match_text(tuple_text({list.name, list.name}), {two, one, rest}, c.indent), out);
      return;
    }
  }
}

void Generator::gen_list(Ctx& c) {
  const ListVal list = build_list(c);
  const int consumers = uniform(1, 2);
  for (int i = 0; i < consumers; ++i) consume_list(c, list);
  if (c.depth == 0 && chance(0.2)) {
    use("adt_result");
    c.adt_results.push_back(list.name);
  }
}

// type Tree<T> { Leaf(T), Node(Tree<T>, Tree<T>) }: built to a depth, then
// folded with nested patterns; its depth measured with wildcards.
void Generator::gen_tree(Ctx& c) {
  use("tree");
  use("nested_match");
  const TVal x = pick_float(c, 16);
  const TVal e = param_for(x, "x");
  const std::string ty = annot(e);
  const std::string tree_type = "Tree<" + ty + ">";
  const int depth = uniform(0, 3);
  // Build.
  const std::string mk = fresh_global("mktree");
  const TVal d{fresh("d"), DType::i64, {}, {}, {}};
  Ctx leaf;
  leaf.indent = 2;
  leaf.depth = c.depth + 1;
  leaf.vals = {e};
  const TVal lv = gen_like(leaf, e, 1);
  Ctx node;
  node.indent = 2;
  node.depth = c.depth + 1;
  node.vals = {e};
  const TVal l = gen_like(node, e, 1);
  const TVal r = gen_like(node, e, 1);
  const std::string dm = emit_other(node, "dm", fmt::format("sub({}, 1i64)", d.name));
  defs_.push_back(fmt::format(
      "def {}({}: i64[], {}: {}) -> {} {{\n  if (less_equal({}, 0i64)) {}\n  else {}\n}}\n", mk,
      d.name, e.name, ty, tree_type, d.name, braced(leaf, "Leaf(" + lv.name + ")", 1),
      braced(node, fmt::format("Node({}({}, {}), {}({}, {}))", mk, dm, l.name, mk, dm, r.name),
             1)));
  const std::string tree = emit_other(c, "tr", fmt::format("{}({}i64, {})", mk, depth, x.name));
  // Fold: Leaf(v) => v; Node(Leaf(a), r) => a op fold(r); Node(l, r) => fold(l) op fold(r).
  const std::string fold = fresh_global("fold");
  const std::string t = fresh("t");
  TVal v = e, a = e;
  v.name = fresh("v");
  a.name = fresh("a");
  const std::string rn = fresh("r"), ln = fresh("l");
  Ctx c1;
  c1.indent = 3;
  c1.vals = {a};
  const TVal fr = emit(c1, fmt::format("{}({})", fold, rn), call_result(e));
  const TVal s1 = binary(c1, a, fr, false);
  Ctx c2;
  c2.indent = 3;
  const std::string rn2 = fresh("r");
  const TVal fl = emit(c2, fmt::format("{}({})", fold, ln), call_result(e));
  const TVal fr2 = emit(c2, fmt::format("{}({})", fold, rn2), call_result(e));
  const TVal s2 = binary(c2, fl, fr2, false);
  Ctx c0;
  c0.indent = 3;
  defs_.push_back(
      fmt::format("def {}({}: {}) -> {} {{\n  {}\n}}\n", fold, t, tree_type, ty,
                  match_text(t,
                             {{fmt::format("Leaf({})", v.name), c0, v.name},
                              {fmt::format("Node(Leaf({}), {})", a.name, rn), c1, s1.name},
                              {fmt::format("Node({}, {})", ln, rn2), c2, s2.name}},
                             1)));
  emit(c, fmt::format("{}({})", fold, tree), call_result(x));
  if (chance(0.5)) {
    // Depth with wildcards: Leaf(_) => 1; Node(l, r) => max(depth(l), depth(r)) + 1.
    use("wildcard");
    const std::string dname = fresh_global("depth");
    const std::string tt = fresh("t");
    defs_.push_back(fmt::format(
        "def {0}({1}: {2}) -> i64[] {{\n  match ({1}) {{\n    Leaf(_) => {{\n      1i64\n    }},\n "
        "   Node({3}, {4}) => {{\n      add(maximum({0}({3}), {0}({4})), 1i64)\n    }}\n  }}\n}}\n",
        dname, tt, tree_type, ln, rn));
    emit(c, fmt::format("{}({})", dname, tree), TVal{{}, DType::i64, {}, {}, depth + 1});
  }
  if (c.depth == 0 && chance(0.2)) {
    use("adt_result");
    c.adt_results.push_back(tree);
  }
}

// --- the program ------------------------------------------------------------------------------

Tensor random_tensor(std::mt19937_64& rng, DType dtype, const Extents& shape) {
  std::uniform_int_distribution<int> small(-16, 16);
  const std::int64_t n = numel(shape);
  const Shape s{std::span<const std::int64_t>(shape)};
  switch (dtype) {
    case DType::f32: {
      std::vector<float> v;
      for (std::int64_t i = 0; i < n; ++i) v.push_back(static_cast<float>(small(rng)) / 8.0f);
      return Tensor::from_data<float>(s, v);
    }
    case DType::f64: {
      std::vector<double> v;
      for (std::int64_t i = 0; i < n; ++i) v.push_back(small(rng) / 8.0);
      return Tensor::from_data<double>(s, v);
    }
    case DType::i32: {
      std::vector<std::int32_t> v;
      for (std::int64_t i = 0; i < n; ++i) v.push_back(small(rng) / 4);
      return Tensor::from_data<std::int32_t>(s, v);
    }
    case DType::i64: {
      std::vector<std::int64_t> v;
      for (std::int64_t i = 0; i < n; ++i) v.push_back(small(rng) / 4);
      return Tensor::from_data<std::int64_t>(s, v);
    }
    default: {
      Tensor t = Tensor::zeros(s, dtype);
      auto* data = static_cast<std::uint8_t*>(t.raw_data());
      for (std::int64_t i = 0; i < n; ++i) data[i] = small(rng) > 0 ? 1 : 0;
      return t;
    }
  }
}

std::int64_t draw_extent(std::mt19937_64& rng) {
  const int r = std::uniform_int_distribution<int>(0, 99)(rng);
  if (r < 8) return 0;
  if (r < 30) return 1;
  return std::uniform_int_distribution<int>(2, 4)(rng);
}

RandomProgram Generator::generate() {
  RandomProgram program;
  program.entry = "main";
  // Symbols n and m; n sometimes with an upper bound.
  std::map<std::string, std::int64_t> symbol_extent = {{"n", draw_extent(rng_)},
                                                       {"m", draw_extent(rng_)}};
  if (chance(0.3)) bounds_["n"] = 6;
  Ctx main;
  main.in_main = true;
  const int ntensors = uniform(1, 3);
  for (int k = 0; k < ntensors; ++k) {
    Param p;
    p.name = fmt::format("%a{}", k);
    p.dtype =
        k == 0 || chance(0.75) ? DType::f32 : pick(std::vector<DType>{DType::i64, DType::i32});
    const int rank = uniform(k == 0 ? 1 : 0, 3);
    for (int d = 0; d < rank; ++d) {
      const int kind = uniform(0, 99);
      if (kind < 35) {
        p.sdims.push_back(SDim::fixed(uniform(1, 4)));
        p.shape.push_back(p.sdims.back().value);
      } else if (kind < 70) {
        p.sdims.push_back(SDim::any());
        p.shape.push_back(draw_extent(rng_));
        use("any_dim");
      } else {
        const std::string sym = chance(0.6) ? "n" : "m";
        p.sdims.push_back(SDim::symbol(sym));
        p.shape.push_back(symbol_extent[sym]);
        use("symbolic_dim");
        if (bounds_.count(sym)) use("bounded_symbol");
      }
    }
    if (numel(p.shape) == 0) use("zero_extent");
    params_.push_back(p);
    main.vals.push_back(TVal{p.name, p.dtype, p.sdims, p.shape, {}});
  }
  if (chance(0.5)) {
    Param p;
    p.kind = Param::Kind::count;
    p.name = "%k";
    p.dtype = DType::i64;
    p.value = uniform(0, 5);
    params_.push_back(p);
    main.vals.push_back(TVal{p.name, DType::i64, {}, {}, p.value});
  }
  if (chance(0.3)) {
    Param p;
    p.kind = Param::Kind::list;
    p.name = "%xs";
    p.dtype = DType::f32;
    const int rank = uniform(0, 2);
    for (int d = 0; d < rank; ++d) {
      if (chance(0.5)) {
        p.sdims.push_back(SDim::fixed(uniform(1, 3)));
        p.shape.push_back(p.sdims.back().value);
      } else {
        p.sdims.push_back(SDim::any());
        p.shape.push_back(draw_extent(rng_));
      }
    }
    p.value = uniform(0, 3);
    params_.push_back(p);
    list_input_ = TVal{{}, p.dtype, p.sdims, p.shape, {}};
    list_input_name_ = p.name;
    list_input_length_ = p.value;
  }

  // The body.
  const int structures = uniform(2, 5);
  for (int s = 0; s < structures; ++s) {
    gen_block(main, uniform(1, 3));
    gen_structure(main);
  }
  gen_block(main, uniform(0, 2));

  // The result: the structures' results, the latest tensor and a few
  // others, and maybe an ADT value.
  std::vector<std::string> outputs = main.results;
  std::vector<std::string> candidates;
  for (const TVal& v : main.vals)
    if (v.name[0] == '%' && v.size() <= kMaxNumel) candidates.push_back(v.name);
  outputs.push_back(candidates.back());
  const int more = uniform(0, 2);
  for (int k = 0; k < more; ++k) outputs.push_back(pick(candidates));
  if (!main.adt_results.empty() && chance(0.6)) outputs.push_back(pick(main.adt_results));
  const std::string result = outputs.size() == 1 && chance(0.5) ? outputs[0] : tuple_text(outputs);

  std::string text =
      "type List<T> { Nil, Cons(T, List<T>) }\n"
      "type Option<T> { None, Some(T) }\n"
      "type Tree<T> { Leaf(T), Node(Tree<T>, Tree<T>) }\n\n";
  std::vector<std::string> params;
  for (const Param& p : params_) {
    if (p.kind == Param::Kind::list)
      params.push_back(fmt::format("{}: List<{}>", p.name, type_text(p.dtype, p.sdims)));
    else
      params.push_back(fmt::format("{}: {}", p.name, type_text(p.dtype, p.sdims, bounds_)));
  }
  text += fmt::format("// seed {}\nentry def @main({}) {{\n{}  {}\n}}\n", seed_, join_names(params),
                      main.text, result);
  for (const std::string& def : defs_) text += "\n" + def;
  program.text = std::move(text);

  // The inputs: as planned, and with the dynamic extents drawn again.
  std::mt19937_64 data(seed_ ^ 0xDA7A);
  const auto make_args = [&](bool redraw) {
    std::map<std::string, std::int64_t> symbols = symbol_extent;
    if (redraw)
      for (auto& [name, extent] : symbols) extent = draw_extent(data);
    std::vector<Value> args;
    for (const Param& p : params_) {
      Extents shape = p.shape;
      for (std::size_t d = 0; d < shape.size(); ++d) {
        if (!redraw) continue;
        if (p.sdims[d].kind == SDim::Kind::any) shape[d] = draw_extent(data);
        if (p.sdims[d].kind == SDim::Kind::symbol) shape[d] = symbols[p.sdims[d].name];
      }
      switch (p.kind) {
        case Param::Kind::tensor:
          args.emplace_back(random_tensor(data, p.dtype, shape));
          break;
        case Param::Kind::count:
          args.emplace_back(Tensor::scalar<std::int64_t>(p.value));
          break;
        case Param::Kind::list: {
          const std::int64_t length =
              redraw ? std::uniform_int_distribution<int>(0, 3)(data) : p.value;
          Value list = Value::adt(0, {});
          for (std::int64_t i = 0; i < length; ++i)
            list = Value::adt(1, {random_tensor(data, p.dtype, shape), list});
          args.push_back(list);
          break;
        }
      }
    }
    return args;
  };
  program.args = make_args(false);
  program.other_args = make_args(true);
  program.features.assign(features_.begin(), features_.end());
  return program;
}

}  // namespace

RandomProgram random_program(std::uint64_t seed) {
  return Generator(seed).generate();
}

const std::vector<std::string>& random_program_features() {
  return kFeatures;
}

}  // namespace nimble::testing
