"""scripts/uv_env.py: uv (tox-uv builds the suite's env) sees pip's own wheel sources. Checked on `pip config
list` output written here (offline), and once on this host's pip (whatever it is configured with)."""

from __future__ import annotations

import importlib.util
import subprocess
import sys
from pathlib import Path

SCRIPT = Path(__file__).resolve().parents[1] / "scripts" / "uv_env.py"
spec = importlib.util.spec_from_file_location("uv_env", SCRIPT)
assert spec and spec.loader
uv_env = importlib.util.module_from_spec(spec)
spec.loader.exec_module(uv_env)

LISTED = """\
:env:.find-links='/opt/wheels /srv/more wheels'
:env:.default-timeout='180'
global.cert='/etc/ssl/certs/ca-certificates.crt'
global.extra-index-url='file:///opt/pypi/simple file:///opt/pypi-more/simple'
global.find-links='/ignored/by/the/env'
install.index-url='https://mirror.example/simple'
freeze.find-links='/not/an/install/option'
"""


def test_pips_sources_become_uvs_variables_the_environment_ranked_first() -> None:
    settings = uv_env.pip_settings(LISTED)
    assert settings["find-links"] == "/opt/wheels /srv/more wheels"
    lines = uv_env.exports(settings, {})
    assert lines == [
        "export UV_FIND_LINKS=/opt/wheels,/srv/more,wheels",
        "export UV_INDEX_URL=https://mirror.example/simple",
        "export UV_EXTRA_INDEX_URL='file:///opt/pypi/simple file:///opt/pypi-more/simple'",
    ]


def test_a_uv_variable_already_set_is_kept_and_nothing_configured_prints_nothing() -> None:
    settings = uv_env.pip_settings(LISTED)
    lines = uv_env.exports(settings, {"UV_FIND_LINKS": "/mine"})
    assert not any(line.startswith("export UV_FIND_LINKS=") for line in lines)
    assert uv_env.exports(uv_env.pip_settings(""), {}) == []


def test_the_script_runs_on_this_hosts_pip_and_prints_only_exports() -> None:
    done = subprocess.run([sys.executable, str(SCRIPT)], capture_output=True, text=True, check=True)
    assert all(line.startswith("export UV_") for line in done.stdout.splitlines() if line)
