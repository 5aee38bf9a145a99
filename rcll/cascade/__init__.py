"""The recall cascade (spec §5): tier 1 hot (Redis), tier 2 warm (PostgreSQL), tier 3 cold."""
