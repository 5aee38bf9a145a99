"""The recall cascade (spec §5): tier 1 hot (Redis), tier 2 warm, tier 3 cold, and the
updates made after the response (activation, Hebbian co-recall, promotion)."""
