"""Memory Worth feedback: outcomes recorded per unit (spec §3, §5)."""
