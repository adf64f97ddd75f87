"""`python -m cuxla bench handoff|train|scale|models|memory`: PyTorch <-> XLA
handoffs side by side; training step and compile times of torch.compile
backends; the data-parallel step over 1, 2, 4... devices; the model zoo
(cuxla._zoo) trained eager and under cuxla, compared; PyTorch and XLA on one
memory pool or two (CUDA only). Each writes a table (Markdown, JSON) and a
plot (PNG).

One module per benchmark (handoff, train, scale, models, memory; train_child
and memory_child are the processes train's backends and memory's
measurements run in; step_profile, where a step's device time goes);
writers writes their tables, rows and figures.
"""
from __future__ import annotations

import os

# JAX's defaults take 75% of the GPU up front: off, so that PyTorch keeps room.
os.environ.setdefault("XLA_PYTHON_CLIENT_PREALLOCATE", "false")

from .. import _zoo
from .handoff import handoff
from .memory import memory
from .models import models
from .scale import scale
from .train import split_backends, train


def main(args) -> int:
    if args.what == "models":
        if args.models:
            names = args.models.split(",")
        elif args.subset == "ci":
            names = _zoo.CI_SUBSET
        elif args.subset == "causal-lms":
            names = _zoo.causal_lms()
        elif args.subset == "image-classifiers":
            names = _zoo.image_classifiers()
        else:
            names = list(_zoo.MODELS)
        return models(names, args.steps or 3, args.jobs, args.timeout, args.out, args.dropout, args.tolerance,
                      args.dtype)
    if args.what == "train":
        return train((args.models or "bert,gpt2,llama").split(","), split_backends(args.backends), args.rounds,
                     args.steps or 4, args.out, args.tf32, args.size)
    if args.what == "memory":
        return memory((args.models or "op,bert,bert-dropout,batch").split(","), args.out)
    if args.what == "scale":
        return scale((args.models or "mlp,cnn,bert").split(","), args.steps or 20, args.out)
    return handoff(args.max_bytes, args.out, args.budget)
