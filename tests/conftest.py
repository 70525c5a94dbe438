from __future__ import annotations

import os

import pytest

# Never let a test write into the user's real results database or model cache by accident.
os.environ.pop("WORKBENCH_DB", None)


@pytest.fixture
def db_path(tmp_path):
    return tmp_path / "results.db"
