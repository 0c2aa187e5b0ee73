"""What a write to the API server answers (pure): :class:`WriteResult`, :func:`answer_of`, and the
time one request may take (:data:`REQUEST_TIMEOUT`), shared by the writers of
:mod:`cogate.controller.kube.writer` and :mod:`cogate.controller.kube.objects`.
"""

from __future__ import annotations

import json
from enum import StrEnum

__all__ = ["REQUEST_TIMEOUT", "WriteResult", "answer_of"]

#: Seconds an API request may take.
REQUEST_TIMEOUT = 10


class WriteResult(StrEnum):
    """What one write did; also the ``result`` label of its metric. Which write answers which:

    - :meth:`Writer.ungate <cogate.controller.kube.writer.Writer.ungate>` (``writer.UNGATE_RESULTS``),
      :meth:`Writer.check_release <cogate.controller.kube.writer.Writer.check_release>`: ``removed``
      (gate removed), ``ok`` (dry run accepted), ``absent`` (the pod carries no such gate),
      ``not_found`` (pod gone, or recreated under its name), ``skipped`` (``only_if`` said no),
      ``refused`` (the API server refused the patch), ``failed``, ``stopped`` (not sent: the
      controller is shutting down, :meth:`Writer.stop_releasing
      <cogate.controller.kube.writer.Writer.stop_releasing>`; the next leader finishes the release);
    - :meth:`Writer.evict <cogate.controller.kube.writer.Writer.evict>`: ``evicted``, ``gone``, ``failed``;
      :meth:`Writer.delete <cogate.controller.kube.writer.Writer.delete>`: ``deleted``, ``gone``, ``failed``;
    - :meth:`Objects.ensure_pdb <cogate.controller.kube.objects.Objects.ensure_pdb>`: ``created``,
      ``updated``, ``unchanged``, ``foreign``, ``failed``; :meth:`Objects.delete_pdb
      <cogate.controller.kube.objects.Objects.delete_pdb>`: ``deleted``, ``absent``, ``foreign``, ``failed``;
      the other creates ``created``, ``failed``, and deletes ``deleted``, ``gone``, ``failed``
      (:class:`cogate.controller.kube.objects.Objects`);
    - :meth:`Writer.write_status <cogate.controller.kube.writer.Writer.write_status>` answers a bool;
      its metric counts ``ok`` and ``error``.
    """

    REMOVED = "removed"
    OK = "ok"
    ABSENT = "absent"
    NOT_FOUND = "not_found"
    SKIPPED = "skipped"
    REFUSED = "refused"
    FAILED = "failed"
    STOPPED = "stopped"
    EVICTED = "evicted"
    GONE = "gone"
    DELETED = "deleted"
    CREATED = "created"
    UPDATED = "updated"
    UNCHANGED = "unchanged"
    FOREIGN = "foreign"
    ERROR = "error"


def answer_of(exc: BaseException) -> str:
    """The API server's message of an error (the ``Status`` body's ``message``), else its text."""
    body = getattr(exc, "body", None)
    if isinstance(body, (bytes, str)):
        try:
            msg = json.loads(body).get("message")
            if isinstance(msg, str) and msg:
                return msg
        except (ValueError, AttributeError):
            pass
    return str(getattr(exc, "reason", "") or exc).strip()
