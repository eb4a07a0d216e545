"""Scenarios: the schema (frozen msgspec Structs), the YAML loader with validation, overrides."""

from simharness.scenario.loader import load_scenario, parse_scenario
from simharness.scenario.model import Scenario

__all__ = ["Scenario", "load_scenario", "parse_scenario"]
