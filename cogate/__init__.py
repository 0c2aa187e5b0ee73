"""cogate: gang scheduling for Kubernetes without replacing the scheduler."""

__version__ = "0.1.0"
