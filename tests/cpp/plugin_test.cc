// Finding, choosing and loading PJRT plugins, and the guards on a plugin's
// function table.
#include <dlfcn.h>
#include <link.h>
#include <unistd.h>

#include <cstddef>
#include <filesystem>
#include <fstream>
#include <string>

#include "pjrt/xla_environment.h"
#include "test_env.h"

namespace cuxla::pjrt {
namespace {

namespace fs = std::filesystem;
using test::Contains;
using test::PluginPath;
using test::ScopedEnv;
using test::TestPlatform;
using test::ThrownError;

// The file the dynamic loader opens for `soname`; empty when it has none.
std::string LibraryPath(const char* soname) {
  void* handle = dlopen(soname, RTLD_NOW | RTLD_NOLOAD);
  if (handle == nullptr) handle = dlopen(soname, RTLD_NOW);
  if (handle == nullptr) return "";
  link_map* map = nullptr;
  std::string path;
  if (dlinfo(handle, RTLD_DI_LINKMAP, &map) == 0 && map != nullptr) path = map->l_name;
  dlclose(handle);
  return path;
}

// A file in the temp directory, removed at the end of the scope.
class TempFile {
 public:
  TempFile(const std::string& name, const std::string& contents)
      : path_(fs::temp_directory_path() / (std::to_string(getpid()) + "_" + name)) {
    std::ofstream(path_) << contents;
  }
  ~TempFile() {
    std::error_code ec;
    fs::remove(path_, ec);
  }
  std::string path() const { return path_.string(); }

