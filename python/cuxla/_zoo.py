"""The model zoo of `python -m cuxla bench models`: the Hugging Face models of
PyTorch's dynamo benchmark list (benchmarks/dynamo/huggingface_models_list.txt)
and the LLM families it names, each built from its transformers config class
with a small config (random weights, nothing downloaded), and the run of one
of them: N AdamW steps eager, then the same N steps under
torch.compile(backend="cuxla"), losses and parameters compared (with eager
one precision up as the yardstick of the run's own rounding: float64 for
float32, float32 for bfloat16).

    python -m cuxla._zoo run BertForMaskedLM --steps 3 [--device cpu|cuda] [--dtype bfloat16]

prints the result as one JSON line (the last line of stdout). The parent
(`cuxla._bench.models`) runs each model in its own process, so that a crash or
a hang costs one row.
"""
from __future__ import annotations

import argparse
import contextlib
import copy
import json
import math
import re
import statistics
import sys
import time
import traceback

from ._errors import one_line

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

# A BERT-like encoder, a GPT-2 decoder, two seq2seq models and a Llama: one of
# each kind, few enough for CI's CPU.
CI_SUBSET = ["BertForMaskedLM", "DistillGPT2", "T5ForConditionalGeneration", "BartForConditionalGeneration", "Llama"]


def causal_lms() -> list[str]:
    """Every causal language model class of the installed transformers the
    zoo does not train already: architectures past the benchmark list's."""
    return _classes_ending("ForCausalLM")


def image_classifiers() -> list[str]:
    """Every image classification model class of the installed transformers:
    vision transformers, convolutional networks and hybrids."""
    return _classes_ending("ForImageClassification")


def _classes_ending(suffix: str) -> list[str]:
    import transformers

    trained = {class_name for class_name, _ in MODELS.values()}
    return sorted(name for name in dir(transformers)
                  if name.endswith(suffix) and not name.startswith("Auto") and name not in trained)


# Classes past the zoo whose default config is their largest: EfficientNet's
# is B7 at 600 x 600; B0's, whose last convolution's 1280 channels hidden_dim
# names again.
_CLASS_OVERRIDES = {"EfficientNetForImageClassification": {"width_coefficient": 1.0, "depth_coefficient": 1.0,
                                                           "image_size": 224, "hidden_dim": 1280}}


# Dropout's rates, and stochastic depth's (drop_path_rate, EfficientNet's
# drop_connect_rate): a rate, or one per stage.
_DROPOUT = re.compile(r"(dropout|pdrop|layerdrop)(_prob|_rate|_p)?$|(^|_)drop(_[a-z]+)*_rate$")


def config_for(config_cls, overrides: dict, dropout: str = "zero"):
    """The small config: SMALL under the names this config has, overrides on top."""
    kwargs = _small(config_cls().to_dict(), getattr(config_cls, "sub_configs", {}), dropout)
    kwargs.update(overrides)
    return config_cls(**kwargs)


def _small(defaults: dict, parts: dict, dropout: str) -> dict:
    """What makes a config of these `defaults` small, and those of its
    `parts` (a composite config's own configs: CLIP's vision and text towers)."""
    # A vision model's stages each have their own count (Swin's num_heads, a list): kept.
    kwargs = {k: v for k, v in SMALL.items() if k in defaults and not isinstance(defaults[k], (list, tuple))}
    vocab = kwargs.get("vocab_size", defaults.get("vocab_size"))
    # Special tokens of the full vocabulary would index past the small one.
    for key, value in defaults.items():
        if key.endswith("token_id") and isinstance(value, int) and vocab and value >= vocab:
            kwargs[key] = vocab - 1
    if dropout == "zero":
        # A compiled program draws its random numbers otherwise than eager
        # PyTorch: with dropout, the runs cannot agree step by step.
        kwargs.update({k: _zeroed(v) for k, v in defaults.items() if _DROPOUT.search(k)})
    for part in parts:
        if isinstance(defaults.get(part), dict):
            kwargs[part] = {**defaults[part], **_small(defaults[part], {}, dropout)}
    return kwargs


def _zeroed(rate):
    """A rate, or one per stage, made 0 of its own type (a config may check
    that an int stays an int: Mpt's attention config)."""
    if isinstance(rate, (list, tuple)):
        return [_zeroed(r) for r in rate]
    return type(rate)(0) if isinstance(rate, (int, float)) else rate


