"""The CLI's consoles and how data reaches them: text from the service (memory text, file
names, bank ids, error messages) is printed as it is, never read as Rich markup — a
memory that says ``[/b]`` is shown, not parsed (a stray closing tag would raise
``rich.errors.MarkupError``)."""

from __future__ import annotations

from rich.console import Console
from rich.markup import escape
from rich.table import Table
from rich.text import Text

console = Console(stderr=True)  # messages and progress


def out() -> Console:
    """The console results go to: standard output, 160 columns wide when not a terminal."""
    c = Console()
    return c if c.is_terminal else Console(width=160)


def add_data_row(table: Table, *cells: str) -> None:
    """A row of ``table`` whose cells are data: each shown as plain text."""
    table.add_row(*(Text(c) for c in cells))


def plain(value: object) -> str:
    """``value`` as text safe inside a markup string (``f"[red]{plain(error)}"``)."""
    return escape(str(value))
