// interop/dtype.h — DLPack data types <-> cuxla DTypes, one table.
#pragma once

#include <optional>

#include "dlpack/dlpack.h"
#include "pjrt/dtype.h"

namespace cuxla::interop {

// The DType of a DLPack type (lanes must be 1); nullopt for types XLA lacks.
std::optional<DType> FromDLDataType(DLDataType type) noexcept;
DLDataType ToDLDataType(DType dtype) noexcept;

}  // namespace cuxla::interop
