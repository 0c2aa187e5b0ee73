"""``cogate explain`` (issue 31): why a gang waits, from one snapshot of the cluster (pure).

:mod:`~cogate.controller.explain.explanation` runs the controller's own planning path on a
snapshot and words the answer; :mod:`~cogate.controller.explain.report` prints it. The I/O shell
(one-shot lists, the command line) is :mod:`cogate.explain`.
"""
