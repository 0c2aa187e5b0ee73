"""Pure: what is said about a group: its status and phase (`status`), its conditions (`conditions`),
event vocabulary (`notices`), what happens after a release (`lifecycle`), the planner's input built
from the caches (`inputs`) and what the status writes remember per group (`memory`).

The folder map and import rule: docs/internals.md."""