def build(name: str, device: str, dropout: str = "zero"):
    """(model, batch) for a zoo name, or for any transformers model class
    name; None when transformers has no such class."""
    import torch
    import transformers

    class_name, overrides = MODELS.get(name, (name, _CLASS_OVERRIDES.get(name, {})))
    if class_name.endswith(("ForSequenceClassification", "ForImageClassification")):
        # Else the first forward sets it, and the second step compiles again.
        overrides = {"problem_type": "single_label_classification", **overrides}
    model_cls = getattr(transformers, class_name, None)
    if not (isinstance(model_cls, type) and issubclass(model_cls, transformers.PreTrainedModel)):
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

    if class_name.endswith("ForImageClassification") and class_name != "ImageGPTForImageClassification":
        return {**_images(class_name, getattr(config, "vision_config", None) or config, device),
                "labels": torch.randint(0, config.num_labels, (BATCH,), device=device)}
    # Ids above the special tokens (pad, bos, eos are small ids or vocab - 1);
    # a composite config's vocabulary is its text part's (Fuyu's).
    vocabulary = getattr(config, "vocab_size", None) or config.get_text_config().vocab_size
    ids = torch.randint(4, vocabulary - 1, (BATCH, SEQUENCE), device=device)
    if class_name.endswith("ForQuestionAnswering"):
        return {"input_ids": ids, "start_positions": torch.randint(0, SEQUENCE, (BATCH,), device=device),
                "end_positions": torch.randint(0, SEQUENCE, (BATCH,), device=device)}
    # ImageGPT's pixels are a sequence of colour ids.
    if class_name.endswith("ForSequenceClassification") or class_name == "ImageGPTForImageClassification":
        return {"input_ids": ids, "labels": torch.randint(0, config.num_labels, (BATCH,), device=device)}
    if class_name.startswith("Whisper"):  # the encoder's two convolutions halve the frames
        frames = 2 * config.max_source_positions
        return {"input_features": torch.randn(BATCH, config.num_mel_bins, frames, device=device), "labels": ids}
    # Language models, masked, causal and seq2seq: the model shifts the labels itself.
    return {"input_ids": ids, "labels": ids}


def _images(class_name: str, config, device: str) -> dict:
    """A batch of images at the config's own size and colours (ImageNet's
    224 x 224 RGB where it names none: convolutional networks take any size)."""
    import torch

    if class_name.startswith("Siglip2"):  # images come as their patches, flattened, with a mask and a grid
        side = math.isqrt(config.num_patches)
        return {"pixel_values": torch.randn(BATCH, config.num_patches,
                                            config.num_channels * config.patch_size ** 2, device=device),
                "pixel_attention_mask": torch.ones(BATCH, config.num_patches, dtype=torch.int32, device=device),
                "spatial_shapes": torch.tensor([[side, side]] * BATCH, device=device)}
    size = getattr(config, "image_size", 224)
    height, width = (size, size) if isinstance(size, int) else size
    return {"pixel_values": torch.randn(BATCH, getattr(config, "num_channels", 3), height, width, device=device)}


def _train(model, batch: dict, steps: int, sync, seed: int = 1) -> tuple[list[float], list[float], list[int]]:
    """Losses, seconds and graphs Dynamo compiled, of each of `steps` AdamW steps."""
    import torch

    compiled_graphs = torch._dynamo.utils.counters["stats"]
    optimizer = torch.optim.AdamW(model.parameters(), lr=1e-3)
    torch.manual_seed(seed)  # the same random numbers (with dropout) in every run
    losses, times, compiled = [], [], []
    for _ in range(steps):
        graphs_before = compiled_graphs["unique_graphs"]
        start = time.perf_counter()
        optimizer.zero_grad(set_to_none=True)
        loss = model(**batch).loss
        loss.backward()
        optimizer.step()
        losses.append(loss.item())
        sync()
        times.append(time.perf_counter() - start)
        compiled.append(compiled_graphs["unique_graphs"] - graphs_before)
    return losses, times, compiled


def _steady_step(times: list[float], compiled: list[int]) -> tuple[float, int]:
    """The seconds of a step after the first that compiled nothing (their
    median), and how many steps after the first compiled again: a model that
    changes its own Python in its first step (BigBird picks its attention)
    compiles again in its second. Where every later step compiled, their
    median, compiles and all."""
    later = list(zip(times[1:], compiled[1:]))
    without_compiles = [t for t, graphs in later if not graphs]
    return statistics.median(without_compiles or times[1:] or times), sum(1 for _, graphs in later if graphs)


