"""Routing and load telemetry: what producers use to pick and weigh partitions."""

from __future__ import annotations

from ._load import EnqueueResult, InboundLoad, LoadSnapshot, OutboundLoad, RoutingLoad

__all__ = ["EnqueueResult", "InboundLoad", "LoadSnapshot", "OutboundLoad", "RoutingLoad"]
