"""Mental models: named, stored reflect answers (:mod:`rcll.mental_models.service`)."""
