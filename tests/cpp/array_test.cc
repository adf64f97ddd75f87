// Arrays: host <-> device copies, shapes and layouts, and use after delete.
#include <cstdint>
#include <string>
#include <vector>

#include "test_env.h"

namespace cuxla {
namespace {

using test::Contains;
using test::Download;
using test::TestClient;
using test::ThrownError;
using test::UploadFloats;

// `count` deterministic bytes; only 0 and 1 for bool, whose other bytes XLA
// need not preserve.
std::vector<uint8_t> Pattern(DType dtype, size_t count) {
  std::vector<uint8_t> bytes(count);
  for (size_t i = 0; i < count; ++i)
    bytes[i] = static_cast<uint8_t>(dtype == DType::kBool ? i % 3 == 1 : i * 37 + 11);
  return bytes;
}

Array UploadBytes(const std::vector<uint8_t>& bytes, DType dtype, std::vector<int64_t> dims) {
  Client& client = *TestClient();
  return test::Upload(client, bytes, std::move(dims), dtype, client.devices().front());
}

// Copies `dims` of `dtype` to the device and back; true when every bit survives.
::testing::AssertionResult RoundTripsBitExact(DType dtype, std::vector<int64_t> dims) {
  size_t count = DTypeSize(dtype);
  for (int64_t dim : dims) count *= static_cast<size_t>(dim);
  const std::vector<uint8_t> sent = Pattern(dtype, count);
  const Array array = UploadBytes(sent, dtype, dims);
  std::vector<uint8_t> received(count, 0xAA);
  array.CopyToHost(received.data(), received.size());
  for (size_t i = 0; i < count; ++i)
    if (sent[i] != received[i])
      return ::testing::AssertionFailure()
             << DTypeName(dtype) << " byte " << i << " sent " << int{sent[i]} << " received "
             << int{received[i]};
  return ::testing::AssertionSuccess();
}

TEST(ArrayTest, EveryDTypeRoundTripsBitExact) {
  for (int code = static_cast<int>(DType::kBool); code <= static_cast<int>(DType::kFloat8E8M0FNU);
       ++code)
    EXPECT_TRUE(RoundTripsBitExact(static_cast<DType>(code), {3, 5}));
}

TEST(ArrayTest, EveryDTypeKeepsItsDType) {
  for (int code = static_cast<int>(DType::kBool); code <= static_cast<int>(DType::kFloat8E8M0FNU);
       ++code) {
    const DType dtype = static_cast<DType>(code);
    const Array array = UploadBytes(Pattern(dtype, DTypeSize(dtype)), dtype, {1});
    EXPECT_EQ(array.dtype(), dtype) << DTypeName(dtype);
  }
}

TEST(ArrayTest, ReportsDimsSizeAndNbytes) {
  const Array array = UploadBytes(Pattern(DType::kFloat64, 2 * 3 * 4 * 8), DType::kFloat64, {2, 3, 4});
  EXPECT_EQ(array.dtype(), DType::kFloat64);
  EXPECT_EQ(array.dims(), (std::vector<int64_t>{2, 3, 4}));
  EXPECT_EQ(array.size(), 24);
  EXPECT_EQ(array.nbytes(), 24 * 8);
}

TEST(ArrayTest, RankZeroArrayRoundTrips) {
  const Array array = UploadFloats(*TestClient(), {2.5f}, {});
  EXPECT_TRUE(array.dims().empty());
  EXPECT_EQ(array.size(), 1);
  EXPECT_EQ(array.nbytes(), 4);
  EXPECT_EQ(Download<float>(array), std::vector<float>{2.5f});
}

TEST(ArrayTest, SizeZeroArrayRoundTrips) {
  const float unused = 0.0f;  // a valid pointer for the empty copy
  HostBuffer host;
  host.data = &unused;
  host.dtype = DType::kFloat32;
  host.dims = {0, 3};
  const Array array = TestClient()->FromHost(host, TestClient()->devices().front());
  EXPECT_EQ(array.dims(), (std::vector<int64_t>{0, 3}));
  EXPECT_EQ(array.size(), 0);
  EXPECT_EQ(array.nbytes(), 0);
  float dst = 1.0f;
  array.CopyToHost(&dst, 0);
  EXPECT_EQ(dst, 1.0f);
}

TEST(ArrayTest, FreshArrayIsRowMajor) {
  const Array array = UploadFloats(*TestClient(), std::vector<float>(24), {2, 3, 4});
  EXPECT_EQ(array.layout(), (std::vector<int64_t>{2, 1, 0}));
}

TEST(ArrayTest, FromHostPlacesTheArrayOnTheGivenDevice) {
  Client& client = *TestClient();
  for (const Device& device : client.devices()) {
    const Array array = test::Upload(client, std::vector<float>{1.0f}, {1}, DType::kFloat32, device);
    EXPECT_EQ(&array.device(), &device) << "device id " << device.id;
  }
}

TEST(ArrayTest, CopyToHostWithTheWrongSizeThrowsValueError) {
  const Array array = UploadFloats(*TestClient(), std::vector<float>(6), {2, 3});
  std::vector<float> dst(5);
  auto error = ThrownError([&] { array.CopyToHost(dst.data(), dst.size() * sizeof(float)); });
  ASSERT_TRUE(error);
  EXPECT_EQ(error->kind(), ErrorKind::kValue);
  EXPECT_TRUE(Contains(error->what(), "20"));
  EXPECT_TRUE(Contains(error->what(), "24"));
}

TEST(ArrayTest, DeleteMarksTheArrayDeletedAndIsIdempotent) {
  Array array = UploadFloats(*TestClient(), {1.0f, 2.0f}, {2});
  EXPECT_FALSE(array.is_deleted());
  array.Delete();
  EXPECT_TRUE(array.is_deleted());
  array.Delete();
  EXPECT_TRUE(array.is_deleted());
}

TEST(ArrayTest, BufferOfADeletedArrayThrowsRuntimeError) {
  Array array = UploadFloats(*TestClient(), {1.0f, 2.0f}, {2});
  array.Delete();
  auto error = ThrownError([&] { array.buffer(); });
  ASSERT_TRUE(error);
  EXPECT_EQ(error->kind(), ErrorKind::kRuntime);
  EXPECT_TRUE(Contains(error->what(), "deleted"));
}

TEST(ArrayTest, CopyToHostOfADeletedArrayThrowsRuntimeError) {
  Array array = UploadFloats(*TestClient(), {1.0f, 2.0f}, {2});
  array.Delete();
  std::vector<float> dst(2);
  auto error = ThrownError([&] { array.CopyToHost(dst.data(), dst.size() * sizeof(float)); });
  ASSERT_TRUE(error);
  EXPECT_EQ(error->kind(), ErrorKind::kRuntime);
  EXPECT_TRUE(Contains(error->what(), "deleted"));
}

TEST(ArrayTest, UnsafeBufferPointerIsStableAndDistinctPerArray) {
  const Array first = UploadFloats(*TestClient(), {1.0f, 2.0f}, {2});
  const Array second = UploadFloats(*TestClient(), {1.0f, 2.0f}, {2});
  EXPECT_NE(first.UnsafeBufferPointer(), 0u);
  EXPECT_EQ(first.UnsafeBufferPointer(), first.UnsafeBufferPointer());
  EXPECT_NE(first.UnsafeBufferPointer(), second.UnsafeBufferPointer());
}

TEST(ArrayTest, BlockUntilReadyLeavesTheDataIntact) {
  const Array array = UploadFloats(*TestClient(), {1.0f, -2.0f, 3.5f}, {3});
  array.BlockUntilReady();
  EXPECT_EQ(Download<float>(array), (std::vector<float>{1.0f, -2.0f, 3.5f}));
}

TEST(ArrayTest, BlockUntilReadyOnADeletedArrayThrowsRuntimeError) {
  Array array = UploadFloats(*TestClient(), {1.0f}, {1});
  array.Delete();
  auto error = ThrownError([&] { array.BlockUntilReady(); });
  ASSERT_TRUE(error);
  EXPECT_EQ(error->kind(), ErrorKind::kRuntime);
}

// A view whose owner needs no notice (DeviceView::on_delete null) reads the
// memory it is given and is deleted without calling anything.
TEST(ArrayTest, ViewWithoutOnDeleteCallbackReadsItsMemoryAndDeletesCleanly) {
  Client& client = *TestClient();
  const Array owner = UploadFloats(client, std::vector<float>(64, 2.5f), {64});
  owner.BlockUntilReady();
  DeviceView view;
  view.data = reinterpret_cast<void*>(owner.UnsafeBufferPointer());
  view.dtype = DType::kFloat32;
  view.dims = {64};
  Array alias = Array::CreateView(client.state(), view, client.devices().front());
  EXPECT_TRUE(alias.is_view());
  EXPECT_EQ(Download<float>(alias), std::vector<float>(64, 2.5f));
  alias.Delete();
  EXPECT_EQ(Download<float>(owner), std::vector<float>(64, 2.5f));
}

}  // namespace
}  // namespace cuxla
