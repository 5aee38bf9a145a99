"""Celery workers: a thin shell that runs ``rcll`` pipeline stages by job id."""
