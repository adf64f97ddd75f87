// pjrt/client.h — a PJRT client: its creation options, host -> device
// copies and compiled executables (cached by program and device).
#pragma once

#include <cstdint>
#include <memory>
#include <optional>
#include <span>
#include <string>
#include <string_view>
#include <vector>

#include "pjrt/array.h"
#include "pjrt/client_state.h"
#include "pjrt/executable.h"
#include "pjrt/key_value_store.h"
#include "pjrt/plugin.h"

namespace cuxla {

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

struct MemoryStats {
  int64_t bytes_in_use = 0;
  std::optional<int64_t> peak_bytes_in_use;
  std::optional<int64_t> bytes_limit;
  std::optional<int64_t> pool_bytes;
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
