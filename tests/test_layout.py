"""The package's layering and size rules, checked on the source (see docs/architecture.md).

* data flows one way: ``wss.model`` imports nothing from ``views``, ``studies`` or ``cli``;
  ``views`` import nothing from ``studies`` or ``cli``; ``studies`` nothing from ``cli``;
* only ``wss.cli`` parses argv or exits: no ``sys.exit``/``argparse`` anywhere else;
* inside ``wss.model``, each wing imports only from the wings below it (:data:`MODEL_WINGS`), except
  for names imported only for type checking;
* components never see the Plan or the Scenario: they take their own settings;
* no function in ``wss/`` is longer than 80 lines.
"""

from __future__ import annotations

import ast
from pathlib import Path

import pytest

PACKAGE = Path(__file__).resolve().parents[1] / "wss"
MAX_FUNCTION_LINES = 80


def _modules() -> list[Path]:
    return sorted(PACKAGE.rglob("*.py"))


def _layer(path: Path) -> str:
    parts = path.relative_to(PACKAGE).parts
    return parts[0] if len(parts) > 1 else "root"


def _imported(tree: ast.AST) -> set[str]:
    """Every module named by an absolute import, anywhere in the file (lazy imports included)."""
    names: set[str] = set()
    for node in ast.walk(tree):
        if isinstance(node, ast.ImportFrom) and node.module and node.level == 0:
            names.add(node.module)
        elif isinstance(node, ast.Import):
            names.update(a.name for a in node.names)
    return names


#: layer -> the wss layers it must not import
FORBIDDEN = {
    "model": ("wss.views", "wss.studies", "wss.cli"),
    "views": ("wss.studies", "wss.cli"),
    "studies": ("wss.cli",),
}


@pytest.mark.parametrize("path", _modules(), ids=lambda p: str(p.relative_to(PACKAGE)))
def test_imports_follow_the_layers(path: Path):
    forbidden = FORBIDDEN.get(_layer(path), ())
    tree = ast.parse(path.read_text(encoding="utf-8"))
    bad = sorted(m for m in _imported(tree) if m.startswith(forbidden))
    assert not bad, f"{path.relative_to(PACKAGE)} imports {bad}, against the layering"


def test_no_relative_imports():
    """Absolute imports only: a module's imports read the same wherever it moves."""
    relative = [
        f"{p.relative_to(PACKAGE)}:{n.lineno}"
        for p in _modules()
        for n in ast.walk(ast.parse(p.read_text(encoding="utf-8")))
        if isinstance(n, ast.ImportFrom) and n.level > 0
    ]
    assert not relative, relative


def test_only_the_cli_parses_arguments_or_exits():
    offenders = []
    for path in _modules():
        if _layer(path) == "cli" or path.name == "__main__.py":
            continue
        tree = ast.parse(path.read_text(encoding="utf-8"))
        if "argparse" in _imported(tree):
            offenders.append(f"{path.relative_to(PACKAGE)} imports argparse")
        for node in ast.walk(tree):
            if (isinstance(node, ast.Call) and isinstance(node.func, ast.Attribute) and node.func.attr == "exit"
                    and isinstance(node.func.value, ast.Name) and node.func.value.id == "sys"):
                offenders.append(f"{path.relative_to(PACKAGE)}:{node.lineno} calls sys.exit")
    assert not offenders, offenders


#: The wings of ``wss.model``, ground floor first: a module may import from its own wing and those
#: before it in this list, never from one after it (docs/architecture.md, "Layers").
MODEL_WINGS = ("scenario", "machine", "workload", "kernels", "numerics", "plan", "program", "components",
               "folding", "sim", "result", "simulate")


def _wing(module: str) -> str | None:
    """The wing of a dotted ``wss.model`` module name (``wss.model.sim.cluster`` -> ``sim``)."""
    parts = module.split(".")
    return parts[2] if len(parts) > 2 and parts[:2] == ["wss", "model"] else None


