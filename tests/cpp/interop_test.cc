// DLPack interop: strides <-> layouts, DLPack <-> cuxla dtypes, importing
// tensors (views, copies, refusals, and the producer's deleter called exactly
// once), exporting Arrays, and row-major copies of views.
#include <atomic>
#include <chrono>
#include <cstdint>
#include <cstring>
#include <optional>
#include <string>
#include <thread>
#include <tuple>
#include <type_traits>
#include <vector>

#include "interop/dtype.h"
#include "interop/export.h"
#include "interop/import.h"
#include "pjrt/layout.h"
#include "pjrt/programs/strided_copy.h"
#include "pjrt/text.h"
#include "test_env.h"

namespace cuxla {
namespace {

using interop::CopyPolicy;
using pjrt::AddressText;
using pjrt::CompactStrides;
using pjrt::MinorToMajor;
using pjrt::RowMajor;
using pjrt::TupleText;
using test::Contains;
using test::Download;
using test::TestClient;
using test::TestPlatform;
using test::ThrownError;
using test::UploadFloats;

using Ints = std::vector<int64_t>;

constexpr const char* kNeedsHostMemory =
    "builds tensors over host memory, which only the cpu plugin can view; the GPU path is "
    "covered by the Python tests with torch";

bool DeviceMemoryIsHostMemory() { return TestPlatform() == "cpu"; }

uintptr_t Address(const void* pointer) { return reinterpret_cast<uintptr_t>(pointer); }

std::tuple<int, int, int> Fields(DLDataType type) { return {type.code, type.bits, type.lanes}; }

// ---------------------------------------------------------------- layouts

TEST(LayoutTest, RowMajorStridesGiveTheRowMajorLayout) {
  EXPECT_EQ(MinorToMajor(Ints{2, 3, 4}, Ints{12, 4, 1}), (Ints{2, 1, 0}));
}

TEST(LayoutTest, NoStridesMeanRowMajor) {
  EXPECT_EQ(MinorToMajor(Ints{2, 3, 4}, Ints{}), (Ints{2, 1, 0}));
  EXPECT_EQ(MinorToMajor(Ints{}, Ints{}), Ints{});
}

TEST(LayoutTest, TransposedMatrixIsColumnMajor) {
  EXPECT_EQ(MinorToMajor(Ints{3, 2}, Ints{1, 3}), (Ints{0, 1}));
}

TEST(LayoutTest, PermutedTensorGivesThePermutation) {
  // A row-major (2, 3, 4) tensor permuted (2, 0, 1): dims (4, 2, 3).
  EXPECT_EQ(MinorToMajor(Ints{4, 2, 3}, Ints{1, 12, 4}), (Ints{0, 2, 1}));
}

TEST(LayoutTest, ChannelsLastNchwIsMinorInChannels) {
  // N=2, C=3, H=4, W=5 stored as NHWC.
  EXPECT_EQ(MinorToMajor(Ints{2, 3, 4, 5}, Ints{60, 1, 15, 3}), (Ints{1, 3, 2, 0}));
}

TEST(LayoutTest, SizeOneDimsWithAnyStrideStayRowMajor) {
  EXPECT_EQ(MinorToMajor(Ints{2, 1, 3}, Ints{3, 999, 1}), (Ints{2, 1, 0}));
  EXPECT_EQ(MinorToMajor(Ints{1, 4}, Ints{7, 1}), (Ints{1, 0}));
  EXPECT_EQ(MinorToMajor(Ints{1, 1}, Ints{0, -5}), (Ints{1, 0}));
}

TEST(LayoutTest, SizeZeroTensorIsRowMajorWhateverItsStrides) {
  EXPECT_EQ(MinorToMajor(Ints{0, 3}, Ints{1, 7}), (Ints{1, 0}));
  EXPECT_EQ(MinorToMajor(Ints{2, 0, 3}, Ints{0, -1, 2}), (Ints{2, 1, 0}));
}

TEST(LayoutTest, StepsHaveNoLayout) {
  EXPECT_EQ(MinorToMajor(Ints{3}, Ints{2}), std::nullopt);
  EXPECT_EQ(MinorToMajor(Ints{3, 2}, Ints{4, 2}), std::nullopt);
  EXPECT_EQ(MinorToMajor(Ints{3, 2}, Ints{4, 1}), std::nullopt);  // every other row
}

TEST(LayoutTest, BroadcastsHaveNoLayout) {
  EXPECT_EQ(MinorToMajor(Ints{3, 2}, Ints{0, 1}), std::nullopt);
  EXPECT_EQ(MinorToMajor(Ints{4}, Ints{0}), std::nullopt);
}

TEST(LayoutTest, NegativeStridesHaveNoLayout) {
  EXPECT_EQ(MinorToMajor(Ints{3}, Ints{-1}), std::nullopt);
  EXPECT_EQ(MinorToMajor(Ints{2, 3}, Ints{-3, 1}), std::nullopt);
}

TEST(LayoutTest, OverlappingStridesHaveNoLayout) {
  EXPECT_EQ(MinorToMajor(Ints{2, 2}, Ints{1, 1}), std::nullopt);
  EXPECT_EQ(MinorToMajor(Ints{2, 3}, Ints{2, 1}), std::nullopt);
}

TEST(LayoutTest, CompactStridesInvertMinorToMajor) {
  const std::vector<std::pair<Ints, Ints>> tensors = {
      {{2, 3, 4}, {12, 4, 1}},        // row-major
      {{3, 2}, {1, 3}},               // transposed
      {{4, 2, 3}, {1, 12, 4}},        // permuted (2, 0, 1)
      {{2, 3, 4, 5}, {60, 1, 15, 3}}, // channels last
  };
  for (const auto& [dims, strides] : tensors) {
    const std::optional<Ints> layout = MinorToMajor(dims, strides);
    ASSERT_TRUE(layout) << TupleText(strides);
    EXPECT_EQ(CompactStrides(dims, *layout), strides) << TupleText(strides);
  }
}

TEST(LayoutTest, TupleTextSpellsPythonTuples) {
  EXPECT_EQ(TupleText(Ints{3, 2}), "(3, 2)");
  EXPECT_EQ(TupleText(Ints{5}), "(5,)");
  EXPECT_EQ(TupleText(Ints{}), "()");
}

TEST(LayoutTest, AddressTextSpellsPythonHex) {
  EXPECT_EQ(AddressText(reinterpret_cast<const void*>(0x7f3a5c000010)), "0x7f3a5c000010");
  EXPECT_EQ(AddressText(nullptr), "0x0");
}

// ----------------------------------------------------------------- dtypes

TEST(DLDataTypeTest, EveryDTypeRoundTrips) {
  for (int code = static_cast<int>(DType::kBool); code <= static_cast<int>(DType::kFloat8E8M0FNU);
       ++code) {
    const DType dtype = static_cast<DType>(code);
    const DLDataType type = interop::ToDLDataType(dtype);
    EXPECT_EQ(type.lanes, 1) << DTypeName(dtype);
    EXPECT_EQ(type.bits, 8 * DTypeSize(dtype)) << DTypeName(dtype);
    EXPECT_EQ(interop::FromDLDataType(type), dtype) << DTypeName(dtype);
  }
}

TEST(DLDataTypeTest, TypesAreTheOnesDLPackDefines) {
  using interop::ToDLDataType;
  EXPECT_EQ(Fields(ToDLDataType(DType::kBool)), Fields({kDLBool, 8, 1}));
  EXPECT_EQ(Fields(ToDLDataType(DType::kUInt16)), Fields({kDLUInt, 16, 1}));
  EXPECT_EQ(Fields(ToDLDataType(DType::kBFloat16)), Fields({kDLBfloat, 16, 1}));
  EXPECT_EQ(Fields(ToDLDataType(DType::kFloat32)), Fields({kDLFloat, 32, 1}));
  EXPECT_EQ(Fields(ToDLDataType(DType::kComplex64)), Fields({kDLComplex, 64, 1}));
  EXPECT_EQ(Fields(ToDLDataType(DType::kComplex128)), Fields({kDLComplex, 128, 1}));
  EXPECT_EQ(Fields(ToDLDataType(DType::kFloat8E4M3FN)), Fields({kDLFloat8_e4m3fn, 8, 1}));
  EXPECT_EQ(Fields(ToDLDataType(DType::kFloat8E8M0FNU)), Fields({kDLFloat8_e8m0fnu, 8, 1}));
}

TEST(DLDataTypeTest, VectorLanesHaveNoDType) {
  EXPECT_EQ(interop::FromDLDataType({kDLFloat, 32, 4}), std::nullopt);
  EXPECT_EQ(interop::FromDLDataType({kDLFloat, 32, 0}), std::nullopt);
}

TEST(DLDataTypeTest, UnknownTypesHaveNoDType) {
  EXPECT_EQ(interop::FromDLDataType({kDLOpaqueHandle, 64, 1}), std::nullopt);
  EXPECT_EQ(interop::FromDLDataType({200, 32, 1}), std::nullopt);
  EXPECT_EQ(interop::FromDLDataType({kDLFloat, 24, 1}), std::nullopt);
  EXPECT_EQ(interop::FromDLDataType({kDLFloat4_e2m1fn, 4, 1}), std::nullopt);
}

// ---------------------------------------------------------------- helpers

// A DLPack tensor made by hand over memory kept alive elsewhere, whose
// deleter counts its calls (PJRT may make them from its own threads). Every
// test hands it to ImportDLPack, which must release it exactly once: the
// destructor waits for that (so the memory outlives PJRT's use) and checks it.
template <class Managed>
class CountedTensor {
 public:
  CountedTensor(void* data, DLDevice device, DLDataType dtype, Ints shape, Ints strides = {})
      : shape_(std::move(shape)), strides_(std::move(strides)) {
    if constexpr (std::is_same_v<Managed, DLManagedTensorVersioned>)
      managed_.version = {DLPACK_MAJOR_VERSION, DLPACK_MINOR_VERSION};
    managed_.manager_ctx = this;
    managed_.deleter = [](Managed* self) {
      static_cast<CountedTensor*>(self->manager_ctx)->calls_.fetch_add(1);
    };
    DLTensor& t = managed_.dl_tensor;
    t.data = data;
    t.device = device;
    t.ndim = static_cast<int32_t>(shape_.size());
    t.dtype = dtype;
    t.shape = shape_.empty() ? nullptr : shape_.data();
    t.strides = strides_.empty() ? nullptr : strides_.data();
    t.byte_offset = 0;
  }
  ~CountedTensor() { EXPECT_EQ(AwaitDeleterCalls(1), 1) << "deleter calls by the end of the test"; }
  CountedTensor(const CountedTensor&) = delete;
  CountedTensor& operator=(const CountedTensor&) = delete;

