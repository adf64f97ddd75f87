"""The model zoo of `python -m cuxla bench models`: the Hugging Face models of
PyTorch's dynamo benchmark list (benchmarks/dynamo/huggingface_models_list.txt)
and the LLM families it names, each built from its transformers config class
with a small config (random weights, nothing downloaded), and the run of one
of them: N AdamW steps eager, then the same N steps under
torch.compile(backend="cuxla"), losses and parameters compared.

    python -m cuxla._zoo run BertForMaskedLM --steps 3 [--device cpu|cuda]

prints the result as one JSON line (the last line of stdout). The parent
(`cuxla._bench.models`) runs each model in its own process, so that a crash or
a hang costs one row.
"""
from __future__ import annotations

import argparse
import copy
import json
import math
import re
import statistics
import sys
import time
import traceback

BATCH, SEQUENCE = 2, 16

# Every model gets these sizes, under whichever of the names its config uses.
SMALL = dict(
    vocab_size=512, hidden_size=64, d_model=64, n_embd=64, dim=64, embedding_size=64,
    num_hidden_layers=2, num_layers=2, n_layer=2, n_layers=2, encoder_layers=2, decoder_layers=2,
    num_decoder_layers=2,
    num_attention_heads=4, num_heads=4, n_head=4, n_heads=4, attention_heads=4, encoder_attention_heads=4,
    decoder_attention_heads=4, num_key_value_heads=2, head_dim=16, d_kv=16, d_head=16,
    intermediate_size=128, hidden_dim=128, d_ff=128, d_inner=128, n_inner=128, ffn_dim=128, encoder_ffn_dim=128,
    decoder_ffn_dim=128,
    max_position_embeddings=64, n_positions=64, max_target_positions=64,
    # Training needs no key/value cache, and a cache object in the graph is not what is measured.
    use_cache=False,
)
# Windows smaller than the sequence, so that the local-attention code runs.
WINDOW = dict(sliding_window=8)

