#include "interop/layout.h"

#include <algorithm>
#include <numeric>

namespace cuxla::interop {

std::optional<std::vector<int64_t>> MinorToMajor(std::span<const int64_t> dims,
                                                 std::span<const int64_t> strides) {
  const size_t rank = dims.size();
  std::vector<int64_t> order(rank);
  // Row-major first, so that ties (size-1 dims) keep the default layout.
  std::iota(order.rbegin(), order.rend(), int64_t{0});
  if (strides.empty()) return order;
  // A tensor with no elements is laid out however its producer likes.
  if (std::find(dims.begin(), dims.end(), 0) != dims.end()) return order;

  // Row-major (size-1 dims aside) is the default layout, whatever a size-1
  // dim's stride says.
  int64_t expected = 1;
  bool row_major = true;
  for (int64_t d : order) {
    if (dims[d] == 1) continue;
    row_major = row_major && strides[d] == expected;
    expected *= dims[d];
  }
  if (row_major) return order;

  // Dimensions of size > 1 sorted from the smallest stride; size-1 dims go
  // last (most major), where any stride fits. stable_sort keeps row-major ties.
  auto key = [&](int64_t d) { return dims[d] == 1 ? INT64_MAX : strides[d]; };
  std::stable_sort(order.begin(), order.end(), [&](int64_t a, int64_t b) { return key(a) < key(b); });
  expected = 1;
  for (int64_t d : order) {
    if (dims[d] == 1) continue;
    if (strides[d] != expected) return std::nullopt;
    expected *= dims[d];
  }
  return order;
}

}  // namespace cuxla::interop
