"""Operations (jobs) as their callers see them (:mod:`rcll.operations.service`)."""