# name -> (transformers model class, config overrides). The config class is
# the model class's own; the inputs follow from the class name (see _batch).
MODELS: dict[str, tuple[str, dict]] = {
    "AlbertForMaskedLM": ("AlbertForMaskedLM", {}),
    "AlbertForQuestionAnswering": ("AlbertForQuestionAnswering", {}),
    "AllenaiLongformerBase": ("LongformerForMaskedLM", {"attention_window": 8}),
    "BartForCausalLM": ("BartForCausalLM", {}),
    "BartForConditionalGeneration": ("BartForConditionalGeneration", {}),
    "BertForMaskedLM": ("BertForMaskedLM", {}),
    "BertForQuestionAnswering": ("BertForQuestionAnswering", {}),
    "BlenderbotForCausalLM": ("BlenderbotForCausalLM", {}),
    "BlenderbotForConditionalGeneration": ("BlenderbotForConditionalGeneration", {}),
    "BlenderbotSmallForCausalLM": ("BlenderbotSmallForCausalLM", {}),
    "BlenderbotSmallForConditionalGeneration": ("BlenderbotSmallForConditionalGeneration", {}),
    "CamemBert": ("CamembertForMaskedLM", {}),
    "DebertaV2ForMaskedLM": ("DebertaV2ForMaskedLM", {}),
    "DebertaV2ForQuestionAnswering": ("DebertaV2ForQuestionAnswering", {}),
    "DistilBertForMaskedLM": ("DistilBertForMaskedLM", {}),
    "DistilBertForQuestionAnswering": ("DistilBertForQuestionAnswering", {}),
    "DistillGPT2": ("GPT2LMHeadModel", {}),
    "ElectraForCausalLM": ("ElectraForCausalLM", {"is_decoder": True}),
    "ElectraForQuestionAnswering": ("ElectraForQuestionAnswering", {}),
    "GPT2ForSequenceClassification": ("GPT2ForSequenceClassification", {"pad_token_id": 0}),
    "GPTJForCausalLM": ("GPTJForCausalLM", {"rotary_dim": 8}),
    "GPTJForQuestionAnswering": ("GPTJForQuestionAnswering", {"rotary_dim": 8}),
    "GPTNeoForCausalLM": ("GPTNeoForCausalLM", {"attention_types": [[["global", "local"], 1]], "window_size": 8}),
    "GPTNeoForSequenceClassification": ("GPTNeoForSequenceClassification",
                                        {"attention_types": [[["global", "local"], 1]], "window_size": 8,
                                         "pad_token_id": 0}),
    "GoogleFnet": ("FNetForMaskedLM", {}),
    "LayoutLMForMaskedLM": ("LayoutLMForMaskedLM", {}),
    "LayoutLMForSequenceClassification": ("LayoutLMForSequenceClassification", {}),
    "M2M100ForConditionalGeneration": ("M2M100ForConditionalGeneration", {}),
    "MBartForCausalLM": ("MBartForCausalLM", {}),
    "MBartForConditionalGeneration": ("MBartForConditionalGeneration", {}),
    "MT5ForConditionalGeneration": ("MT5ForConditionalGeneration", {}),
    "MegatronBertForCausalLM": ("MegatronBertForCausalLM", {"is_decoder": True}),
    "MegatronBertForQuestionAnswering": ("MegatronBertForQuestionAnswering", {}),
    # MobileBERT's attention runs at the bottleneck width, not the hidden one.
    "MobileBertForMaskedLM": ("MobileBertForMaskedLM", {"intra_bottleneck_size": 32, "num_feedforward_networks": 2}),
    "MobileBertForQuestionAnswering": ("MobileBertForQuestionAnswering",
                                       {"intra_bottleneck_size": 32, "num_feedforward_networks": 2}),
    "OPTForCausalLM": ("OPTForCausalLM", {"word_embed_proj_dim": 64}),
    "PLBartForCausalLM": ("PLBartForCausalLM", {}),
    "PLBartForConditionalGeneration": ("PLBartForConditionalGeneration", {}),
    "PegasusForCausalLM": ("PegasusForCausalLM", {}),
    "PegasusForConditionalGeneration": ("PegasusForConditionalGeneration", {}),
    "RobertaForCausalLM": ("RobertaForCausalLM", {"is_decoder": True}),
    "RobertaForQuestionAnswering": ("RobertaForQuestionAnswering", {}),
    # T5's config no longer says which token starts the decoder; T5 used pad (0).
    "T5ForConditionalGeneration": ("T5ForConditionalGeneration", {"decoder_start_token_id": 0}),
    # The other T5: gated GELU feed-forward, untied head, 2 wider heads (T5 v1.1's shape).
    "T5Small": ("T5ForConditionalGeneration", {"decoder_start_token_id": 0, "feed_forward_proj": "gated-gelu",
                                               "tie_word_embeddings": False, "num_heads": 2, "d_kv": 32}),
    "TrOCRForCausalLM": ("TrOCRForCausalLM", {}),
    "XGLMForCausalLM": ("XGLMForCausalLM", {}),
    "XLNetLMHeadModel": ("XLNetLMHeadModel", {}),
    "YituTechConvBert": ("ConvBertForMaskedLM", {}),
    "Llama": ("LlamaForCausalLM", {}),
    "Gemma2": ("Gemma2ForCausalLM", WINDOW),
    "Gemma3": ("Gemma3ForCausalLM", WINDOW),
    "Whisper": ("WhisperForConditionalGeneration", {"num_mel_bins": 16, "max_source_positions": 16}),
    "Qwen3": ("Qwen3ForCausalLM", {}),
    "Mistral": ("MistralForCausalLM", WINDOW),
    "GptOss": ("GptOssForCausalLM", {**WINDOW, "num_local_experts": 4, "num_experts_per_tok": 2}),
}

# A BERT-like encoder, a GPT-2 decoder, two seq2seq models and a Llama: about
# 80 s together, one at a time, on a 2-core CPU.
CI_SUBSET = ["BertForMaskedLM", "DistillGPT2", "T5ForConditionalGeneration", "BartForConditionalGeneration", "Llama"]

_DROPOUT = re.compile(r"(dropout|pdrop|layerdrop)(_prob|_rate|_p)?$")


def config_for(config_cls, overrides: dict, dropout: str = "zero"):
    """The small config: SMALL under the names this config has, overrides on top."""
    defaults = config_cls().to_dict()
    kwargs = {k: v for k, v in SMALL.items() if k in defaults}
    vocab = kwargs.get("vocab_size", defaults.get("vocab_size"))
    # Special tokens of the full vocabulary would index past the small one.
    for key, value in defaults.items():
        if key.endswith("token_id") and isinstance(value, int) and vocab and value >= vocab:
            kwargs[key] = vocab - 1
    if dropout == "zero":
        # XLA and PyTorch draw different random numbers (random ops stay in
        # PyTorch, but in another order): with dropout the runs cannot agree.
        kwargs.update({k: 0.0 for k in defaults if _DROPOUT.search(k)})
    kwargs.update(overrides)
    return config_cls(**kwargs)


def build(name: str, device: str, dropout: str = "zero"):
    """(model, batch) for a zoo name, or for any transformers model class
    name; None when transformers has no such class."""
    import torch
    import transformers

    class_name, overrides = MODELS.get(name, (name, {}))
    model_cls = getattr(transformers, class_name, None)
    if model_cls is None or not hasattr(model_cls, "config_class"):
        return None
    config = config_for(model_cls.config_class, overrides, dropout)
    torch.manual_seed(0)
    model = model_cls(config).to(device).train()
    if dropout == "zero":  # modules that took a rate not named like the config's
        for module in model.modules():
            if isinstance(module, torch.nn.modules.dropout._DropoutNd):
                module.p = 0.0
    return model, _batch(class_name, config, device)


