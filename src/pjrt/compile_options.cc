#include "pjrt/compile_options.h"

#include "pjrt/proto_wire.h"
#include "pjrt/xla_proto_fields.h"

namespace cuxla::pjrt {

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
