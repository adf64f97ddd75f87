"""python -m cuxla {info,demo}: what cuxla found, and a short demonstration."""
from __future__ import annotations

import argparse
import sys


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m cuxla", description=__doc__)
    commands = parser.add_subparsers(dest="command", required=True)
    info = commands.add_parser("info", help="plugins, PJRT versions, devices and memory")
    info.add_argument("--platform", choices=["cuda", "cpu"], help="only this platform")
    demo = commands.add_parser("demo", help="arrays, a compiled program, results and timings")
    demo.add_argument("--platform", choices=["cuda", "cpu"], help="default: CUDA if present, else CPU")
    args = parser.parse_args(argv)

    if args.command == "info":
        from ._info import report

        return report(args.platform)
    from ._demo import run

    return run(args.platform)


if __name__ == "__main__":
    sys.exit(main())
