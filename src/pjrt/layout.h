// pjrt/layout.h — minor-to-major layouts: row-major, compact strides, and the layout DLPack strides describe.
#pragma once

#include <cstdint>
#include <optional>
#include <span>
#include <vector>

namespace cuxla::pjrt {

// The row-major layout of rank `rank`: {rank-1, ..., 0}.
std::vector<int64_t> RowMajorLayout(size_t rank);

// Whether the permutation `minor_to_major` is the row-major layout (n-1, ..., 0).
bool IsRowMajor(std::span<const int64_t> minor_to_major) noexcept;

// Element strides of a compact tensor of `dims` laid out `minor_to_major`.
std::vector<int64_t> CompactStrides(std::span<const int64_t> dims,
                                    std::span<const int64_t> minor_to_major);

// The minor-to-major layout of a tensor whose element strides are a
// permutation of compact strides (size-1 dimensions may have any stride);
// nullopt for steps, broadcasts, negative or overlapping strides. Row-major
// tensors give {rank-1, ..., 0}, and so does `strides` empty (DLPack: compact).
std::optional<std::vector<int64_t>> MinorToMajor(std::span<const int64_t> dims,
                                                 std::span<const int64_t> strides);

}  // namespace cuxla::pjrt
