"""Queue and task names in one place (stable names; a test checks the worker consumes all)."""


class QueueNames:
    EXTRACT = "extract"
    EMBED = "embed"
    CONSOLIDATE = "consolidate"
    MAINTENANCE = "maintenance"

    @classmethod
    def all(cls) -> list[str]:
        return [cls.EXTRACT, cls.EMBED, cls.CONSOLIDATE, cls.MAINTENANCE]


SWEEP_TASK = "maintenance.sweep_jobs"  # the recovery sweep, scheduled by beat
VECTOR_INDEX_TASK = "maintenance.vector_indexes"  # per-bank HNSW indexes, scheduled by beat
DEDUP_SWEEP_TASK = "consolidate.dedup_sweep"  # beat: enqueue dedup scans of banks with new units
DEDUP_SCAN_TASK = "consolidate.dedup_scan"  # one bank's dedup scan (args: [bank_id])
CLOSETS_TASK = "consolidate.closets"  # one closets job (POST …/closets or the beat check)
CLOSET_CHECK_TASK = "consolidate.closet_check"  # groups past closet_min_units, scheduled by beat
HEBBIAN_DECAY_TASK = "maintenance.hebbian_decay"  # beat: decay and prune co-recall weights
# beat: claim the webhook deliveries that are due, one deliver task each (rcll.webhooks)
WEBHOOK_DISPATCH_TASK = "maintenance.webhook_dispatch"
WEBHOOK_DELIVER_TASK = "maintenance.webhook_deliver"  # one attempt (args: [delivery_id, claim])
LLM_LOG_PURGE_TASK = "maintenance.purge_llm_requests"  # beat: the request log's retention


def _routes() -> dict[str, dict[str, str]]:
    from rcll.retain.stages import JOB_STEPS, STAGES

    return {**{stage.task_name: {"queue": stage.queue} for stage in STAGES},
            **{step.task_name: {"queue": step.queue} for step in JOB_STEPS.values()},
            SWEEP_TASK: {"queue": QueueNames.MAINTENANCE},
            VECTOR_INDEX_TASK: {"queue": QueueNames.MAINTENANCE},
            DEDUP_SWEEP_TASK: {"queue": QueueNames.CONSOLIDATE},
            DEDUP_SCAN_TASK: {"queue": QueueNames.CONSOLIDATE},
            CLOSETS_TASK: {"queue": QueueNames.CONSOLIDATE},
            CLOSET_CHECK_TASK: {"queue": QueueNames.CONSOLIDATE},
            HEBBIAN_DECAY_TASK: {"queue": QueueNames.MAINTENANCE},
            WEBHOOK_DISPATCH_TASK: {"queue": QueueNames.MAINTENANCE},
            WEBHOOK_DELIVER_TASK: {"queue": QueueNames.MAINTENANCE},
            LLM_LOG_PURGE_TASK: {"queue": QueueNames.MAINTENANCE}}


ROUTES = _routes()
