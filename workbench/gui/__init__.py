"""The desktop app and the chart module (Qt lives only here; see docs/architecture.md)."""
