"""pyproject.toml lists hwprof's packages one by one (collectors/ installs as hwprof.collectors): a package folder
missing from the list is missing from the wheel that tox tests and a user installs, while an editable install
still finds it. Every folder of the checkout with an __init__.py is in the list, and nothing else is."""

from __future__ import annotations

import tomllib
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent


def test_every_package_folder_is_listed_for_the_wheel() -> None:
    listed = set(tomllib.loads((ROOT / "pyproject.toml").read_text())["tool"]["setuptools"]["packages"])
    found = set()
    for top, name in (("hwprof", "hwprof"), ("collectors", "hwprof.collectors")):
        for init in (ROOT / top).rglob("__init__.py"):
            parts = init.parent.relative_to(ROOT / top).parts
            found.add(".".join((name, *parts)))
    assert found == listed, {"not listed": sorted(found - listed), "no such folder": sorted(listed - found)}
