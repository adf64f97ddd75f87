"""An exception said in one line, for logs, reports and tables."""
from __future__ import annotations


def one_line(error: BaseException) -> str:
    """`error`'s type and the first line of its message that has text."""
    lines = [line.strip() for line in str(error).splitlines() if line.strip()]
    return f"{type(error).__name__}: {lines[0] if lines else ''}"
