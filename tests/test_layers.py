"""The package's shape, as docs/DEVELOPING.md (section 9, the module map) states it: subpackages
in layers that import only downwards, no import cycle, no module over 750 lines (600 as laid out
by hand before ruff format, which spreads the same code over about a quarter more lines), and an
import inside a function only with a comment that says why.

The imports are read with :mod:`ast` (nothing is imported), and cycles are found by the standard
library's :mod:`graphlib`.
"""

import ast
import graphlib
from pathlib import Path

import pytest

PACKAGE = Path(__file__).resolve().parents[1] / "mpilab"
#: The layers, lowest first (docs/DEVELOPING.md, section 9).
LAYERS = ("core", "model", "simulate", "measure", "cluster", "grade", "studies", "cli")
MAX_LINES = 750


def module_name(path):
    parts = list(path.relative_to(PACKAGE.parent).with_suffix("").parts)
    if parts[-1] == "__init__":
        parts.pop()
    return ".".join(parts)


MODULES = {module_name(p): p for p in sorted(PACKAGE.rglob("*.py"))}
TREES = {name: ast.parse(path.read_text(), filename=str(path)) for name, path in MODULES.items()}


def imported(name, node):
    """The kit's modules an import statement of module ``name`` names."""
    if isinstance(node, ast.Import):
        targets = [a.name for a in node.names]
    else:
        base = name.split(".") if MODULES[name].name == "__init__.py" else name.split(".")[:-1]
        if node.level:
            base = base[: len(base) - node.level + 1]
            module = ".".join(base + ([node.module] if node.module else []))
        else:
            module = node.module or ""
        targets = [module] + [f"{module}.{a.name}" for a in node.names]
    return {t for t in targets if t in MODULES and t != name}


def imports(name):
    """(line, module) of every import of the kit's modules in module ``name``."""
    return [
        (node.lineno, target)
        for node in ast.walk(TREES[name])
        if isinstance(node, (ast.Import, ast.ImportFrom))
        for target in imported(name, node)
    ]


def layer(name):
    parts = name.split(".")
    return parts[1] if len(parts) > 2 or (len(parts) == 2 and parts[1] in LAYERS) else None


def test_the_parser_sees_the_package():
    assert len(MODULES) > 50 and "mpilab.simulate.platforms" in MODULES
    assert "mpilab.core.errors" in {m for _, m in imports("mpilab.simulate.platforms")}


def test_layers_import_only_downwards():
    wrong = []
    for name in MODULES:
        mine = layer(name)
        if mine not in LAYERS:
            continue
        for line, target in imports(name):
            theirs = layer(target)
            if theirs in LAYERS and LAYERS.index(theirs) > LAYERS.index(mine):
                wrong.append(
                    f"{MODULES[name].relative_to(PACKAGE.parent)}:{line}: "
                    f"{mine} imports {target} ({theirs} is a higher layer)"
                )
    assert not wrong, "\n".join(wrong)


def test_no_import_cycle():
    graph = {name: {target for _, target in imports(name)} for name in MODULES}
    try:
        graphlib.TopologicalSorter(graph).prepare()
    except graphlib.CycleError as e:
        pytest.fail(f"import cycle: {' -> '.join(e.args[1])}")


def test_no_module_over_the_line_limit():
    long = {
        str(p.relative_to(PACKAGE.parent)): n
        for p in MODULES.values()
        if (n := len(p.read_text().splitlines())) > MAX_LINES
    }
    assert not long, f"modules over {MAX_LINES} lines: {long}"


def test_an_import_inside_a_function_says_why():
    """A comment on the import's line, or on the line before it (the first of a group)."""
    silent = []
    for name, tree in TREES.items():
        lines = MODULES[name].read_text().splitlines()
        for func in ast.walk(tree):
            if not isinstance(func, (ast.FunctionDef, ast.AsyncFunctionDef)):
                continue
            for node in ast.walk(func):
                if isinstance(node, (ast.Import, ast.ImportFrom)):
                    here, before = lines[node.lineno - 1], lines[node.lineno - 2]
                    if "#" not in here and "#" not in before:
                        silent.append(
                            f"{MODULES[name].relative_to(PACKAGE.parent)}:{node.lineno}: {here.strip()}"
                        )
    assert not silent, "imports inside functions without a reason:\n" + "\n".join(silent)


#: The modules that may read a CSV with pandas: core.results (every table a C program of the kit
#: prints) and studies.reference (the seeds' reference tables, data files of the kit).
READS_CSV = {"mpilab.core.results", "mpilab.studies.reference"}


def test_c_programs_output_is_read_only_in_core_results():
    """Issue 32: a C program's output goes driver.parse -> core.results (or results.read_table),
    never through a pandas reader of its own somewhere else."""
    readers = {
        name
        for name, tree in TREES.items()
        for node in ast.walk(tree)
        if isinstance(node, ast.Attribute)
        and node.attr in ("read_csv", "read_table", "read_fwf")
        and isinstance(node.value, ast.Name)
        and node.value.id in ("pd", "pandas")
    }
    assert readers <= READS_CSV, f"{sorted(readers - READS_CSV)} read a CSV with pandas: use core.results"
    assert "mpilab.core.results" in readers  # the walk finds what it looks for
