#include "pjrt/stream_order.h"

#include "pjrt/client_state.h"

namespace cuxla::pjrt {

ReadOrder OrderAfterProducer(const ClientState& state, const Device& device, intptr_t producer,
                             bool only_programs_read) {
  const int ordinal = device.local_hardware_id;
  if (const intptr_t compute = state.compute_stream(device).stream; compute != 0) {
    if (only_programs_read) {
      cuda::StreamWaitStream(ordinal, compute, producer);
      return {};
    }
    return {0, std::make_shared<const cuda::StreamMarker>(ordinal, producer, compute)};
  }
  // Asking whether the producer is idle costs less than the ready stream's
  // bookkeeping (docs/gpu-results.md); on the compute stream's route an event
  // and a wait cost what asking would.
  if (cuda::StreamIdle(ordinal, producer)) return {};
  const intptr_t ready = state.ExternalReadyStream(device);
  cuda::StreamWaitStream(ordinal, ready, producer);
  return {ready, nullptr};
}

std::optional<ImportOrder> ExecutionImports::Earlier(int device_id) const {
  if (device_id != device_id_) return std::nullopt;
  return ImportOrder{{ready_stream_, nullptr}, true};
}

ImportOrder ExecutionImports::First(const ClientState& state, const Device& device, intptr_t producer) {
  ImportOrder order{OrderAfterProducer(state, device, producer, /*only_programs_read=*/true), false};
  device_id_ = device.local_hardware_id;
  ready_stream_ = order.read.ready_stream;
  return order;
}

}  // namespace cuxla::pjrt
