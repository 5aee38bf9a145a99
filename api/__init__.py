"""The HTTP API: a thin Flask shell that parses input, calls ``rcll`` and shapes the answer."""
