"""Pure capacity planning as kube-scheduler filters: node filters, topology spread, the capacity model
(`capacity`), explanations of what a group lacks, the decision sequence (`planner`), the planner's state
kept between passes (`planstate`) and the release JSON Patch (`patches`).

The folder map and import rule: docs/internals.md."""
