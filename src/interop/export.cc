#include "interop/export.h"

#include <algorithm>
#include <mutex>
#include <new>
#include <unordered_map>
#include <vector>

#include "interop/dtype.h"
#include "pjrt/layout.h"

namespace cuxla::interop {
namespace {

using pjrt::CompactStrides;

// An export of XLA's own buffer not yet let go of: its Array, and its tensor
// (shape and strides in the export's own block).
struct LiveExport {
  const Array* array;
  const DLTensor* tensor;
};

// Every live export, by the address its tensor hands out. Never destroyed:
// deleters may run at exit.
struct LiveExports {
  std::mutex mutex;
  std::unordered_map<const void*, LiveExport> by_address;  // the latest export of an address
};

LiveExports& Live() {
  static auto* live = new LiveExports();
  return *live;
}

// One allocation per export: the managed tensor, the reference that keeps
// the buffer alive, the Array, then the shape and strides.
template <class Managed>
struct Exported {
  Managed managed;  // first: the deleter is handed a pointer to it
  Array::ExternalReference reference;
  Array source;

  explicit Exported(const Array& array) : managed{}, reference(array), source(array) {}

  int64_t* shape() noexcept { return reinterpret_cast<int64_t*>(this + 1); }

  static Managed* Make(const Array& array) {
    const size_t rank = array.dims().size();
    void* block = ::operator new(sizeof(Exported) + 2 * rank * sizeof(int64_t));
    Exported* exported;
    try {
      exported = new (block) Exported(array);
    } catch (...) {
      ::operator delete(block);
      throw;
    }
    int64_t* shape = exported->shape();
    int64_t* strides = shape + rank;
    const std::vector<int64_t> compact = CompactStrides(array.dims(), array.layout());
    for (size_t i = 0; i < rank; ++i) {
      shape[i] = array.dims()[i];
      strides[i] = compact[i];
    }
    DLTensor& t = exported->managed.dl_tensor;
    t.data = exported->reference.data();
    t.device = DLDeviceOf(array);
    t.ndim = static_cast<int32_t>(rank);
    t.dtype = ToDLDataType(array.dtype());
    t.shape = shape;
    t.strides = strides;
    t.byte_offset = 0;
    exported->managed.manager_ctx = exported;
    exported->managed.deleter = &Delete;
    if (!array.is_view()) {  // a view's memory is its producer's: an import of it is a view again
      LiveExports& live = Live();
      const std::lock_guard lock(live.mutex);
      live.by_address[t.data] = LiveExport{&exported->source, &t};
    }
    return &exported->managed;
  }

  // Drops the reference (the buffer may be freed now) and the block. Callable
  // from any thread, without the GIL.
  static void Delete(Managed* managed) noexcept {
    auto* exported = static_cast<Exported*>(managed->manager_ctx);
    {
      LiveExports& live = Live();
      const std::lock_guard lock(live.mutex);
      const auto it = live.by_address.find(exported->reference.data());
      if (it != live.by_address.end() && it->second.array == &exported->source) live.by_address.erase(it);
    }
    exported->~Exported();
    ::operator delete(exported);
  }
};
static_assert(sizeof(Exported<DLManagedTensorVersioned>) % alignof(int64_t) == 0);
static_assert(sizeof(Exported<DLManagedTensor>) % alignof(int64_t) == 0);

}  // namespace

DLDevice DLDeviceOf(const Device& device) {
  if (device.platform == Platform::kCuda) return DLDevice{kDLCUDA, device.local_hardware_id};
  return DLDevice{kDLCPU, 0};
}

DLDevice DLDeviceOf(const Array& array) { return DLDeviceOf(array.device()); }

void OrderConsumer(const Array& array, std::optional<intptr_t> consumer_stream) {
  if (array.device().platform != Platform::kCuda) {
    array.BlockUntilReady();  // the consumer reads host memory now
  } else if (consumer_stream) {
    array.WaitUntilReadyOnStream(*consumer_stream);
  }
}

bool SameReading(const DLTensor& a, const DLTensor& b) noexcept {
  const auto rank = static_cast<size_t>(a.ndim);
  return a.data == b.data && a.byte_offset == b.byte_offset && a.device.device_type == b.device.device_type &&
         a.device.device_id == b.device.device_id && a.dtype.code == b.dtype.code && a.dtype.bits == b.dtype.bits &&
         a.dtype.lanes == b.dtype.lanes && a.ndim == b.ndim && std::equal(a.shape, a.shape + rank, b.shape) &&
         (rank == 0 || (a.strides == nullptr && b.strides == nullptr) ||
          (a.strides != nullptr && b.strides != nullptr && std::equal(a.strides, a.strides + rank, b.strides)));
}

std::optional<Array> LiveExportOf(const DLTensor& tensor, const ClientState& state, const Device& device) {
  LiveExports& live = Live();
  const std::lock_guard lock(live.mutex);
  const auto it = live.by_address.find(tensor.data);
  if (it == live.by_address.end() || !SameReading(*it->second.tensor, tensor)) return std::nullopt;
  const Array& array = *it->second.array;
  if (array.state().get() != &state || &array.device() != &device) return std::nullopt;
  return array;
}

DLManagedTensorVersioned* ExportDLPack(const Array& array) {
  DLManagedTensorVersioned* managed = Exported<DLManagedTensorVersioned>::Make(array);
  managed->version = {DLPACK_MAJOR_VERSION, DLPACK_MINOR_VERSION};
  managed->flags = 0;
  return managed;
}

DLManagedTensor* ExportLegacyDLPack(const Array& array) {
  return Exported<DLManagedTensor>::Make(array);
}

}  // namespace cuxla::interop
