"""GPU node pools for JupyterHub on Kubernetes."""

__version__ = "0.1.0.dev0"
