#include "cuda/driver.h"

#include <dlfcn.h>

#include <mutex>
#include <tuple>
#include <string>
#include <vector>

#include "base/error.h"
#include "cuda/driver_calls.h"

namespace cuxla::cuda {
namespace {

// Loads libcuda.so.1 (never closed: the driver stays for the process) and
// its entry points; empty on success, else why not.
std::string Load(Entries& e) {
  void* lib = dlopen("libcuda.so.1", RTLD_NOW | RTLD_GLOBAL);
  if (lib == nullptr) {
    const char* err = dlerror();
    return std::string("libcuda.so.1 not loadable: ") + (err ? err : "unknown error");
  }
  auto resolve = [lib](auto&... entry) {
    ((entry.fn = reinterpret_cast<decltype(entry.fn)>(dlsym(lib, entry.symbol))), ...);
  };
  std::apply(resolve, Entries::Required(e));
  std::apply(resolve, Entries::Pools(e));
  const char* missing = nullptr;  // the first required entry point not found
  std::apply([&](const auto&... entry) { ((missing = missing ? missing : entry.fn ? nullptr : entry.symbol), ...); },
             Entries::Required(e));
  if (missing != nullptr) return std::string("libcuda.so.1 lacks ") + missing;
  return {};
}

struct Loaded {
  Entries entries{};
  DriverStatus status;
};

const Loaded& Probe() noexcept {
  static const Loaded loaded = [] {
    Loaded l;
    l.status.why_not = Load(l.entries);
    if (!l.status.why_not.empty()) return l;
    if (CUresult rc = l.entries.cuInit(0); rc != 0) {
      l.status.why_not = "cuInit failed with CUresult " + std::to_string(rc);
      return l;
    }
    l.entries.cuDriverGetVersion(&l.status.version);
    if (CUresult rc = l.entries.cuDeviceGetCount(&l.status.device_count); rc != 0) {
      l.status.why_not = "cuDeviceGetCount failed with CUresult " + std::to_string(rc);
      return l;
    }
    if (l.status.device_count == 0) {
      l.status.why_not = "the CUDA driver sees no device";
      return l;
    }
    l.status.available = true;
    return l;
  }();
  return loaded;
}

// Each device's handle and primary context, retained once for the process.
struct PrimaryContexts {
  std::mutex mutex;
  std::vector<CUdevice> devices;
  std::vector<CUcontext> contexts;
};

PrimaryContexts& AllPrimaryContexts() {
  static auto* all = new PrimaryContexts;  // never destroyed: used until the process ends
  return *all;
}

// Per device: one event reused for every wait, since cuStreamWaitEvent takes
// the event's state when called, and the events of StreamMarkers gone (kept
// for the next ones).
struct DeviceSync {
  CUevent event = nullptr;
  std::vector<CUevent> spare_events;
};

// Every device's DeviceSync, under one lock. Kept out of OnDevice: a
// function template's statics are its instantiation's, one per `work` type.
struct DeviceSyncs {
  std::mutex mutex;
  std::vector<DeviceSync> devices;
};

DeviceSyncs& AllDeviceSyncs(int device_count) {
  static auto* all = [device_count] {
    auto* syncs = new DeviceSyncs;
    syncs->devices.resize(device_count);
    return syncs;
  }();
  return *all;
}

// Runs `work` with device `ordinal`'s primary context current and its
// DeviceSync, under one lock.
template <class Work>
void OnDevice(int ordinal, Work work) {
  const DeviceContext context(ordinal);
  DeviceSyncs& all = AllDeviceSyncs(Probe().status.device_count);
  std::lock_guard<std::mutex> lock(all.mutex);
  const char* failed = nullptr;
  const CUresult rc = work(context.cu, all.devices[ordinal], failed);
  if (failed != nullptr) Fail(failed, rc);
}

// Records `event` on `stream` and makes `waiter` wait for it; on failure,
// `failed` names the driver call.
CUresult RecordAndWait(const Entries& cu, CUevent event, intptr_t stream, intptr_t waiter, const char*& failed) {
  CUresult rc = cu.cuEventRecord(event, reinterpret_cast<CUstream>(stream));
  if (rc != 0) {
    failed = "cuEventRecord";
  } else if ((rc = cu.cuStreamWaitEvent(reinterpret_cast<CUstream>(waiter), event, 0)) != 0) {
    failed = "cuStreamWaitEvent";
  }
  return rc;
}

}  // namespace

const DriverStatus& Driver() noexcept { return Probe().status; }

const Entries& LoadedEntries() {
  const Loaded& loaded = Probe();
  if (!loaded.status.available)
    throw Error(ErrorKind::kRuntime, "CUDA driver unavailable: " + loaded.status.why_not);
  return loaded.entries;
}

void Fail(const char* call, CUresult rc) {
  throw Error(ErrorKind::kRuntime, std::string(call) + " failed with CUresult " + std::to_string(rc));
}

DeviceContext::DeviceContext(int ordinal) : cu(LoadedEntries()) {
  const int count = Probe().status.device_count;
  if (ordinal < 0 || ordinal >= count) throw Error(ErrorKind::kValue, "no CUDA device " + std::to_string(ordinal));
  CUcontext context = nullptr;
  {
    PrimaryContexts& all = AllPrimaryContexts();
    std::lock_guard<std::mutex> lock(all.mutex);
    all.devices.resize(count);
    all.contexts.resize(count);
    if (all.contexts[ordinal] == nullptr) {
      if (CUresult rc = cu.cuDeviceGet(&all.devices[ordinal], ordinal)) Fail("cuDeviceGet", rc);
      if (CUresult rc = cu.cuDevicePrimaryCtxRetain(&all.contexts[ordinal], all.devices[ordinal]))
        Fail("cuDevicePrimaryCtxRetain", rc);
    }
    device = all.devices[ordinal];
    context = all.contexts[ordinal];
  }
  CUcontext current = nullptr;
  cu.cuCtxGetCurrent(&current);
  if (current == context) return;
  if (CUresult rc = cu.cuCtxPushCurrent(context)) Fail("cuCtxPushCurrent", rc);
  pushed_ = true;
}

DeviceContext::~DeviceContext() {
  if (!pushed_) return;
  CUcontext popped;
  cu.cuCtxPopCurrent(&popped);
}

void StreamWaitStream(int ordinal, intptr_t waiter, intptr_t producer) {
  OnDevice(ordinal, [&](const Entries& cu, DeviceSync& sync, const char*& failed) -> CUresult {
    if (sync.event == nullptr) {
      if (CUresult rc = cu.cuEventCreate(&sync.event, kEventDisableTiming); rc != 0) {
        failed = "cuEventCreate";
        return rc;
      }
    }
    return RecordAndWait(cu, sync.event, producer, waiter, failed);
  });
}

StreamMarker::StreamMarker(int ordinal, intptr_t stream, intptr_t waiter) : ordinal_(ordinal), event_(nullptr) {
  OnDevice(ordinal, [&](const Entries& cu, DeviceSync& sync, const char*& failed) -> CUresult {
    CUevent event = nullptr;
    CUresult rc = 0;
    if (!sync.spare_events.empty()) {
      event = sync.spare_events.back();
      sync.spare_events.pop_back();
    } else if ((rc = cu.cuEventCreate(&event, kEventDisableTiming)) != 0) {
      failed = "cuEventCreate";
      return rc;
    }
    if ((rc = RecordAndWait(cu, event, stream, waiter, failed)) != 0) {
      sync.spare_events.push_back(event);
      return rc;
    }
    event_ = event;
    return rc;
  });
}

StreamMarker::~StreamMarker() {
  try {
    OnDevice(ordinal_, [&](const Entries&, DeviceSync& sync, const char*&) -> CUresult {
      sync.spare_events.push_back(static_cast<CUevent>(event_));
      return 0;
    });
  } catch (...) {
    // Nothing to report to from a destructor; the event is lost, not misused.
  }
}

void StreamMarker::MakeWait(intptr_t stream) const {
  OnDevice(ordinal_, [&](const Entries& cu, DeviceSync&, const char*& failed) -> CUresult {
    const CUresult rc = cu.cuStreamWaitEvent(reinterpret_cast<CUstream>(stream), static_cast<CUevent>(event_), 0);
    if (rc != 0) failed = "cuStreamWaitEvent";
    return rc;
  });
}

void StreamMarker::Wait() const {
  // Not under OnDevice's lock: other threads' stream work must go on meanwhile.
  if (CUresult rc = Probe().entries.cuEventSynchronize(static_cast<CUevent>(event_)); rc != 0)
    Fail("cuEventSynchronize", rc);
}

bool StreamIdle(int ordinal, intptr_t stream) {
  bool idle = false;
  OnDevice(ordinal, [&](const Entries& cu, DeviceSync&, const char*& failed) -> CUresult {
    const CUresult rc = cu.cuStreamQuery(reinterpret_cast<CUstream>(stream));
    idle = rc == 0;
    if (rc != 0 && rc != kNotReady) failed = "cuStreamQuery";
    return rc;
  });
  return idle;
}

}  // namespace cuxla::cuda
