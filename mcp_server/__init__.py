"""RCLL's MCP server (issue 9 item 6, spec §8): the seven memory verbs as MCP tools plus a
session-start context resource and prompt, over stdio and streamable HTTP.

A thin layer like ``api/``: each tool translates its arguments and calls the same ``rcll``
service the HTTP route calls (recall → ``services.cascade``, retain → the retain service,
the lifecycle verbs → ``services.lifecycle``, context → ``rcll.search.session_context``).
``build_server`` (``server.py``) assembles it; ``run.py`` starts a transport; ``auth.py``
turns an API key into a :class:`~rcll.access.principal.Principal`; ``results.py`` turns
answers and ``rcll`` errors into MCP tool results.
"""
