#include "producer_deleters.h"

#include <Python.h>

#include <atomic>
#include <cstddef>
#include <mutex>
#include <new>
#include <utility>
#include <vector>

namespace cuxla::bindings {
namespace {

// A producer's tensor whose deleter is still to run.
struct QueuedDeleter {
  void* tensor;
  void (*run)(void* tensor) noexcept;
};

template <class Managed>
void RunDeleter(void* tensor) noexcept {
  auto* managed = static_cast<Managed*>(tensor);
  managed->deleter(managed);
}

class DeleterQueue {
 public:
  void Push(QueuedDeleter deleter) noexcept {
    bool schedule = false;
    {
      std::lock_guard lock(mutex_);
      queued_.push_back(deleter);
      nonempty_.store(true, std::memory_order_release);
      schedule = !std::exchange(scheduled_, true);
    }
    // At most one pending call registered at a time; if Python refuses one
    // (its queue is full), the next import runs the queue. Once the
    // interpreter is gone there is none to ask (and nothing will run).
    if (schedule && (!Py_IsInitialized() || Py_AddPendingCall(&FromPendingCall, this) != 0)) {
      std::lock_guard lock(mutex_);
      scheduled_ = false;
    }
  }

  void RunAll() noexcept {
    if (!nonempty_.load(std::memory_order_acquire)) return;
    std::vector<QueuedDeleter> batch;
    {
      std::lock_guard lock(mutex_);
      batch.swap(queued_);
      nonempty_.store(false, std::memory_order_relaxed);
    }
    for (const QueuedDeleter& d : batch) d.run(d.tensor);
  }

 private:
  static int FromPendingCall(void* self) {
    auto* queue = static_cast<DeleterQueue*>(self);
    {
      std::lock_guard lock(queue->mutex_);
      queue->scheduled_ = false;
    }
    queue->RunAll();
    return 0;
  }

  std::mutex mutex_;
  std::vector<QueuedDeleter> queued_;
  std::atomic<bool> nonempty_{false};
  bool scheduled_ = false;  // a pending call is registered and has not run yet
};

// Never destroyed: PJRT's threads may release tensors while the process exits.
DeleterQueue& Queue() {
  static auto* queue = new DeleterQueue();
  return *queue;
}

// Once the interpreter is gone nothing runs: the tensor stays queued and
// its memory goes with the process.
template <class Managed>
void RunOrQueue(Managed* tensor) noexcept {
  if (tensor->deleter == nullptr) return;
  if (Py_IsInitialized() && PyGILState_Check()) {
    tensor->deleter(tensor);
    return;
  }
  Queue().Push({tensor, &RunDeleter<Managed>});
}

// The tensor cuxla imports: the producer's, field for field, but for the
// deleter, which frees this wrapper and runs (or queues) the producer's.
template <class Managed>
struct GilDeleterTensor {
  Managed tensor;
  Managed* producer;

  static void Delete(Managed* self) noexcept {
    auto* wrapper = reinterpret_cast<GilDeleterTensor*>(self);
    Managed* producer = wrapper->producer;
    delete wrapper;
    RunOrQueue(producer);
  }
};
static_assert(offsetof(GilDeleterTensor<DLManagedTensorVersioned>, tensor) == 0);
static_assert(offsetof(GilDeleterTensor<DLManagedTensor>, tensor) == 0);

template <class Managed>
Managed* Wrap(Managed* tensor) {
  if (tensor == nullptr) return nullptr;
  auto* wrapper = new (std::nothrow) GilDeleterTensor<Managed>{*tensor, tensor};
  if (wrapper == nullptr) {
    RunOrQueue(tensor);
    throw std::bad_alloc();
  }
  wrapper->tensor.manager_ctx = nullptr;
  wrapper->tensor.deleter = &GilDeleterTensor<Managed>::Delete;
  return &wrapper->tensor;
}

}  // namespace

DLManagedTensorVersioned* WithGilDeleter(DLManagedTensorVersioned* tensor) { return Wrap(tensor); }
DLManagedTensor* WithGilDeleter(DLManagedTensor* tensor) { return Wrap(tensor); }

void RunQueuedDeleters() { Queue().RunAll(); }

}  // namespace cuxla::bindings
