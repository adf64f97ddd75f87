#include "interop/dtype.h"

#include <iterator>

namespace cuxla::interop {
namespace {

struct DLPackType {
  DType dtype;
  uint8_t code;
  uint8_t bits;
};

// Every cuxla DType, in enum order (checked below), with its DLPack code and bits.
constexpr DLPackType kTypes[] = {
    {DType::kBool, kDLBool, 8},
    {DType::kInt8, kDLInt, 8},
    {DType::kInt16, kDLInt, 16},
    {DType::kInt32, kDLInt, 32},
    {DType::kInt64, kDLInt, 64},
    {DType::kUInt8, kDLUInt, 8},
    {DType::kUInt16, kDLUInt, 16},
    {DType::kUInt32, kDLUInt, 32},
    {DType::kUInt64, kDLUInt, 64},
    {DType::kFloat16, kDLFloat, 16},
    {DType::kBFloat16, kDLBfloat, 16},
    {DType::kFloat32, kDLFloat, 32},
    {DType::kFloat64, kDLFloat, 64},
    {DType::kComplex64, kDLComplex, 64},
    {DType::kComplex128, kDLComplex, 128},
    {DType::kFloat8E5M2, kDLFloat8_e5m2, 8},
    {DType::kFloat8E4M3FN, kDLFloat8_e4m3fn, 8},
    {DType::kFloat8E4M3B11FNUZ, kDLFloat8_e4m3b11fnuz, 8},
    {DType::kFloat8E5M2FNUZ, kDLFloat8_e5m2fnuz, 8},
    {DType::kFloat8E4M3FNUZ, kDLFloat8_e4m3fnuz, 8},
    {DType::kFloat8E4M3, kDLFloat8_e4m3, 8},
    {DType::kFloat8E3M4, kDLFloat8_e3m4, 8},
    {DType::kFloat8E8M0FNU, kDLFloat8_e8m0fnu, 8},
};

constexpr bool InEnumOrder() {
  for (size_t i = 0; i < std::size(kTypes); ++i)
    if (static_cast<size_t>(kTypes[i].dtype) != i) return false;
  return true;
}
static_assert(InEnumOrder() && std::size(kTypes) == static_cast<size_t>(DType::kFloat8E8M0FNU) + 1,
              "one row per DType, in enum order");

}  // namespace

std::optional<DType> FromDLDataType(DLDataType type) noexcept {
  if (type.lanes != 1) return std::nullopt;
  for (const DLPackType& row : kTypes)
    if (row.code == type.code && row.bits == type.bits) return row.dtype;
  return std::nullopt;
}

DLDataType ToDLDataType(DType dtype) noexcept {
  const DLPackType& row = kTypes[static_cast<size_t>(dtype)];
  return DLDataType{row.code, row.bits, 1};
}

}  // namespace cuxla::interop
