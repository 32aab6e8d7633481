// to_string(Tensor): nested brackets in the style of numpy / PyTorch, with
// long dims elided to their first and last few entries.
#include <fmt/format.h>

#include <cmath>
#include <string>

#include "nimble/runtime/tensor.hpp"
#include "runtime/element.hpp"

namespace nimble {
namespace {

class TensorPrinter {
 public:
  TensorPrinter(const Tensor& tensor, const TensorPrintOptions& options)
      : tensor_(tensor), options_(options), base_(tensor.raw_data()) {}

  std::string print() {
    out_ = fmt::format("Tensor<{}>{} {}", to_string(tensor_.dtype()), to_string(tensor_.shape()),
                       to_string(tensor_.device()));
    out_ += '\n';
    print_axis(0, 0);
    return std::move(out_);
  }

 private:
  void print_element(std::int64_t flat) {
    const double v = load_as_double(base_, tensor_.dtype(), flat);
    if (tensor_.dtype() == DType::boolean)
      out_ += v != 0.0 ? "true" : "false";
    else if (is_floating(tensor_.dtype()))
      out_ += fmt::format("{:.{}g}", v, options_.precision);
    else
      out_ += fmt::format("{}", static_cast<std::int64_t>(v));
  }

  // Prints the sub-array along `axis` that starts at element `offset`.
  void print_axis(std::size_t axis, std::int64_t offset) {
    const Shape& shape = tensor_.shape();
    if (axis == shape.rank()) {
      print_element(offset);
      return;
    }
    std::int64_t inner = 1;
    for (std::size_t a = axis + 1; a < shape.rank(); ++a) inner *= shape[a];
    const std::int64_t extent = shape[axis];
    const bool elide = extent > options_.threshold && extent > 2 * options_.edge_items;
    out_ += '[';
    for (std::int64_t i = 0; i < extent; ++i) {
      if (elide && i == options_.edge_items) {
        out_ += "...";
        i = extent - options_.edge_items - 1;
        separator(axis);
        continue;
      }
      print_axis(axis + 1, offset + i * inner);
      if (i + 1 < extent) separator(axis);
    }
    out_ += ']';
  }

  // Between entries: ", " inside the innermost axis, a newline and the
  // indentation of the next bracket otherwise.
  void separator(std::size_t axis) {
    if (axis + 1 == tensor_.shape().rank()) {
      out_ += ", ";
      return;
    }
    out_ += ",\n";
    out_.append(axis + 1, ' ');
  }

  const Tensor& tensor_;
  const TensorPrintOptions& options_;
  const void* base_;
  std::string out_;
};

}  // namespace

std::string to_string(const Tensor& tensor, const TensorPrintOptions& options) {
  if (!tensor.defined()) return "Tensor<undefined>";
  if (!tensor.device().is_cpu())
    return fmt::format("Tensor<{}>{} {} (not on the host)", to_string(tensor.dtype()),
                       to_string(tensor.shape()), to_string(tensor.device()));
  return TensorPrinter(tensor, options).print();
}

}  // namespace nimble
