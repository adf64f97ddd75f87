// Clients: their platform and devices, and the memory options read from the
// environment.
#include <algorithm>
#include <chrono>
#include <map>
#include <stdexcept>
#include <set>
#include <string>

#include "test_env.h"

namespace cuxla {
namespace {

using test::Contains;
using test::ScopedEnv;
using test::TestClient;
using test::TestPlatform;
using test::ThrownError;

TEST(ClientTest, PlatformIsTheTestPlatform) {
  EXPECT_EQ(TestClient()->platform_name(), TestPlatform());
}

TEST(ClientTest, PlatformVersionIsNotEmpty) {
  EXPECT_FALSE(TestClient()->platform_version().empty());
}

TEST(ClientTest, DevicesHaveUniqueIdsAndTheClientsPlatform) {
  const auto& devices = TestClient()->devices();
  ASSERT_FALSE(devices.empty());
  std::set<int> ids;
  for (const Device& device : devices) {
    EXPECT_TRUE(ids.insert(device.id).second) << "device id " << device.id << " repeats";
    EXPECT_EQ(device.platform, TestClient()->platform());
    EXPECT_NE(device.handle, nullptr);
  }
}

TEST(ClientTest, DeviceByIdIsTheListedDevice) {
  for (const Device& device : TestClient()->devices())
    EXPECT_EQ(&TestClient()->device(device.id), &device) << "device id " << device.id;
}

TEST(ClientTest, DeviceByAnAbsentIdThrowsValueErrorNamingTheId) {
  int absent = 0;
  for (const Device& device : TestClient()->devices()) absent = std::max(absent, device.id + 1);
  auto error = ThrownError([&] { TestClient()->device(absent); });
  ASSERT_TRUE(error);
  EXPECT_EQ(error->kind(), ErrorKind::kValue);
  EXPECT_TRUE(Contains(error->what(), "id " + std::to_string(absent)));
}

TEST(ClientTest, MemoryOptionsAreRefusedOffCuda) {
  if (TestPlatform() == "cuda") GTEST_SKIP() << "memory options apply to cuda clients";
  ClientOptions options;
  options.preallocate = true;
  auto plugin = Plugin::Load(test::PluginPath());
  auto error = ThrownError([&] { Client::Create(plugin, TestPlatform(), options); });
  ASSERT_TRUE(error);
  EXPECT_EQ(error->kind(), ErrorKind::kValue);
  EXPECT_TRUE(Contains(error->what(), "'" + TestPlatform() + "'"));
}

TEST(ClientTest, DeviceCountSetsTheCpuClientsDevicesAndIsRefusedElsewhere) {
  auto plugin = Plugin::Load(test::PluginPath());
  ClientOptions options;
  options.device_count = 3;
  if (TestPlatform() != "cpu") {
    auto error = ThrownError([&] { Client::Create(plugin, TestPlatform(), options); });
    ASSERT_TRUE(error);
    EXPECT_EQ(error->kind(), ErrorKind::kValue);
    EXPECT_TRUE(Contains(error->what(), "device_count applies to the cpu platform only"));
    return;
  }
  auto client = Client::Create(plugin, "cpu", options);
  ASSERT_EQ(client->devices().size(), 3u);
  for (int i = 0; i < 3; ++i) EXPECT_EQ(client->devices()[i].local_hardware_id, i);
  options.device_count = 0;
  auto error = ThrownError([&] { Client::Create(plugin, "cpu", options); });
  ASSERT_TRUE(error);
  EXPECT_TRUE(Contains(error->what(), "device_count must be at least 1, got 0"));
  test::ScopedEnv env("CUXLA_CPU_DEVICE_COUNT", "two");
  auto malformed = ThrownError([&] { Client::Create(plugin, "cpu", {}); });
  ASSERT_TRUE(malformed);
  EXPECT_TRUE(Contains(malformed->what(), "CUXLA_CPU_DEVICE_COUNT='two' is not an integer"));
}

// The three memory variables, unset for the test unless it sets them.
class ClientOptionsEnvTest : public ::testing::Test {
 protected:
  ScopedEnv preallocate_{"CUXLA_PREALLOCATE", std::nullopt};
  ScopedEnv fraction_{"CUXLA_MEM_FRACTION", std::nullopt};
  ScopedEnv allocator_{"CUXLA_ALLOCATOR", std::nullopt};
};

TEST_F(ClientOptionsEnvTest, WithoutVariablesOptionsStayUnset) {
  const ClientOptions options = ClientOptions{}.WithEnvironment();
  EXPECT_FALSE(options.preallocate);
  EXPECT_FALSE(options.memory_fraction);
  EXPECT_FALSE(options.allocator);
}

TEST_F(ClientOptionsEnvTest, WithEnvironmentReadsCuxlaPreallocate) {
  ScopedEnv set("CUXLA_PREALLOCATE", "1");
  EXPECT_EQ(ClientOptions{}.WithEnvironment().preallocate, true);
}

TEST_F(ClientOptionsEnvTest, WithEnvironmentReadsCuxlaMemFraction) {
  ScopedEnv set("CUXLA_MEM_FRACTION", "0.5");
  EXPECT_EQ(ClientOptions{}.WithEnvironment().memory_fraction, 0.5);
}

TEST_F(ClientOptionsEnvTest, WithEnvironmentReadsCuxlaAllocator) {
  ScopedEnv set("CUXLA_ALLOCATOR", "platform");
  EXPECT_EQ(ClientOptions{}.WithEnvironment().allocator, "platform");
}

TEST_F(ClientOptionsEnvTest, ExplicitOptionsWinOverTheEnvironment) {
  ScopedEnv preallocate("CUXLA_PREALLOCATE", "1");
  ScopedEnv fraction("CUXLA_MEM_FRACTION", "0.5");
  ScopedEnv allocator("CUXLA_ALLOCATOR", "platform");
  ClientOptions explicit_options;
  explicit_options.preallocate = false;
  explicit_options.memory_fraction = 0.25;
  explicit_options.allocator = "bfc";
  const ClientOptions merged = explicit_options.WithEnvironment();
  EXPECT_EQ(merged.preallocate, false);
  EXPECT_EQ(merged.memory_fraction, 0.25);
  EXPECT_EQ(merged.allocator, "bfc");
}

TEST_F(ClientOptionsEnvTest, MalformedCuxlaPreallocateThrowsValueErrorNamingIt) {
  ScopedEnv set("CUXLA_PREALLOCATE", "maybe");
  auto error = ThrownError([] { ClientOptions{}.WithEnvironment(); });
  ASSERT_TRUE(error);
  EXPECT_EQ(error->kind(), ErrorKind::kValue);
  EXPECT_TRUE(Contains(error->what(), "CUXLA_PREALLOCATE"));
  EXPECT_TRUE(Contains(error->what(), "maybe"));
}

TEST_F(ClientOptionsEnvTest, MalformedCuxlaMemFractionThrowsValueErrorNamingIt) {
  ScopedEnv set("CUXLA_MEM_FRACTION", "abc");
  auto error = ThrownError([] { ClientOptions{}.WithEnvironment(); });
  ASSERT_TRUE(error);
  EXPECT_EQ(error->kind(), ErrorKind::kValue);
  EXPECT_TRUE(Contains(error->what(), "CUXLA_MEM_FRACTION"));
  EXPECT_TRUE(Contains(error->what(), "abc"));
}


// An in-memory store, as torch.distributed's TCPStore is across processes.
class MemoryStore : public KeyValueStore {
 public:
  std::string Get(std::string_view key, std::chrono::milliseconds) override {
    if (fail_get) throw std::runtime_error("the store is down");
    auto it = values.find(std::string(key));
    if (it == values.end()) throw std::runtime_error("timed out waiting for " + std::string(key));
    return it->second;
  }
  std::optional<std::string> TryGet(std::string_view key) override {
    auto it = values.find(std::string(key));
    if (it == values.end()) return std::nullopt;
    return it->second;
  }
  void Put(std::string_view key, std::string_view value) override { values[std::string(key)] = value; }

