"""torch.compile(backend="cuxla"): training matches eager PyTorch step by step,
fallback to PyTorch for what XLA should not run, registration."""
import copy

import pytest
import torch

import cuxla
import cuxla.dynamo
from cuxla import _models


@pytest.fixture
def tdev(client):
    if client.platform == "cuda":
        # Eager PyTorch in full float32, as XLA's lowering asks (no TF32).
        torch.backends.cudnn.allow_tf32 = False
        torch.backends.cuda.matmul.allow_tf32 = False
        return "cuda"
    return "cpu"


def test_backend_is_registered_under_its_name():
    assert "cuxla" in torch._dynamo.list_backends()


def _compare_training(workload, steps):
    reference = copy.deepcopy(workload)
    eager = _models.train(reference, steps)
    torch._dynamo.reset()
    cuxla.dynamo.reset_report()
    compiled = _models.train(workload, steps, compile_backend="cuxla")
    worst = max(abs(a - b) / max(abs(a), 1e-12) for a, b in zip(eager, compiled))
    return eager, compiled, worst


@pytest.mark.parametrize("name", ["mlp", "cnn", "bert"])
def test_training_matches_eager_at_every_step(tdev, name):
    size = "tiny" if tdev == "cpu" or name != "bert" else "base"
    eager, compiled, worst = _compare_training(_models.WORKLOADS[name](tdev, size), steps=50)
    assert worst <= 1e-3, f"{name}: worst relative loss difference {worst:.2e}"
    assert compiled[-1] < compiled[0], "the loss went down"
    report = cuxla.dynamo.report()
    assert report["xla_programs"] >= 2, report  # forward and backward
    memory = ""
    if tdev == "cuda":
        xla = cuxla._client.client_for_platform("cuda").memory_stats() or {}
        memory = (f", peak memory: torch {torch.cuda.max_memory_allocated() / 2**30:.2f} GiB, "
                  f"XLA {(xla.get('peak_bytes_in_use') or 0) / 2**30:.2f} GiB")
    print(f"{name}({size}) on {tdev}: eager {eager[0]:.4f} -> {eager[-1]:.4f}, "
          f"cuxla {compiled[0]:.4f} -> {compiled[-1]:.4f}, worst relative difference {worst:.1e}, "
          f"lowering {report['lowering_s']:.2f} s, compile {report['compile_s']:.2f} s{memory}")


class WithNoise(torch.nn.Module):
    """A random op between two layers: it must run in PyTorch."""

    def __init__(self):
        super().__init__()
        self.a = torch.nn.Linear(8, 8)
        self.b = torch.nn.Linear(8, 1)

    def forward(self, x):
        h = torch.relu(self.a(x))
        return self.b(h + 0.0 * torch.rand_like(h))


def test_random_ops_fall_back_to_pytorch_and_are_reported(tdev):
    torch.manual_seed(0)
    model = WithNoise().to(tdev)
    x = torch.randn(4, 8, device=tdev)
    expected = model(x)
    torch._dynamo.reset()
    cuxla.dynamo.reset_report()
    got = torch.compile(model, backend="cuxla")(x)
    assert torch.allclose(got, expected, rtol=1e-5, atol=1e-6)
    report = cuxla.dynamo.report()
    assert any("rand" in f["op"] and "random" in f["reason"] for f in report["fallbacks"]), report
    assert report["xla_programs"] >= 1, "the rest still runs in XLA"


def test_inputs_and_outputs_share_memory_with_xla(tdev):
    # The compiled graph's outputs are XLA buffers handed to PyTorch: their
    # memory is not PyTorch's (no copy back into PyTorch's allocator).
    torch._dynamo.reset()
    model = torch.nn.Linear(4, 4).to(tdev)
    out = torch.compile(model, backend="cuxla")(torch.randn(2, 4, device=tdev))
    assert cuxla.from_dlpack(out).unsafe_buffer_pointer() == out.data_ptr()


def test_training_steps_copy_nothing_between_host_and_device(tdev):
    if tdev != "cuda":
        pytest.skip("host <-> device copies exist on CUDA only")
    workload = _models.mlp("cuda")
    torch._dynamo.reset()
    model = torch.compile(workload.model, backend="cuxla")
    optimizer = torch.optim.AdamW(workload.model.parameters(), lr=1e-3)

    def step():
        optimizer.zero_grad(set_to_none=True)
        workload.loss(model, workload.batch).backward()
        optimizer.step()

    for _ in range(3):
        step()
    torch.cuda.synchronize()
    activities = [torch.profiler.ProfilerActivity.CPU, torch.profiler.ProfilerActivity.CUDA]
    with torch.profiler.profile(activities=activities) as profile:
        for _ in range(3):
            step()
        torch.cuda.synchronize()
    copies = [e.name for e in profile.events() if "HtoD" in e.name or "DtoH" in e.name]
    assert not copies, f"host <-> device copies in 3 steps: {copies[:8]}"