  Managed* get() noexcept { return &managed_; }
  DLTensor& dl_tensor() noexcept { return managed_.dl_tensor; }
  int deleter_calls() const noexcept { return calls_.load(); }

  // The deleter's calls once they reach `calls` or 10 s have passed: PJRT
  // releases memory when its last use is done, possibly a little later.
  int AwaitDeleterCalls(int calls) const {
    const auto deadline = std::chrono::steady_clock::now() + std::chrono::seconds(10);
    while (calls_.load() < calls && std::chrono::steady_clock::now() < deadline)
      std::this_thread::sleep_for(std::chrono::milliseconds(1));
    return calls_.load();
  }

 private:
  Ints shape_;
  Ints strides_;
  std::atomic<int> calls_{0};
  Managed managed_{};
};
using Tensor = CountedTensor<DLManagedTensorVersioned>;
using LegacyTensor = CountedTensor<DLManagedTensor>;

DLDataType Float32() { return interop::ToDLDataType(DType::kFloat32); }
DLDataType UInt8() { return interop::ToDLDataType(DType::kUInt8); }

// The DLPack device of the test client's first device.
DLDevice TestDLDevice() {
  return interop::DLDeviceOf(UploadFloats(*TestClient(), {0.0f}, {1}));
}

// `values` in memory of the test device that outlives every Array made over
// it (an exported upload), so that import tests run on CPU and CUDA alike.
class DeviceMemory {
 public:
  template <class T>
  DeviceMemory(const std::vector<T>& values, DType dtype) {
    Client& client = *TestClient();
    const Array array = test::Upload(client, values, {static_cast<int64_t>(values.size())}, dtype,
                                     client.devices().front());
    interop::OrderConsumer(array, std::nullopt);
    array.BlockUntilReady();
    exported_ = interop::ExportDLPack(array);
  }
  ~DeviceMemory() { exported_->deleter(exported_); }
  DeviceMemory(const DeviceMemory&) = delete;
  DeviceMemory& operator=(const DeviceMemory&) = delete;