# The precisions a zoo run trains in, and the one its yardstick runs in.
YARDSTICKS = {"float32": "float64", "bfloat16": "float32"}
# The largest relative difference from eager that passes, by precision:
# bfloat16's a little over its 8 bits' rounding (2^-7), by which two correct
# runs can differ.
TOLERANCES = {"float32": 1e-4, "bfloat16": 1e-2}


def _yardstick_copy(model, dtype: str):
    """The yardstick's model, in `dtype`, its forward making in `dtype` the
    tensors it makes without one (`_made_in`). Mixture-of-experts layers run
    there through transformers' reference loop over the experts: torch's
    grouped matrix product, their default, has no float64 kernel."""
    import torch

    wider = copy.deepcopy(model).to(getattr(torch, dtype))
    if getattr(wider.config, "_experts_implementation", None) not in (None, "eager"):
        wider.set_experts_implementation("eager")
    forward = wider.forward

    def forward_in_its_dtype(*args, **kwargs):
        with _made_in(getattr(torch, dtype)):
            return forward(*args, **kwargs)

    wider.forward = forward_in_its_dtype
    return wider


@contextlib.contextmanager
def _made_in(dtype):
    """Tensors made without a dtype made in `dtype` (a torch dtype), as the
    yardstick's model's forward needs: XGLM fills its mask with its dtype's
    lowest value through a tensor of the default dtype, which float64's overflows."""
    import torch

    before = torch.get_default_dtype()
    torch.set_default_dtype(dtype)
    try:
        yield
    finally:
        torch.set_default_dtype(before)


def _in_dtype(batch: dict, dtype: str) -> dict:
    """`batch` with its floating-point tensors in `dtype`."""
    import torch

    return {k: v.to(getattr(torch, dtype)) if v.is_floating_point() else v for k, v in batch.items()}


def _first_line(error: BaseException) -> str:
    """The innermost cause's type and first line: dynamo wraps the backend's
    error in a BackendCompilerFailed whose own first line says nothing."""
    while error.__cause__ is not None:
        error = error.__cause__
    return one_line(error)[:200]


# A gradient below this share of the model's largest is taken for rounding.
NOISE = 1e-6
# How much further from the yardstick's run (eager one precision up) than
# eager cuxla may be, where eager itself is further than the tolerance.
# PyTorch's dynamo benchmarks judge accuracy so (torch._dynamo.utils.same with
# fp64_ref: 2 to 3 times, on each tensor's RMS error); the worst element of a
# model is noisier.
ROUNDING_SLACK = 3.0


# With the models' own dropout the runs draw different masks: cuxla's loss may
# be as far from eager's as eager's own under another seed, twice over, and
# at least this far (relative, at any step).
DROPOUT_TRACKING = 0.05


def _compare_params(reference, model) -> dict:
    """How far two trainings' parameters (and last gradients) ended apart.

    max|a - b| is measured against the model's largest |a|; per tensor it is
    only reported. Tensors whose gradient is rounding noise in both runs (below
    NOISE of the model's largest) are left out of the verdict's measure: such a
    gradient is zero in exact arithmetic (a key bias, which softmax ignores; a
    QA head's bias, which shifts every position alike), and AdamW, dividing by
    the gradient's own size, turns its rounding into steps of up to lr in
    whichever direction the rounding fell, in eager PyTorch as in XLA."""
    import torch

    def largest(t) -> float:
        return 0.0 if t is None else float(t.detach().abs().max())

    compiled = dict(model.named_parameters())
    pairs = [(name, a, compiled[name]) for name, a in reference.named_parameters() if a.numel()]
    top_grad = max(largest(a.grad) for _, a, _ in pairs) or 1.0
    scale = max((largest(a) for _, a, _ in pairs if torch.isfinite(a).all()), default=0.0) or 1.0
    absolute, per_tensor, grads, noise = {}, {}, {}, []
    for name, a, b in pairs:
        a64, b64 = a.detach().double(), b.detach().double()
        finite = bool(torch.isfinite(a64).all() and torch.isfinite(b64).all())
        absolute[name] = float((a64 - b64).abs().max()) if finite else math.inf
        per_tensor[name] = absolute[name] / max(largest(a64), 1e-12)
        if a.grad is not None and b.grad is not None:
            grads[name] = float((a.grad.double() - b.grad.double()).abs().max()) / top_grad
        if max(largest(a.grad), largest(b.grad)) < NOISE * top_grad:
            noise.append(name)
    counted = {name: d for name, d in absolute.items() if name not in noise} or {"-": 0.0}
    worst, worst_tensor = max(counted, key=counted.get), max(per_tensor, key=per_tensor.get)
    return {"max_param_diff": counted[worst] / scale, "worst_param": worst,
            "max_param_diff_per_tensor": per_tensor[worst_tensor], "worst_tensor": worst_tensor,
            "noise_gradient_tensors": noise, "max_grad_diff": max(grads.values(), default=None)}


