#include "pjrt/programs/internal_programs.h"

#include <deque>
#include <mutex>
#include <utility>

#include "pjrt/executable.h"
#include "pjrt/programs/compute_stream.h"
#include "pjrt/programs/strided_copy.h"

namespace cuxla::pjrt {
namespace {

class ClientPrograms final : public InternalPrograms {
 public:
  explicit ClientPrograms(const ClientState& state) : state_(state) {}

  std::shared_ptr<const Executable> Compiled(std::string_view program, const Device& device) const override {
    const Device* devices[] = {&device};
    return compiled_.Get(program, devices, [&] {
      // Non-owning: a shared_ptr with no control block, pointing at the state.
      std::shared_ptr<const ClientState> state(std::shared_ptr<const ClientState>(), &state_);
      return Executable::Compile(std::move(state), program, device);
    });
  }

  Array RowMajor(const Array& array) const override { return pjrt::RowMajor(array); }

  const ComputeStream& compute_stream(const Device& device) const override {
    std::lock_guard<std::mutex> lock(streams_mutex_);
    for (const auto& [known, stream] : streams_)
      if (known == &device) return stream;
    return streams_.emplace_back(&device, ProbeComputeStream(state_, device)).second;
  }

 private:
  const ClientState& state_;  // owns this
  // Keyed by shapes and strides, so a process importing many kinds of
  // strided tensors makes many: bounded.
  mutable ExecutableCache compiled_{256};
  mutable std::mutex streams_mutex_;
  mutable std::deque<std::pair<const Device*, ComputeStream>> streams_;  // references stay valid
};

}  // namespace

std::unique_ptr<const InternalPrograms> MakeInternalPrograms(const ClientState& state) {
  return std::make_unique<const ClientPrograms>(state);
}

}  // namespace cuxla::pjrt
