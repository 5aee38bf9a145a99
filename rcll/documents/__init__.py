"""Documents and a bank's contents as lists: the use cases behind the documents, memories
list, tags and clear routes (:mod:`rcll.documents.service`)."""
