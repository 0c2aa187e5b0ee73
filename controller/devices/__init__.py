"""DRA devices (resource.k8s.io/v1): device selectors in CEL (`cel`, pure), ResourceSlice/claim records
(`records`, pure), devices as planner resources (`dra`, pure) and the devices room over four informers
(`room`, I/O).

The folder map and import rule: docs/internals.md."""
