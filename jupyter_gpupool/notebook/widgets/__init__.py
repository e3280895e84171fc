"""Widgets for notebooks: :class:`LaunchPanel` (needs ipywidgets)."""

from .panel import LaunchPanel, PoolBar

__all__ = ["LaunchPanel", "PoolBar"]
