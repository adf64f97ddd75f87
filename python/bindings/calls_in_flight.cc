#include "calls_in_flight.h"

#include <atomic>
#include <deque>
#include <memory>
#include <mutex>
#include <utility>
#include <vector>

#include "cuda/driver.h"

namespace cuxla::bindings {
namespace {

struct CallInFlight {
  Executable::Call call;
  std::unique_ptr<cuda::StreamMarker> done;
};

class CallsInFlight {
 public:
  void Keep(Executable::Call call, int ordinal, intptr_t stream) {
    std::unique_ptr<cuda::StreamMarker> marker;
    try {
      marker = std::make_unique<cuda::StreamMarker>(ordinal, stream);
    } catch (const Error&) {
      return;  // no marker: the arguments go now, as PJRT allows in flight
    }
    std::lock_guard lock(mutex_);
    kept_.push_back(CallInFlight{std::move(call), std::move(marker)});
    nonempty_.store(true, std::memory_order_release);
  }

  void ReleaseDone() {
    if (!nonempty_.load(std::memory_order_acquire)) return;
    std::vector<CallInFlight> released;  // destroyed out of the lock: deleters may call back into cuxla
    {
      std::lock_guard lock(mutex_);
      // In order of keeping; a stream's markers pass in that order, and
      // markers of other streams wait for the next release.
      while (!kept_.empty() && (kept_.size() > kMaxCallsInFlight || kept_.front().done->Done())) {
        released.push_back(std::move(kept_.front()));
        kept_.pop_front();
      }
      nonempty_.store(!kept_.empty(), std::memory_order_relaxed);
    }
  }

 private:
  std::mutex mutex_;
  std::deque<CallInFlight> kept_;
  std::atomic<bool> nonempty_{false};  // checked without the lock on every call and import
};

// Never destroyed: at exit, calls still kept hold their tensors for good
// rather than hand them to an interpreter being torn down.
CallsInFlight& Kept() {
  static auto* kept = new CallsInFlight();
  return *kept;
}

}  // namespace

void KeepUntilDone(Executable::Call call, int ordinal, intptr_t stream) {
  Kept().Keep(std::move(call), ordinal, stream);
}

void ReleaseDoneCalls() { Kept().ReleaseDone(); }

}  // namespace cuxla::bindings
