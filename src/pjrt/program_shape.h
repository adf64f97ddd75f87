// pjrt/program_shape.h — the parameter and result shapes of a compiled
// program, read from its optimized HloModuleProto: arguments are checked
// before PJRT runs on them (the plugins do not check shapes or dtypes), and
// outputs are described without asking PJRT about each one.
#pragma once

#include <cstdint>
#include <optional>
#include <string_view>
#include <vector>

#include "pjrt/dtype.h"

namespace cuxla::pjrt {

struct HloShape {
  std::optional<DType> dtype;  // nullopt: a type cuxla has no DType for (tuple, token...)
  std::vector<int64_t> dims;
  std::vector<int64_t> minor_to_major;  // empty when the proto has no layout
};

struct ProgramShape {
  std::vector<HloShape> parameters;
  std::vector<HloShape> results;  // the result tuple's elements, or the one result
};

// The entry computation's shape (host_program_shape) of a program serialized
// in PJRT's `format`: "hlo" (HloModuleProto) or "hlo_with_config"
// (HloModuleProtoWithConfig). Throws a RuntimeError-kind Error for another
// format or malformed bytes.
ProgramShape EntryProgramShape(std::string_view format, std::string_view program);

}  // namespace cuxla::pjrt
