"""I/O: talking to the API server: informers (list + watch), Lease leader election, metrics and health,
Events, and the one writer of status, gates and evictions.

The folder map and import rule: docs/internals.md."""