def _batch(class_name: str, config, device: str) -> dict:
    import torch

    # Ids above the special tokens (pad, bos, eos are small ids or vocab - 1).
    ids = torch.randint(4, config.vocab_size - 1, (BATCH, SEQUENCE), device=device)
    if class_name.endswith("ForQuestionAnswering"):
        return {"input_ids": ids, "start_positions": torch.randint(0, SEQUENCE, (BATCH,), device=device),
                "end_positions": torch.randint(0, SEQUENCE, (BATCH,), device=device)}
    if class_name.endswith("ForSequenceClassification"):
        return {"input_ids": ids, "labels": torch.randint(0, config.num_labels, (BATCH,), device=device)}
    if class_name.startswith("Whisper"):  # the encoder's two convolutions halve the frames
        frames = 2 * config.max_source_positions
        return {"input_features": torch.randn(BATCH, config.num_mel_bins, frames, device=device), "labels": ids}
    # Language models, masked, causal and seq2seq: the model shifts the labels itself.
    return {"input_ids": ids, "labels": ids}


def _train(model, batch: dict, steps: int, sync) -> tuple[list[float], list[float]]:
    """Losses and seconds of `steps` AdamW steps."""
    import torch

    optimizer = torch.optim.AdamW(model.parameters(), lr=1e-3)
    torch.manual_seed(1)  # the same random numbers (with dropout) in both runs
    losses, times = [], []
    for _ in range(steps):
        start = time.perf_counter()
        optimizer.zero_grad(set_to_none=True)
        loss = model(**batch).loss
        loss.backward()
        optimizer.step()
        losses.append(loss.item())
        sync()
        times.append(time.perf_counter() - start)
    return losses, times


def _first_line(error: BaseException) -> str:
    """The innermost cause's type and first line: dynamo wraps the backend's
    error in a BackendCompilerFailed whose own first line says nothing."""
    while error.__cause__ is not None:
        error = error.__cause__
    lines = [line for line in str(error).splitlines() if line.strip()]
    return f"{type(error).__name__}: {lines[0].strip() if lines else ''}"[:200]


def _param_differences(reference, model) -> tuple[float, str, float, str]:
    """How far the parameters ended apart: max|a - b| over the largest |a| of
    the model (the verdict's measure) and of the tensor itself (reported), each
    with the worst tensor's name. Per tensor it is noise where a gradient is
    zero in exact arithmetic (a key bias, which softmax ignores): AdamW scales
    its 1e-12 of rounding up to steps of lr * 1e-4, on a tensor that stays near 0."""
    import torch

    compiled = dict(model.named_parameters())
    absolute, per_tensor, scale = {}, {}, 0.0
    for name, a in reference.named_parameters():
        a, b = a.detach().double(), compiled[name].detach().double()
        if not a.numel():
            continue
        finite = bool(torch.isfinite(a).all() and torch.isfinite(b).all())
        absolute[name] = float((a - b).abs().max()) if finite else math.inf
        top = float(a.abs().max()) if finite else 0.0
        per_tensor[name] = absolute[name] / max(top, 1e-12)
        scale = max(scale, top)
    worst, worst_tensor = max(absolute, key=absolute.get), max(per_tensor, key=per_tensor.get)
    return absolute[worst] / max(scale, 1e-12), worst, per_tensor[worst_tensor], worst_tensor


def _rate(part, whole):
    return None if part is None or not whole else part / whole


