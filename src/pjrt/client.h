// pjrt/client.h — a PJRT client: its creation options, its devices, host <->
// device copies and compiled executables (cached by program and device).
#pragma once

#include <cstdint>
#include <memory>
#include <mutex>
#include <optional>
#include <span>
#include <string>
#include <string_view>
#include <unordered_map>
#include <vector>

#include "cuda/driver.h"
#include "pjrt/api.h"
#include "pjrt/compute_stream.h"
#include "pjrt/dtype.h"
#include "pjrt/key_value_store.h"
#include "pjrt/plugin.h"

namespace cuxla {

class Array;
class Executable;

// The alignment XLA needs of a buffer's address on `platform`: XLA's GPU
// entry parameters assume 16 bytes; the CPU plugin refuses views under 64.
inline size_t BufferAlignment(std::string_view platform) noexcept { return platform == "cpu" ? 64 : 16; }

// Options for a client. The memory options are a CUDA client's (README,
// "CUDA memory"): unset, they fall back to CUXLA_PREALLOCATE / CUXLA_MEM_FRACTION
// / CUXLA_ALLOCATOR, then to the defaults: no preallocation, the plugin's own
// fraction and allocator. `device_count` is a CPU client's number of
// devices (unset: CUXLA_CPU_DEVICE_COUNT, else the plugin's default);
// with several, the plugin gets twice as many threads (PJRT_NPROC, unless
// set) so that SPMD partitions waiting in collectives cannot starve it.
// `num_nodes` > 1 makes one CUDA client of several processes (one per
// node_id), which find each other through `kv_store`.
struct ClientOptions {
  std::optional<bool> preallocate;
  std::optional<double> memory_fraction;  // in (0, 1]
  std::optional<std::string> allocator;   // "platform", "bfc", "cuda_async", "default"
  std::vector<int64_t> visible_devices;   // empty: all
  std::optional<int64_t> device_count;    // CPU only, >= 1
  int64_t node_id = 0;                    // this process, in [0, num_nodes)
  int64_t num_nodes = 1;
  std::shared_ptr<KeyValueStore> kv_store;  // needed when num_nodes > 1

  // These options with the environment of `platform` filled in for unset
  // fields; throws a ValueError-kind Error naming a malformed variable or value.
  ClientOptions WithEnvironment(std::string_view platform = "cuda") const;
};

struct Device {
  PJRT_Device* handle = nullptr;  // valid while the client that listed it lives
  int id = 0;                     // global id
  int local_hardware_id = -1;     // CUDA ordinal on GPUs
  std::string kind;               // "NVIDIA H200", "cpu"...
  std::string platform;           // "cuda", "cpu"
};

struct MemoryStats {
  int64_t bytes_in_use = 0;
  std::optional<int64_t> peak_bytes_in_use;
  std::optional<int64_t> bytes_limit;
  std::optional<int64_t> pool_bytes;
};

// Executables by devices and program text, compiled on first use; with a
// capacity, emptied when full (executables in use live on through their
// shared_ptrs).
class ExecutableCache {
 public:
  explicit ExecutableCache(size_t capacity = 0) : capacity_(capacity) {}
  template <class Compile>
  std::shared_ptr<const Executable> Get(std::string_view program, std::span<const Device* const> devices,
                                        Compile compile) {
    std::string key;
    for (const Device* device : devices) key += std::to_string(device->id) + ",";
    key.push_back('\0');
    key.append(program);
    std::lock_guard<std::mutex> lock(mutex_);
    auto it = entries_.find(key);
    if (it != entries_.end()) return it->second;
    if (capacity_ != 0 && entries_.size() >= capacity_) entries_.clear();
    auto executable = compile();
    entries_.emplace(std::move(key), executable);
    return executable;
  }

 private:
  size_t capacity_;  // 0: unbounded
  std::mutex mutex_;
  std::unordered_map<std::string, std::shared_ptr<const Executable>> entries_;
};

// What every object made by a client needs, shared by the client, its arrays
// and its executables so that the PJRT client is destroyed after all of them.
struct ClientState {
  std::shared_ptr<const pjrt::Plugin> plugin;  // keeps the Api alive (never unloaded)
  std::shared_ptr<KeyValueStore> kv_store;     // PJRT may call it until the client is gone
  pjrt::ClientPtr client;
  std::string platform;
  std::vector<Device> devices;  // addressable devices
  size_t global_device_count = 0;  // every process's devices

