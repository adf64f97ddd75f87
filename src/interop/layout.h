// interop/layout.h — DLPack strides <-> XLA minor-to-major layouts.
#pragma once

#include <cstdint>
#include <optional>
#include <span>
#include <vector>

namespace cuxla::interop {

// The minor-to-major layout of a tensor whose element strides are a
// permutation of compact strides (size-1 dimensions may have any stride);
// nullopt for steps, broadcasts, negative or overlapping strides. Row-major
// tensors give {rank-1, ..., 0}, and so does `strides` empty (DLPack: compact).
std::optional<std::vector<int64_t>> MinorToMajor(std::span<const int64_t> dims,
                                                 std::span<const int64_t> strides);


}  // namespace cuxla::interop
