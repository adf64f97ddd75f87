// Meshes, partition specs, shardings read from compiled SPMD programs, and
// SPMD execution on sharded arrays (on the CPU plugin's several devices).
#include <cstring>
#include <numeric>

#include "test_env.h"

namespace cuxla {
namespace {

using test::ThrownError;
using Ints = std::vector<int64_t>;

// Devices are not looked at by the mesh arithmetic: placeholders will do.
Mesh MeshOf(Ints shape, std::vector<std::string> names, std::vector<Device>& storage) {
  const int64_t n = std::accumulate(shape.begin(), shape.end(), int64_t{1}, std::multiplies<>());
  storage.assign(static_cast<size_t>(n), Device{});
  Mesh mesh{std::move(shape), std::move(names), {}};
  for (size_t i = 0; i < storage.size(); ++i) {
    storage[i].id = static_cast<int>(i);
    storage[i].platform = Platform::kCpu;
    mesh.devices.push_back(&storage[i]);
  }
  return mesh;
}

TEST(ShardingTest, SpecOverAMeshGivesEachPartitionItsTile) {
  std::vector<Device> devices;
  const Mesh mesh = MeshOf({2, 3}, {"data", "model"}, devices);
  const Sharding s = Sharding::Of(mesh, {"model", std::nullopt}, 2);
  EXPECT_EQ(s.tiles, (Ints{3, 1}));
  ASSERT_EQ(s.partitions(), 6u);
  // Row-major mesh: partition p = data * 3 + model; the tile follows "model".
  for (size_t p = 0; p < 6; ++p) EXPECT_EQ(s.tile_of_partition[p], (Ints{static_cast<int64_t>(p % 3), 0}));
  EXPECT_EQ(s.TileDims(Ints{9, 4}), (Ints{3, 4}));
  EXPECT_EQ(s.GlobalDims(Ints{3, 4}), (Ints{9, 4}));
}

TEST(ShardingTest, HloShardingTextListsDevicesInTileOrder) {
  std::vector<Device> devices;
  const Mesh line = MeshOf({4}, {"x"}, devices);
  EXPECT_EQ(HloShardingText(line, {"x", std::nullopt}, 2), "{devices=[4,1]<=[4]}");
  EXPECT_EQ(HloShardingText(line, {std::nullopt}, 1), "{replicated}");
  std::vector<Device> grid_devices;
  const Mesh grid = MeshOf({2, 2}, {"a", "b"}, grid_devices);
  EXPECT_EQ(HloShardingText(grid, {"a", "b"}, 2), "{devices=[2,2]<=[2,2]}");
  EXPECT_EQ(HloShardingText(grid, {"b", "a"}, 2), "{devices=[2,2]<=[2,2]T(1,0)}");
  EXPECT_EQ(HloShardingText(grid, {"b", std::nullopt}, 2), "{devices=[2,1,2]<=[2,2]T(1,0) last_tile_dim_replicate}");
}

TEST(ShardingTest, BadSpecsAndMeshesAreValueErrorsNamingTheProblem) {
  std::vector<Device> devices;
  const Mesh mesh = MeshOf({2}, {"x"}, devices);
  auto unknown = ThrownError([&] { Sharding::Of(mesh, {"y"}, 1); });
  ASSERT_TRUE(unknown);
  EXPECT_EQ(unknown->kind(), ErrorKind::kValue);
  EXPECT_NE(std::string(unknown->what()).find("no axis 'y'"), std::string::npos);
  auto twice = ThrownError([&] { Sharding::Of(mesh, {"x", "x"}, 2); });
  ASSERT_TRUE(twice);
  EXPECT_NE(std::string(twice->what()).find("used by two dimensions"), std::string::npos);
  auto rank = ThrownError([&] { Sharding::Of(mesh, {"x"}, 2); });
  ASSERT_TRUE(rank);
  EXPECT_NE(std::string(rank->what()).find("1 entries for an array of rank 2"), std::string::npos);
  auto uneven = ThrownError([&] { Sharding::Of(mesh, {"x"}, 1).TileDims(Ints{5}); });
  ASSERT_TRUE(uneven);
  EXPECT_NE(std::string(uneven->what()).find("does not split evenly"), std::string::npos);
  Mesh short_mesh = mesh;
  short_mesh.devices.pop_back();
  auto size = ThrownError([&] { short_mesh.Validate(); });
  ASSERT_TRUE(size);
  EXPECT_NE(std::string(size->what()).find("needs 2 devices, got 1"), std::string::npos);
  Mesh repeated = mesh;
  repeated.devices[1] = repeated.devices[0];
  auto dup = ThrownError([&] { repeated.Validate(); });
  ASSERT_TRUE(dup);
  EXPECT_NE(std::string(dup->what()).find("appears twice"), std::string::npos);
}

// A client of the CPU plugin with two devices (CPU only: the CUDA plugin has
// one device per GPU).
std::shared_ptr<Client> TwoDeviceClient() {
  static const auto* client = new std::shared_ptr<Client>(
      Client::Create(Plugin::Load(test::PluginPath()), "cpu", ClientOptions{.device_count = 2}));
  return *client;
}

// y = x @ w with x split by rows, and x^T y (summed over both partitions'
// rows: XLA's all-reduce), replicated.
constexpr std::string_view kSplitProduct = R"(
module @m attributes {mhlo.num_partitions = 2 : i32, mhlo.num_replicas = 1 : i32} {
func.func public @main(%x: tensor<4x2xf32> {mhlo.sharding = "{devices=[2,1]<=[2]}"},
                       %w: tensor<2x2xf32> {mhlo.sharding = "{replicated}"})
    -> (tensor<4x2xf32> {mhlo.sharding = "{devices=[2,1]<=[2]}"}, tensor<2x2xf32> {mhlo.sharding = "{replicated}"}) {
  %y = stablehlo.dot_general %x, %w, contracting_dims = [1] x [0] : (tensor<4x2xf32>, tensor<2x2xf32>) -> tensor<4x2xf32>
  %g = stablehlo.dot_general %x, %y, contracting_dims = [0] x [0] : (tensor<4x2xf32>, tensor<4x2xf32>) -> tensor<2x2xf32>
  return %y, %g : tensor<4x2xf32>, tensor<2x2xf32>
}
}
)";

TEST(ShardingTest, SpmdProgramRunsOnShardedArraysWithXlaCollectives) {
  if (test::TestPlatform() != "cpu") GTEST_SKIP() << "needs the CPU plugin's several devices";
  auto client = TwoDeviceClient();
  ASSERT_EQ(client->devices().size(), 2u);
  std::vector<const Device*> devices{&client->devices()[0], &client->devices()[1]};
  const Mesh mesh{{2}, {"rows"}, devices};
  auto exe = client->Compile(kSplitProduct, devices);
  EXPECT_EQ(exe->num_partitions(), 2u);
  ASSERT_EQ(exe->parameter_shardings().size(), 2u);
  EXPECT_EQ(exe->parameter_shardings()[0], Sharding::Of(mesh, {"rows", std::nullopt}, 2));
  EXPECT_EQ(exe->result_shardings()[1], Sharding::Replicated(2, 2));

  // x = [[0,1],[2,3],[4,5],[6,7]], w = identity.
  const float x0[] = {0, 1, 2, 3}, x1[] = {4, 5, 6, 7}, w[] = {1, 0, 0, 1};
  auto host = [&](const float* data, Ints dims, const Device& d) {
    return client->FromHost(HostBuffer{data, DType::kFloat32, std::move(dims), {}}, d);
  };
  ShardedArray x({host(x0, {2, 2}, *devices[0]), host(x1, {2, 2}, *devices[1])},
                 Sharding::Of(mesh, {"rows", std::nullopt}, 2));
  ShardedArray ws({host(w, {2, 2}, *devices[0]), host(w, {2, 2}, *devices[1])}, Sharding::Replicated(2, 2));
  EXPECT_EQ(x.dims(), (Ints{4, 2}));
  const ShardedArray* args[] = {&x, &ws};
  std::vector<ShardedArray> out = ExecuteSharded(*exe, args);
  ASSERT_EQ(out.size(), 2u);
  EXPECT_EQ(out[0].dims(), (Ints{4, 2}));
  EXPECT_EQ(out[1].dims(), (Ints{2, 2}));
  float y1[4], g[4];
  out[0].shards()[1].CopyToHost(y1, sizeof y1);
  EXPECT_EQ(std::memcmp(y1, x1, sizeof y1), 0);
  // x^T x = [[0+4+16+36, 0+6+20+42], [.., 1+9+25+49]] on both partitions.
  for (const Array& shard : out[1].shards()) {
    shard.CopyToHost(g, sizeof g);
    EXPECT_EQ(g[0], 56.0f);
    EXPECT_EQ(g[1], 68.0f);
    EXPECT_EQ(g[3], 84.0f);
  }

  // Split another way than the program's parameter: refused, naming both.
  ShardedArray whole({host(x0, {2, 2}, *devices[0]), host(x1, {2, 2}, *devices[1])}, Sharding::Replicated(2, 2));
  const ShardedArray* wrong[] = {&whole, &ws};
  auto error = ThrownError([&] { ExecuteSharded(*exe, wrong); });
  ASSERT_TRUE(error);
  EXPECT_EQ(error->kind(), ErrorKind::kValue);
  EXPECT_NE(std::string(error->what()).find("argument 0 is split in tiles (1, 1)"), std::string::npos) << error->what();
}

TEST(ShardingTest, ShardsOfDifferentShapesOrOnOneDeviceAreRefused) {
  if (test::TestPlatform() != "cpu") GTEST_SKIP() << "needs the CPU plugin's several devices";
  auto client = TwoDeviceClient();
  const float data[] = {1, 2, 3, 4};
  const Device& d0 = client->devices()[0];
  const Device& d1 = client->devices()[1];
  auto host = [&](Ints dims, const Device& d) {
    return client->FromHost(HostBuffer{data, DType::kFloat32, std::move(dims), {}}, d);
  };
  auto shape = ThrownError([&] { ShardedArray({host({2}, d0), host({4}, d1)}, Sharding::Replicated(1, 2)); });
  ASSERT_TRUE(shape);
  EXPECT_NE(std::string(shape->what()).find("shard 1 is float32(4,), shard 0 float32(2,)"), std::string::npos)
      << shape->what();
  auto same = ThrownError([&] { ShardedArray({host({2}, d0), host({2}, d0)}, Sharding::Replicated(1, 2)); });
  ASSERT_TRUE(same);
  EXPECT_NE(std::string(same->what()).find("both on device 0"), std::string::npos);
}

}  // namespace
}  // namespace cuxla
