"""ProvisioningRequests for a waiting group's missing nodes: the rules (`provreq`, pure) and the room
that asks cluster-autoscaler, judges, consumes and deletes (`room`, I/O); what it remembers per group
(`memory`, pure).

The folder map and import rule: docs/internals.md."""
