"""RCLL engine: retain, recall and the stores behind them. Never imports Flask or Celery."""

__version__ = "0.1.0"
