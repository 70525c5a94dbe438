"""The `workbench` CLI with the run's parent-side stages made holdable, for tests/test_signals.py:
``python -m tests.signal_helpers run SPEC --db DB`` is ``workbench run SPEC --db DB``, except that with
``WORKBENCH_HOLD_PARENT`` = ``quality`` (the quality pass starts) or ``finish`` (the final write
starts) and ``WORKBENCH_HOLD_DIR`` set, the parent holds there (``workbench.testing.hold``: it writes
``reached`` and waits for ``release``), so that a test can signal it at that stage without racing the
clock. The workers hold through the fake strategy's own ``hold_at``."""

from __future__ import annotations

import functools
import os
from typing import Any

from workbench.testing import hold


def _holding(method: Any, stage: str) -> Any:
    @functools.wraps(method)
    def wrapper(*args: Any, **kwargs: Any) -> Any:
        hold(os.environ["WORKBENCH_HOLD_DIR"], f"parent:{stage}")
        return method(*args, **kwargs)

    return wrapper


def main() -> None:
    stage = os.environ.get("WORKBENCH_HOLD_PARENT")
    if stage == "quality":
        from workbench.run.quality import QualityPass

        QualityPass.run = _holding(QualityPass.run, stage)  # type: ignore[method-assign]
    elif stage == "finish":
        from workbench.run.recording import RunRecorder

        RunRecorder.finish = _holding(RunRecorder.finish, stage)  # type: ignore[method-assign]
    from workbench.cli import main as cli

    cli()


if __name__ == "__main__":
    main()
