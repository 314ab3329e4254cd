"""The package's import structure: no cycles, every module importable alone, lazy imports only where meant.

The graph counts every import statement, those inside functions too (an
import moved into a function to dodge a cycle is still a cycle).
"""

from __future__ import annotations

import ast
import subprocess
import sys
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

import pytest

from mpi_run import run_python

SRC = Path(__file__).resolve().parents[2] / "src"

# Imports a function may make instead of the module: initialising MPI, an optional dependency (SimGrid), or
# loading a heavy library that most callers of the module never need.
LAZY_TARGETS = (
    "mpi4py.MPI",
    "torch",
    "torchvision",
    "matplotlib",
    "sklearn",
    "scipy",
    "PIL",
    "simgrid",
    "pandas",
    "h5py",
)
# Package modules that import one of those at their top, so importing them lazily is lazy for the same reason
# (the subcommands' computing modules: `scaledl --help` and a subcommand's --help import none of them).
LAZY_MODULES = (
    "scaledl.train.loop", "scaledl.train.setup", "scaledl.sim.platform", "scaledl.sim.run",
    "scaledl.sim.roofline", "scaledl.architectures", "scaledl.report.claims",
    "scaledl.report.comm_model", "scaledl.report.compare", "scaledl.report.figures", "scaledl.report.runs", "scaledl.report.tables", "scaledl.report.trace",
    "scaledl.report.tuning", "scaledl.report.claims.judged",
    "scaledl.comm.flat", "scaledl.data.loader", "scaledl.train.provenance",  # torch at their top (calibrate's step)
    "scaledl.algorithms.rules",  # torch at its top (calibrate's step: the loop's update between two timed steps)
    "scaledl.data.hdf5",  # h5py: what Snakemake imports while parsing reads a prepared file only where one exists
    "scaledl.data.converters",  # every converter, so h5py too (scaledl.data.datasets: a default left out)
)  # fmt: skip
# The ground floor: small shared modules that everything may import and that import nothing above them.
GROUND_FLOOR = (
    "scaledl",
    "scaledl.atomic",
    "scaledl.errors",
    "scaledl.progress",
    "scaledl.config",
    "scaledl.run_record",
)
# The run's clock: the transport's clock and the phase timer on it, comm's floor, which nothing above reaches into.
CLOCK = ("scaledl.comm.transport", "scaledl.comm.timing")


def module_files() -> dict[str, Path]:
    mods = {}
    for path in sorted((SRC / "scaledl").rglob("*.py")):
        name = ".".join(path.relative_to(SRC).with_suffix("").parts).removesuffix(".__init__")
        mods[name] = path
    return mods


MODULES = module_files()


def imported_names(node: ast.AST) -> list[str]:
    if isinstance(node, ast.Import):
        return [alias.name for alias in node.names]
    if isinstance(node, ast.ImportFrom) and node.module and node.level == 0:
        # a package module's name, else module.name (so `from mpi4py import MPI` reads mpi4py.MPI)
        names = [f"{node.module}.{alias.name}" for alias in node.names]
        return [n if n in MODULES or not n.startswith("scaledl.") else node.module for n in names]
    return []


def package_edges(importer: str, target: str) -> set[str]:
    """`target` and the packages above it whose __init__ runs first (not the importer's own ancestors)."""
    parts = target.split(".")
    found = {".".join(parts[:i]) for i in range(2, len(parts) + 1)} & set(MODULES)
    return {m for m in found if m != importer and not importer.startswith(m + ".")}


def import_graph() -> dict[str, set[str]]:
    graph = {}
    for name, path in MODULES.items():
        edges = set()
        for node in ast.walk(ast.parse(path.read_text())):
            for target in imported_names(node):
                edges |= package_edges(name, target)
        graph[name] = edges
    return graph


def find_cycle(graph: dict[str, set[str]]) -> list[str] | None:
    state: dict[str, int] = {}  # 1: on the current path, 2: done
    path: list[str] = []

    def visit(node: str) -> list[str] | None:
        state[node] = 1
        path.append(node)
        for nxt in sorted(graph[node]):
            if state.get(nxt) == 1:
                return path[path.index(nxt) :] + [nxt]
            if nxt not in state and (cycle := visit(nxt)):
                return cycle
        path.pop()
        state[node] = 2
        return None

    for node in sorted(graph):
        if node not in state and (cycle := visit(node)):
            return cycle
    return None


def test_cycle_finder_finds_a_cycle():
    assert find_cycle({"a": {"b"}, "b": {"c"}, "c": {"a"}, "d": set()}) == ["a", "b", "c", "a"]
    assert find_cycle({"a": {"b"}, "b": set()}) is None


def test_no_import_cycle():
    cycle = find_cycle(import_graph())
    assert cycle is None, "import cycle: " + " -> ".join(cycle)


def upward_imports(graph: dict[str, set[str]], modules, allowed) -> list[str]:
    """`module -> target` for every import of `modules` (inside functions too) that leaves `allowed`."""
    return [f"{m} -> {t}" for m in modules for t in sorted(graph[m]) if t not in allowed]


def test_upward_import_finder_finds_one():
    graph = {"scaledl.errors": {"scaledl.train.loop"}, "scaledl.atomic": {"scaledl.errors"}}
    assert upward_imports(graph, ["scaledl.errors", "scaledl.atomic"], GROUND_FLOOR) == [
        "scaledl.errors -> scaledl.train.loop"
    ]


def test_the_ground_floor_imports_nothing_above_it():
    """atomic, errors, progress, config and run_record import only each other: no comm, algorithms, train,
    grid, net, report, sim or data (nor models, plugins, cli), so every package may import them."""
    assert set(GROUND_FLOOR) <= set(MODULES)
    offenders = upward_imports(import_graph(), GROUND_FLOOR, GROUND_FLOOR)
    assert not offenders, "the ground floor imports from above it:\n" + "\n".join(offenders)