  const pjrt::Api& api() const noexcept { return plugin->api(); }
  const Device& DeviceOf(PJRT_Device* handle) const;
  size_t buffer_alignment() const noexcept { return BufferAlignment(platform); }
  // The device whose local_hardware_id is `id`; ValueError-kind Error if none.
  const Device& DeviceWithHardwareId(int id) const;
  // CUDA: an XLA stream on which externally made buffers of `device` are
  // marked ready (the PJRT stream extension; throws where the plugin has
  // none). A view given it as its ready stream is used only after the work
  // queued on it so far — at the price of PJRT's own event bookkeeping for a
  // stream not its own (its cost: docs/gpu-results.md).
  intptr_t ExternalReadyStream(const Device& device) const;
  // CUDA: the stream XLA runs `device`'s programs on, probed on first use
  // (pjrt/compute_stream.h), or why it is unknown.
  const ComputeStream& compute_stream(const Device& device) const { return compute_streams_.Get(*this, device); }
  // CUDA: orders XLA's coming use of `device` memory after the work queued so
  // far on `producer` (a CUDA stream; 1 the legacy default), on the device.
  // When the device's compute stream is known, it waits for that work, and a
  // marker of it is returned as `pending_writes` unless `only_programs_read`
  // (no other reader will need it); otherwise an external-ready stream
  // waits, returned as `ready_stream`. Views and copies of the memory are to
  // be given both (DeviceView). Both empty when the ready stream's route
  // finds `producer` with nothing left to run.
  struct ProducerOrder {
    intptr_t ready_stream = 0;
    std::shared_ptr<const cuda::StreamMarker> pending_writes;
  };
  ProducerOrder OrderAfter(const Device& device, intptr_t producer, bool only_programs_read) const;
  // Compiles, once per client and device, a program cuxla runs for itself
  // (such as a strided copy). These executables do not own this state: it
  // owns them, and their outputs belong to the arguments' client.
  std::shared_ptr<const Executable> InternalProgram(std::string_view program,
                                                    const Device& device) const;

 private:
  // Keyed by shapes and strides, so a process importing many kinds of
  // strided tensors makes many: bounded. Declared after `client`, so
  // destroyed before the PJRT client that made them.
  mutable ExecutableCache internal_programs_{256};
  ComputeStreamCache compute_streams_;
};

// Host data to copy to a device: a pointer valid for the duration of the copy.
struct HostBuffer {
  const void* data = nullptr;
  DType dtype = DType::kFloat32;
  std::vector<int64_t> dims;
  std::vector<int64_t> byte_strides;  // empty: C-contiguous
};

class Client {
 public:
  // Creates a client of `platform` ("cuda", "cpu") from `plugin`; refuses a
  // plugin whose client reports another platform, and memory options on a
  // platform other than CUDA.
  static std::shared_ptr<Client> Create(std::shared_ptr<const pjrt::Plugin> plugin,
                                        const std::string& platform,
                                        const ClientOptions& options);
  // The same from a plugin path; the options are checked before it is loaded.
  static std::shared_ptr<Client> Create(const std::string& plugin_path,
                                        const std::string& platform,
                                        const ClientOptions& options);

  const std::string& platform() const noexcept { return state_->platform; }
  std::string platform_version() const;
  const std::vector<Device>& devices() const noexcept { return state_->devices; }
  const Device& device(int id) const;  // by global id; ValueError if absent
  const pjrt::Plugin& plugin() const noexcept { return *state_->plugin; }
  const ClientOptions& options() const noexcept { return options_; }
  // nullopt when the plugin does not report memory statistics.
  std::optional<MemoryStats> memory_stats(const Device& device) const;

  Array FromHost(const HostBuffer& host, const Device& device) const;
  // Compiles StableHLO (MLIR text or bytecode) for `device`, or as an SPMD
  // program with partition i on devices[i]; the same program and devices
  // give the same Executable.
  std::shared_ptr<const Executable> Compile(std::string_view program, const Device& device);
  std::shared_ptr<const Executable> Compile(std::string_view program, std::span<const Device* const> devices);

  const std::shared_ptr<const ClientState>& state() const noexcept { return state_; }

  Client(std::shared_ptr<const ClientState> state, ClientOptions options)
      : state_(std::move(state)), options_(std::move(options)) {}

 private:
  // `options` already resolved by ResolveOptions.
  static std::shared_ptr<Client> CreateResolved(std::shared_ptr<const pjrt::Plugin> plugin,
                                                const std::string& platform,
                                                ClientOptions options);
  // Validates `options` for `platform` and fills CUDA's from the environment.
  static ClientOptions ResolveOptions(const std::string& platform, const ClientOptions& options);

  std::shared_ptr<const ClientState> state_;
  ClientOptions options_;
  ExecutableCache cache_;
};

}  // namespace cuxla
