"""gunicorn settings the API process model needs beyond its command line (``rcll serve``,
:func:`rcll.dev.stack.api_cmd` pass ``--config python:api.gunicorn_conf``):

- ``logconfig_dict``: gunicorn's own lines (errors, the access log) and the app's in
  ``RCLL_LOG_FORMAT`` (JSON lines or text, :func:`rcll.telemetry.logs.dict_config`);
- ``child_exit``: a gunicorn worker that exited is marked dead in the Prometheus multiprocess
  folder, so ``/metrics`` keeps summing what every worker ever counted.
"""

from rcll.config import get_settings
from rcll.telemetry import exposition, logs

logconfig_dict = logs.dict_config(get_settings().log_format)


def child_exit(server, worker) -> None:
    """gunicorn hook: a worker process exited."""
    exposition.process_dead(worker.pid)
