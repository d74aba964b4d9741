"""Test support: stand-ins for services that cannot run here (each says which and why)."""
