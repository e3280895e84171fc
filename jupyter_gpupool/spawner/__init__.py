"""GPUPoolSpawner: KubeSpawner with prioritized GPU pools, GPU counts and fallback.

The pure parts are modules of their own (options and their checks, the form, pod settings,
scheduling signals, messages), so they are tested without a cluster or a hub. ``spawner`` holds
the class and its settings, built on ``choosing`` (the form hooks), ``placing`` (the start with
fallback, state, progress) and ``service`` (the questions to the gpupool service over one
kept-alive client). It is imported on first use: the pure modules don't pay for KubeSpawner.
"""

from __future__ import annotations

from typing import Any

__all__ = ["GPUPoolSpawner"]


def __getattr__(name: str) -> Any:
    if name == "GPUPoolSpawner":
        from .spawner import GPUPoolSpawner

        return GPUPoolSpawner
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
