// tests/fuzz/import_fuzzer.cc — libFuzzer harness over the DLPack import
// path on the CPU plugin: arbitrary versions, ranks, shapes, strides, dtypes,
// devices, offsets, flags and copy policies. Every input must give an Array
// or a cuxla::Error — never a crash, a leak or a second call of the deleter.
#include <fuzzer/FuzzedDataProvider.h>

#include <atomic>
#include <chrono>
#include <cstdint>
#include <cstdlib>
#include <memory>
#include <sstream>
#include <string>
#include <thread>
#include <vector>

#include "cuxla/cuxla.h"

namespace {

using cuxla::CopyPolicy;

// The memory every tensor points into: a producer never describes memory it
// does not have, so the harness keeps tensors that would reach outside it
// away from cuxla (see Reach).
constexpr size_t kArena = 1 << 16;
alignas(64) unsigned char arena[kArena];

// Never destroyed: at exit, the plugin's own statics (LLVM's JIT registry)
// may already be gone, and destroying its executables then would crash.
std::shared_ptr<cuxla::Client>& client = *new std::shared_ptr<cuxla::Client>();

struct Counted {
  DLManagedTensorVersioned managed{};
  std::vector<int64_t> shape, strides;
  std::atomic<int>* deletions;
};

void Delete(DLManagedTensorVersioned* self) {
  auto* counted = static_cast<Counted*>(self->manager_ctx);
  counted->deletions->fetch_add(1);
  delete counted;
}

enum class Memory { kInside, kOutside, kRefusedAnyway };

// Whether the tensor stays inside the arena. Descriptions too large for 64
// bits are passed on: cuxla must refuse them without touching memory.
Memory Where(const DLTensor& t) {
  if (t.ndim < 0 || (t.ndim > 0 && t.shape == nullptr)) return Memory::kRefusedAnyway;
  int64_t elements = 1, high = 0;
  for (int i = 0; i < t.ndim; ++i) {
    if (t.shape[i] < 0) return Memory::kRefusedAnyway;
    if (t.shape[i] == 0) return Memory::kInside;  // empty: nothing touched
    if (__builtin_mul_overflow(elements, t.shape[i], &elements)) return Memory::kRefusedAnyway;
    if (t.strides == nullptr) continue;
    int64_t reach;
    if (__builtin_mul_overflow(t.shape[i] - 1, t.strides[i], &reach)) return Memory::kRefusedAnyway;
    if (reach < 0) return Memory::kOutside;  // reaches before the data: outside the arena
    if (__builtin_add_overflow(high, reach, &high)) return Memory::kRefusedAnyway;
  }
  if (t.strides == nullptr) high = elements - 1;
  const int64_t item = 16;  // the widest element
  int64_t span, bytes;
  if (__builtin_add_overflow(high, 1, &span) || __builtin_mul_overflow(span, item, &bytes))
    return Memory::kRefusedAnyway;
  return static_cast<uint64_t>(bytes) + t.byte_offset <= kArena ? Memory::kInside : Memory::kOutside;
}

}  // namespace

extern "C" int LLVMFuzzerInitialize(int*, char***) {
  std::vector<std::string> dirs;
  std::stringstream paths(std::getenv("CUXLA_PACKAGE_DIRS") ? std::getenv("CUXLA_PACKAGE_DIRS") : "");
  for (std::string dir; std::getline(paths, dir, ':');) dirs.push_back(dir);
  const auto choice = cuxla::ChoosePlugin("cpu", "", dirs);
  client = cuxla::Client::Create(cuxla::Plugin::Load(choice.path), "cpu", {});
  for (size_t i = 0; i < kArena; ++i) arena[i] = static_cast<unsigned char>(i * 131);
  return 0;
}

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  FuzzedDataProvider in(data, size);
  std::atomic<int> deletions{0};
  auto* counted = new Counted;
  counted->deletions = &deletions;
  DLManagedTensorVersioned& m = counted->managed;
  m.version.major = in.ConsumeBool() ? DLPACK_MAJOR_VERSION : in.ConsumeIntegral<uint32_t>();
  m.version.minor = in.ConsumeIntegral<uint32_t>();
  m.flags = in.ConsumeIntegral<uint64_t>();
  m.manager_ctx = counted;
  m.deleter = &Delete;
  DLTensor& t = m.dl_tensor;
  t.ndim = in.ConsumeIntegralInRange<int32_t>(-2, 6);
  for (int i = 0; i < std::max(t.ndim, 0); ++i)
    counted->shape.push_back(in.ConsumeBool() ? in.ConsumeIntegralInRange<int64_t>(-1, 9)
                                              : in.ConsumeIntegral<int64_t>());
  t.shape = in.ConsumeIntegralInRange(0, 15) == 0 ? nullptr : counted->shape.data();
  if (in.ConsumeBool()) {
    for (int i = 0; i < std::max(t.ndim, 0); ++i)
      counted->strides.push_back(in.ConsumeBool() ? in.ConsumeIntegralInRange<int64_t>(-4, 64)
                                                  : in.ConsumeIntegral<int64_t>());
    t.strides = counted->strides.data();
  }
  t.dtype.code = in.ConsumeIntegralInRange<uint8_t>(0, 18);
  t.dtype.bits = in.PickValueInArray<uint8_t>({1, 4, 8, 16, 32, 64, 128, 255});
  t.dtype.lanes = in.ConsumeBool() ? 1 : in.ConsumeIntegral<uint16_t>();
  t.device.device_type = in.ConsumeBool() ? kDLCPU : static_cast<DLDeviceType>(in.ConsumeIntegralInRange(0, 20));
  t.device.device_id = in.ConsumeBool() ? 0 : in.ConsumeIntegral<int32_t>();
  t.byte_offset = in.ConsumeIntegralInRange<uint64_t>(0, 256);
  t.data = in.ConsumeIntegralInRange(0, 31) == 0 ? nullptr : arena;
  const CopyPolicy copy = in.PickValueInArray({CopyPolicy::kIfNeeded, CopyPolicy::kNever, CopyPolicy::kAlways});

  if (t.data != nullptr && Where(t) == Memory::kOutside) {
    Delete(&m);  // a producer lying about its memory: outside the contract
    return 0;
  }
  try {
    cuxla::ImportOptions options;
    options.copy = copy;
    cuxla::Array array = cuxla::ImportDLPack(client->state(), &m, options);
    if (array.size() > 0 && array.nbytes() < (1 << 20)) {
      std::vector<unsigned char> host(static_cast<size_t>(array.nbytes()));
      array.CopyToHost(host.data(), host.size());
    }
    array.BlockUntilReady();
  } catch (const cuxla::Error&) {
    // Refused, with a message: what bad input must get.
  }
  // PJRT releases a view once it is destroyed and its computations are done,
  // possibly on one of its own threads a little later.
  const auto deadline = std::chrono::steady_clock::now() + std::chrono::seconds(10);
  while (deletions.load() == 0 && std::chrono::steady_clock::now() < deadline)
    std::this_thread::sleep_for(std::chrono::microseconds(10));
  if (deletions.load() != 1) __builtin_trap();  // released never, or twice
  return 0;
}
