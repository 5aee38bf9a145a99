"""Webhooks: signed HTTP deliveries of job events (:mod:`rcll.webhooks.service`)."""
