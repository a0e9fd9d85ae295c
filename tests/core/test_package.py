"""The package's metadata (pyproject.toml): the same pins as requirements.txt, buildable offline with an older
setuptools, and a `berteval` command that is `python -m berteval`. Reads files only: no build, no network."""

from __future__ import annotations

import re
import tomllib

from conftest import REPO


def _pyproject() -> dict:
    return tomllib.loads((REPO / "pyproject.toml").read_text(encoding="utf-8"))


def _pin(line: str) -> tuple[str, str]:
    name, _, version = line.partition("==")
    assert version, f"not pinned with ==: {line!r}"
    return re.sub(r"[-_.]+", "-", name.strip().lower()), version.strip()


def test_pyproject_pins_are_requirements_txt_pins():
    """requirements.txt (what the Space and the README's commands install) and the package with every extra
    install the same releases: a pin changed in one file and not the other fails here."""
    project = _pyproject()["project"]
    listed = list(project["dependencies"])
    for extra in project["optional-dependencies"].values():
        listed += [r for r in extra if not r.startswith("berteval[")]  # dev pulls in app and bench by name
    packaged = dict(_pin(r) for r in listed)
    assert len(packaged) == len(listed), "a package is listed twice in pyproject.toml"
    lines = (REPO / "requirements.txt").read_text(encoding="utf-8").splitlines()
    required = dict(_pin(line.split("#")[0]) for line in lines if line.split("#")[0].strip())
    assert packaged == required


def test_pyproject_builds_with_a_setuptools_before_77():
    """An offline build uses whatever setuptools the machine has: a fresh Python 3.11 venv carries 65.5 and
    Debian 12's python3-setuptools is 66.1. Before 77 setuptools rejects the SPDX string form of `license`
    (`license = "Apache-2.0"`: "must be valid exactly by one definition"), so the table form stays, and the
    build requirement does not ask for more than editable installs need (64)."""
    data = _pyproject()
    assert data["project"]["license"] == {"text": "Apache-2.0"}
    (setuptools,) = [r for r in data["build-system"]["requires"] if r.startswith("setuptools")]
    assert ">=64" in setuptools


def test_the_berteval_command_is_python_m_berteval():
    from berteval import cli

    module, _, func = _pyproject()["project"]["scripts"]["berteval"].partition(":")
    assert (module, func) == ("berteval.cli", "main") and callable(cli.main)
    # what `python -m berteval` runs (read, not imported: it calls sys.exit)
    assert "from .cli import main" in (REPO / "berteval" / "__main__.py").read_text(encoding="utf-8")
