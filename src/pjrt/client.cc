#include "pjrt/client.h"

#include <algorithm>
#include <cstdlib>
#include <mutex>
#include <string>
#include <thread>

#include "cuda/driver.h"
#include "pjrt/programs/internal_programs.h"

namespace cuxla {
namespace {

constexpr std::string_view kAllocators[] = {"default", "platform", "bfc", "cuda_async"};

[[noreturn]] void BadOption(const std::string& message) {
  throw Error(ErrorKind::kValue, message);
}

std::optional<std::string> Env(const char* name) {
  const char* value = std::getenv(name);
  if (value == nullptr || *value == '\0') return std::nullopt;
  return std::string(value);
}

bool ParseBool(const char* variable, const std::string& text) {
  std::string lower = text;
  std::transform(lower.begin(), lower.end(), lower.begin(), ::tolower);
  if (lower == "1" || lower == "true" || lower == "yes" || lower == "on") return true;
  if (lower == "0" || lower == "false" || lower == "no" || lower == "off") return false;
  BadOption(std::string(variable) + "='" + text + "' is not a boolean (use 1/0, true/false)");
}

int64_t ParseCount(const char* variable, const std::string& text) {
  char* end = nullptr;
  const long long value = std::strtoll(text.c_str(), &end, 10);
  if (end == text.c_str() || *end != '\0')
    BadOption(std::string(variable) + "='" + text + "' is not an integer");
  return value;
}

double ParseFraction(const char* variable, const std::string& text) {
  char* end = nullptr;
  double value = std::strtod(text.c_str(), &end);
  if (end == text.c_str() || *end != '\0')
    BadOption(std::string(variable) + "='" + text + "' is not a number");
  return value;
}

void Validate(const std::string& platform, const ClientOptions& options) {
  const bool memory = options.preallocate || options.memory_fraction || options.allocator ||
                      !options.visible_devices.empty();
  if (memory && platform != "cuda")
    BadOption("preallocate, memory_fraction, allocator and visible_devices apply to the cuda "
              "platform only, not '" + platform + "'");
  if (options.device_count && platform != "cpu")
    BadOption("device_count applies to the cpu platform only, not '" + platform + "'");
  if (options.device_count && *options.device_count < 1)
    BadOption("device_count must be at least 1, got " + std::to_string(*options.device_count));
  if (options.num_nodes < 1 || options.node_id < 0 || options.node_id >= options.num_nodes)
    BadOption("node_id must be in [0, num_nodes): got node_id " + std::to_string(options.node_id) +
              ", num_nodes " + std::to_string(options.num_nodes));
  if (options.num_nodes > 1 && platform != "cuda")
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

// PJRT named values of `platform`'s plugin pointing into `options`, which
// must outlive them.
std::vector<PJRT_NamedValue> NamedValues(const std::string& platform, const ClientOptions& options) {
  std::vector<PJRT_NamedValue> values;
  auto add = [&](std::string_view name, PJRT_NamedValue_Type type) -> PJRT_NamedValue& {
    PJRT_NamedValue& value = values.emplace_back(CUXLA_PJRT_ARGS(PJRT_NamedValue));
    value.name = name.data();
    value.name_size = name.size();
    value.type = type;
    value.value_size = 1;
    return value;
  };
  if (platform == "cpu") {
    if (options.device_count)
      add("cpu_device_count", PJRT_NamedValue_kInt64).int64_value = *options.device_count;
    return values;
  }
  if (platform != "cuda") return values;
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

std::string DescriptionString(const pjrt::Api& api, PJRT_DeviceDescription* description) {
  auto args = CUXLA_PJRT_ARGS(PJRT_DeviceDescription_Kind_Args);
  args.device_description = description;
  CUXLA_PJRT_CALL(api, PJRT_DeviceDescription_Kind, &args);
  return std::string(args.device_kind, args.device_kind_size);
}

Device DescribeDevice(const pjrt::Api& api, PJRT_Device* handle, const std::string& platform) {
  Device device;
  device.handle = handle;
  device.platform = platform;
  auto desc_args = CUXLA_PJRT_ARGS(PJRT_Device_GetDescription_Args);
  desc_args.device = handle;
  CUXLA_PJRT_CALL(api, PJRT_Device_GetDescription, &desc_args);
  auto id_args = CUXLA_PJRT_ARGS(PJRT_DeviceDescription_Id_Args);
  id_args.device_description = desc_args.device_description;
  CUXLA_PJRT_CALL(api, PJRT_DeviceDescription_Id, &id_args);
  device.id = id_args.id;
  device.kind = DescriptionString(api, desc_args.device_description);
  auto hw_args = CUXLA_PJRT_ARGS(PJRT_Device_LocalHardwareId_Args);
  hw_args.device = handle;
  CUXLA_PJRT_CALL(api, PJRT_Device_LocalHardwareId, &hw_args);
  device.local_hardware_id = hw_args.local_hardware_id;
  return device;
}

// The CPU plugin sizes its thread pools by PJRT_NPROC, else the machine's
// cores, and at least one thread per device. An SPMD program's partitions
// each hold a thread while they wait for each other in a collective, so with
// as many threads as partitions a launch can find none left for the last
// partition and hang. For a client of several CPU devices (the plugin makes
// 4 unless told), cuxla sets PJRT_NPROC (unless the user has) to twice the
// devices, or the cores if more, for the plugin to read while it creates the
// client, then unsets it. Such CPU clients are made one at a time: another
// made meanwhile would find the variable set, and lose it when the first
// unsets it.
class CpuThreadsForPartitions {
 public:
  CpuThreadsForPartitions(const std::string& platform, const ClientOptions& options) {
    constexpr int64_t kPluginDefaultDevices = 4;
    const int64_t devices = options.device_count.value_or(kPluginDefaultDevices);
    if (platform != "cpu" || devices <= 1) return;
    lock_ = std::unique_lock(Mutex());
    if (std::getenv(kVariable) != nullptr) return;
    const auto threads = std::max<int64_t>(std::thread::hardware_concurrency(), 2 * devices);
    set_ = setenv(kVariable, std::to_string(threads).c_str(), 0) == 0;
  }
  ~CpuThreadsForPartitions() {
    if (set_) unsetenv(kVariable);
  }
  CpuThreadsForPartitions(const CpuThreadsForPartitions&) = delete;
  CpuThreadsForPartitions& operator=(const CpuThreadsForPartitions&) = delete;

 private:
  static std::mutex& Mutex() {
    static std::mutex mutex;
    return mutex;
  }
  static constexpr const char* kVariable = "PJRT_NPROC";
  std::unique_lock<std::mutex> lock_;  // released after the variable is unset
  bool set_ = false;
};

}  // namespace

ClientOptions ClientOptions::WithEnvironment(std::string_view platform) const {
  ClientOptions merged = *this;
  if (platform == "cpu") {
    if (!merged.device_count)
      if (auto text = Env("CUXLA_CPU_DEVICE_COUNT")) merged.device_count = ParseCount("CUXLA_CPU_DEVICE_COUNT", *text);
    return merged;
  }
  if (platform != "cuda") return merged;
  if (!merged.preallocate)
    if (auto text = Env("CUXLA_PREALLOCATE")) merged.preallocate = ParseBool("CUXLA_PREALLOCATE", *text);
  if (!merged.memory_fraction)
    if (auto text = Env("CUXLA_MEM_FRACTION"))
      merged.memory_fraction = ParseFraction("CUXLA_MEM_FRACTION", *text);
  if (!merged.allocator)
    if (auto text = Env("CUXLA_ALLOCATOR")) merged.allocator = *text;
  return merged;
}

ClientOptions Client::ResolveOptions(const std::string& platform, const ClientOptions& options) {
  ClientOptions resolved = options.WithEnvironment(platform);
  // Never preallocate unless asked: PyTorch shares the card (README, "CUDA memory").
  if (platform == "cuda") resolved.preallocate = resolved.preallocate.value_or(false);
  Validate(platform, resolved);
  return resolved;
}

std::shared_ptr<Client> Client::Create(std::shared_ptr<const pjrt::Plugin> plugin,
                                       const std::string& platform,
                                       const ClientOptions& options) {
  return CreateResolved(std::move(plugin), platform, ResolveOptions(platform, options));
}

std::shared_ptr<Client> Client::Create(const std::string& plugin_path, const std::string& platform,
                                       const ClientOptions& options) {
  ClientOptions resolved = ResolveOptions(platform, options);
  return CreateResolved(pjrt::Plugin::Load(plugin_path), platform, std::move(resolved));
}

std::shared_ptr<Client> Client::CreateResolved(std::shared_ptr<const pjrt::Plugin> plugin,
                                               const std::string& platform,
                                               ClientOptions resolved) {
  const std::vector<PJRT_NamedValue> named = NamedValues(platform, resolved);

  const pjrt::Api& api = plugin->api();
  auto args = CUXLA_PJRT_ARGS(PJRT_Client_Create_Args);
  args.create_options = named.data();
  args.num_options = named.size();
  if (resolved.kv_store != nullptr) pjrt::SetKeyValueCallbacks(args, *resolved.kv_store);
  {
    const CpuThreadsForPartitions threads(platform, resolved);
    try {
      CUXLA_PJRT_CALL(api, PJRT_Client_Create, &args);
    } catch (const Error& e) {
      // The CUDA plugin's words for "no GPU" differ between versions; the driver's device count does not.
      const cuda::DriverStatus& driver = cuda::Driver();
      if (platform != "cuda" || driver.device_count > 0) throw;
      throw Error(ErrorKind::kNoDevice, "no CUDA device here (" +
                                            (driver.available ? std::string("the driver sees none") : driver.why_not) +
                                            "): " + e.what());
    }
  }

  auto state = std::make_shared<ClientState>();
  state->plugin = std::move(plugin);
  state->kv_store = resolved.kv_store;
  state->client = pjrt::ClientPtr(args.client, pjrt::ClientDestroy{&state->api()});
  state->programs = MakeInternalPrograms(*state);

  auto name_args = CUXLA_PJRT_ARGS(PJRT_Client_PlatformName_Args);
  name_args.client = args.client;
  CUXLA_PJRT_CALL(api, PJRT_Client_PlatformName, &name_args);
  state->platform.assign(name_args.platform_name, name_args.platform_name_size);
  if (state->platform != platform)
    BadOption("PJRT plugin " + api.plugin_path() + " makes '" + state->platform +
              "' clients, not '" + platform + "'");

  auto dev_args = CUXLA_PJRT_ARGS(PJRT_Client_AddressableDevices_Args);
  dev_args.client = args.client;
  CUXLA_PJRT_CALL(api, PJRT_Client_AddressableDevices, &dev_args);
  for (size_t i = 0; i < dev_args.num_addressable_devices; ++i)
    state->devices.push_back(DescribeDevice(api, dev_args.addressable_devices[i], state->platform));
  if (state->devices.empty())
    throw Error(ErrorKind::kNoDevice, "the " + platform + " client has no addressable device");
  auto all_args = CUXLA_PJRT_ARGS(PJRT_Client_Devices_Args);
  all_args.client = args.client;
  CUXLA_PJRT_CALL(api, PJRT_Client_Devices, &all_args);
  state->global_device_count = all_args.num_devices;
  return std::make_shared<Client>(std::move(state), std::move(resolved));
}

std::string Client::platform_version() const {
  auto args = CUXLA_PJRT_ARGS(PJRT_Client_PlatformVersion_Args);
  args.client = state_->client.get();
  CUXLA_PJRT_CALL(state_->api(), PJRT_Client_PlatformVersion, &args);
  return std::string(args.platform_version, args.platform_version_size);
}

const Device& Client::device(int id) const {
  for (const Device& device : state_->devices)
    if (device.id == id) return device;
  throw Error(ErrorKind::kValue, "no " + platform() + " device with id " + std::to_string(id) +
                                     " (this client has " + std::to_string(devices().size()) + ")");
}

std::optional<MemoryStats> Client::memory_stats(const Device& device) const {
  const pjrt::Api& api = state_->api();
  if (!api.Has(&PJRT_Api::PJRT_Device_MemoryStats)) return std::nullopt;
  auto args = CUXLA_PJRT_ARGS(PJRT_Device_MemoryStats_Args);
  args.device = device.handle;
  try {
    CUXLA_PJRT_CALL(api, PJRT_Device_MemoryStats, &args);
  } catch (const Error&) {
    return std::nullopt;  // UNIMPLEMENTED on platforms without an allocator to report
  }
  MemoryStats stats;
  stats.bytes_in_use = args.bytes_in_use;
  if (args.peak_bytes_in_use_is_set) stats.peak_bytes_in_use = args.peak_bytes_in_use;
  if (args.bytes_limit_is_set) stats.bytes_limit = args.bytes_limit;
  if (args.pool_bytes_is_set) stats.pool_bytes = args.pool_bytes;
  return stats;
}

Array Client::FromHost(const HostBuffer& host, const Device& device) const {
  return Array::FromHost(state_, host, device);
}

std::shared_ptr<const Executable> Client::Compile(std::string_view program, const Device& device) {
  const Device* devices[] = {&device};
  return Compile(program, devices);
}

std::shared_ptr<const Executable> Client::Compile(std::string_view program,
                                                  std::span<const Device* const> devices) {
  return cache_.Get(program, devices, [&] { return Executable::Compile(state_, program, devices); });
}

}  // namespace cuxla