def _rate(part, whole):
    return None if part is None or not whole else part / whole


def run(name: str, steps: int = 3, device: str = "cpu", tolerance: float | None = None, dropout: str = "zero",
        dtype: str = "float32") -> dict:
    """One model in `dtype`: eager, eager one precision up (the yardstick),
    then cuxla; the row that `bench models` tabulates. `tolerance`: by
    default TOLERANCES'."""
    import torch

    import cuxla.dynamo

    from . import _torch_memory

    row = {"model": name, "class": MODELS.get(name, (name,))[0], "device": device, "steps": steps, "dtype": dtype,
           "device_name": torch.cuda.get_device_name(device) if device.startswith("cuda") else "CPU",
           "one_pool": _torch_memory.uses_xla_allocator(), "verdict": None, "detail": ""}
    tolerance = TOLERANCES[dtype] if tolerance is None else tolerance
    start = time.perf_counter()
    built = build(name, device, dropout)
    if built is None:
        return {**row, "verdict": "not in transformers",
                "detail": f"transformers {_version()} has no model class {row['class']}"}
    model, batch = built
    if dtype != "float32":  # built in float32
        model, batch = model.to(getattr(torch, dtype)), _in_dtype(batch, dtype)
    row["attention"] = getattr(model.config, "_attn_implementation", None)
    cuda = device.startswith("cuda")
    if cuda:  # XLA's GPU matmuls are full float32: so must eager's be
        torch.backends.cuda.matmul.allow_tf32 = False
        torch.backends.cudnn.allow_tf32 = False
    sync = torch.cuda.synchronize if cuda else (lambda: None)

    yardstick = YARDSTICKS[dtype]
    # Kept on the host: on a GPU a copy would weigh in the runs' peak memory.
    initial = {name: t.detach().to("cpu", copy=True) for name, t in model.state_dict().items()}
    reference, wider = copy.deepcopy(model), _yardstick_copy(model, yardstick)
    reseeded = copy.deepcopy(model) if dropout == "default" else None  # eager under another seed
    try:
        if cuda:
            _torch_memory.reset_torch_peak_memory_stats()
        eager_losses, eager_times, _ = _train(reference, batch, steps, sync)
        row["peak_mib_eager"] = _torch_memory.torch_max_memory_allocated() / 2**20 if cuda else None
    except Exception as error:
        traceback.print_exc()
        return {**row, "verdict": "eager failed", "detail": _first_line(error), "seconds": time.perf_counter() - start}
    try:  # the yardstick of the run's own rounding
        wider_losses, *_ = _train(wider, _in_dtype(batch, yardstick), steps, sync)
    except Exception as error:  # a kernel without the wider dtype: the tolerance alone decides
        row["yardstick_failed"], wider = _first_line(error), None

    torch._dynamo.reset()
    cuxla.dynamo.reset_report()
    if cuda:
        _torch_memory.reset_torch_peak_memory_stats()
    try:
        compiled_model = torch.compile(model, backend="cuxla")
        losses, times, compiled = _train(compiled_model, batch, steps, sync)
        error = None
    except Exception as caught:
        traceback.print_exc()
        error = caught
    report = cuxla.dynamo.report()
    row.update(
        graph_breaks=report["graph_breaks"],
        graph_break_reasons=[b["reason"][:160] for b in report["graph_break_reasons"][:3]],
        graphs=report.get("graphs"), xla_programs=report.get("xla_programs"),
        aten_ops=report.get("aten_ops"), xla_ops=report.get("xla_ops"),
        backwards_without_zeros=report.get("backwards_without_zeros"),
        programs_per_graph=_rate(report.get("xla_programs"), report.get("graphs")),
        xla_op_share=_rate(report.get("xla_ops"), report.get("aten_ops")),
        xla_compile_s=(report.get("lowering_s") or 0.0) + (report.get("compile_s") or 0.0),
        fallbacks=sorted(report.get("fallbacks", []), key=lambda f: -f["count"]), losses_eager=eager_losses,
        step_ms_eager=statistics.median(eager_times[1:] or eager_times) * 1e3)
    if error is not None:
        return {**row, "verdict": "error", "detail": _first_line(error), "seconds": time.perf_counter() - start}
    # Read before the step-by-step check trains again.
    peak_mib_cuxla = _torch_memory.torch_max_memory_allocated() / 2**20 if cuda else None
    peak_mib_xla = _torch_memory.xla_max_memory_allocated() / 2**20 if cuda else None

    steady, compiled_again = _steady_step(times, compiled)
    params = _compare_params(reference, model)
    differences = {"losses": _loss_difference(eager_losses, losses), "parameters": params["max_param_diff"]}
    # Where eager is itself far from the yardstick (an ill-conditioned model,
    # or bfloat16), cuxla passes if it is about as far: within ROUNDING_SLACK times.
    own = theirs = {}
    if wider is not None:
        own = {"losses": _loss_difference(wider_losses, eager_losses),
               "parameters": _compare_params(wider, reference)["max_param_diff"]}
        theirs = {"losses": _loss_difference(wider_losses, losses),
                  "parameters": _compare_params(wider, model)["max_param_diff"]}
    if dropout == "default":  # XLA draws its own masks: the runs can track each other, not agree
        other_losses, *_ = _train(reseeded, batch, steps, sync, seed=2)
        row["eager_other_seed"] = _loss_difference(eager_losses, other_losses)
        wrong = [] if differences["losses"] <= max(DROPOUT_TRACKING, 2 * row["eager_other_seed"]) else ["losses"]
    else:
        wrong = [what for what, d in differences.items()
                 if not (d <= tolerance or (own and theirs[what] <= ROUNDING_SLACK * own[what]))]
    detail = f"losses {differences['losses']:.1e}, parameters {differences['parameters']:.1e}"
    if dropout == "default":
        detail += f"; eager under another seed {row['eager_other_seed']:.1e}"
    elif own and max(differences.values()) > tolerance:
        detail += f"; eager {dtype} itself {own['losses']:.1e}, {own['parameters']:.1e} from {yardstick}"
    if wrong:
        detail += f" (worst: {'loss' if wrong == ['losses'] else params['worst_param']})"
    if wider is not None and dropout != "default":
        # Each step judged from one state too (eager's, from the start, given to the other two before each
        # step): two runs of a sensitive model can part by rounding alone, and two that agree can hide a
        # wrong gradient (AdamW's first steps barely see a gradient's scale).
        reference.load_state_dict(initial)
        row["steps_from_one_state"] = _steps_from_one_state(reference, model, compiled_model, wider, batch,
                                                            _in_dtype(batch, yardstick), steps, sync)
        words, failing = _step_by_step(row["steps_from_one_state"], tolerance, f"{dtype} itself", yardstick)
        detail += words
        row["runs_part"] = bool(wrong)
        wrong = _wrong_after_steps(wrong, failing, steps)
    if compiled_again:
        detail += (f"; Dynamo compiled again in {compiled_again} of the {steps - 1} later steps"
                   + (", whose time the step's includes" if compiled_again == steps - 1 else ""))
    row.update(
        params, losses_cuxla=losses, max_loss_diff=differences["losses"], step_ms_cuxla=steady * 1e3,
        later_steps_compiling=compiled_again,
        eager_vs_yardstick=own or None, cuxla_vs_yardstick=theirs or None,
        # The first step's extra time over a later one: tracing, partitioning, lowering, compiling.
        compile_s=max(times[0] - steady, 0.0),
        peak_mib_cuxla=peak_mib_cuxla, peak_mib_xla=peak_mib_xla,
        # Training like eager with nothing in XLA is eager's pass, not cuxla's.
        verdict="wrong result" if wrong else "eager only" if not row["xla_ops"] else
        "pass step by step" if row.get("runs_part") else "pass", detail=detail,
        seconds=time.perf_counter() - start)
    # JSON has no infinity: a difference that is not finite is None.
    return {k: None if isinstance(v, float) and not math.isfinite(v) else v for k, v in row.items()}


