"""Memory hierarchy: rooms (topics), halls (knowledge types), layers L0–L3 (spec §6)."""

from typing import Annotated

from pydantic import AfterValidator

ROOMS = ("auth", "pipeline", "infrastructure", "deployment", "schema", "api", "ui", "tax", "hr",
         "legal", "compliance", "monitoring", "agent", "general")
HALLS = ("warning", "decision", "procedure", "event", "preference", "discovery", "fact")
LAYERS = (0, 1, 2, 3)
DEFAULT_ROOM, DEFAULT_HALL, DEFAULT_LAYER = "general", "fact", 2


def _one_of(kind: str, names: tuple[str, ...]):
    def check(v: str) -> str:
        if v not in names:
            raise ValueError(f"unknown {kind} {v!r}; one of {', '.join(names)}")
        return v
    return check


Room = Annotated[str, AfterValidator(_one_of("room", ROOMS))]
"""A room name from :data:`ROOMS`; validation fails (ValueError) on any other."""
Hall = Annotated[str, AfterValidator(_one_of("hall", HALLS))]
"""A hall name from :data:`HALLS`; validation fails (ValueError) on any other."""
