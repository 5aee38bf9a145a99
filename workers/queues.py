"""Queue and task names in one place (stable names; a test checks the worker consumes all)."""


class QueueNames:
    EXTRACT = "extract"
    EMBED = "embed"
    CONSOLIDATE = "consolidate"
    MAINTENANCE = "maintenance"

    @classmethod
    def all(cls) -> list[str]:
        return [cls.EXTRACT, cls.EMBED, cls.CONSOLIDATE, cls.MAINTENANCE]


class TaskNames:
    RETAIN_EXTRACT = "retain.extract"
    RETAIN_EMBED = "retain.embed"


ROUTES = {
    TaskNames.RETAIN_EXTRACT: {"queue": QueueNames.EXTRACT},
    TaskNames.RETAIN_EMBED: {"queue": QueueNames.EMBED},
}