  std::map<std::string, std::string> values;
  bool fail_get = false;
};

TEST(ClientTest, KeyValueCallbacksReachTheStoreAndCarryItsErrors) {
  auto plugin = Plugin::Load(FAKE_PJRT_kv_PATH);
  auto store = std::make_shared<MemoryStore>();
  ClientOptions options;
  options.node_id = 1;
  options.num_nodes = 2;
  options.kv_store = store;
  auto error = ThrownError([&] { Client::Create(plugin, "cuda", options); });
  ASSERT_TRUE(error);
  EXPECT_TRUE(Contains(error->what(),
                       "fake kv plugin: node 1 of 2 read 'hello from 1'; try-get of an absent key: NOT_FOUND"))
      << error->what();
  EXPECT_EQ(store->values["fake/node1"], "hello from 1");

  store->fail_get = true;
  auto failed = ThrownError([&] { Client::Create(plugin, "cuda", options); });
  ASSERT_TRUE(failed);
  EXPECT_TRUE(Contains(failed->what(), "cuxla key-value store get: the store is down")) << failed->what();
}

TEST(ClientTest, SeveralProcessesNeedAStoreAValidNodeIdAndCuda) {
  auto plugin = Plugin::Load(FAKE_PJRT_kv_PATH);
  ClientOptions options;
  options.num_nodes = 2;
  auto no_store = ThrownError([&] { Client::Create(plugin, "cuda", options); });
  ASSERT_TRUE(no_store);
  EXPECT_EQ(no_store->kind(), ErrorKind::kValue);
  EXPECT_TRUE(Contains(no_store->what(), "needs a kv_store"));
  options.kv_store = std::make_shared<MemoryStore>();
  options.node_id = 2;
  auto bad_node = ThrownError([&] { Client::Create(plugin, "cuda", options); });
  ASSERT_TRUE(bad_node);
  EXPECT_TRUE(Contains(bad_node->what(), "node_id must be in [0, num_nodes): got node_id 2, num_nodes 2"));
  options.node_id = 0;
  auto cpu = ThrownError([&] { Client::Create(plugin, "cpu", options); });
  ASSERT_TRUE(cpu);
  EXPECT_TRUE(Contains(cpu->what(), "are cuda clients, not 'cpu'"));
}

}  // namespace
}  // namespace cuxla
