"""Built-in strategies. Registered through the ``workbench.strategies`` entry-point group exactly like
third-party plugins (see pyproject.toml); the ``workbench`` package never imports this one directly."""
