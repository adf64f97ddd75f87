"""Attention masks a compiled graph makes from no input (transformers'
causal mask under torch.compile) become the attention's flags: the causal
pattern `is_causal`, a mask that keeps everything none; any other mask, and
any mask made from an input, stays. Outputs and gradients match eager's."""
import pytest
import torch
import torch.nn.functional as F

import cuxla.dynamo


def _mask(kind: str, positions: torch.Tensor, padding: torch.Tensor) -> torch.Tensor:
    """A (batch, 1, T, T) mask built in the graph, as transformers builds one."""
    batch, length = padding.shape
    causal = (positions[None, :] <= positions[:, None])[None, None].expand(batch, 1, length, length)
    lowest = torch.finfo(torch.float32).min
    return {
        "boolean causal": lambda: causal,
        "additive causal, the lowest float": lambda: torch.zeros(causal.shape).masked_fill(~causal, lowest),
        "additive causal, -inf": lambda: torch.zeros(causal.shape).masked_fill(~causal, float("-inf")),
        "keeps everything": lambda: torch.ones(causal.shape, dtype=torch.bool),
        "additive zeros": lambda: torch.zeros(causal.shape),
        "a sliding window": lambda: causal & (positions[None, :] > positions[:, None] - 3)[None, None],
        "causal, a query not seeing one key": lambda: causal & ((positions != 3)[:, None] | (positions != 0)),
        "additive causal, a finite number": lambda: torch.zeros(causal.shape).masked_fill(~causal, -1e4),
        "causal with an input's padding": lambda: causal & padding[:, None, None, :],
    }[kind]()


# kind -> (the pair's mask is gone, is_causal)
FOLDED = {"boolean causal": (True, True), "additive causal, the lowest float": (True, True),
          "additive causal, -inf": (True, True), "keeps everything": (True, False), "additive zeros": (True, False)}
KEPT = ["a sliding window", "causal, a query not seeing one key", "additive causal, a finite number",
        "causal with an input's padding"]


class _Attention(torch.nn.Module):
    def __init__(self, kind: str):
        super().__init__()
        self.kind = kind
        self.project = torch.nn.Linear(16, 48)

    def forward(self, x, padding):
        batch, length, _ = x.shape
        q, k, v = self.project(x).view(batch, length, 3, 2, 8).permute(2, 0, 3, 1, 4)
        if self.kind == "is_causal":
            return F.scaled_dot_product_attention(q, k, v, is_causal=True)
        return F.scaled_dot_product_attention(q, k, v, attn_mask=_mask(self.kind, torch.arange(length), padding))


def _pairs_lowered(monkeypatch) -> list:
    """(mask given, is_causal) of each attention op in the graphs handed to
    lowering (forward and backward), as they are lowered."""
    lowered = []
    lower = cuxla.dynamo._partition_and_lower

    def recording(graph, *args, **kwargs):
        for node in graph.graph.nodes:
            if node.op == "call_function" and node.target in _PAIR:
                arguments = dict(zip((a.name for a in node.target._schema.arguments), node.args)) | node.kwargs
                lowered.append((arguments["bias"] is not None, arguments["is_causal"]))
        return lower(graph, *args, **kwargs)

    monkeypatch.setattr(cuxla.dynamo, "_partition_and_lower", recording)
    return lowered


_PAIR = (torch.ops.cuxla.attention.default, torch.ops.cuxla.attention_backward.default)


@pytest.mark.parametrize("kind", [*FOLDED, *KEPT])
def test_a_mask_made_from_no_input_becomes_the_attentions_flags(monkeypatch, kind):
    monkeypatch.setenv("CUXLA_CACHE_DIR", "")  # lowered here, not taken from a cache
    lowered = _pairs_lowered(monkeypatch)
    torch.manual_seed(0)
    model = _Attention(kind)
    x = torch.randn(2, 8, 16)
    padding = torch.ones(2, 8, dtype=torch.bool)
    expected = model(x, padding)
    expected_grads = torch.autograd.grad(expected.square().sum(), model.parameters())

    torch._dynamo.reset()
    cuxla.dynamo.reset_report()
    out = torch.compile(model, backend="cuxla")(x, padding)
    grads = torch.autograd.grad(out.square().sum(), model.parameters())
    torch.testing.assert_close(out, expected, rtol=1e-5, atol=1e-5)
    for got, want in zip(grads, expected_grads):
        torch.testing.assert_close(got, want, rtol=1e-4, atol=1e-5)
    report = cuxla.dynamo.report()
    assert report["xla_ops"] == report["aten_ops"], report
    gone, causal = FOLDED.get(kind, (False, False))
    assert lowered == [(not gone, causal)] * 2, lowered


def test_a_folded_masks_ops_leave_the_graph(monkeypatch):
    # The causal mask made in the graph compiles to the very ops of is_causal, the mask's own gone.
    monkeypatch.setenv("CUXLA_CACHE_DIR", "")
    x, padding = torch.randn(2, 8, 16, requires_grad=True), torch.ones(2, 8, dtype=torch.bool)
    ops = []
    for kind in ("boolean causal", "is_causal"):
        torch._dynamo.reset()
        cuxla.dynamo.reset_report()
        torch.compile(_Attention(kind), backend="cuxla")(x, padding).sum().backward()
        ops.append(cuxla.dynamo.report()["aten_ops"])
    assert ops[0] == ops[1], ops


def test_a_mask_that_cannot_be_computed_at_compile_time_stays(monkeypatch):
    # Computing the mask fails (here, reading its pattern): it stays a mask, the graph in XLA.
    from cuxla import _attention_masks

    monkeypatch.setenv("CUXLA_CACHE_DIR", "")
    monkeypatch.setattr(_attention_masks, "_pattern", lambda mask: 1 / 0)
    lowered = _pairs_lowered(monkeypatch)
    torch._dynamo.reset()
    cuxla.dynamo.reset_report()
    model, x = _Attention("boolean causal"), torch.randn(2, 8, 16)
    torch.testing.assert_close(torch.compile(model, backend="cuxla")(x, torch.ones(2, 8, dtype=torch.bool)),
                               model(x, torch.ones(2, 8, dtype=torch.bool)), rtol=1e-5, atol=1e-5)
    report = cuxla.dynamo.report()
    assert lowered == [(True, False)] * 2 and report["xla_ops"] == report["aten_ops"], (lowered, report)