def run(name: str, steps: int = 3, device: str = "cpu", tolerance: float = 1e-4, dropout: str = "zero") -> dict:
    """One model: eager, then cuxla; the row that `bench models` tabulates."""
    import torch

    import cuxla.dynamo

    row = {"model": name, "class": MODELS.get(name, (name,))[0], "device": device, "steps": steps,
           "device_name": torch.cuda.get_device_name(device) if device.startswith("cuda") else "CPU",
           "verdict": None, "detail": ""}
    start = time.perf_counter()
    built = build(name, device, dropout)
    if built is None:
        return {**row, "verdict": "not in transformers", "detail": f"transformers {_version()} has no {row['class']}"}
    model, batch = built
    row["attention"] = getattr(model.config, "_attn_implementation", None)
    cuda = device.startswith("cuda")
    if cuda:  # XLA's GPU matmuls are full float32: so must eager's be
        torch.backends.cuda.matmul.allow_tf32 = False
        torch.backends.cudnn.allow_tf32 = False
    sync = torch.cuda.synchronize if cuda else (lambda: None)

    reference = copy.deepcopy(model)
    try:
        if cuda:
            torch.cuda.reset_peak_memory_stats()
        eager_losses, eager_times = _train(reference, batch, steps, sync)
        row["peak_mib_eager"] = torch.cuda.max_memory_allocated() / 2**20 if cuda else None
    except Exception as error:
        traceback.print_exc()
        return {**row, "verdict": "eager failed", "detail": _first_line(error), "seconds": time.perf_counter() - start}

    torch._dynamo.reset()
    cuxla.dynamo.reset_report()
    if cuda:
        torch.cuda.reset_peak_memory_stats()
    try:
        losses, times = _train(torch.compile(model, backend="cuxla"), batch, steps, sync)
        error = None
    except Exception as caught:
        traceback.print_exc()
        error = caught
    report = cuxla.dynamo.report()
    fallbacks = sorted(report.get("fallbacks", []), key=lambda f: -f["count"])
    row.update(
        graphs=report.get("graphs"), xla_programs=report.get("xla_programs"),
        aten_ops=report.get("aten_ops"), xla_ops=report.get("xla_ops"),
        programs_per_graph=_rate(report.get("xla_programs"), report.get("graphs")),
        xla_op_share=_rate(report.get("xla_ops"), report.get("aten_ops")),
        xla_compile_s=(report.get("lowering_s") or 0.0) + (report.get("compile_s") or 0.0),
        fallbacks=fallbacks, losses_eager=eager_losses,
        step_ms_eager=statistics.median(eager_times[1:] or eager_times) * 1e3)
    if error is not None:
        return {**row, "verdict": "error", "detail": _first_line(error), "seconds": time.perf_counter() - start}

    steady = statistics.median(times[1:] or times)
    loss_diff = max(abs(a - b) / max(abs(a), 1e-12) if math.isfinite(a) and math.isfinite(b) else math.inf
                    for a, b in zip(eager_losses, losses))
    param_diff, worst_param, tensor_diff, worst_tensor = _param_differences(reference, model)
    worst = max(loss_diff, param_diff)
    row.update(
        losses_cuxla=losses, max_loss_diff=_finite(loss_diff), max_param_diff=_finite(param_diff),
        worst_param=worst_param, max_param_diff_per_tensor=_finite(tensor_diff), worst_tensor=worst_tensor,
        step_ms_cuxla=steady * 1e3,
        # The first step's extra time over a later one: tracing, partitioning, lowering, compiling.
        compile_s=max(times[0] - steady, 0.0),
        peak_mib_cuxla=torch.cuda.max_memory_allocated() / 2**20 if cuda else None,
        peak_mib_xla=_xla_peak_mib() if cuda else None,
        verdict="pass" if worst <= tolerance else "wrong result",
        detail=f"losses {loss_diff:.1e}, parameters {param_diff:.1e}" + (
            "" if worst <= tolerance else f" (worst: {'loss' if loss_diff >= param_diff else worst_param})"),
        seconds=time.perf_counter() - start)
    return row


def _finite(x: float):
    return x if math.isfinite(x) else None


def _xla_peak_mib() -> float:
    import cuxla

    stats = cuxla._client.client_for_platform("cuda").memory_stats() or {}
    return (stats.get("peak_bytes_in_use") or 0) / 2**20


def _version() -> str:
    import transformers

    return transformers.__version__


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m cuxla._zoo", description=__doc__,
                                     formatter_class=argparse.RawDescriptionHelpFormatter)
    commands = parser.add_subparsers(dest="command", required=True)
    one = commands.add_parser("run", help="one model: eager vs cuxla, a JSON line")
    one.add_argument("name", help="a zoo name, or any transformers model class")
    one.add_argument("--steps", type=int, default=3)
    one.add_argument("--device", help="default: cuda if present, else cpu")
    one.add_argument("--tolerance", type=float, default=1e-4, help="largest relative difference that passes")
    one.add_argument("--dropout", choices=["zero", "default"], default="zero")
    commands.add_parser("list", help="the zoo's names")
    args = parser.parse_args(argv)
    if args.command == "list":
        print("\n".join(MODELS))
        return 0
    import torch

    device = args.device or ("cuda" if torch.cuda.is_available() else "cpu")
    try:
        row = run(args.name, args.steps, device, args.tolerance, args.dropout)
    except Exception as error:  # building the model, or the comparison itself
        traceback.print_exc()
        row = {"model": args.name, "device": device, "verdict": "error", "detail": _first_line(error)}
    sys.stdout.flush()
    print(json.dumps(row), flush=True)
    return 0


if __name__ == "__main__":
    sys.exit(main())
