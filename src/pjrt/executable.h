// pjrt/executable.h — a compiled XLA program loaded on one device or as the
// partitions of an SPMD program on several, and its execution on Arrays.
#pragma once

#include <memory>
#include <mutex>
#include <optional>
#include <span>
#include <string>
#include <string_view>
#include <unordered_map>
#include <variant>
#include <vector>

#include "pjrt/api.h"
#include "pjrt/array.h"
#include "pjrt/client_state.h"
#include "pjrt/program_shape.h"

namespace cuxla {

class Executable {
 public:
  // Compiles StableHLO (MLIR text or bytecode) for one replica and one
  // partition on `device`. A program the plugin rejects raises an Error
  // carrying the compiler's message, of the kind its PJRT error code maps to.
  static std::shared_ptr<const Executable> Compile(std::shared_ptr<const ClientState> state,
                                                   std::string_view program, const Device& device);
  // Compiles StableHLO for one partition per device of `devices` (partition
  // i on devices[i]): an SPMD program, which XLA partitions as its sharding
  // annotations say, with XLA's own collectives between the partitions.
  static std::shared_ptr<const Executable> Compile(std::shared_ptr<const ClientState> state,
                                                   std::string_view program,
                                                   std::span<const Device* const> devices);

  // The arguments of one execution, checked and held: what Run needs, and
  // nothing it reads from the Arrays themselves, so that an Array deleted
  // meanwhile (another thread, without the GIL) cannot pull a buffer away.
  struct Call {
    // Per partition, per argument: its buffer, or (an argument in another
    // layout than row-major) the Array that Run copies row-major first.
    std::vector<std::vector<std::variant<std::shared_ptr<PJRT_Buffer>, Array>>> args;
    std::shared_ptr<const ClientState> owner;  // the arguments' client
  };

  // Checks the arguments of each partition (partition i's all on device i,
  // matching the program's parameters in number, dtype and shape — for an
  // SPMD program, a tile's shape; ValueError-kind Error otherwise) and holds
  // their buffers. Host work only: it never waits on the device, so a caller
  // may hold a lock (Python's GIL) that PJRT's own threads need.
  Call PreparePartitions(std::span<const std::vector<const Array*>> args) const;
  // Runs on a prepared call (a view in another layout than row-major is
  // first copied into row-major on the device) and returns each partition's
  // outputs, which become ready asynchronously. May wait for the device
  // (PJRT bounds the computations in flight): call it without the GIL.
  std::vector<std::vector<Array>> RunPartitions(const Call& call) const;
  // The same for a program of one partition.
  Call Prepare(std::span<const Array* const> args) const;
  std::vector<Array> Run(const Call& call) const;
  std::vector<Array> Execute(std::span<const Array* const> args) const;

  // XLA's device memory for one execution, as its compiler planned it.
  struct MemorySizes {
    int64_t arguments = 0;
    int64_t outputs = 0;
    int64_t aliased = 0;  // of the arguments, those reused as outputs
    int64_t scratch = 0;  // XLA's temporaries, allocated for the execution
    int64_t code = 0;
  };
  // nullopt where the plugin has no such entry or answers it with an error.
  std::optional<MemorySizes> memory_sizes() const;

  const std::string& name() const noexcept { return name_; }
  size_t num_outputs() const noexcept { return num_outputs_; }
  size_t num_partitions() const noexcept { return devices_.size(); }
  const Device& device() const noexcept { return *devices_.front(); }  // partition 0's
  const std::vector<const Device*>& devices() const noexcept { return devices_; }
  const std::vector<pjrt::HloShape>& parameters() const noexcept { return shape_.parameters; }
  const std::vector<pjrt::HloShape>& results() const noexcept { return shape_.results; }
  // How each parameter and result is split over the partitions (whole, with one).
  const std::vector<std::optional<Sharding>>& parameter_shardings() const noexcept {
    return shape_.parameter_shardings;
  }
  const std::vector<std::optional<Sharding>>& result_shardings() const noexcept { return shape_.result_shardings; }
  const std::shared_ptr<const ClientState>& state() const noexcept { return state_; }

  Executable(std::shared_ptr<const ClientState> state, pjrt::LoadedExecutablePtr loaded,
             std::vector<const Device*> devices);

 private:
  std::shared_ptr<const ClientState> state_;  // declared first: destroyed last
  pjrt::LoadedExecutablePtr loaded_;
  std::vector<const Device*> devices_;  // partition i runs on devices_[i]
  std::string name_;
  size_t num_outputs_ = 0;
  pjrt::ProgramShape shape_;
};

namespace pjrt {

// Executables by devices and program text, compiled on first use; with a
// capacity, emptied when full (executables in use live on through their
// shared_ptrs). Compiles run outside the lock, so that threads compile
// different programs at once; two threads asking for the same new program
// at once both compile it and get the first one stored.
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
    {
      std::lock_guard<std::mutex> lock(mutex_);
      auto it = entries_.find(key);
      if (it != entries_.end()) return it->second;
    }
    std::shared_ptr<const Executable> executable = compile();
    std::lock_guard<std::mutex> lock(mutex_);
    if (auto it = entries_.find(key); it != entries_.end()) return it->second;
    if (capacity_ != 0 && entries_.size() >= capacity_) entries_.clear();
    entries_.emplace(std::move(key), executable);
    return executable;
  }

 private:
  size_t capacity_;  // 0: unbounded
  std::mutex mutex_;
  std::unordered_map<std::string, std::shared_ptr<const Executable>> entries_;
};

}  // namespace pjrt
}  // namespace cuxla
