// pjrt/dtype.h — the element types cuxla moves, and their PJRT buffer types.
#pragma once

#include <cstddef>
#include <optional>
#include <string_view>

#include "xla/pjrt/c/pjrt_c_api.h"

namespace cuxla {

// Every element type both PyTorch/DLPack and XLA have.
enum class DType {
  kBool,
  kInt8, kInt16, kInt32, kInt64,
  kUInt8, kUInt16, kUInt32, kUInt64,
  kFloat16, kBFloat16, kFloat32, kFloat64,
  kComplex64, kComplex128,
  kFloat8E5M2, kFloat8E4M3FN, kFloat8E4M3B11FNUZ, kFloat8E5M2FNUZ, kFloat8E4M3FNUZ,
  kFloat8E4M3, kFloat8E3M4, kFloat8E8M0FNU,
};

// NumPy / ml_dtypes spelling: "float32", "bfloat16", "float8_e4m3fn"...
std::string_view DTypeName(DType dtype) noexcept;
std::optional<DType> DTypeFromName(std::string_view name) noexcept;
size_t DTypeSize(DType dtype) noexcept;  // bytes per element

namespace pjrt {

std::string_view MlirTypeName(DType dtype) noexcept;  // "f32", "complex<f64>", "f8E4M3FN"...
PJRT_Buffer_Type ToPjrt(DType dtype) noexcept;
std::optional<DType> FromPjrt(PJRT_Buffer_Type type) noexcept;
// From xla.PrimitiveType (xla_data.proto), as HLO protos spell types.
std::optional<DType> FromXlaPrimitiveType(int type) noexcept;

}  // namespace pjrt

}  // namespace cuxla