 private:
  fs::path path_;
};

TEST(PluginTest, LoadingTheSameFileTwiceGivesTheSamePlugin) {
  auto first = Plugin::Load(PluginPath());
  auto second = Plugin::Load(PluginPath());
  EXPECT_EQ(first.get(), second.get());
  EXPECT_EQ(first->path(), fs::canonical(PluginPath()).string());
}

TEST(PluginTest, LoadingThroughARedundantPathGivesTheSamePlugin) {
  const fs::path path(PluginPath());
  const std::string redundant = path.parent_path().string() + "/./" + path.filename().string();
  EXPECT_EQ(Plugin::Load(redundant).get(), Plugin::Load(PluginPath()).get());
}

TEST(PluginTest, ApiHasMajorVersionZeroAndAPositiveMinor) {
  const Api& api = Plugin::Load(PluginPath())->api();
  EXPECT_EQ(api.major(), 0);
  EXPECT_GT(api.minor(), 0);
  EXPECT_EQ(api.version(), "0." + std::to_string(api.minor()));
}

TEST(PluginTest, AttributesIncludeTheXlaVersion) {
  const auto attributes = Plugin::Load(PluginPath())->Attributes();
  bool found = false;
  for (const auto& [name, value] : attributes)
    if (name == "xla_version") found = !value.empty();
  EXPECT_TRUE(found) << "no non-empty xla_version among " << attributes.size() << " attributes";
}

TEST(PluginTest, LoadOfAMissingFileNamesThePathAndCause) {
  const std::string path = "/nonexistent/cuxla/xla_cpu_pjrt.so";
  auto error = ThrownError([&] { Plugin::Load(path); });
  ASSERT_TRUE(error);
  EXPECT_EQ(error->kind(), ErrorKind::kValue);
  EXPECT_TRUE(Contains(error->what(), path));
  EXPECT_TRUE(Contains(error->what(), "no such file"));
}

TEST(PluginTest, LoadOfAFileThatIsNotASharedLibraryNamesThePath) {
  TempFile text("not_a_plugin.so", "this is text, not ELF\n");
  auto error = ThrownError([&] { Plugin::Load(text.path()); });
  ASSERT_TRUE(error);
  EXPECT_EQ(error->kind(), ErrorKind::kValue);
  EXPECT_TRUE(Contains(error->what(), text.path()));
}

TEST(PluginTest, LoadOfALibraryWithoutGetPjrtApiSaysSo) {
  const std::string libm = LibraryPath("libm.so.6");
  if (libm.empty()) GTEST_SKIP() << "the dynamic loader finds no libm.so.6 to load";
  auto error = ThrownError([&] { Plugin::Load(libm); });
  ASSERT_TRUE(error);
  EXPECT_EQ(error->kind(), ErrorKind::kValue);
  EXPECT_TRUE(Contains(error->what(), libm));
  EXPECT_TRUE(Contains(error->what(), "GetPjrtApi"));
}

TEST(PluginTest, PluginOfAnotherMajorVersionIsRefusedNamingBoth) {
  auto error = ThrownError([] { Plugin::Load(FAKE_PJRT_future_PATH); });
  ASSERT_TRUE(error);
  EXPECT_EQ(error->kind(), ErrorKind::kValue);
  EXPECT_TRUE(Contains(error->what(), "PJRT C API 1.0"));
  EXPECT_TRUE(Contains(error->what(), "major version 0"));
}

TEST(PluginTest, PluginTooOldForAClientSaysWhichVersionIsNeeded) {
  std::shared_ptr<const Plugin> old = Plugin::Load(FAKE_PJRT_old_PATH);
  EXPECT_EQ(old->api().minor(), 1);
  auto error = ThrownError([&] { Client::Create(old, "cpu", {}); });
  ASSERT_TRUE(error);
  EXPECT_EQ(error->kind(), ErrorKind::kRuntime);
  EXPECT_TRUE(Contains(error->what(), "PJRT_Client_Create is not provided"));
  EXPECT_TRUE(Contains(error->what(), "PJRT C API 0.1"));
  EXPECT_TRUE(Contains(error->what(), "0." + std::to_string(PJRT_API_MINOR)));
}

TEST(PluginTest, FindPluginWithoutPackageDirsFindsNothingAndSaysWhy) {
  ScopedEnv no_override("CUXLA_PJRT_PLUGIN", std::nullopt);
  const PluginSearch search = FindPlugin(TestPlatform(), {});
  EXPECT_EQ(search.platform, TestPlatform());
  EXPECT_FALSE(search.found);
  ASSERT_EQ(search.candidates.size(), 1u);
  EXPECT_TRUE(Contains(search.candidates[0].path, fs::path(PluginPath()).filename().string()));
  EXPECT_TRUE(Contains(search.candidates[0].outcome, "0 package directories"));
}

TEST(PluginTest, FindPluginForAnUnknownPlatformSaysCuxlaKnowsNoPackage) {
  ScopedEnv no_override("CUXLA_PJRT_PLUGIN", std::nullopt);
  const PluginSearch search = FindPlugin("tpu", test::PackageDirs());
  EXPECT_FALSE(search.found);
  ASSERT_FALSE(search.candidates.empty());
  EXPECT_TRUE(Contains(search.candidates.back().outcome, "'tpu'"));
}

TEST(PluginTest, FindPluginFindsTheInstalledPluginInPackageDirs) {
  ScopedEnv no_override("CUXLA_PJRT_PLUGIN", std::nullopt);
  const PluginSearch search = FindPlugin(TestPlatform(), test::PackageDirs());
  ASSERT_TRUE(search.found);
  EXPECT_EQ(*search.found, PluginPath());
  EXPECT_EQ(PlatformOfPluginFile(*search.found), TestPlatform());
}

TEST(PluginTest, FindPluginTakesCuxlaPjrtPluginFirst) {
  ScopedEnv override("CUXLA_PJRT_PLUGIN", PluginPath());
  const PluginSearch search = FindPlugin(TestPlatform(), {});
  ASSERT_TRUE(search.found);
  EXPECT_EQ(*search.found, PluginPath());
  ASSERT_EQ(search.candidates.size(), 1u);
  EXPECT_EQ(search.candidates[0].path, PluginPath());
  EXPECT_EQ(search.candidates[0].outcome, "found");
}

TEST(PluginTest, FindPluginReportsAMissingCuxlaPjrtPluginAndLooksNoFurther) {
  const std::string missing = "/nonexistent/cuxla/plugin.so";
  ScopedEnv override("CUXLA_PJRT_PLUGIN", missing);
  const PluginSearch search = FindPlugin(TestPlatform(), test::PackageDirs());
  EXPECT_FALSE(search.found);
  ASSERT_EQ(search.candidates.size(), 1u);
  EXPECT_EQ(search.candidates[0].path, missing);
  EXPECT_TRUE(Contains(search.candidates[0].outcome, "CUXLA_PJRT_PLUGIN"));
}

TEST(PluginTest, ChoosePluginRefusesAMissingCuxlaPjrtPluginNamingTheVariableAndPath) {
  const std::string missing = "/nonexistent/cuxla/plugin.so";
  ScopedEnv override("CUXLA_PJRT_PLUGIN", missing);
  for (const std::string platform : {"", "cpu"}) {
    auto error = ThrownError([&] { ChoosePlugin(platform, "", test::PackageDirs()); });
    ASSERT_TRUE(error) << "platform '" << platform << "'";
    EXPECT_EQ(error->kind(), ErrorKind::kValue);
    EXPECT_EQ(std::string(error->what()), "CUXLA_PJRT_PLUGIN=" + missing + ": no such file");
  }
}

TEST(PluginTest, PlatformOfPluginFileKnowsTheCpuAndCudaPlugins) {
  EXPECT_EQ(PlatformOfPluginFile("/site-packages/xla_plugins/xla_cpu_pjrt/xla_cpu_pjrt.so"), "cpu");
  EXPECT_EQ(PlatformOfPluginFile("/site-packages/jax_plugins/xla_cuda13/xla_cuda_plugin.so"), "cuda");
  EXPECT_EQ(PlatformOfPluginFile("/usr/lib/libsomething.so"), std::nullopt);
}

TEST(PluginTest, ChoosePluginTakesAnExplicitPathAndPlatformAsGiven) {
  const PluginChoice choice = ChoosePlugin("cpu", "/some/where/custom.so", {});
  EXPECT_EQ(choice.platform, "cpu");
  EXPECT_EQ(choice.path, "/some/where/custom.so");
}

TEST(PluginTest, ChoosePluginTellsThePlatformFromAKnownFileName) {
  const PluginChoice choice = ChoosePlugin("", "/opt/xla_cuda_plugin.so", {});
  EXPECT_EQ(choice.platform, "cuda");
  EXPECT_EQ(choice.path, "/opt/xla_cuda_plugin.so");
}

TEST(PluginTest, ChoosePluginRefusesAnUnknownFileWithoutAPlatform) {
  TempFile custom("custom.so", "");
  auto error = ThrownError([&] { ChoosePlugin("", custom.path(), {}); });
  ASSERT_TRUE(error);
  EXPECT_EQ(error->kind(), ErrorKind::kValue);
  EXPECT_TRUE(Contains(error->what(), custom.path()));
  EXPECT_TRUE(Contains(error->what(), "cannot tell the platform"));
}

TEST(PluginTest, ChoosePluginSaysAMissingFileOfAnUnknownNameDoesNotExist) {
  auto error = ThrownError([] { ChoosePlugin("", "/nonexistent/cuxla/custom.so", {}); });
  ASSERT_TRUE(error);
  EXPECT_EQ(error->kind(), ErrorKind::kValue);
  EXPECT_EQ(std::string(error->what()), "cannot load PJRT plugin /nonexistent/cuxla/custom.so: no such file");
}

TEST(PluginTest, ChoosePluginListsEveryPlaceLookedAtWhenNothingIsFound) {
  ScopedEnv no_override("CUXLA_PJRT_PLUGIN", std::nullopt);
  auto error = ThrownError([] { ChoosePlugin("tpu", "", {}); });
  ASSERT_TRUE(error);
  EXPECT_EQ(error->kind(), ErrorKind::kNoDevice);
  EXPECT_TRUE(Contains(error->what(), "platform 'tpu'"));
  EXPECT_TRUE(Contains(error->what(), "looked at:"));
}

TEST(XlaLoggingTest, WarningsAndErrorsByDefaultAndTheUsersOwnSettingStands) {
  EXPECT_EQ(XlaMinLogLevel(nullptr, nullptr, nullptr, nullptr), "1");
  EXPECT_EQ(XlaMinLogLevel(nullptr, "0", nullptr, nullptr), std::nullopt);
  EXPECT_EQ(XlaMinLogLevel(nullptr, nullptr, "1", nullptr), "0");
  EXPECT_EQ(XlaMinLogLevel(nullptr, nullptr, nullptr, "cpu_client=1"), "0");
  EXPECT_EQ(XlaMinLogLevel(nullptr, "2", "1", nullptr), std::nullopt);
}

TEST(XlaLoggingTest, XlasLevelIsInTheEnvironmentBeforeMain) {
  // Set while the library was loaded, where a plugin opened later reads it.
  EXPECT_NE(std::getenv("TF_CPP_MIN_LOG_LEVEL"), nullptr);
}

// The settings that leave each of cuxla's flags but the one under test to XLA.
constexpr XlaSettings kOthersAsked{.command_buffers = "1", .triton_gemm = "1", .dot_merger = "1"};
// Added whatever the settings, unless the user's flags name it.
const std::string kXnnpackOff = " --xla_cpu_use_xnnpack=false";

TEST(XlaFlagsTest, EachSwitchIsOffUnlessAskedForOrTheUsersFlagsSayOtherwise) {
  struct Switch {
    const char* XlaSettings::*setting;
    const char* off;        // what cuxla adds
    const char* users_own;  // the user's own setting of that flag, which stands
  };
  const Switch switches[] = {
      {&XlaSettings::command_buffers, "--xla_gpu_enable_command_buffer=", "--xla_gpu_enable_command_buffer=FUSION"},
      {&XlaSettings::triton_gemm, "--xla_gpu_enable_triton_gemm=false", "--xla_gpu_enable_triton_gemm=true"},
      {&XlaSettings::dot_merger, "--xla_gpu_dot_merger_threshold_mb=0", "--xla_gpu_dot_merger_threshold_mb=32"},
  };
  for (const Switch& s : switches) {
    for (const char* value : {static_cast<const char*>(nullptr), "0"}) {
      XlaSettings settings = kOthersAsked;
      settings.*s.setting = value;
      EXPECT_EQ(XlaFlags(nullptr, settings), s.off + kXnnpackOff);
      EXPECT_EQ(XlaFlags("--xla_dump_to=/tmp/d", settings), std::string("--xla_dump_to=/tmp/d ") + s.off + kXnnpackOff);
      EXPECT_EQ(XlaFlags(s.users_own, settings), s.users_own + kXnnpackOff);
    }
  }
  EXPECT_EQ(XlaFlags("--xla_dump_to=/tmp/d", kOthersAsked), "--xla_dump_to=/tmp/d" + kXnnpackOff);
  EXPECT_EQ(XlaFlags("--xla_cpu_use_xnnpack=true", kOthersAsked), std::nullopt);
}

TEST(XlaFlagsTest, AllOfCuxlasFlagsUnsetIsEachOff) {
  EXPECT_EQ(XlaFlags(nullptr, {}),
            "--xla_gpu_enable_command_buffer= --xla_gpu_enable_triton_gemm=false --xla_gpu_dot_merger_threshold_mb=0" +
                kXnnpackOff);
}

TEST(XlaFlagsTest, AutotuneLevelWhenAskedForUnlessTheUsersFlagsSetIt) {
  XlaSettings settings = kOthersAsked;
  settings.autotune_level = "0";
  EXPECT_EQ(XlaFlags(nullptr, settings), "--xla_gpu_autotune_level=0" + kXnnpackOff);
  EXPECT_EQ(XlaFlags("--xla_gpu_autotune_level=4", settings), "--xla_gpu_autotune_level=4" + kXnnpackOff);
  settings.command_buffers = nullptr;
  settings.autotune_level = "2";
  EXPECT_EQ(XlaFlags(nullptr, settings), "--xla_gpu_enable_command_buffer= --xla_gpu_autotune_level=2" + kXnnpackOff);
}

TEST(XlaFlagsTest, XlasFlagsAreInTheEnvironmentBeforeMain) {
  // Set while the library was loaded (unless this run asked for XLA's own).
  const char* asked = std::getenv("CUXLA_COMMAND_BUFFERS");
  if (asked != nullptr && std::string(asked) == "1") GTEST_SKIP() << "CUXLA_COMMAND_BUFFERS=1 in this run";
  const char* flags = std::getenv("XLA_FLAGS");
  ASSERT_NE(flags, nullptr);
  EXPECT_TRUE(Contains(flags, "--xla_gpu_enable_command_buffer"));
}

TEST(XlaLoggingTest, CuxlaLogDecidesWhenSet) {
  EXPECT_EQ(XlaMinLogLevel("info", "2", nullptr, nullptr), "0");
  EXPECT_EQ(XlaMinLogLevel("warning", nullptr, "1", nullptr), "1");
  EXPECT_EQ(XlaMinLogLevel("error", "0", nullptr, nullptr), "2");
  EXPECT_EQ(XlaMinLogLevel("loud", nullptr, nullptr, nullptr), std::nullopt);
}

TEST(XlaEnvironmentTest, LoadRefusesASettingOfCuxlasThatXlaCannotTake) {
  struct Refused {
    const char* variable;
    const char* value;
    const char* message;
  };
  const Refused refused[] = {
      {"CUXLA_LOG", "loud", "CUXLA_LOG='loud' is not a log level"},
      {"CUXLA_COMMAND_BUFFERS", "yes", "CUXLA_COMMAND_BUFFERS='yes' is neither 0 nor 1"},
      {"CUXLA_TRITON_GEMM", "on", "CUXLA_TRITON_GEMM='on' is neither 0 nor 1"},
      {"CUXLA_DOT_MERGER", "off", "CUXLA_DOT_MERGER='off' is neither 0 nor 1"},
      {"CUXLA_AUTOTUNE_LEVEL", "9", "CUXLA_AUTOTUNE_LEVEL='9' is not a level from 0 to 4"},
  };
  for (const Refused& r : refused) {
    ScopedEnv setting(r.variable, r.value);
    auto error = ThrownError([] { Plugin::Load(PluginPath()); });
    ASSERT_TRUE(error) << r.variable;
    EXPECT_EQ(error->kind(), ErrorKind::kValue);
    EXPECT_TRUE(Contains(error->what(), r.message)) << error->what();
  }
}

// A function table that ends before PJRT_Client_Create, as a plugin older than
// that entry would have.
PJRT_Api ShortTable() {
  PJRT_Api table{};
  table.struct_size = offsetof(PJRT_Api, PJRT_Client_Create);
  table.pjrt_api_version.major_version = 0;
  table.pjrt_api_version.minor_version = 1;
  return table;
}

TEST(ApiTest, HasIsFalseForAnEntryPastTheEndOfTheTable) {
  PJRT_Api table = ShortTable();
  const Api api(&table, "fake.so");
  EXPECT_FALSE(api.Has(&PJRT_Api::PJRT_Client_Create));
}

TEST(ApiTest, HasIsFalseForANullEntryInsideTheTable) {
  PJRT_Api table = ShortTable();
  const Api api(&table, "fake.so");
  ASSERT_LT(offsetof(PJRT_Api, PJRT_Error_Message), table.struct_size);
  EXPECT_FALSE(api.Has(&PJRT_Api::PJRT_Error_Message));
}

TEST(ApiTest, GetOfAnEntryPastTheEndNamesTheEntryAndTheVersion) {
  PJRT_Api table = ShortTable();
  const Api api(&table, "fake.so");
  auto error = ThrownError([&] { api.Get(&PJRT_Api::PJRT_Client_Create, "PJRT_Client_Create"); });
  ASSERT_TRUE(error);
  EXPECT_TRUE(Contains(error->what(), "PJRT_Client_Create"));
  EXPECT_TRUE(Contains(error->what(), "0.1"));
  EXPECT_TRUE(Contains(error->what(), "fake.so"));
}

}  // namespace
}  // namespace cuxla::pjrt
