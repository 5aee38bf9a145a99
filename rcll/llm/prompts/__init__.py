"""Prompts, one module per prompt: ``VERSION`` (stored on what it produced), the pydantic
reply schema and ``build_messages(...)``."""

# Tags around the text a prompt works on (the replay stand-in's echo mode finds it by them).
CHUNK_OPEN, CHUNK_CLOSE = "<chunk>", "</chunk>"
UNITS_OPEN, UNITS_CLOSE = "<units>", "</units>"
DIRECTIVES_OPEN, DIRECTIVES_CLOSE = "<directives>", "</directives>"
