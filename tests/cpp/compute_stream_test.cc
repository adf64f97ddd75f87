// The compute-stream probe: its FFI handler against hand-made call frames,
// and the probe itself on the test platform.
#include "pjrt/programs/compute_stream.h"

#include "test_env.h"

namespace cuxla::pjrt {
namespace {

using test::Contains;
using test::ScopedEnv;
using test::TestClient;
using test::TestPlatform;

TEST(ComputeStreamTest, HandlerTellsXlaItsFfiVersionWhenAskedForMetadata) {
  XLA_FFI_Metadata metadata{};
  metadata.struct_size = XLA_FFI_Metadata_STRUCT_SIZE;
  metadata.traits = 0xff;
  XLA_FFI_Metadata_Extension extension{};
  extension.extension_base = {XLA_FFI_Metadata_Extension_STRUCT_SIZE, XLA_FFI_Extension_Metadata, nullptr};
  extension.metadata = &metadata;
  XLA_FFI_CallFrame frame{};
  frame.struct_size = XLA_FFI_CallFrame_STRUCT_SIZE;
  frame.extension_start = &extension.extension_base;  // no api, no ctx: must not be touched

  EXPECT_EQ(RecordComputeStream(&frame), nullptr);
  EXPECT_EQ(metadata.api_version.major_version, XLA_FFI_API_MAJOR);
  EXPECT_EQ(metadata.api_version.minor_version, XLA_FFI_API_MINOR);
  EXPECT_EQ(metadata.traits, 0u);  // not command-buffer compatible: runs on the stream itself
}

// A fake XLA FFI API whose stream query fails with a known error.
XLA_FFI_Error* const kStreamError = reinterpret_cast<XLA_FFI_Error*>(0x5eed);
XLA_FFI_ExecutionContext* seen_context = nullptr;

XLA_FFI_Error* FailingStreamGet(XLA_FFI_Stream_Get_Args* args) {
  seen_context = args->ctx;
  return kStreamError;
}

TEST(ComputeStreamTest, HandlerAsksForTheStreamOfItsContextAndPassesOnXlasError) {
  XLA_FFI_Api api{};
  api.struct_size = XLA_FFI_Api_STRUCT_SIZE;
  api.XLA_FFI_Stream_Get = &FailingStreamGet;
  auto* context = reinterpret_cast<XLA_FFI_ExecutionContext*>(0xc0de);
  XLA_FFI_CallFrame frame{};
  frame.struct_size = XLA_FFI_CallFrame_STRUCT_SIZE;
  frame.api = &api;
  frame.ctx = context;
  frame.stage = XLA_FFI_ExecutionStage_EXECUTE;

  EXPECT_EQ(RecordComputeStream(&frame), kStreamError);
  EXPECT_EQ(seen_context, context);
}

TEST(ComputeStreamTest, IsFoundOnCudaAndExplainedElsewhere) {
  const auto& state = *TestClient()->state();
  const ComputeStream& found = state.compute_stream(state.devices.front());
  if (TestPlatform() == "cuda") {
    EXPECT_NE(found.stream, 0) << found.why_not;
    EXPECT_TRUE(found.why_not.empty());
    // Probed once: the same record again.
    EXPECT_EQ(&state.compute_stream(state.devices.front()), &found);
  } else {
    EXPECT_EQ(found.stream, 0);
    EXPECT_TRUE(Contains(found.why_not, "not a CUDA client"));
  }
}

TEST(ComputeStreamTest, EnvironmentTurnsTheProbeOff) {
  if (TestPlatform() != "cuda") GTEST_SKIP() << "the probe only runs for CUDA clients";
  ScopedEnv off("CUXLA_COMPUTE_STREAM", "0");
  const auto& state = *TestClient()->state();
  const ComputeStream probed = ProbeComputeStream(state, state.devices.front());
  EXPECT_EQ(probed.stream, 0);
  EXPECT_TRUE(Contains(probed.why_not, "CUXLA_COMPUTE_STREAM=0"));
}

}  // namespace
}  // namespace cuxla::pjrt
