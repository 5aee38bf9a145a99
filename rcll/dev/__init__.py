"""Local stack for development, the quickstart and tests: no system services needed."""
