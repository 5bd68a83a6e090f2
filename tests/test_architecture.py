"""The package layout of core/ holds: no import cycles (function-level imports included), packages import only
the layers below them (docs/architecture.md), and no module imports another module's private names."""

from __future__ import annotations

import ast
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]

# package -> the core packages it may import (besides itself); top-level modules count as packages here.
ALLOWED = {
    "collector": set(),
    "errors": set(),
    "storage": set(),
    "models": {"errors", "storage"},
    "data": {"errors", "storage", "models"},
    "evaluation": {"errors", "storage", "models", "data"},
    "generation": {"errors", "storage", "models", "data", "evaluation"},
    "losses": {"errors"},
    "training": {"collector", "errors", "storage", "models", "data", "evaluation", "losses"},
    "runs": {"errors", "storage", "models", "data", "evaluation", "training"},
    "jobs": {"collector", "errors", "storage", "models", "data", "evaluation", "training", "runs"},
    "analysis": {"errors", "storage", "models", "data", "evaluation", "training", "runs", "jobs"},
    "reproduce": {"errors", "storage", "models", "data", "evaluation", "training", "runs", "jobs", "generation"},
    "cli": {"errors", "storage", "models", "data", "evaluation", "training", "runs", "jobs", "analysis", "reproduce",
            "generation"},
    "__main__": {"cli"},
}


def _modules(root: Path = ROOT) -> dict[str, Path]:
    return {".".join(p.relative_to(root).with_suffix("").parts).removesuffix(".__init__"): p
            for p in (root / "core").rglob("*.py")}


def _imports(path: Path, mods: dict[str, Path]) -> list[tuple[str, list[str]]]:
    """(imported core module, names taken from it) for every import in the file, at any depth."""
    found = []
    for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"))):
        if isinstance(node, ast.ImportFrom) and node.module and node.level == 0:
            names = [a.name for a in node.names]
            submodules = [f"{node.module}.{n}" for n in names if f"{node.module}.{n}" in mods]
            if submodules:
                found += [(m, []) for m in submodules]
            elif node.module in mods:
                found.append((node.module, names))
        elif isinstance(node, ast.Import):
            found += [(a.name, []) for a in node.names if a.name in mods]
    return found


def _package(module: str) -> str:
    return module.split(".")[1] if module != "core" else "core"


def test_no_import_cycles() -> None:
    mods = _modules()
    graph = {name: {m for m, _ in _imports(path, mods) if m != name} for name, path in mods.items()}
    cycles: list[str] = []
    state: dict[str, int] = {}  # 1 visiting, 2 done

    def visit(node: str, stack: list[str]) -> None:
        state[node] = 1
        for dep in sorted(graph[node]):
            if state.get(dep) == 1:
                cycles.append(" -> ".join(stack[stack.index(dep):] + [node, dep]) if dep in stack
                              else f"{node} -> {dep}")
            elif dep not in state:
                visit(dep, [*stack, node])
        state[node] = 2

    for name in sorted(graph):
        if name not in state:
            visit(name, [])
    assert cycles == []


def test_packages_import_only_lower_layers() -> None:
    mods = _modules()
    wrong = []
    for name, path in mods.items():
        package = _package(name)
        if package == "core":
            continue
        for target, _names in _imports(path, mods):
            other = _package(target)
            if other not in (package, "core") and other not in ALLOWED[package]:
                wrong.append(f"{name} imports {target}")
    assert wrong == []


def test_no_private_names_across_modules() -> None:
    mods = _modules()
    for root in ("ui", "app_pages"):
        mods |= {f"{root}.{p.stem}": p for p in (ROOT / root).glob("*.py")}
    mods["app"] = ROOT / "app.py"
    private = [f"{name} takes {n} from {target}"
               for name, path in mods.items() for target, names in _imports(path, _modules())
               for n in names if n.startswith("_") and target != name]
    assert private == []


def test_every_package_says_what_it_exports() -> None:
    for init in (ROOT / "core").glob("*/__init__.py"):
        doc = ast.get_docstring(ast.parse(init.read_text(encoding="utf-8")))
        assert doc, f"{init.relative_to(ROOT)} has no docstring naming its modules"
        for module in init.parent.glob("[!_]*.py"):
            assert f"``{module.stem}``" in doc, f"{init.relative_to(ROOT)} does not describe {module.stem}"


def test_the_checks_see_a_cycle(tmp_path: Path) -> None:
    """The walker itself: a cycle through a function-level import is found."""
    (tmp_path / "core" / "a").mkdir(parents=True)
    (tmp_path / "core" / "a" / "x.py").write_text("from core.a import y\n")
    (tmp_path / "core" / "a" / "y.py").write_text("def f():\n    from core.a.x import g\n")
    mods = _modules(tmp_path)
    assert _imports(mods["core.a.x"], mods) == [("core.a.y", [])]
    assert _imports(mods["core.a.y"], mods) == [("core.a.x", ["g"])]


def test_the_cli_starts_without_the_heavy_libraries():
    """`python -m core runs` took 0.4 s; importing a table's content reader at the config's import (pandas,
    scikit-learn) made every command, --help included, take 2.2 s. The commands that list or label runs need neither
    those nor torch."""
    import subprocess
    import sys

    code = ("import sys, core.cli, core.training.config, core.runs.labels; "
            "print(sorted(m for m in ('sklearn', 'torch', 'pandas', 'transformers') if m in sys.modules))")
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True,
                         cwd=Path(__file__).resolve().parents[1])
    assert out.stdout.strip() == "[]", out.stdout


def test_a_cli_quick_call_asks_its_model_without_torch_or_transformers():
    """`quick` asks whether the model supports a top-layers run before it hands the run over: importing
    core.training.top_layers for that (torch and transformers, 2.5 s) and transformers' config reader held back the
    call's worker, whose own imports then shared the cores with the call's (issue 32)."""
    import subprocess
    import sys

    code = ("import sys, core.jobs.quick; core.jobs.quick.quick_top_layers(None); "
            "print(sorted(m for m in ('torch', 'transformers') if m in sys.modules))")
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True,
                         cwd=Path(__file__).resolve().parents[1])
    assert out.stdout.strip() == "[]", out.stdout


def test_reading_cached_figures_needs_neither_sentence_transformers_nor_scikit_learn_nor_scipy_stats():
    """`layers --compare`, `maps` and a repeated `evaluate` read cached states and results: importing
    sentence-transformers (6 s), scikit-learn (1.3 s) and scipy.stats (1 s) at the top of the modules they use made
    half of `layers --compare`'s 14 s (issue 32). Each is imported where a model runs or a figure is computed."""
    import subprocess
    import sys

    code = ("import sys, core.cli.analysis, core.evaluation.evaluate, core.evaluation.corpus_eval, core.analysis.maps, "
            "core.data.kinds; "
            "print(sorted(m for m in ('sentence_transformers', 'sklearn', 'scipy.stats') if m in sys.modules))")
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True,
                         cwd=Path(__file__).resolve().parents[1])
    assert out.stdout.strip() == "[]", out.stdout
