"""Build hook: ship the repository's presets and example scenarios inside the package.

``configs/`` (hardware and model presets) and ``scenarios/`` (runnable examples and the validation
cases of ``wss reproduce``) live at the top of the repository, where users read and edit them.  A
wheel must carry them too, or a plain ``pip install`` knows no presets: they are copied into the
built package as ``wss/configs`` and ``wss/scenarios``, where :func:`wss.model.scenario.presets.config_root`
and :func:`wss.studies.validation.default_directory` look first.  An editable install reads them from
the checkout instead.  Everything else is declared in pyproject.toml.
"""

import shutil
from pathlib import Path

from setuptools import setup
from setuptools.command.build_py import build_py

HERE = Path(__file__).resolve().parent
SHIPPED = ("configs", "scenarios")


class BuildPyWithData(build_py):
    """``build_py`` that also copies the shipped data folders into ``<build>/wss/``."""

    def run(self) -> None:
        super().run()
        for name in SHIPPED:
            src = HERE / name
            if src.is_dir():
                shutil.copytree(src, Path(self.build_lib) / "wss" / name, dirs_exist_ok=True,
                                ignore=shutil.ignore_patterns("__pycache__", "*.pyc"))


setup(cmdclass={"build_py": BuildPyWithData})
