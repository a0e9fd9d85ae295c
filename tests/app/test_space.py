"""The Space metadata: README's front matter must mirror space.yaml."""

import yaml

from conftest import REPO


def front_matter() -> dict:
    text = (REPO / "README.md").read_text(encoding="utf-8")
    assert text.startswith("---\n"), "README.md must open with the Space's YAML front matter"
    return yaml.safe_load(text.split("---\n", 2)[1])


def test_readme_front_matter_mirrors_space_yaml():
    space = yaml.safe_load((REPO / "space.yaml").read_text(encoding="utf-8"))
    assert front_matter() == space
    assert space["sdk"] == "gradio" and space["app_file"] == "app.py"


def test_ci_runs_the_readme_test_command_and_then_the_slow_tests():
    commands = ["python -m pytest tests -q", "python -m pytest tests -q -m slow"]
    readme = [line.split("#")[0].strip() for line in (REPO / "README.md").read_text(encoding="utf-8").splitlines()]
    ci = [line.strip() for line in (REPO / ".ci" / "run").read_text(encoding="utf-8").splitlines()]
    assert all(c in readme for c in commands), "the README shows both test commands, each on a line of its own"
    assert [line for line in ci if line.startswith("python -m pytest")] == commands


def test_space_sdk_version_is_the_pinned_gradio():
    space = yaml.safe_load((REPO / "space.yaml").read_text(encoding="utf-8"))
    pins = dict(line.split("==", 1) for line in (REPO / "requirements.txt").read_text(encoding="utf-8").splitlines()
                if "==" in line and not line.lstrip().startswith("#"))
    assert str(space["sdk_version"]) == pins["gradio"].strip()
