"""The lifecycle verbs (spec §7; issue 9 item 3): read, remember, derive, correct,
supersede, forget — one module each, one service (:class:`rcll.lifecycle.service.Lifecycle`)
called by HTTP, the CLI and MCP alike. Recall stays in :mod:`rcll.cascade`."""
