"""PEP 517 build backend for cogate: ``setuptools.build_meta`` minus one notice.

cogate's layout maps top-level directories onto subpackages (``controller/`` ->
``cogate.controller``, see ``[tool.setuptools.package-dir]`` in pyproject.toml).
For such a layout setuptools' editable install uses a meta path finder and always
emits the informational ``InformationOnly("Editable installation.")`` notice,
which pip prints as a ``BuildBackendWarning`` on every ``pip install -e .``.
It asks for no action, so this backend hides exactly that notice; every other
setuptools warning (deprecations, missing package data, ...) still shows.

Wheels and sdists are built by setuptools unchanged.
"""

from __future__ import annotations

import warnings

from setuptools.build_meta import *  # noqa: F401,F403  (the PEP 517 hooks)
from setuptools.build_meta import __all__  # noqa: F401
from setuptools.warnings import InformationOnly

warnings.filterwarnings("ignore", message=r"Editable installation\.", category=InformationOnly)
