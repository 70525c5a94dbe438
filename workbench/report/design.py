"""How a run's trials were ordered and what disturbed them, in words: the design lines of ``show``'s
notes, the report's "How the trials ran", ``noise`` and the comparison of two runs. The facts are
:class:`~workbench.analysis.run.Design`'s and :class:`~workbench.analysis.paired.Disturbance`'s.
"""

from __future__ import annotations

from workbench.analysis.paired import Disturbance
from workbench.analysis.run import Design
from workbench.formatting import fixed, percent

__all__ = ["ORDER_TEXT", "design_lines", "disturbance_line"]

#: what each trial order means for the speed-ups
ORDER_TEXT = {
    "interleaved": "interleaved (all variants loaded, trials round by round in a balanced order, "
    "paired by prompt and round)",
    "blocks": "counterbalanced blocks (one variant loaded at a time, A B B A over passes of "
    "repetitions; speed-ups paired by prompt and repetition)",
    "sequential": "sequential: each variant's trials in one go, so the machine's drift lands on "
    'whichever variant ran then (interleaving is the default: order = "interleaved")',
}


def disturbance_line(rule: Disturbance) -> str | None:
    """``3 of 120 trials disturbed (2%), left out of the speed-ups``; None when none was."""
    if not rule.disturbed:
        return None
    share = rule.disturbed / rule.measured if rule.measured else 0.0
    what = "left out of the speed-ups" if rule.excluded else f"kept in the speed-ups ({rule.kept_because})"
    return f"{rule.disturbed} of {rule.measured} trials disturbed ({percent(share)}), {what}"


def design_lines(design: Design) -> list[str]:
    """What `show` and the report say about the design, one line each."""
    out = [f"Order: {ORDER_TEXT[design.order]}."]
    if design.workers == "per-repetition" and (design.processes or 0) > 1:
        out.append(
            f"Workers: fresh processes every repetition ({design.processes} per variant); the CIs "
            "count process pairs, not just trials, since two processes of one variant can differ "
            "by a few per cent."
        )
    elif design.workers == "one":
        out.append(
            'Workers: one process per variant for the whole run (workers = "one"): a slow process '
            "would look like a slow variant."
        )
    if design.note:
        out.append(design.note[:1].upper() + design.note[1:] + ".")
    if design.drift is not None:
        out.append(
            f"Drift: the baseline's last rounds took {fixed(design.drift, 2)} times as long as its first "
            + ("(the machine's speed moved during the run)." if abs(design.drift - 1) > 0.05 else "(steady).")
        )
    line = disturbance_line(design.disturbance)
    if line:
        out.append(line[:1].upper() + line[1:] + ".")
    return out
