"""The plugin contract, the bottom layer: what a strategy is (:mod:`.strategy`), its parameters
(:mod:`.config`), the variant it loads (:mod:`.variant`) on a device (:mod:`.device`), the errors
(:mod:`.errors`), the registry of strategies (:mod:`.registry`), where the package's resources
are (:mod:`.resources`), the string values stored and compared everywhere (:mod:`.literals`) and
the metric table (:mod:`.metrics`: each metric's label, unit and direction).
Imports nothing else of ours, and never torch at import time.
"""
