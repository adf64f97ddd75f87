// python/bindings/producer_deleters.cc — the queue of producers' deleters waiting for the GIL.
#include "producer_deleters.h"

#include <Python.h>

#include <atomic>
#include <cstddef>
#include <mutex>
#include <new>
#include <utility>

namespace cuxla::bindings {
namespace {

// A producer's deleter still to run, queued without allocating: the node
// lives in the wrapper that carried the tensor (GilDeleterTensor).
struct QueuedDeleter {
  QueuedDeleter* next = nullptr;
  void (*run)(QueuedDeleter* self) noexcept = nullptr;  // runs the producer's deleter, frees the wrapper
};

class DeleterQueue {
 public:
  void Push(QueuedDeleter* deleter) noexcept {
    bool schedule = false;
    {
      std::lock_guard lock(mutex_);
      deleter->next = nullptr;
      (last_ != nullptr ? last_->next : first_) = deleter;
      last_ = deleter;
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
    QueuedDeleter* batch = nullptr;
    {
      std::lock_guard lock(mutex_);
      batch = std::exchange(first_, nullptr);
      last_ = nullptr;
      nonempty_.store(false, std::memory_order_relaxed);
    }
    while (batch != nullptr) {
      QueuedDeleter* next = batch->next;  // read first: run frees the node
      batch->run(batch);
      batch = next;
    }
  }

 private:
  static int FromPendingCall(void* self) noexcept {
    auto* queue = static_cast<DeleterQueue*>(self);
    {
      std::lock_guard lock(queue->mutex_);
      queue->scheduled_ = false;
    }
    queue->RunAll();
    return 0;
  }

  std::mutex mutex_;
  QueuedDeleter* first_ = nullptr;  // in the order queued
  QueuedDeleter* last_ = nullptr;
  std::atomic<bool> nonempty_{false};
  bool scheduled_ = false;  // a pending call is registered and has not run yet
};

// Never destroyed: PJRT's threads may release tensors while the process exits.
DeleterQueue& Queue() {
  static auto* queue = new DeleterQueue();
  return *queue;
}

// The tensor cuxla imports: the producer's, field for field, but for the
// deleter, which runs the producer's (and frees this wrapper) at once with
// the GIL held, and otherwise queues it. Once the interpreter is gone
// nothing runs: the tensor stays queued and its memory goes with the process.
template <class Managed>
struct GilDeleterTensor {
  Managed tensor;
  Managed* producer;
  QueuedDeleter queued;

  static void Delete(Managed* self) noexcept {
    auto* wrapper = reinterpret_cast<GilDeleterTensor*>(self);
    if (Py_IsInitialized() && PyGILState_Check()) {
      Finish(wrapper);
      return;
    }
    Queue().Push(&wrapper->queued);
  }

  static void RunQueued(QueuedDeleter* queued) noexcept {
    Finish(reinterpret_cast<GilDeleterTensor*>(reinterpret_cast<char*>(queued) - offsetof(GilDeleterTensor, queued)));
  }

  static void Finish(GilDeleterTensor* wrapper) noexcept {
    Managed* producer = wrapper->producer;
    delete wrapper;
    if (producer->deleter != nullptr) producer->deleter(producer);
  }
};
static_assert(offsetof(GilDeleterTensor<DLManagedTensorVersioned>, tensor) == 0);
static_assert(offsetof(GilDeleterTensor<DLManagedTensor>, tensor) == 0);

// The GilDeleterTensor of `tensor`, as the tensor XLA is given. Called with
// the GIL held (an import takes the producer's tensor with it).
template <class Managed>
Managed* MakeGilDeleterTensor(Managed* tensor) {
  if (tensor == nullptr) return nullptr;
  auto* wrapper = new (std::nothrow) GilDeleterTensor<Managed>{*tensor, tensor, {}};
  if (wrapper == nullptr) {
    if (tensor->deleter != nullptr) tensor->deleter(tensor);
    throw std::bad_alloc();
  }
  wrapper->tensor.manager_ctx = nullptr;
  wrapper->tensor.deleter = &GilDeleterTensor<Managed>::Delete;
  wrapper->queued.run = &GilDeleterTensor<Managed>::RunQueued;
  return &wrapper->tensor;
}

}  // namespace

DLManagedTensorVersioned* WithGilDeleter(DLManagedTensorVersioned* tensor) { return MakeGilDeleterTensor(tensor); }
DLManagedTensor* WithGilDeleter(DLManagedTensor* tensor) { return MakeGilDeleterTensor(tensor); }

void RunQueuedDeleters() { Queue().RunAll(); }

}  // namespace cuxla::bindings
