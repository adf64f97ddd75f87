"""The models `bench train` and the torch.compile tests train: an MLP, a small
CNN, and Hugging Face's BertForMaskedLM, GPT-2 and a Llama-style decoder (each
built from a config, random weights, nothing downloaded), "tiny" for CPUs and
tests or "base" (bert-base, GPT-2 small, a 1B Llama in bfloat16). Dropout is
0 unless asked: XLA and PyTorch draw different random numbers, and losses are
compared step by step."""
from __future__ import annotations

import dataclasses
from typing import Callable

import torch


@dataclasses.dataclass
class Workload:
    name: str
    model: torch.nn.Module
    batch: tuple  # the model's inputs
    loss: Callable  # (model, batch) -> scalar loss
    tokens: int = 0  # tokens per step, for a language model's tokens/s


def mlp(device: str, size: str = "tiny", batch: int | None = None) -> Workload:
    width = 64 if size == "tiny" else 4096
    torch.manual_seed(0)
    model = torch.nn.Sequential(
        torch.nn.Linear(width, 2 * width), torch.nn.GELU(), torch.nn.Linear(2 * width, width),
        torch.nn.GELU(), torch.nn.Linear(width, 10)).to(device)
    x = torch.randn(batch or (32 if size == "tiny" else 256), width, device=device)
    y = torch.randint(0, 10, (x.shape[0],), device=device)
    return Workload("mlp", model, (x, y), lambda m, b: torch.nn.functional.cross_entropy(m(b[0]), b[1]))


def cnn(device: str, size: str = "tiny") -> Workload:
    channels, image = (8, 16) if size == "tiny" else (64, 64)
    torch.manual_seed(0)
    model = torch.nn.Sequential(
        torch.nn.Conv2d(3, channels, 3, padding=1), torch.nn.BatchNorm2d(channels), torch.nn.ReLU(),
        torch.nn.MaxPool2d(2), torch.nn.Conv2d(channels, 2 * channels, 3, padding=1), torch.nn.ReLU(),
        torch.nn.AdaptiveAvgPool2d(1), torch.nn.Flatten(), torch.nn.Linear(2 * channels, 10)).to(device)
    x = torch.randn(8 if size == "tiny" else 64, 3, image, image, device=device)
    y = torch.randint(0, 10, (x.shape[0],), device=device)
    return Workload("cnn", model, (x, y), lambda m, b: torch.nn.functional.cross_entropy(m(b[0]), b[1]))


def bert(device: str, size: str = "tiny", dropout: float = 0.0) -> Workload:
    from transformers import BertConfig, BertForMaskedLM

    if size == "tiny":
        config = BertConfig(vocab_size=256, hidden_size=32, num_hidden_layers=2, num_attention_heads=2,
                            intermediate_size=64, max_position_embeddings=64)
        batch, sequence = 4, 16
    else:  # bert-base
        config = BertConfig()
        batch, sequence = 16, 128
    config.hidden_dropout_prob = config.attention_probs_dropout_prob = dropout
    torch.manual_seed(0)
    model = BertForMaskedLM(config).to(device)
    ids = torch.randint(0, config.vocab_size, (batch, sequence), device=device)
    labels = torch.where(torch.rand(batch, sequence, device=device) < 0.15, ids, torch.full_like(ids, -100))
    labels[:, 0] = ids[:, 0]  # at least one masked position per sequence
    return Workload("bert", model, (ids, labels),
                    lambda m, b: m(input_ids=b[0], labels=b[1]).loss, batch * sequence)


def gpt2(device: str, size: str = "tiny") -> Workload:
    from transformers import GPT2Config, GPT2LMHeadModel

    if size == "tiny":
        config = GPT2Config(vocab_size=256, n_positions=64, n_embd=32, n_layer=2, n_head=2, bos_token_id=0,
                            eos_token_id=0)
        batch, sequence = 4, 32
    else:  # GPT-2 small, 124M
        config = GPT2Config()
        batch, sequence = 8, 1024
    config.resid_pdrop = config.embd_pdrop = config.attn_pdrop = 0.0
    torch.manual_seed(0)
    model = GPT2LMHeadModel(config)
    # Its class name names no loss of transformers': unset, each loss logs a
    # warning, a call Dynamo cuts the graph at (three graph breaks a step,
    # under any backend). The loss it falls back to, named.
    model.loss_type = "ForCausalLM"
    return _causal_lm("gpt2", model, config.vocab_size, batch, sequence, device)


def llama(device: str, size: str = "tiny") -> Workload:
    from transformers import LlamaConfig, LlamaForCausalLM

    if size == "tiny":
        config = LlamaConfig(vocab_size=256, hidden_size=32, intermediate_size=64, num_hidden_layers=2,
                             num_attention_heads=4, num_key_value_heads=2, max_position_embeddings=64)
        batch, sequence = 4, 32
    else:  # a 1.1B decoder: Llama 3.2 1B's shape with a 32k vocabulary
        config = LlamaConfig(vocab_size=32000, hidden_size=2048, intermediate_size=8192, num_hidden_layers=16,
                             num_attention_heads=32, num_key_value_heads=8, max_position_embeddings=1024)
        batch, sequence = 4, 1024
    torch.manual_seed(0)
    model = LlamaForCausalLM(config).to(torch.bfloat16)
    return _causal_lm("llama", model, config.vocab_size, batch, sequence, device)


def _causal_lm(name: str, model: torch.nn.Module, vocabulary: int, batch: int, sequence: int,
               device: str) -> Workload:
    ids = torch.randint(0, vocabulary, (batch, sequence), device=device)
    return Workload(name, model.to(device), (ids,), lambda m, b: m(input_ids=b[0], labels=b[0]).loss,
                    batch * sequence)


WORKLOADS = {"mlp": mlp, "cnn": cnn, "bert": bert, "gpt2": gpt2, "llama": llama}


PHASES = ("forward", "backward", "optimizer")  # a training step's, in order


def training_step(workload: Workload, compile_backend: str | None = None) -> Callable[..., torch.Tensor]:
    """One AdamW step (lr 1e-3) of `workload` per call, returning the loss.
    `compile_backend`: torch.compile's backend, or eager. The step called
    with `at_phase_end` calls it with each of PHASES as that phase ends
    (the forward: the loss computed)."""
    model = workload.model
    step_model = torch.compile(model, backend=compile_backend) if compile_backend else model
    optimizer = torch.optim.AdamW(model.parameters(), lr=1e-3)
    no_phases = (lambda phase: None)

    def step(at_phase_end: Callable[[str], None] = no_phases) -> torch.Tensor:
        optimizer.zero_grad(set_to_none=True)
        loss = workload.loss(step_model, workload.batch)
        at_phase_end("forward")
        loss.backward()
        at_phase_end("backward")
        optimizer.step()
        at_phase_end("optimizer")
        return loss

    return step


def train(workload: Workload, steps: int, compile_backend: str | None = None,
          on_step: Callable[[int, float], None] | None = None) -> list[float]:
    """`steps` AdamW steps; the losses. `compile_backend`: torch.compile's backend, or eager."""
    step = training_step(workload, compile_backend)
    losses = []
    for i in range(steps):
        losses.append(step().item())
        if on_step is not None:
            on_step(i, losses[-1])
    return losses