def _runtime_imports(tree: ast.Module) -> set[str]:
    """Absolute imports outside ``if TYPE_CHECKING:`` blocks (lazy imports inside functions included)."""
    skip: set[int] = set()
    for node in ast.walk(tree):
        if isinstance(node, ast.If) and "TYPE_CHECKING" in ast.unparse(node.test):
            skip.update(id(n) for child in node.body for n in ast.walk(child))
    names: set[str] = set()
    for node in ast.walk(tree):
        if id(node) in skip:
            continue
        if isinstance(node, ast.ImportFrom) and node.module and node.level == 0:
            names.add(node.module)
        elif isinstance(node, ast.Import):
            names.update(a.name for a in node.names)
    return names


def test_model_wings_are_listed_and_complete():
    """Every top-level entry of wss/model is a wing of the list (a new one must say where it stands)."""
    entries = {p.stem for p in (PACKAGE / "model").iterdir() if p.name != "__init__.py" and p.name != "__pycache__"}
    assert entries == set(MODEL_WINGS)


@pytest.mark.parametrize("path", sorted((PACKAGE / "model").rglob("*.py")),
                         ids=lambda p: str(p.relative_to(PACKAGE)))
def test_model_wings_import_only_downward(path: Path):
    own = _wing("wss." + ".".join(path.relative_to(PACKAGE).with_suffix("").parts))
    if own not in MODEL_WINGS:  # wss/model/__init__.py, which imports nothing
        return
    rank = MODEL_WINGS.index(own)
    up = sorted(m for m in _runtime_imports(ast.parse(path.read_text(encoding="utf-8")))
                if (w := _wing(m)) is not None and w in MODEL_WINGS and MODEL_WINGS.index(w) > rank)
    assert not up, f"{path.relative_to(PACKAGE)} ({own}) imports {up}, from wings above it"


def test_components_take_their_own_settings_not_the_plan():
    for path in sorted((PACKAGE / "model" / "components").glob("*.py")):
        imported = _imported(ast.parse(path.read_text(encoding="utf-8")))
        bad = sorted(m for m in imported if m.startswith(("wss.model.plan", "wss.model.scenario")))
        assert not bad, f"components/{path.name} imports {bad}: give it a settings object built in cluster.py"


def test_no_function_is_longer_than_80_lines():
    long = []
    for path in _modules():
        for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"))):
            if isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef)):
                assert node.end_lineno is not None
                lines = node.end_lineno - node.lineno + 1
                if lines > MAX_FUNCTION_LINES:
                    long.append(f"{path.relative_to(PACKAGE)}:{node.lineno} {node.name} ({lines} lines)")
    assert not long, "split these into named steps: " + "; ".join(long)


def test_user_facing_text_cites_public_sources_not_private_notes():
    """Docs, messages, presets and scenarios stand alone: no "seed 00N" or the team's design notes by file name."""
    import re

    root = Path(__file__).resolve().parents[1]
    private = re.compile(r"\bseeds?\s*00\d|DESIGN\.md|PARAMETERS\.md|MEASUREMENTS\.md|shared/seeds")
    files = [root / "README.md", *(root / "docs").rglob("*.md"), *(root / "wss").rglob("*.py"),
             *(root / "configs").rglob("*.yaml"), *(root / "scenarios").rglob("*.yaml"),
             *(root / "notebooks").glob("*.ipynb")]
    hits = [f"{p.relative_to(root)}: {m.group(0)}" for p in files
            for m in private.finditer(p.read_text(encoding="utf-8"))]
    assert hits == []


def _private_imports(tree: ast.AST) -> list[str]:
    """``module.name`` for every private name (one leading underscore) imported from a wss module."""
    return [f"{node.module}.{a.name}" for node in ast.walk(tree)
            if isinstance(node, ast.ImportFrom) and node.module and node.module.startswith("wss")
            for a in node.names if a.name.startswith("_") and not a.name.startswith("__")]


def test_no_module_imports_another_modules_private_names():
    """A helper two modules share is public in one of them (or in a module of its own), not reached into."""
    found = {str(p.relative_to(PACKAGE)): names for p in _modules()
             if (names := _private_imports(ast.parse(p.read_text(encoding="utf-8"))))}
    assert found == {}
