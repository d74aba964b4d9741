from gpuplace.components.placement.discover_inventory.component import discover_inventory

__all__ = ["discover_inventory"]
