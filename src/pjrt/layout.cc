#include "pjrt/layout.h"

#include <algorithm>
#include <numeric>

namespace cuxla::pjrt {

std::vector<int64_t> RowMajorLayout(size_t rank) {
  std::vector<int64_t> layout(rank);
  std::iota(layout.rbegin(), layout.rend(), int64_t{0});
  return layout;
}

bool IsRowMajor(std::span<const int64_t> minor_to_major) noexcept {
  return std::is_sorted(minor_to_major.rbegin(), minor_to_major.rend());
}

std::vector<int64_t> CompactStrides(std::span<const int64_t> dims,
                                    std::span<const int64_t> minor_to_major) {
  std::vector<int64_t> strides(dims.size());
  int64_t next = 1;
  for (int64_t d : minor_to_major) {
    strides[d] = next;
    next *= std::max<int64_t>(dims[d], 1);
  }
  return strides;
}

std::optional<std::vector<int64_t>> MinorToMajor(std::span<const int64_t> dims,
                                                 std::span<const int64_t> strides) {
  // Row-major first, so that ties (size-1 dims) keep the default layout.
  std::vector<int64_t> order = RowMajorLayout(dims.size());
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

}  // namespace cuxla::pjrt
