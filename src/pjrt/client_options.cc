#include "pjrt/client_options.h"

#include <algorithm>
#include <string>

#include "pjrt/api.h"
#include "pjrt/environment.h"

namespace cuxla {
namespace {

constexpr std::string_view kAllocators[] = {"default", "platform", "bfc", "cuda_async"};

[[noreturn]] void BadOption(const std::string& message) {
  throw Error(ErrorKind::kValue, message);
}

void Validate(std::string_view name, const ClientOptions& options) {
  const std::string platform(name);
  const Platform kind = PlatformOf(name);
  const bool memory = options.preallocate || options.memory_fraction || options.allocator ||
                      !options.visible_devices.empty();
  if (memory && kind != Platform::kCuda)
    BadOption("preallocate, memory_fraction, allocator and visible_devices apply to the cuda "
              "platform only, not '" + platform + "'");
  if (options.device_count && kind != Platform::kCpu)
    BadOption("device_count applies to the cpu platform only, not '" + platform + "'");
  if (options.device_count && *options.device_count < 1)
    BadOption("device_count must be at least 1, got " + std::to_string(*options.device_count));
  if (options.num_nodes < 1 || options.node_id < 0 || options.node_id >= options.num_nodes)
    BadOption("node_id must be in [0, num_nodes): got node_id " + std::to_string(options.node_id) +
              ", num_nodes " + std::to_string(options.num_nodes));
  if (options.num_nodes > 1 && kind != Platform::kCuda)
    BadOption("clients of several processes (num_nodes > 1) are cuda clients, not '" + platform + "'");
  if (options.num_nodes > 1 && options.kv_store == nullptr)
    BadOption("a client of " + std::to_string(options.num_nodes) + " processes needs a kv_store to find them");
  if (options.memory_fraction &&
      !(*options.memory_fraction > 0.0 && *options.memory_fraction <= 1.0))
    BadOption("memory_fraction must be in (0, 1], got " + std::to_string(*options.memory_fraction));
  if (options.allocator &&
      std::find(std::begin(kAllocators), std::end(kAllocators), *options.allocator) ==
          std::end(kAllocators))
    BadOption("allocator must be one of default, platform, bfc, cuda_async; got '" +
              *options.allocator + "'");
}

}  // namespace

ClientOptions ClientOptions::WithEnvironment(Platform platform) const {
  ClientOptions merged = *this;
  if (platform == Platform::kCpu) {
    if (!merged.device_count) merged.device_count = pjrt::EnvInteger("CUXLA_CPU_DEVICE_COUNT");
    return merged;
  }
  if (platform != Platform::kCuda) return merged;
  if (!merged.preallocate) merged.preallocate = pjrt::EnvBool("CUXLA_PREALLOCATE");
  if (!merged.memory_fraction) merged.memory_fraction = pjrt::EnvNumber("CUXLA_MEM_FRACTION");
  if (!merged.allocator) merged.allocator = pjrt::EnvText("CUXLA_ALLOCATOR");
  return merged;
}

namespace pjrt {

ClientOptions ResolveOptions(std::string_view platform, const ClientOptions& options) {
  const Platform kind = PlatformOf(platform);
  ClientOptions resolved = options.WithEnvironment(kind);
  // Never preallocate unless asked: PyTorch shares the card (README, "CUDA memory").
  if (kind == Platform::kCuda) resolved.preallocate = resolved.preallocate.value_or(false);
  Validate(platform, resolved);
  return resolved;
}

std::vector<PJRT_NamedValue> CreateOptions(Platform platform, const ClientOptions& options) {
  std::vector<PJRT_NamedValue> values;
  auto add = [&](std::string_view name, PJRT_NamedValue_Type type) -> PJRT_NamedValue& {
    PJRT_NamedValue& value = values.emplace_back(CUXLA_PJRT_ARGS(PJRT_NamedValue));
    value.name = name.data();
    value.name_size = name.size();
    value.type = type;
    value.value_size = 1;
    return value;
  };
  if (platform == Platform::kCpu) {
    if (options.device_count)
      add("cpu_device_count", PJRT_NamedValue_kInt64).int64_value = *options.device_count;
    return values;
  }
  if (platform != Platform::kCuda) return values;
  add("preallocate", PJRT_NamedValue_kBool).bool_value = options.preallocate.value_or(false);
  if (options.memory_fraction)
    add("memory_fraction", PJRT_NamedValue_kFloat).float_value =
        static_cast<float>(*options.memory_fraction);
  if (options.allocator) {
    PJRT_NamedValue& value = add("allocator", PJRT_NamedValue_kString);
    value.string_value = options.allocator->c_str();
    value.value_size = options.allocator->size();
  }
  if (!options.visible_devices.empty()) {
    PJRT_NamedValue& value = add("visible_devices", PJRT_NamedValue_kInt64List);
    value.int64_array_value = options.visible_devices.data();
    value.value_size = options.visible_devices.size();
  }
  if (options.num_nodes > 1) {
    add("node_id", PJRT_NamedValue_kInt64).int64_value = options.node_id;
    add("num_nodes", PJRT_NamedValue_kInt64).int64_value = options.num_nodes;
  }
  return values;
}

}  // namespace pjrt
}  // namespace cuxla
