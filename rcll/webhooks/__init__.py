"""Webhooks: signed event deliveries to a bank's registered endpoints (Hindsight's shapes)."""
