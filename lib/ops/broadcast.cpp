#include "ops/broadcast.hpp"

#include <fmt/format.h>
#include <fmt/ranges.h>

#include <algorithm>

#include "support/check.hpp"

namespace nimble::ops {

std::optional<Dim> broadcast_dim(const Dim& a, const Dim& b) {
  if (same_dim(a, b)) return merge_equal_dim(a, b);
  if (is_one(a)) return b;
  if (is_one(b)) return a;
  if (a.is_fixed() && b.is_fixed()) return std::nullopt;
  if (a.is_fixed()) return a;
  if (b.is_fixed()) return b;
  return ir::Any;  // Any vs a symbol, or two symbols: either side may be 1
}

Shape broadcast_shapes(std::span<const BroadcastOperand> operands) {
  std::size_t rank = 0;
  for (const auto& operand : operands) rank = std::max(rank, operand.type->rank());
  Shape result(rank, Dim(1));
  for (std::size_t d = 0; d < rank; ++d) {
    // The operand whose constant (!= 1) the result dim holds, for the message.
    std::size_t source = 0;
    for (std::size_t i = 0; i < operands.size(); ++i) {
      const TensorTypeNode& t = *operands[i].type;
      if (d + t.rank() < rank) continue;  // an implicit leading 1
      const Dim& dim = t.shape[d + t.rank() - rank];
      std::optional<Dim> merged = broadcast_dim(result[d], dim);
      if (!merged) {
        const BroadcastOperand& other = operands[source];
        throw_error(ErrorKind::type_error, "{} {} and {} {} do not broadcast: dim {} is {} vs {}",
                    other.name, to_string(*other.type), operands[i].name, to_string(t), d,
                    ir::to_string(result[d]), ir::to_string(dim));
      }
      const bool had_constant = result[d].is_fixed() && !is_one(result[d]);
      if (!had_constant && merged->is_fixed() && !is_one(*merged)) source = i;
      result[d] = *merged;
    }
  }
  return result;
}

BroadcastExtent broadcast_extent(const te::Expr& a, const te::Expr& b) {
  const te::Expr always = te::int_imm(1, DType::boolean);
  if (te::provably_equal(a, b)) return {a, always};
  const std::optional<std::int64_t> ca = te::as_int(a);
  const std::optional<std::int64_t> cb = te::as_int(b);
  if (ca == 1) return {b, always};
  if (cb == 1) return {a, always};
  if (ca && cb) throw_error(ErrorKind::type_error, "extents {} and {} do not broadcast", *ca, *cb);
  // A constant other than 1 is the result; the other side must be it or 1.
  if (ca) return {a, te::eq(b, a) || te::eq(b, 1)};
  if (cb) return {b, te::eq(a, b) || te::eq(a, 1)};
  return {te::select(te::eq(a, 1), b, a), te::eq(a, b) || te::eq(a, 1) || te::eq(b, 1)};
}

TeBroadcast broadcast_shapes(std::span<const te::Tensor> inputs,
                             std::span<const std::string_view> names) {
  NIMBLE_ASSERT(inputs.size() == names.size(), "broadcast_shapes: one name per input");
  std::size_t rank = 0;
  for (const te::Tensor& t : inputs) rank = std::max(rank, t.ndim());
  TeBroadcast result{std::vector<te::Expr>(rank, te::Expr(1)), {}};
  for (std::size_t d = 0; d < rank; ++d) {
    for (std::size_t i = 0; i < inputs.size(); ++i) {
      const te::Tensor& t = inputs[i];
      if (d + t.ndim() < rank) continue;  // an implicit leading 1
      BroadcastExtent merged = broadcast_extent(result.shape[d], t.shape()[d + t.ndim() - rank]);
      te::add_check(
          result.checks, merged.ok, ErrorKind::invalid_argument,
          fmt::format("{} do not broadcast at dim {}", fmt::join(names.first(i + 1), ", "), d));
      result.shape[d] = std::move(merged.extent);
    }
  }
  return result;
}

te::Expr broadcast_index(const te::Expr& extent, const te::Expr& out, const te::Expr& i) {
  if (te::provably_equal(extent, out)) return i;
  return te::select(te::eq(extent, 1), 0, i);
}

te::Expr load_broadcast(const te::Tensor& input, std::span<const te::Var> index,
                        std::span<const te::Expr> shape) {
  NIMBLE_ASSERT(input.ndim() <= shape.size() && index.size() == shape.size(),
                "load_broadcast: the input has a higher rank than the result");
  const std::size_t offset = shape.size() - input.ndim();
  std::vector<te::Expr> indices;
  for (std::size_t d = 0; d < input.ndim(); ++d)
    indices.push_back(broadcast_index(input.shape()[d], shape[offset + d], index[offset + d]));
  return input(std::move(indices));
}

}  // namespace nimble::ops
