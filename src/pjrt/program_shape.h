// pjrt/program_shape.h — the parameter shapes of a compiled program, read from
// its optimized HloModuleProto, so that arguments are checked before PJRT
// runs on them (the plugins do not check shapes or dtypes).
#pragma once

#include <cstdint>
#include <optional>
#include <string_view>
#include <vector>

#include "pjrt/dtype.h"

namespace cuxla::pjrt {

struct ParameterShape {
  std::optional<DType> dtype;  // nullopt: a type cuxla has no DType for (tuple, token...)
  std::vector<int64_t> dims;
  std::vector<int64_t> minor_to_major;  // empty when the proto has no layout
};

// The entry parameters (host_program_shape) of a program serialized in PJRT's
// `format`: "hlo" (HloModuleProto) or "hlo_with_config" (HloModuleProtoWithConfig).
// Throws a RuntimeError-kind Error for another format or malformed bytes.
std::vector<ParameterShape> EntryParameters(std::string_view format, std::string_view program);

}  // namespace cuxla::pjrt
