"""Memory banks: the bank service (create, profile, config, stats, list, delete)."""
