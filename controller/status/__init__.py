"""Pure: what is said about a group: its status and phase (`status`), its conditions (`conditions`),
event vocabulary (`notices`), what happens after a release (`lifecycle`) and the planner's input built
from the caches (`inputs`).

The folder map and import rule: docs/internals.md."""
