"""Directives: a bank's hard rules that reflect's prompt carries (Hindsight's directives) —
the request models (:mod:`rcll.directives.models`) and the service
(:mod:`rcll.directives.service`)."""
