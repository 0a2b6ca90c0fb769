"""scripts/debian_mirror.sh: the Debian mirror that scripts/install_valgrind.sh fetches valgrind from
is the one apt is configured with (issue 17: no registry host name in the code). The download itself
is run for real by .ci/run; this checks the parsing of apt's sources on made-up files, offline."""

from __future__ import annotations

import shutil
import subprocess
from pathlib import Path

import pytest

SCRIPT = Path(__file__).resolve().parents[1] / "scripts" / "debian_mirror.sh"

ONE_LINE = """\
# deb http://commented.example/debian bookworm main
deb [arch=amd64 signed-by=/etc/keys/local.gpg] http://mirror.local:8080/debian bookworm main contrib
deb http://security.example/debian-security bookworm-security main
deb-src http://sources.example/debian bookworm main
deb http://ports.example/ubuntu noble main
deb http://contrib-only.example/debian trixie contrib
"""

DEB822 = """\
Types: deb deb-src
URIs: file:/srv/mirror/debian https://second.example/debian
Suites: trixie trixie-updates
Components: main
Signed-By: /usr/share/keyrings/debian-archive-keyring.gpg

Types: deb
URIs: http://disabled.example/debian
Suites: trixie
Components: main
Enabled: no

Types: deb
URIs: http://inline-key.example/debian
Suites: sid
Components: main contrib
Signed-By:
 -----BEGIN PGP PUBLIC KEY BLOCK-----
 .
 mQINBGPL
 -----END PGP PUBLIC KEY BLOCK-----

Types: deb
URIs: http://nodesource.example/node_20.x
Suites: nodistro
Components: main
"""


def _mirrors(list_file: Path, parts: Path) -> list[tuple[str, str]]:
    done = subprocess.run(["bash", str(SCRIPT), str(list_file), str(parts)], capture_output=True, text=True)
    assert done.returncode == 0, done.stderr
    return [tuple(line.split("\t")) for line in done.stdout.splitlines()]  # type: ignore[misc]


@pytest.mark.skipif(shutil.which("bash") is None or shutil.which("awk") is None, reason="needs bash and awk")
def test_mirrors_come_from_one_line_and_deb822_sources(tmp_path: Path) -> None:
    parts = tmp_path / "sources.list.d"
    parts.mkdir()
    (tmp_path / "sources.list").write_text(ONE_LINE)
    (parts / "mirror.sources").write_text(DEB822)
    (parts / "ignored.list.disabled").write_text("deb http://not-read.example/debian bookworm main\n")
    assert _mirrors(tmp_path / "sources.list", parts) == [
        ("http://mirror.local:8080/debian", "/etc/keys/local.gpg"),
        ("file:/srv/mirror/debian", "/usr/share/keyrings/debian-archive-keyring.gpg"),
        ("https://second.example/debian", "/usr/share/keyrings/debian-archive-keyring.gpg"),
        ("http://inline-key.example/debian", ""),
    ]


@pytest.mark.skipif(shutil.which("bash") is None or shutil.which("awk") is None, reason="needs bash and awk")
def test_no_sources_is_no_mirror(tmp_path: Path) -> None:
    assert _mirrors(tmp_path / "missing.list", tmp_path / "missing.d") == []
    (tmp_path / "only.list").write_text("deb http://security.example/debian-security trixie-security main\n")
    assert _mirrors(tmp_path / "only.list", tmp_path) == []
