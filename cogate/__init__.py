"""cogate: gang scheduling for Kubernetes without replacing the scheduler."""

#: The release (semantic versioning, https://semver.org): the package's version (pyproject.toml reads it
#: here), the Helm chart's ``version`` and ``appVersion`` and the image tag are all this one string;
#: ``tools/version.py set X.Y.Z`` changes them together (CONTRIBUTING.md, "Releasing").
__version__ = "0.3.0"
