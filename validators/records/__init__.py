"""Known-good records: the model, the host fingerprint, the SQLite store, JSON in git.

- `model`: the schema-versioned, content-addressed `Record`;
- `gated`: the declared gated metrics per serving profile (direction, tolerance class), the
  facts a record stores for each metric;
- `fingerprint`: probe the host, compare two hosts, check a host against a stack's targets;
- `store`: the append-only SQLite store with export/import of JSON files;
- `extract` / `compose`: from validation reports to a record; `resolve`: RECORD|STACK args.
"""
