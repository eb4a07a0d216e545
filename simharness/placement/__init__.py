"""Placement: mstar node groups to worker graphs per walk, and replicas per request."""

from simharness.placement.layout import Assignment, Layout, WorkerGraph

__all__ = ["Assignment", "Layout", "WorkerGraph"]