def _steps_from_one_state(eager, model, compiled_model, wider, batch: dict, wide_batch: dict, steps: int,
                          sync) -> list[dict]:
    """Eager trains `steps` AdamW steps; before each, `model` (run as
    `compiled_model`) and `wider` are given eager's parameters and buffers,
    and each step's loss and gradients are compared with eager's: relative,
    the gradients' largest difference over the model's largest gradient."""
    import torch

    optimizer = torch.optim.AdamW(eager.parameters(), lr=1e-3)
    torch.manual_seed(1)
    compared = []
    for _ in range(steps):
        state = eager.state_dict()
        model.load_state_dict(state)
        wider.load_state_dict(state)
        results = {}
        for name, module, run_, inputs in (("eager", eager, eager, batch), ("cuxla", model, compiled_model, batch),
                                            ("yardstick", wider, wider, wide_batch)):
            module.zero_grad(set_to_none=True)
            loss = run_(**inputs).loss
            loss.backward()
            sync()
            results[name] = (loss.item(), [p.grad for p in module.parameters()])
        loss, grads = results["eager"]
        top = max((float(g.abs().max()) for g in grads if g is not None and g.numel()), default=0.0) or 1.0

        def apart(other):
            other_loss, other_grads = other
            gap = max((float((g.double() - h.double()).abs().max()) for g, h in zip(grads, other_grads)
                       if g is not None and h is not None and g.numel()), default=0.0)
            return {"loss": abs(other_loss - loss) / max(abs(loss), 1e-12), "gradients": gap / top}

        compared.append({"cuxla": apart(results["cuxla"]), "yardstick": apart(results["yardstick"])})
        optimizer.step()
    return compared


