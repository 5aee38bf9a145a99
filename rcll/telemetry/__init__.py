"""Operations telemetry: Prometheus metric definitions (:mod:`.metrics`), the families sampled
at scrape time (:mod:`.collectors`), multiprocess exposition (:mod:`.exposition`) and JSON-line
logs with the job's ids on every line (:mod:`.logs`). Engine code: no Flask, no Celery."""
