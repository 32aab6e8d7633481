#include "ops/broadcast.hpp"

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

}  // namespace nimble::ops