def test_the_clock_imports_only_the_ground_floor():
    """The phase timer sits beside the clock it reads (comm.transport), and neither imports anything above
    the ground floor: not the patterns, not the simulator that installs its own clock."""
    assert set(CLOCK) <= set(MODULES)
    offenders = upward_imports(import_graph(), CLOCK, GROUND_FLOOR + CLOCK)
    assert not offenders, "the clock imports from above the ground floor:\n" + "\n".join(offenders)


def names_run_json(tree: ast.AST) -> bool:
    """The module names the file: the literal "run.json", or run_record's RUN_JSON / run_json_path."""
    for node in ast.walk(tree):
        if isinstance(node, ast.Constant) and node.value == "run.json":
            return True
        if isinstance(node, ast.ImportFrom) and node.module == "scaledl.run_record":
            if {alias.name for alias in node.names} & {"RUN_JSON", "run_json_path"}:
                return True
    return False


def parses_json(tree: ast.AST) -> bool:
    return any(name == "json" or name.startswith("json.") for node in ast.walk(tree) for name in imported_names(node))


def test_run_json_is_parsed_by_run_record_alone():
    """One module owns run.json (scaledl.run_record: its blocks, its writer, its parser): no other module
    both names the file and imports json, and only that module spells its name."""
    trees = {name: ast.parse(path.read_text()) for name, path in MODULES.items()}
    spelled = [
        name
        for name, tree in trees.items()
        if any(isinstance(n, ast.Constant) and n.value == "run.json" for n in ast.walk(tree))
    ]
    assert spelled == ["scaledl.run_record"], spelled
    both = [name for name, tree in trees.items() if names_run_json(tree) and parses_json(tree)]
    assert both == ["scaledl.run_record"], both


def function_imports(path: Path) -> list[tuple[int, str]]:
    """(line, imported name) of every import inside a function or class body."""
    tree = ast.parse(path.read_text())
    found = []
    for scope in ast.walk(tree):
        if not isinstance(scope, (ast.FunctionDef, ast.AsyncFunctionDef)):
            continue
        for node in ast.walk(scope):
            found += [(node.lineno, name) for name in imported_names(node)]
    return found


def is_lazy_target(name: str) -> bool:
    return any(name == t or name.startswith(t + ".") for t in LAZY_TARGETS + LAZY_MODULES)


def test_imports_inside_functions_are_deliberately_lazy():
    offenders = [
        f"{path.relative_to(SRC)}:{line} imports {name}"
        for path in MODULES.values()
        for line, name in function_imports(path)
        if not is_lazy_target(name)
    ]
    assert not offenders, "\n".join(offenders)


def test_every_lazy_import_says_why():
    """A comment on the import's line or in the three lines above it."""
    missing = []
    for path in MODULES.values():
        lines = path.read_text().splitlines()
        missing += [
            f"{path.relative_to(SRC)}:{line}"
            for line, _ in function_imports(path)
            if not any("#" in text for text in lines[max(line - 4, 0) : line])
        ]
    assert not missing, "lazy imports without a reason: " + ", ".join(missing)


def top_imports(name: str) -> list[str]:
    return [t for node in ast.parse(MODULES[name].read_text()).body for t in imported_names(node)]


def is_heavy(name: str, seen: frozenset = frozenset()) -> bool:
    """The module pulls in MPI, torch or another heavy library at its top, itself or through a package module
    it imports at its top."""
    top = top_imports(name)
    if any(is_lazy_target(t) for t in top if not t.startswith("scaledl")):
        return True
    inner = [t for t in top if t in MODULES and t not in seen and t != name]
    return any(is_heavy(t, seen | {name}) for t in inner)


def test_lazy_modules_are_heavy():
    """A package module imported lazily must pull in MPI or torch at its top (itself, or through the package
    modules it imports there)."""
    for name in LAZY_MODULES:
        assert is_heavy(name), name


def import_alone(module: str) -> tuple[str, int, str]:
    # a process of its own in which no module of the package is loaded yet (the warm server's children have the
    # third-party libraries loaded, so that each import costs the package's own modules, not torch's)
    proc = run_python(["-c", f"import {module}"], timeout=120, preload="libraries")
    return module, proc.returncode, proc.stderr.strip().splitlines()[-1:] and proc.stderr.strip().splitlines()[-1]


@pytest.mark.timeout(300)
def test_every_module_imports_alone_in_a_process_of_its_own():
    modules = [m for m in MODULES if m != "scaledl.__main__"]
    with ThreadPoolExecutor(max_workers=2) as pool:
        failed = [f"{m}: {err}" for m, rc, err in pool.map(import_alone, modules) if rc != 0]
    assert not failed, "\n".join(failed)


# What Snakemake imports while it parses the workflow.
PARSE_TIME_PACKAGES = ("scaledl.grid", "scaledl.data.datasets", "scaledl.report.catalogue")


def test_the_grid_imports_neither_torch_nor_mpi():
    """Snakemake imports scaledl.grid while parsing: loading torch there costs seconds per parse, and
    initialising MPI inside Snakemake (or a Slurm job step) would start a PMI handshake."""
    grid_modules = [m for m in MODULES if any(m == p or m.startswith(p + ".") for p in PARSE_TIME_PACKAGES)]
    assert len(grid_modules) > 3
    code = (
        "import sys\n"
        + "".join(f"import {m}\n" for m in grid_modules)
        + "heavy = [m for m in ('torch', 'mpi4py.MPI', 'matplotlib') if m in sys.modules]\n"
        + "assert not heavy, heavy\n"
    )
    proc = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=120)
    assert proc.returncode == 0, proc.stderr[-2000:]
