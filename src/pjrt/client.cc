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

Device DescribeDevice(const pjrt::Api& api, PJRT_Device* handle, const ClientState& state) {
  Device device;
  device.handle = handle;
  device.platform = state.platform;
  device.platform_name = state.platform_name;
  PJRT_DeviceDescription* description =
      CUXLA_PJRT_QUERY(api, PJRT_Device_GetDescription, device, handle).device_description;
  device.id = CUXLA_PJRT_QUERY(api, PJRT_DeviceDescription_Id, device_description, description).id;
  const auto kind = CUXLA_PJRT_QUERY(api, PJRT_DeviceDescription_Kind, device_description, description);
  device.kind.assign(kind.device_kind, kind.device_kind_size);
  device.local_hardware_id = CUXLA_PJRT_QUERY(api, PJRT_Device_LocalHardwareId, device, handle).local_hardware_id;
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
  CpuThreadsForPartitions(Platform platform, const ClientOptions& options) {
    constexpr int64_t kPluginDefaultDevices = 4;
    const int64_t devices = options.device_count.value_or(kPluginDefaultDevices);
    if (platform != Platform::kCpu || devices <= 1) return;
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

std::shared_ptr<Client> Client::Create(std::shared_ptr<const pjrt::Plugin> plugin,
                                       const std::string& platform,
                                       const ClientOptions& options) {
  return CreateResolved(std::move(plugin), platform, pjrt::ResolveOptions(platform, options));
}

std::shared_ptr<Client> Client::Create(const std::string& plugin_path, const std::string& platform,
                                       const ClientOptions& options) {
  ClientOptions resolved = pjrt::ResolveOptions(platform, options);
  return CreateResolved(pjrt::Plugin::Load(plugin_path), platform, std::move(resolved));
}

std::shared_ptr<Client> Client::CreateResolved(std::shared_ptr<const pjrt::Plugin> plugin,
                                               const std::string& platform,
                                               ClientOptions resolved) {
  const Platform kind = PlatformOf(platform);
  const std::vector<PJRT_NamedValue> named = pjrt::CreateOptions(kind, resolved);

  const pjrt::Api& api = plugin->api();
  auto args = CUXLA_PJRT_ARGS(PJRT_Client_Create_Args);
  args.create_options = named.data();
  args.num_options = named.size();
  if (resolved.kv_store != nullptr) pjrt::SetKeyValueCallbacks(args, *resolved.kv_store);
  {
    const CpuThreadsForPartitions threads(kind, resolved);
    try {
      CUXLA_PJRT_CALL(api, PJRT_Client_Create, &args);
    } catch (const Error& e) {
      // The CUDA plugin's words for "no GPU" differ between versions; the driver's device count does not.
      const cuda::DriverStatus& driver = cuda::Driver();
      if (kind != Platform::kCuda || driver.device_count > 0) throw;
      throw Error(ErrorKind::kNoDevice, "no CUDA device here (" +
                                            (driver.available ? std::string("the driver sees none") : driver.why_not) +
                                            "): " + e.what());
    }
  }

  auto state = std::make_shared<ClientState>();
  state->plugin = std::move(plugin);
  state->kv_store = resolved.kv_store;
  state->client = pjrt::ClientPtr(args.client, pjrt::ClientDestroy{&state->api()});
  state->programs = pjrt::MakeInternalPrograms(*state);

  const auto name_args = CUXLA_PJRT_QUERY(api, PJRT_Client_PlatformName, client, args.client);
  state->platform_name.assign(name_args.platform_name, name_args.platform_name_size);
  if (state->platform_name != platform)
    throw Error(ErrorKind::kValue, "PJRT plugin " + api.plugin_path() + " makes '" + state->platform_name +
                                       "' clients, not '" + platform + "'");
  state->platform = kind;

  const auto dev_args = CUXLA_PJRT_QUERY(api, PJRT_Client_AddressableDevices, client, args.client);
  for (size_t i = 0; i < dev_args.num_addressable_devices; ++i)
    state->devices.push_back(DescribeDevice(api, dev_args.addressable_devices[i], *state));
  if (state->devices.empty())
    throw Error(ErrorKind::kNoDevice, "the " + platform + " client has no addressable device");
  state->global_device_count = CUXLA_PJRT_QUERY(api, PJRT_Client_Devices, client, args.client).num_devices;
  return std::make_shared<Client>(std::move(state), std::move(resolved));
}

std::string Client::platform_version() const {
  const auto args = CUXLA_PJRT_QUERY(state_->api(), PJRT_Client_PlatformVersion, client, state_->client.get());
  return std::string(args.platform_version, args.platform_version_size);
}

const Device& Client::device(int id) const {
  for (const Device& device : state_->devices)
    if (device.id == id) return device;
  throw Error(ErrorKind::kValue, "no " + platform_name() + " device with id " + std::to_string(id) +
                                     " (this client has " + std::to_string(devices().size()) + ")");
}

std::optional<MemoryStats> Client::MemoryStatsOf(const ClientState& state, const Device& device) {
  const pjrt::Api& api = state.api();
  if (!api.Has(&PJRT_Api::PJRT_Device_MemoryStats)) return std::nullopt;
  PJRT_Device_MemoryStats_Args args{};
  try {
    args = CUXLA_PJRT_QUERY(api, PJRT_Device_MemoryStats, device, device.handle);
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
