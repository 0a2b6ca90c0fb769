"""The one build step pyproject.toml cannot say: hwprof-agent.pth (the start-up hook of `HWPROF_AGENT=1`, see
hwprof/agent/autostart.py) installed at the top of site-packages, where Python's site module reads .pth files."""

import os

from setuptools import setup
from setuptools.command.build_py import build_py

HOOK = os.path.join("hwprof", "agent", "hwprof-agent.pth")


class BuildWithAgentHook(build_py):
    def run(self) -> None:
        super().run()
        self.copy_file(HOOK, os.path.join(self.build_lib, os.path.basename(HOOK)))

    def get_outputs(self, include_bytecode: bool = True) -> list[str]:
        return [*super().get_outputs(include_bytecode), os.path.join(self.build_lib, os.path.basename(HOOK))]


setup(cmdclass={"build_py": BuildWithAgentHook})
