"""What to run: a spec (TOML or the GUI's form) parsed into dataclasses with precise errors
(:mod:`.parse`; a workload's table: :mod:`.workload_parse`; typed keys, numbers and durations of any
table: :mod:`.tables`), its workloads (:mod:`.workloads`), a workload's experience targets
(:mod:`.targets`), and TOML writing (:mod:`.writer`). Model sources and their one-off conversions are
their own package, :mod:`workbench.sources`.
"""

from __future__ import annotations

from workbench.core.variant import Variant
from workbench.spec.parse import DTYPES, Spec, load_spec, parse_spec, spec_from_dict, variant_from_dict
from workbench.spec.workloads import Workload

__all__ = [
    "DTYPES",
    "Spec",
    "Variant",
    "Workload",
    "load_spec",
    "parse_spec",
    "spec_from_dict",
    "variant_from_dict",
]
