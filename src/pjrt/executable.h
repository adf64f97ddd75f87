// pjrt/executable.h — a compiled XLA program loaded on one device, and its
// execution on Arrays.
#pragma once

#include <memory>
#include <span>
#include <string>
#include <string_view>
#include <vector>

#include "pjrt/api.h"
#include "pjrt/client.h"
#include "pjrt/program_shape.h"

namespace cuxla {

class Array;

class Executable {
 public:
  // Compiles StableHLO (MLIR text or bytecode) for one replica and one
  // partition on `device`. A program the plugin rejects raises an Error
  // carrying the compiler's message, of the kind its PJRT error code maps to.
  static std::shared_ptr<const Executable> Compile(std::shared_ptr<const ClientState> state,
                                                   std::string_view program, const Device& device);

  // The arguments of one execution, checked and held: what Run needs, and
  // nothing it reads from the Arrays themselves, so that an Array deleted
  // meanwhile (another thread, without the GIL) cannot pull a buffer away.
  struct Call {
    std::vector<std::shared_ptr<PJRT_Buffer>> buffers;
    std::shared_ptr<const ClientState> owner;  // the arguments' client
  };

  // Checks `args` (all on this executable's device, matching the program's
  // parameters in number, dtype and shape; ValueError-kind Error otherwise)
  // and holds their buffers; a view in another layout than row-major is
  // copied into row-major on the device first.
  Call Prepare(std::span<const Array* const> args) const;
  // Runs on a prepared call and returns the outputs, which become ready
  // asynchronously.
  std::vector<Array> Run(const Call& call) const;
  std::vector<Array> Execute(std::span<const Array* const> args) const;

  const std::string& name() const noexcept { return name_; }
  size_t num_outputs() const noexcept { return num_outputs_; }
  const Device& device() const noexcept { return *device_; }
  const std::vector<pjrt::HloShape>& parameters() const noexcept { return shape_.parameters; }
  const std::vector<pjrt::HloShape>& results() const noexcept { return shape_.results; }
  const std::shared_ptr<const ClientState>& state() const noexcept { return state_; }

  Executable(std::shared_ptr<const ClientState> state, pjrt::LoadedExecutablePtr loaded,
             const Device& device);

 private:
  std::shared_ptr<const ClientState> state_;  // declared first: destroyed last
  pjrt::LoadedExecutablePtr loaded_;
  const Device* device_;
  std::string name_;
  size_t num_outputs_ = 0;
  pjrt::ProgramShape shape_;
};

}  // namespace cuxla
