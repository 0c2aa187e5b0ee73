"""Topology-aware gangs (issue 32, pure): levels and constraints from annotations
(:mod:`~cogate.controller.topology.constraints`), domains and the choice among them
(:mod:`~cogate.controller.topology.domains`). Plain data only: it imports nothing of controller/, so
the records (:class:`~cogate.controller.model.verdicts.GroupRequest`) and the planner may use it."""
