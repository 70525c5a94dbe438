"""The plugin contract, the bottom layer: what a strategy is (:mod:`.strategy`), its parameters
(:mod:`.config`), the variant it loads (:mod:`.variant`) on a device (:mod:`.device`), the errors
(:mod:`.errors`), the registry of strategies (:mod:`.registry`) and where the package's resources
are (:mod:`.resources`). Imports nothing else of ours, and never torch at import time.
"""
