"""Test doubles (dev only, not shipped in the wheel): the loopback fake provider server."""
