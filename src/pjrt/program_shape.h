// pjrt/program_shape.h — the parameter and result shapes of a compiled
// program, read from its optimized HloModuleProto: arguments are checked
// before PJRT runs on them (the plugins do not check shapes or dtypes), and
// outputs are described without asking PJRT about each one; for an SPMD
// program, also how each is split over the partitions.
#pragma once

#include <cstdint>
#include <optional>
#include <string_view>
#include <vector>

#include "pjrt/dtype.h"
#include "pjrt/sharding.h"

namespace cuxla::pjrt {

struct HloShape {
  std::optional<DType> dtype;  // nullopt: a type cuxla has no DType for (tuple, token...)
  std::vector<int64_t> dims;
  std::vector<int64_t> minor_to_major;  // empty when the proto has no layout
};

struct ProgramShape {
  // One partition's shapes (for an SPMD program, the tiles).
  std::vector<HloShape> parameters;
  std::vector<HloShape> results;  // the result tuple's elements, or the one result
  // One per parameter and result: its tiles (whole, with one partition), or
  // nullopt for a sharding cuxla does not describe (maximal, manual).
  std::vector<std::optional<Sharding>> parameter_shardings;
  std::vector<std::optional<Sharding>> result_shardings;
};

// The entry computation's shape (host_program_shape) of a program of
// `partitions` partitions serialized in PJRT's `format`: "hlo"
// (HloModuleProto) or "hlo_with_config" (HloModuleProtoWithConfig). Throws a
// RuntimeError-kind Error for another format or malformed bytes.
ProgramShape EntryProgramShape(std::string_view format, std::string_view program, size_t partitions = 1);

}  // namespace cuxla::pjrt
