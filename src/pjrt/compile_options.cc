#include "pjrt/compile_options.h"

namespace cuxla::pjrt {
namespace {

// Field numbers from xla/pjrt/proto/compile_options.proto and xla/xla_data.proto.
constexpr int kCompileOptionsExecutableBuildOptions = 3;
constexpr int kBuildOptionsDeviceOrdinal = 1;
constexpr int kBuildOptionsNumReplicas = 4;
constexpr int kBuildOptionsNumPartitions = 5;
constexpr int kBuildOptionsUseSpmdPartitioning = 6;
constexpr int kBuildOptionsDeviceAssignment = 9;
constexpr int kBuildOptionsUseShardyPartitioner = 19;
constexpr int kDeviceAssignmentReplicaCount = 1;
constexpr int kDeviceAssignmentComputationCount = 2;
constexpr int kDeviceAssignmentComputationDevices = 3;
constexpr int kComputationDeviceReplicaDeviceIds = 1;

constexpr int kVarint = 0;
constexpr int kLengthDelimited = 2;

void PutVarint(std::string& out, uint64_t value) {
  while (value >= 0x80) {
    out.push_back(static_cast<char>((value & 0x7f) | 0x80));
    value >>= 7;
  }
  out.push_back(static_cast<char>(value));
}

// int32/int64 fields: negative values are written as their 64-bit two's complement.
void PutInt(std::string& out, int field, int64_t value) {
  PutVarint(out, (static_cast<uint64_t>(field) << 3) | kVarint);
  PutVarint(out, static_cast<uint64_t>(value));
}

void PutMessage(std::string& out, int field, const std::string& message) {
  PutVarint(out, (static_cast<uint64_t>(field) << 3) | kLengthDelimited);
  PutVarint(out, message.size());
  out += message;
}

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
