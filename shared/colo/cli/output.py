"""What every ``colo`` command prints with: the consoles and the memory cell format."""

from __future__ import annotations

import sys

from rich.console import Console

from colo.quantity import format_memory

console = Console(width=None if sys.stdout.isatty() else 160)
err_console = Console(stderr=True, width=None if sys.stderr.isatty() else 160)
"""Notices (which servers a command uses, warnings) go to stderr: stdout stays the command's output."""


def _mem(n_bytes: int) -> str:
    """Bytes for a table cell: exact binary units when exact, else GiB with one decimal."""
    exact = format_memory(n_bytes)
    return exact if not exact.isdigit() or n_bytes < 2**30 else f"{n_bytes / 2**30:.1f}Gi"
