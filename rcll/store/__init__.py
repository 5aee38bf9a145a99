"""PostgreSQL repositories: one module per table family, SQL kept beside its callers."""
