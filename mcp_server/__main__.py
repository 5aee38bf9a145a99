"""``python -m mcp_server`` (what ``rcll mcp`` runs): the MCP server in the foreground.

stdio (default): the key is ``--api-key`` or ``RCLL_API_KEY``; a missing or wrong key (with
auth on) exits with status 2 and a message on stderr, before any MCP traffic. stdout carries
only the protocol; logs go to stderr. http: streamable HTTP on ``--host``/``--port`` (path
``/mcp``), each request authenticated by its ``Authorization: Bearer`` key.
"""

from __future__ import annotations

import logging
import sys

import click


@click.command("mcp")
@click.option("--transport", type=click.Choice(["stdio", "http"]), default="stdio",
              show_default=True)
@click.option("--host", default="127.0.0.1", show_default=True, help="http: address to bind.")
@click.option("--port", type=int, default=None,
              help="http: port  [default: RCLL_MCP_PORT, 8766]")
@click.option("--bank", default=None, help="Default bank for tools called without bank_id.")
@click.option("--api-key", default=None, help="stdio: the caller's key (default RCLL_API_KEY).")
def main(transport: str, host: str, port: int, bank: str | None, api_key: str | None) -> None:
    """Run RCLL's MCP server."""
    logging.basicConfig(level=logging.INFO, stream=sys.stderr,
                        format="%(asctime)s %(levelname)s %(name)s: %(message)s")
    from mcp_server.run import run_http, run_stdio
    from rcll.bootstrap import bootstrap

    services = bootstrap()
    port = port or services.settings.mcp_port
    try:
        if transport == "stdio":
            status = run_stdio(services, api_key or services.settings.api_key, bank)
        else:
            status = run_http(services, host, port, bank)
    finally:
        services.close()
    sys.exit(status)


if __name__ == "__main__":
    main(prog_name="rcll mcp")  # what users type (rcll mcp execs this module)
