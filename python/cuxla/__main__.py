"""The command line, `cuxla` or `python -m cuxla`: what cuxla found, a short demonstration, benchmarks."""
from __future__ import annotations

import argparse
import pathlib
import sys

from . import __version__, _zoo

_ERRORS = (ValueError, RuntimeError, BufferError, MemoryError)  # what cuxla raises


def _raised_by_cuxla(error: BaseException) -> bool:
    """Whether cuxla raised `error`: its innermost Python frame is cuxla's, in the
    package or a subpackage (the C++ core raises in the cuxla code that called
    it). Others' errors are bugs, shown whole."""
    tb = error.__traceback__
    while tb.tb_next is not None:
        tb = tb.tb_next
    return pathlib.Path(__file__).parent in pathlib.Path(tb.tb_frame.f_code.co_filename).parents


def main(argv: list[str] | None = None, prog: str = "cuxla") -> int:
    parser = argparse.ArgumentParser(prog=prog, description="What cuxla found, a short demonstration, benchmarks.")
    parser.add_argument("--version", action="version", version=f"cuxla {__version__}")
    parser.add_argument("--debug", action="store_true", help="show tracebacks of cuxla's errors too")
    commands = parser.add_subparsers(dest="command", required=True)
    info = commands.add_parser("info", help="plugins, PJRT versions, devices and memory")
    info.add_argument("--platform", choices=["cuda", "cpu"], help="only this platform")
    demo = commands.add_parser("demo", help="arrays, a compiled program, results and timings")
    demo.add_argument("--platform", choices=["cuda", "cpu"], help="default: CUDA if present, else CPU")
    bench = commands.add_parser("bench", help="benchmarks: table, JSON and a PNG plot")
    bench.add_argument("what", choices=["handoff", "train", "scale", "models", "memory"],
                       help="handoff: PyTorch <-> XLA, beside JAX and copies; train: eager/inductor/cuxla; "
                            "scale: data-parallel steps over 1, 2, 4... devices; models: the Hugging Face zoo "
                            "of PyTorch's dynamo benchmarks, eager vs cuxla, one process per model; memory: PyTorch and "
                            "XLA on one CUDA memory pool or two")
    bench.add_argument("--max-bytes", type=int, help="largest tensor (default 1 GiB on CUDA, 256 MiB on CPU)")
    bench.add_argument("--out", default="bench-results", help="folder for WHAT.md/.json/.png")
    bench.add_argument("--budget", type=float, default=1.0, help="seconds per measurement (at least 5 runs)")
    bench.add_argument("--models", help="train: models of mlp,cnn,bert,gpt2,llama (default bert,gpt2,llama); "
                                        "scale: the same (default mlp,cnn,bert); "
                                        "models: zoo names (python -m cuxla._zoo list; default all); "
                                        "memory: measures of op,bert,bert-dropout,batch (default all)")
    bench.add_argument("--backends", default="eager,inductor,cuxla", help="train: torch.compile backends (eager: none); "
                       "BACKEND[NAME=VALUE,...] runs one with those environment variables, a row of its own")
    bench.add_argument("--steps", type=_at_least_one,
                       help="steps per model and backend (train: per round, 4; scale: 20; models: 3)")
    bench.add_argument("--rounds", type=_at_least_one, default=5, help="train: rounds the backends take turns over")
    bench.add_argument("--jobs", type=_at_least_one, default=1, help="models: models run at once")
    bench.add_argument("--timeout", type=float, default=600, help="models: seconds per model")
    bench.add_argument("--dropout", choices=["zero", "default"], default="zero",
                       help="models: every dropout probability 0 (default), or the configs' own")
    bench.add_argument("--tolerance", type=float,
                       help="models: largest relative difference from eager of losses and parameters that "
                            "passes (default 1e-4 in float32, 1e-2 in bfloat16; more where eager itself is as far "
                            "from eager one precision up)")
    bench.add_argument("--dtype", choices=list(_zoo.YARDSTICKS), default="float32",
                       help="models: the precision the models train in (the yardstick: float64, float32)")
    bench.add_argument("--tf32", action="store_true",
                       help="train: float32 matrix products in TF32 for every backend (default: full float32 for all)")
    bench.add_argument("--size", choices=["tiny", "base"],
                       help="train: the models' size (default: base on a GPU, tiny on the CPU)")
    bench.add_argument("--subset", choices=["ci", "causal-lms", "image-classifiers"],
                       help="models: ci = a few models, about 2 minutes on 2 cores; causal-lms = every "
                            "*ForCausalLM class of the installed transformers outside the zoo (about 40 minutes); "
                            "image-classifiers = every *ForImageClassification class")
    args = parser.parse_args(argv)
    try:
        return _run(args)
    except _ERRORS as error:
        if args.debug or not _raised_by_cuxla(error):
            raise
        print(f"cuxla: {error}", file=sys.stderr)
        return 1


def _at_least_one(text: str) -> int:
    value = int(text)
    if value < 1:
        raise argparse.ArgumentTypeError(f"{value} is not a count of at least 1")
    return value


def _run(args: argparse.Namespace) -> int:
    if args.command == "info":
        from ._info import report

        return report(args.platform)
    if args.command == "bench":
        from ._bench import main as bench_main

        return bench_main(args)
    from ._demo import run

    return run(args.platform)


if __name__ == "__main__":
    sys.exit(main(prog="python -m cuxla"))
