#include "pjrt/dtype.h"

namespace cuxla {
namespace {

struct DTypeInfo {
  DType dtype;
  PJRT_Buffer_Type pjrt;
  std::string_view name;
  size_t size;
  int xla_primitive_type;  // xla.PrimitiveType in xla_data.proto
  std::string_view mlir;   // element type in MLIR/StableHLO text
};

// One row per DType, in enum order (checked below).
// DType, PJRT buffer type, name, bytes, xla.PrimitiveType, MLIR type.
constexpr DTypeInfo kDTypes[] = {
    {DType::kBool, PJRT_Buffer_Type_PRED, "bool", 1, 1, "i1"},
    {DType::kInt8, PJRT_Buffer_Type_S8, "int8", 1, 2, "i8"},
    {DType::kInt16, PJRT_Buffer_Type_S16, "int16", 2, 3, "i16"},
    {DType::kInt32, PJRT_Buffer_Type_S32, "int32", 4, 4, "i32"},
    {DType::kInt64, PJRT_Buffer_Type_S64, "int64", 8, 5, "i64"},
    {DType::kUInt8, PJRT_Buffer_Type_U8, "uint8", 1, 6, "ui8"},
    {DType::kUInt16, PJRT_Buffer_Type_U16, "uint16", 2, 7, "ui16"},
    {DType::kUInt32, PJRT_Buffer_Type_U32, "uint32", 4, 8, "ui32"},
    {DType::kUInt64, PJRT_Buffer_Type_U64, "uint64", 8, 9, "ui64"},
    {DType::kFloat16, PJRT_Buffer_Type_F16, "float16", 2, 10, "f16"},
    {DType::kBFloat16, PJRT_Buffer_Type_BF16, "bfloat16", 2, 16, "bf16"},
    {DType::kFloat32, PJRT_Buffer_Type_F32, "float32", 4, 11, "f32"},
    {DType::kFloat64, PJRT_Buffer_Type_F64, "float64", 8, 12, "f64"},
    {DType::kComplex64, PJRT_Buffer_Type_C64, "complex64", 8, 15, "complex<f32>"},
    {DType::kComplex128, PJRT_Buffer_Type_C128, "complex128", 16, 18, "complex<f64>"},
    {DType::kFloat8E5M2, PJRT_Buffer_Type_F8E5M2, "float8_e5m2", 1, 19, "f8E5M2"},
    {DType::kFloat8E4M3FN, PJRT_Buffer_Type_F8E4M3FN, "float8_e4m3fn", 1, 20, "f8E4M3FN"},
    {DType::kFloat8E4M3B11FNUZ, PJRT_Buffer_Type_F8E4M3B11FNUZ, "float8_e4m3b11fnuz", 1, 23, "f8E4M3B11FNUZ"},
    {DType::kFloat8E5M2FNUZ, PJRT_Buffer_Type_F8E5M2FNUZ, "float8_e5m2fnuz", 1, 24, "f8E5M2FNUZ"},
    {DType::kFloat8E4M3FNUZ, PJRT_Buffer_Type_F8E4M3FNUZ, "float8_e4m3fnuz", 1, 25, "f8E4M3FNUZ"},
    {DType::kFloat8E4M3, PJRT_Buffer_Type_F8E4M3, "float8_e4m3", 1, 28, "f8E4M3"},
    {DType::kFloat8E3M4, PJRT_Buffer_Type_F8E3M4, "float8_e3m4", 1, 29, "f8E3M4"},
    {DType::kFloat8E8M0FNU, PJRT_Buffer_Type_F8E8M0FNU, "float8_e8m0fnu", 1, 33, "f8E8M0FNU"},
};

constexpr bool TableInEnumOrder() {
  for (size_t i = 0; i < std::size(kDTypes); ++i)
    if (static_cast<size_t>(kDTypes[i].dtype) != i) return false;
  return true;
}
static_assert(TableInEnumOrder(), "kDTypes rows must follow the DType enum");
static_assert(std::size(kDTypes) == static_cast<size_t>(DType::kFloat8E8M0FNU) + 1);

const DTypeInfo& Info(DType dtype) { return kDTypes[static_cast<size_t>(dtype)]; }

}  // namespace

std::string_view DTypeName(DType dtype) noexcept { return Info(dtype).name; }
size_t DTypeSize(DType dtype) noexcept { return Info(dtype).size; }

std::optional<DType> DTypeFromName(std::string_view name) noexcept {
  for (const DTypeInfo& info : kDTypes)
    if (info.name == name) return info.dtype;
  return std::nullopt;
}

namespace pjrt {

std::string_view MlirTypeName(DType dtype) noexcept { return Info(dtype).mlir; }
PJRT_Buffer_Type ToPjrt(DType dtype) noexcept { return Info(dtype).pjrt; }

std::optional<DType> FromPjrt(PJRT_Buffer_Type type) noexcept {
  for (const DTypeInfo& info : kDTypes)
    if (info.pjrt == type) return info.dtype;
  return std::nullopt;
}

std::optional<DType> FromXlaPrimitiveType(int type) noexcept {
  for (const DTypeInfo& info : kDTypes)
    if (info.xla_primitive_type == type) return info.dtype;
  return std::nullopt;
}

}  // namespace pjrt
}  // namespace cuxla
