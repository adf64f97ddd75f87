// pjrt/xla_proto_fields.h — the field numbers of XLA's protos that cuxla reads
// and writes by hand, one enum per message, named after it (from xla/pjrt/proto/
// compile_options.proto, xla/service/hlo.proto and xla/xla_data.proto).
#pragma once

#include <cstdint>

namespace cuxla::pjrt {

enum CompileOptionsProtoField : uint32_t { kCompileOptionsExecutableBuildOptions = 3 };
enum ExecutableBuildOptionsProtoField : uint32_t {
  kBuildOptionsDeviceOrdinal = 1, kBuildOptionsNumReplicas = 4, kBuildOptionsNumPartitions = 5,
  kBuildOptionsUseSpmdPartitioning = 6, kBuildOptionsDeviceAssignment = 9, kBuildOptionsUseShardyPartitioner = 19
};
enum DeviceAssignmentProtoField : uint32_t {
  kDeviceAssignmentReplicaCount = 1, kDeviceAssignmentComputationCount = 2, kDeviceAssignmentComputationDevices = 3
};
enum ComputationDeviceField : uint32_t { kComputationDeviceReplicaDeviceIds = 1 };

enum HloModuleProtoWithConfigField : uint32_t { kWithConfigModule = 1 };
enum HloModuleProtoField : uint32_t {
  kModuleHostProgramShape = 4, kModuleSpmdOutputSharding = 12, kModuleSpmdParametersShardings = 14
};
enum OpShardingField : uint32_t {
  kShardingType = 1, kShardingTileAssignmentDimensions = 3, kShardingTileAssignmentDevices = 4,
  kShardingTupleShardings = 5, kShardingReplicateOnLastTileDim = 6, kShardingLastTileDims = 8,
  kShardingIotaReshapeDims = 9, kShardingIotaTransposePerm = 10
};
enum ProgramShapeProtoField : uint32_t { kProgramShapeParameters = 1, kProgramShapeResult = 2 };
enum ShapeProtoField : uint32_t { kShapeElementType = 2, kShapeDimensions = 3, kShapeTupleShapes = 4, kShapeLayout = 5 };
enum LayoutProtoField : uint32_t { kLayoutMinorToMajor = 1 };

}  // namespace cuxla::pjrt
