"""Placement components: discovering the fleet and planning a topology-aware placement on it."""
