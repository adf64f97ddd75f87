#include "pjrt/compile_options.h"

#include "pjrt/proto_wire.h"

namespace cuxla::pjrt {
namespace {

// Field numbers from xla/pjrt/proto/compile_options.proto and xla/xla_data.proto.
constexpr uint32_t kCompileOptionsExecutableBuildOptions = 3;
constexpr uint32_t kBuildOptionsDeviceOrdinal = 1;
constexpr uint32_t kBuildOptionsNumReplicas = 4;
constexpr uint32_t kBuildOptionsNumPartitions = 5;
constexpr uint32_t kBuildOptionsUseSpmdPartitioning = 6;
constexpr uint32_t kBuildOptionsDeviceAssignment = 9;
constexpr uint32_t kBuildOptionsUseShardyPartitioner = 19;
constexpr uint32_t kDeviceAssignmentReplicaCount = 1;
constexpr uint32_t kDeviceAssignmentComputationCount = 2;
constexpr uint32_t kDeviceAssignmentComputationDevices = 3;
constexpr uint32_t kComputationDeviceReplicaDeviceIds = 1;

}  // namespace

std::string CompileOptions(std::span<const int64_t> device_ids) {
  const auto partitions = static_cast<int64_t>(device_ids.size());
  std::string assignment;  // replicas x partitions = 1 x N, one device per partition
  PutInt(assignment, kDeviceAssignmentReplicaCount, 1);
  PutInt(assignment, kDeviceAssignmentComputationCount, partitions);
  for (int64_t id : device_ids) {
    std::string computation_device;
    PutInt(computation_device, kComputationDeviceReplicaDeviceIds, id);
    PutMessage(assignment, kDeviceAssignmentComputationDevices, computation_device);
  }

  std::string build;
  PutInt(build, kBuildOptionsDeviceOrdinal, -1);  // -1: placed by the assignment
  PutInt(build, kBuildOptionsNumReplicas, 1);
  PutInt(build, kBuildOptionsNumPartitions, partitions);
  if (partitions > 1) {
    PutInt(build, kBuildOptionsUseSpmdPartitioning, 1);
    PutInt(build, kBuildOptionsUseShardyPartitioner, 1);
  }
  PutMessage(build, kBuildOptionsDeviceAssignment, assignment);

  std::string options;
  PutMessage(options, kCompileOptionsExecutableBuildOptions, build);
  return options;
}

}  // namespace cuxla::pjrt
