"""Memory hierarchy: rooms (topics), halls (knowledge types), layers L0–L3 (spec §6)."""

ROOMS = ("auth", "pipeline", "infrastructure", "deployment", "schema", "api", "ui", "tax", "hr",
         "legal", "compliance", "monitoring", "agent", "general")
HALLS = ("warning", "decision", "procedure", "event", "preference", "discovery", "fact")
LAYERS = (0, 1, 2, 3)
DEFAULT_ROOM, DEFAULT_HALL, DEFAULT_LAYER = "general", "fact", 2
