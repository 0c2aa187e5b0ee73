"""Pure records and vocabularies every other folder reads (no planning, no I/O): quantities and
effective requests (`resources`), pod/node records from API JSON and the membership rule (`records`),
volumes, `spec.minResources`, the planner's vocabulary (`verdicts`), replicas, ResourceQuota,
scheduler-plugins leftovers, wake-up times and the controller's knobs (`config`).

The folder map and import rule: docs/internals.md."""
