"""The recall cascade around the cold pipeline (spec §5): tier 1 hot (Redis, ACT-R
activation), tier 2 warm (PostgreSQL entity drawer + LSH), the token-budget policy and the
after-response updates."""
