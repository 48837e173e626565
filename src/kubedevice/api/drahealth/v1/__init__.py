"""DRA resource health API v1."""
