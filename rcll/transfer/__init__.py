"""Bank export and import: the rcll-bank format, the exporter, the importer and the
service HTTP and the CLI call (docs/guides/export-import.md)."""