def _step_by_step(stepwise: list[dict], tolerance: float, eager: str, yardstick: str) -> tuple[str, list[int]]:
    """The detail's words on `_steps_from_one_state`'s comparisons, and the
    steps (from 1) whose loss or gradients are further from eager's than
    `tolerance` and ROUNDING_SLACK times eager's own from the yardstick's at
    its furthest step: how far rounding carries is the model's and batch's,
    of which one step's distance is one sample (Levit's eager float32
    gradients 0.16 of the largest from float64's at one step, 0.002 at the next)."""
    own = {what: max(step["yardstick"][what] for step in stepwise) for what in ("loss", "gradients")}
    failing = [i + 1 for i, step in enumerate(stepwise)
               if not all(step["cuxla"][what] <= max(tolerance, ROUNDING_SLACK * own[what])
                          for what in ("loss", "gradients"))]
    worst = max(stepwise, key=lambda step: step["cuxla"]["gradients"])
    words = (f"; from eager's state at each step, losses within {max(s['cuxla']['loss'] for s in stepwise):.1e} "
             f"and gradients {worst['cuxla']['gradients']:.1e} (eager {eager} "
             f"{worst['yardstick']['gradients']:.1e} from {yardstick})")
    if failing:
        words += (f": step {failing[0]} is not" if len(failing) == 1 else
                  f": steps {', '.join(map(str, failing))} are not")
    return words, failing


def _wrong_after_steps(wrong: list[str], failing: list[int], steps: int) -> list[str]:
    """What is wrong once the steps from one state are judged too: where the
    two runs part, every step must be within; where they agree, a wrong
    lowering is wrong at every step (the batch is the same at each), while
    some steps apart is rounding tipping a discrete choice (GPT-OSS in
    bfloat16 routes a token to another expert on a near tie)."""
    if not failing or (not wrong and len(failing) < steps):
        return []
    return wrong or [f"step {failing[0]}"]


def _loss_difference(expected: list[float], got: list[float]) -> float:
    """The largest relative difference of two runs' losses, step by step."""
    return max(abs(a - b) / max(abs(a), 1e-12) if math.isfinite(a) and math.isfinite(b) else math.inf
               for a, b in zip(expected, got))


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
    one.add_argument("--tolerance", type=float, help="largest relative difference that passes (default: by dtype)")
    one.add_argument("--dropout", choices=["zero", "default"], default="zero")
    one.add_argument("--dtype", choices=list(YARDSTICKS), default="float32", help="the precision trained in")
    commands.add_parser("list", help="the zoo's names")
    args = parser.parse_args(argv)
    if args.command == "list":
        print("\n".join(MODELS))
        return 0
    import torch

    device = args.device or ("cuda" if torch.cuda.is_available() else "cpu")
    if device.startswith("cuda"):
        from . import _torch_memory

        _torch_memory.use_xla_allocator_if_asked()
    try:
        row = run(args.name, args.steps, device, args.tolerance, args.dropout, args.dtype)
    except Exception as error:  # building the model, or the comparison itself
        traceback.print_exc()
        row = {"model": args.name, "device": device, "verdict": "error", "detail": _first_line(error)}
    sys.stdout.flush()
    print(json.dumps(row), flush=True)
    return 0


if __name__ == "__main__":
    sys.exit(main())