  char* data() const noexcept { return static_cast<char*>(exported_->dl_tensor.data); }
  DLDevice device() const noexcept { return exported_->dl_tensor.device; }

 private:
  DLManagedTensorVersioned* exported_;
};

// start, start + 1, ..., n values.
std::vector<float> Iota(int n, int start = 0) {
  std::vector<float> values(static_cast<size_t>(n));
  for (int i = 0; i < n; ++i) values[static_cast<size_t>(i)] = static_cast<float>(start + i);
  return values;
}

template <class Managed>
Array Import(Managed* tensor, CopyPolicy copy = CopyPolicy::kIfNeeded) {
  interop::ImportOptions options;
  options.copy = copy;
  return interop::ImportDLPack(TestClient()->state(), tensor, options);
}

// The BufferError-kind Error importing `tensor` throws; nullopt (and a test
// failure) if none, or one of another kind.
template <class Managed>
std::optional<Error> ImportRefusal(Managed* tensor, CopyPolicy copy = CopyPolicy::kIfNeeded) {
  std::optional<Error> error = ThrownError([&] { Import(tensor, copy); });
  if (error && error->kind() != ErrorKind::kBuffer) {
    ADD_FAILURE() << "expected a BufferError-kind Error, got kind "
                  << static_cast<int>(error->kind()) << ": " << error->what();
    return std::nullopt;
  }
  return error;
}

// ----------------------------------------------------------------- import

TEST(ImportTest, RowMajorTensorBecomesAViewOfItsMemory) {
  const DeviceMemory memory(Iota(6), DType::kFloat32);
  Tensor tensor(memory.data(), memory.device(), Float32(), {2, 3});
  const Array array = Import(tensor.get());
  EXPECT_TRUE(array.is_view());
  EXPECT_EQ(array.UnsafeBufferPointer(), Address(memory.data()));
  EXPECT_EQ(array.dims(), (Ints{2, 3}));
  EXPECT_EQ(array.dtype(), DType::kFloat32);
  EXPECT_EQ(Download<float>(array), Iota(6));
}

TEST(ImportTest, ViewKeepsTheTensorUntilTheArrayIsDestroyed) {
  const DeviceMemory memory(Iota(6), DType::kFloat32);
  Tensor tensor(memory.data(), memory.device(), Float32(), {2, 3});
  std::optional<Array> array = Import(tensor.get());
  array->BlockUntilReady();
  Download<float>(*array);
  EXPECT_EQ(tensor.deleter_calls(), 0);
  array.reset();
  EXPECT_EQ(tensor.AwaitDeleterCalls(1), 1);
}

TEST(ImportTest, ViewSeesWritesToTheHostMemoryAfterImport) {
  if (!DeviceMemoryIsHostMemory()) GTEST_SKIP() << kNeedsHostMemory;
  alignas(64) float data[4] = {1.0f, 2.0f, 3.0f, 4.0f};
  Tensor tensor(data, {kDLCPU, 0}, Float32(), {4});
  const Array array = Import(tensor.get());
  ASSERT_TRUE(array.is_view());
  EXPECT_EQ(array.UnsafeBufferPointer(), Address(data));
  data[2] = 30.0f;
  EXPECT_EQ(Download<float>(array), (std::vector<float>{1.0f, 2.0f, 30.0f, 4.0f}));
}

TEST(ImportTest, ByteOffsetIsHonoured) {
  // An offset of one alignment unit (64 bytes on CPU, 16 on CUDA) keeps the view aligned.
  const size_t offset = TestClient()->state()->buffer_alignment();
  const int skipped = static_cast<int>(offset / sizeof(float));
  const DeviceMemory memory(Iota(skipped + 4), DType::kFloat32);
  Tensor tensor(memory.data(), memory.device(), Float32(), {4});
  tensor.dl_tensor().byte_offset = offset;
  const Array array = Import(tensor.get());
  EXPECT_TRUE(array.is_view());
  EXPECT_EQ(array.UnsafeBufferPointer(), Address(memory.data() + offset));
  EXPECT_EQ(Download<float>(array), Iota(4, skipped));
}

TEST(ImportTest, TransposedTensorBecomesAColumnMajorView) {
  const DeviceMemory memory(Iota(6), DType::kFloat32);
  // The transpose of the row-major (2, 3) matrix 0..5.
  Tensor tensor(memory.data(), memory.device(), Float32(), {3, 2}, {1, 3});
  const Array array = Import(tensor.get());
  EXPECT_TRUE(array.is_view());
  EXPECT_EQ(array.UnsafeBufferPointer(), Address(memory.data()));
  EXPECT_EQ(array.dims(), (Ints{3, 2}));
  EXPECT_EQ(array.layout(), (Ints{0, 1}));
  EXPECT_EQ(Download<float>(array), (std::vector<float>{0, 3, 1, 4, 2, 5}));
}

TEST(ImportTest, SizeOneDimsWithOddStridesBecomeARowMajorView) {
  const DeviceMemory memory(Iota(6), DType::kFloat32);
  Tensor tensor(memory.data(), memory.device(), Float32(), {2, 1, 3}, {3, 999, 1});
  const Array array = Import(tensor.get(), CopyPolicy::kNever);
  EXPECT_TRUE(array.is_view());
  EXPECT_EQ(array.UnsafeBufferPointer(), Address(memory.data()));
  EXPECT_EQ(array.layout(), (Ints{2, 1, 0}));
  EXPECT_EQ(Download<float>(array), Iota(6));
}

TEST(ImportTest, SteppedTensorIsCopiedWhenCopyIfNeeded) {
  const DeviceMemory memory(Iota(11), DType::kFloat32);
  Tensor tensor(memory.data(), memory.device(), Float32(), {3, 2}, {4, 2});
  std::optional<Array> array = Import(tensor.get(), CopyPolicy::kIfNeeded);
  EXPECT_FALSE(array->is_view());
  EXPECT_EQ(array->dims(), (Ints{3, 2}));
  EXPECT_EQ(Download<float>(*array), (std::vector<float>{0, 2, 4, 6, 8, 10}));
  array.reset();
  EXPECT_EQ(tensor.AwaitDeleterCalls(1), 1);
}

TEST(ImportTest, CopyReleasesTheTensorOnceItHasReadIt) {
  const DeviceMemory memory(Iota(11), DType::kFloat32);
  Tensor tensor(memory.data(), memory.device(), Float32(), {3, 2}, {4, 2});
  const Array array = Import(tensor.get(), CopyPolicy::kIfNeeded);
  array.BlockUntilReady();
  EXPECT_EQ(tensor.AwaitDeleterCalls(1), 1);  // while the copy lives
}

TEST(ImportTest, SteppedTensorIsRefusedWhenCopyNever) {
  const DeviceMemory memory(Iota(11), DType::kFloat32);
  Tensor tensor(memory.data(), memory.device(), Float32(), {3, 2}, {4, 2});
  const std::optional<Error> error = ImportRefusal(tensor.get(), CopyPolicy::kNever);
  ASSERT_TRUE(error);
  EXPECT_TRUE(Contains(error->what(), "(3, 2)"));
  EXPECT_TRUE(Contains(error->what(), "(4, 2)"));
  EXPECT_EQ(tensor.deleter_calls(), 1);
}

TEST(ImportTest, BroadcastTensorIsCopied) {
  const DeviceMemory memory(Iota(4), DType::kFloat32);
  Tensor tensor(memory.data(), memory.device(), Float32(), {3, 2}, {0, 1});
  const Array array = Import(tensor.get());
  EXPECT_FALSE(array.is_view());
  EXPECT_EQ(Download<float>(array), (std::vector<float>{0, 1, 0, 1, 0, 1}));
}

TEST(ImportTest, NegativeStrideTensorIsCopied) {
  const DeviceMemory memory(Iota(4), DType::kFloat32);
  // data points at the last element, read backwards.
  Tensor tensor(memory.data(), memory.device(), Float32(), {4}, {-1});
  tensor.dl_tensor().byte_offset = 3 * sizeof(float);
  const Array array = Import(tensor.get());
  EXPECT_FALSE(array.is_view());
  EXPECT_EQ(Download<float>(array), (std::vector<float>{3, 2, 1, 0}));
}

TEST(ImportTest, CopyAlwaysCopiesACompactTensor) {
  const DeviceMemory memory(Iota(6), DType::kFloat32);
  Tensor tensor(memory.data(), memory.device(), Float32(), {2, 3});
  std::optional<Array> array = Import(tensor.get(), CopyPolicy::kAlways);
  EXPECT_FALSE(array->is_view());
  EXPECT_NE(array->UnsafeBufferPointer(), Address(memory.data()));
  EXPECT_EQ(Download<float>(*array), Iota(6));
  array.reset();
  EXPECT_EQ(tensor.AwaitDeleterCalls(1), 1);
}

TEST(ImportTest, MisalignedTensorIsCopiedWhenCopyIfNeeded) {
  const DeviceMemory memory(std::vector<uint8_t>{0, 1, 2, 3, 4, 5, 6, 7, 8, 9}, DType::kUInt8);
  Tensor tensor(memory.data() + 1, memory.device(), UInt8(), {8});
  std::optional<Array> array = Import(tensor.get(), CopyPolicy::kIfNeeded);
  EXPECT_FALSE(array->is_view());
  EXPECT_EQ(Download<uint8_t>(*array), (std::vector<uint8_t>{1, 2, 3, 4, 5, 6, 7, 8}));
  array.reset();
  EXPECT_EQ(tensor.AwaitDeleterCalls(1), 1);
}

TEST(ImportTest, MisalignedTensorIsRefusedWhenCopyNever) {
  const DeviceMemory memory(std::vector<uint8_t>{0, 1, 2, 3, 4, 5, 6, 7, 8, 9}, DType::kUInt8);
  Tensor tensor(memory.data() + 1, memory.device(), UInt8(), {8});
  const std::optional<Error> error = ImportRefusal(tensor.get(), CopyPolicy::kNever);
  ASSERT_TRUE(error);
  const std::string alignment = std::to_string(TestClient()->state()->buffer_alignment());
  EXPECT_TRUE(Contains(error->what(), "at address " + AddressText(memory.data() + 1) + " is not aligned to " +
                                          alignment + " bytes"))
      << error->what();
  EXPECT_EQ(tensor.deleter_calls(), 1);
}

TEST(ImportTest, RankZeroTensorBecomesAView) {
  const DeviceMemory memory(std::vector<float>{2.5f}, DType::kFloat32);
  Tensor tensor(memory.data(), memory.device(), Float32(), {});
  const Array array = Import(tensor.get());
  EXPECT_TRUE(array.is_view());
  EXPECT_EQ(array.UnsafeBufferPointer(), Address(memory.data()));
  EXPECT_TRUE(array.dims().empty());
  EXPECT_EQ(Download<float>(array), std::vector<float>{2.5f});
}

TEST(ImportTest, SizeZeroTensorIsImportedAndReleasedAtOnce) {
  Tensor tensor(nullptr, TestDLDevice(), Float32(), {0, 3});
  const Array array = Import(tensor.get());
  EXPECT_EQ(array.dims(), (Ints{0, 3}));
  EXPECT_EQ(array.size(), 0);
  EXPECT_EQ(tensor.deleter_calls(), 1);  // while the Array lives
}

TEST(ImportTest, VectorLanesAreRefusedNamingTheType) {
  float data[4] = {};
  Tensor tensor(data, TestDLDevice(), DLDataType{kDLFloat, 32, 4}, {1});
  const std::optional<Error> error = ImportRefusal(tensor.get());
  ASSERT_TRUE(error);
  EXPECT_TRUE(Contains(error->what(), "code 2, bits 32, lanes 4"));
  EXPECT_EQ(tensor.deleter_calls(), 1);
}

TEST(ImportTest, OpaqueHandleTypeIsRefusedNamingTheType) {
  void* data[1] = {};
  Tensor tensor(data, TestDLDevice(), DLDataType{kDLOpaqueHandle, 64, 1}, {1});
  const std::optional<Error> error = ImportRefusal(tensor.get());
  ASSERT_TRUE(error);
  EXPECT_TRUE(Contains(error->what(), "code 3, bits 64, lanes 1"));
  EXPECT_EQ(tensor.deleter_calls(), 1);
}

TEST(ImportTest, TensorOfTheOtherDeviceTypeIsRefused) {
  float data[1] = {};
  const DLDevice other = TestPlatform() == "cuda" ? DLDevice{kDLCPU, 0} : DLDevice{kDLCUDA, 0};
  Tensor tensor(data, other, Float32(), {1});
  const std::optional<Error> error = ImportRefusal(tensor.get());
  ASSERT_TRUE(error);
  EXPECT_TRUE(Contains(error->what(), "'" + TestPlatform() + "' client"));
  EXPECT_EQ(tensor.deleter_calls(), 1);
}

TEST(ImportTest, TensorOfAnUnknownDeviceIdIsRefusedAndReleased) {
  float data[1] = {};
  DLDevice device = TestDLDevice();
  device.device_id = 4096;
  Tensor tensor(data, device, Float32(), {1});
  const std::optional<Error> error = ThrownError([&] { Import(tensor.get()); });
  ASSERT_TRUE(error);
  EXPECT_TRUE(Contains(error->what(), "4096"));
  EXPECT_EQ(tensor.deleter_calls(), 1);
}

TEST(ImportTest, MajorVersionTwoIsRefused) {
  float data[1] = {};
  Tensor tensor(data, TestDLDevice(), Float32(), {1});
  tensor.get()->version = {2, 0};
  const std::optional<Error> error = ImportRefusal(tensor.get());
  ASSERT_TRUE(error);
  EXPECT_TRUE(Contains(error->what(), "version 2.0"));
  EXPECT_EQ(tensor.deleter_calls(), 1);
}

TEST(ImportTest, NullShapeIsRefused) {
  float data[1] = {};
  Tensor tensor(data, TestDLDevice(), Float32(), {1});
  tensor.dl_tensor().shape = nullptr;
  const std::optional<Error> error = ImportRefusal(tensor.get());
  ASSERT_TRUE(error);
  EXPECT_TRUE(Contains(error->what(), "null shape"));
  EXPECT_EQ(tensor.deleter_calls(), 1);
}

TEST(ImportTest, NegativeDimensionIsRefused) {
  float data[1] = {};
  Tensor tensor(data, TestDLDevice(), Float32(), {2, -1});
  const std::optional<Error> error = ImportRefusal(tensor.get());
  ASSERT_TRUE(error);
  EXPECT_TRUE(Contains(error->what(), "(2, -1)"));
  EXPECT_EQ(tensor.deleter_calls(), 1);
}

TEST(ImportTest, TensorBeyondWhatXlaCanAddressIsRefusedUntouched) {
  float data[1] = {};
  // A broadcast of 2^60 elements: every size in 64 bits overflows inside XLA.
  Tensor tensor(data, TestDLDevice(), Float32(), {int64_t{1} << 60}, {0});
  const std::optional<Error> error = ImportRefusal(tensor.get());
  ASSERT_TRUE(error);
  EXPECT_EQ(error->kind(), ErrorKind::kBuffer);
  EXPECT_TRUE(Contains(error->what(), "2^58 elements"));
  EXPECT_EQ(tensor.deleter_calls(), 1);
}

TEST(ImportTest, ShapeWhoseProductOverflowsIsRefused) {
  float data[1] = {};
  Tensor tensor(data, TestDLDevice(), Float32(), {int64_t{1} << 40, int64_t{1} << 40});
  const std::optional<Error> error = ImportRefusal(tensor.get());
  ASSERT_TRUE(error);
  EXPECT_EQ(error->kind(), ErrorKind::kBuffer);
  EXPECT_EQ(tensor.deleter_calls(), 1);
}

TEST(ImportTest, NullDataOfANonEmptyTensorIsRefused) {
  Tensor tensor(nullptr, TestDLDevice(), Float32(), {2});
  const std::optional<Error> error = ImportRefusal(tensor.get());
  ASSERT_TRUE(error);
  EXPECT_TRUE(Contains(error->what(), "null data"));
  EXPECT_EQ(tensor.deleter_calls(), 1);
}

TEST(ImportTest, NullTensorIsAValueError) {
  const std::optional<Error> error = ThrownError(
      [] { Import(static_cast<DLManagedTensorVersioned*>(nullptr)); });
  ASSERT_TRUE(error);
  EXPECT_EQ(error->kind(), ErrorKind::kValue);
}

TEST(ImportTest, LegacyTensorBecomesAViewAndIsReleasedOnce) {
  const DeviceMemory memory(Iota(6), DType::kFloat32);
  LegacyTensor tensor(memory.data(), memory.device(), Float32(), {2, 3});
  std::optional<Array> array = Import(tensor.get());
  EXPECT_TRUE(array->is_view());
  EXPECT_EQ(array->UnsafeBufferPointer(), Address(memory.data()));
  EXPECT_EQ(Download<float>(*array), Iota(6));
  EXPECT_EQ(tensor.deleter_calls(), 0);
  array.reset();
  EXPECT_EQ(tensor.AwaitDeleterCalls(1), 1);
}

TEST(ImportTest, RefusedLegacyTensorIsReleasedOnce) {
  float data[4] = {};
  LegacyTensor tensor(data, TestDLDevice(), DLDataType{kDLFloat, 32, 4}, {1});
  ASSERT_TRUE(ImportRefusal(tensor.get()));
  EXPECT_EQ(tensor.deleter_calls(), 1);
}

// ----------------------------------------------------------------- export

// A (2, 3) float32 Array of 0..5, ready for a consumer.
Array ReadyMatrix() {
  Array array = UploadFloats(*TestClient(), Iota(6), {2, 3});
  interop::OrderConsumer(array, std::nullopt);
  array.BlockUntilReady();
  return array;
}

TEST(ExportTest, DLDeviceIsTheArraysDevice) {
  const Array array = ReadyMatrix();
  const DLDevice device = interop::DLDeviceOf(array);
  if (TestPlatform() == "cuda") {
    EXPECT_EQ(device.device_type, kDLCUDA);
    EXPECT_EQ(device.device_id, array.device().local_hardware_id);
  } else {
    EXPECT_EQ(device.device_type, kDLCPU);
    EXPECT_EQ(device.device_id, 0);
  }
}

// The versioned (DLPack 1.x) and legacy exports, which must behave alike.
template <class Managed>
Managed* Export(const Array& array) {
  if constexpr (std::is_same_v<Managed, DLManagedTensorVersioned>)
    return interop::ExportDLPack(array);
  else
    return interop::ExportLegacyDLPack(array);
}

template <class Managed>
class ExportFormatTest : public ::testing::Test {};
using ExportFormats = ::testing::Types<DLManagedTensorVersioned, DLManagedTensor>;
TYPED_TEST_SUITE(ExportFormatTest, ExportFormats);

TYPED_TEST(ExportFormatTest, TensorDescribesTheArray) {
  const Array array = ReadyMatrix();
  TypeParam* managed = Export<TypeParam>(array);
  if constexpr (std::is_same_v<TypeParam, DLManagedTensorVersioned>) {
    EXPECT_EQ(managed->version.major, DLPACK_MAJOR_VERSION);
    EXPECT_EQ(managed->version.minor, DLPACK_MINOR_VERSION);
    EXPECT_EQ(managed->flags, 0u);
  }
  const DLTensor& t = managed->dl_tensor;
  EXPECT_EQ(Address(t.data), array.UnsafeBufferPointer());
  EXPECT_EQ(t.byte_offset, 0u);
  EXPECT_EQ(t.device.device_type, interop::DLDeviceOf(array).device_type);
  EXPECT_EQ(t.device.device_id, interop::DLDeviceOf(array).device_id);
  EXPECT_EQ(Fields(t.dtype), Fields({kDLFloat, 32, 1}));
  ASSERT_EQ(t.ndim, 2);
  EXPECT_EQ(Ints(t.shape, t.shape + 2), (Ints{2, 3}));
  ASSERT_NE(t.strides, nullptr);
  EXPECT_EQ(Ints(t.strides, t.strides + 2), (Ints{3, 1}));
  managed->deleter(managed);
}

TYPED_TEST(ExportFormatTest, ExportedHostMemoryOutlivesTheArray) {
  if (!DeviceMemoryIsHostMemory()) GTEST_SKIP() << kNeedsHostMemory;
  Array array = ReadyMatrix();
  TypeParam* managed = Export<TypeParam>(array);
  array.Delete();
  std::vector<float> values(6);
  std::memcpy(values.data(), managed->dl_tensor.data, 6 * sizeof(float));
  EXPECT_EQ(values, Iota(6));
  managed->deleter(managed);
}

TYPED_TEST(ExportFormatTest, ExportThenImportIsAViewOfTheSameMemory) {
  const Array array = ReadyMatrix();
  const Array back = Import(Export<TypeParam>(array), CopyPolicy::kNever);
  EXPECT_TRUE(back.is_view());
  EXPECT_EQ(back.UnsafeBufferPointer(), array.UnsafeBufferPointer());
  EXPECT_EQ(back.dims(), array.dims());
  EXPECT_EQ(back.dtype(), array.dtype());
  EXPECT_EQ(Download<float>(back), Iota(6));
}

TEST(ExportTest, ExportedTensorImportsBackAfterTheArrayIsDeleted) {
  Array array = ReadyMatrix();
  DLManagedTensorVersioned* managed = interop::ExportDLPack(array);
  const uintptr_t address = array.UnsafeBufferPointer();
  array.Delete();
  const Array back = Import(managed);  // takes the tensor: its deleter runs later
  EXPECT_EQ(back.UnsafeBufferPointer(), address);
  EXPECT_EQ(Download<float>(back), Iota(6));
}

// ------------------------------------------------------ live exports

// `tensor` as read by LiveExportOf on `array`'s device and client.
std::optional<Array> LiveExportOfOn(const DLTensor& tensor, const Array& array) {
  return interop::LiveExportOf(tensor, *array.state(), array.device());
}

TYPED_TEST(ExportFormatTest, LiveExportIsTheArraysOwnBufferUntilLetGoOf) {
  Array array = ReadyMatrix();
  PJRT_Buffer* const buffer = array.buffer();
  TypeParam* managed = Export<TypeParam>(array);
  // The tensor as a consumer reads it, kept apart from the export's own block.
  Ints shape(managed->dl_tensor.shape, managed->dl_tensor.shape + 2);
  Ints strides(managed->dl_tensor.strides, managed->dl_tensor.strides + 2);
  DLTensor tensor = managed->dl_tensor;
  tensor.shape = shape.data();
  tensor.strides = strides.data();
  const Array other = ReadyMatrix();  // same client and device: what LiveExportOf is asked on
  array.Delete();  // the export holds the buffer on its own
  std::optional<Array> found = LiveExportOfOn(tensor, other);
  ASSERT_TRUE(found.has_value());
  EXPECT_EQ(found->buffer(), buffer);
  EXPECT_FALSE(found->is_view());
  EXPECT_EQ(found->dims(), (Ints{2, 3}));
  managed->deleter(managed);
  EXPECT_FALSE(LiveExportOfOn(tensor, other).has_value()) << "an export let go of is still found";
  EXPECT_EQ(Download<float>(*found), Iota(6));  // the Array found holds the buffer on its own
}

TEST(ExportTest, LiveExportIsNotFoundForAnotherReadingOfItsMemory) {
  const Array array = ReadyMatrix();
  DLManagedTensorVersioned* managed = interop::ExportDLPack(array);
  const DLTensor exported = managed->dl_tensor;
  ASSERT_TRUE(LiveExportOfOn(exported, array).has_value());
  int64_t transposed_shape[] = {3, 2}, transposed_strides[] = {1, 3}, flat_shape[] = {6}, flat_strides[] = {1};
  std::vector<DLTensor> others(5, exported);
  others[0].shape = transposed_shape, others[0].strides = transposed_strides;
  others[1].ndim = 1, others[1].shape = flat_shape, others[1].strides = flat_strides;
  others[2].dtype = DLDataType{kDLInt, 32, 1};
  others[3].byte_offset = 4;
  others[4].strides = nullptr;  // said compact, yet not said how: taken as any other import
  for (const DLTensor& other : others) EXPECT_FALSE(LiveExportOfOn(other, array).has_value());
  managed->deleter(managed);
}

TEST(ExportTest, ViewsAreNotLiveExports) {
  const DeviceMemory memory(Iota(6), DType::kFloat32);
  Tensor tensor(memory.data(), memory.device(), Float32(), {2, 3}, {3, 1});
  const Array view = Import(tensor.get(), CopyPolicy::kNever);
  DLManagedTensorVersioned* managed = interop::ExportDLPack(view);
  EXPECT_FALSE(LiveExportOfOn(managed->dl_tensor, view).has_value());
  managed->deleter(managed);
}

TEST(ExportTest, LiveExportsAreFoundWhileOthersComeAndGo) {
  // Exports made and let go of on several threads at once, each found by its own address.
  std::vector<std::thread> threads;
  std::atomic<int> missed{0};
  for (int t = 0; t < 4; ++t) {
    threads.emplace_back([&missed] {
      for (int i = 0; i < 200; ++i) {
        const Array array = ReadyMatrix();
        DLManagedTensorVersioned* managed = interop::ExportDLPack(array);
        std::optional<Array> found = LiveExportOfOn(managed->dl_tensor, array);
        if (!found || found->buffer() != array.buffer()) ++missed;
        managed->deleter(managed);
      }
    });
  }
  for (std::thread& thread : threads) thread.join();
  EXPECT_EQ(missed.load(), 0);
}

TEST(ExportTest, TransposedViewExportsColumnMajorStrides) {
  const DeviceMemory memory(Iota(6), DType::kFloat32);
  Tensor tensor(memory.data(), memory.device(), Float32(), {3, 2}, {1, 3});
  const Array view = Import(tensor.get(), CopyPolicy::kNever);
  DLManagedTensorVersioned* managed = interop::ExportDLPack(view);
  const DLTensor& t = managed->dl_tensor;
  EXPECT_EQ(Address(t.data), Address(memory.data()));
  ASSERT_EQ(t.ndim, 2);
  EXPECT_EQ(Ints(t.shape, t.shape + 2), (Ints{3, 2}));
  EXPECT_EQ(Ints(t.strides, t.strides + 2), (Ints{1, 3}));
  managed->deleter(managed);
}

// -------------------------------------------------------------- RowMajor

TEST(RowMajorTest, TransposedViewIsCopiedRowMajor) {
  const DeviceMemory memory(Iota(6), DType::kFloat32);
  Tensor tensor(memory.data(), memory.device(), Float32(), {3, 2}, {1, 3});
  const Array view = Import(tensor.get(), CopyPolicy::kNever);
  const Array copy = RowMajor(view);
  EXPECT_EQ(copy.layout(), (Ints{1, 0}));
  EXPECT_EQ(copy.dims(), (Ints{3, 2}));
  EXPECT_NE(copy.UnsafeBufferPointer(), view.UnsafeBufferPointer());
  EXPECT_EQ(Download<float>(copy), (std::vector<float>{0, 3, 1, 4, 2, 5}));
}

TEST(RowMajorTest, RowMajorArrayIsItself) {
  const Array array = ReadyMatrix();
  const Array same = RowMajor(array);
  EXPECT_EQ(same.UnsafeBufferPointer(), array.UnsafeBufferPointer());
  EXPECT_EQ(same.layout(), (Ints{1, 0}));
}

}  // namespace
}  // namespace cuxla
