"""The packages stand on their floors, with no import circle (DESIGN.md, "The controller").

    cli/  lingjund/  lingjun_agent/      the commands, the controller, the agent
              lingjun/                   the ground floor: config, models, clients

The ground floor is what every program loads (the configuration, the models
they share, the clients): it imports nothing of the floors above. The
controller and the agent meet only on it and on the wire, and the commands
import nothing of the agent (``lingjun down`` runs the agent's teardown as a
program). No module of ours is part of an import circle: a circle hides
while some other module happens to be imported first, and was held together
by imports inside functions ("Operations do not call each other sideways;
shared steps are functions of the layer below").

The graph is grimp's (the import graph that import-linter is built on): it
reads every import statement of the packages, those inside functions too,
and leaves out those under ``if TYPE_CHECKING:``, which never run (the
service modules name ``Controller`` in their annotations that way).

An import of our own code inside a function says why on its line (or the
line above): the commands' start-up (bench/README.md: their fast path
avoids grpc, protobuf, msgspec), a heavy library only one path needs;
never to hold a circle together.

And no task is dropped: ``asyncio.create_task(...)`` or ``ensure_future(...)``
as a statement of its own keeps no reference, and the loop holds only a weak
one, so the task can be collected mid-run (STYLE.md: the task that reports a
batch job's end).
"""
from __future__ import annotations

import ast
from pathlib import Path

import grimp
import pytest

ROOT = Path(__file__).resolve().parent.parent
PACKAGES = ("lingjun", "lingjund", "lingjun_agent", "cli")
# importer package -> the packages it may not import
FLOORS = {
    "lingjun": ("lingjund", "lingjun_agent", "cli"),
    "lingjund": ("lingjun_agent",),
    "cli": ("lingjun_agent",),
}
# where daemons run asyncio: the controller, the agent, and the doors and
# servers of the ground floor and of cli/ (lingjun restd) that they serve with
TASK_PACKAGES = ("lingjund", "lingjun_agent", "lingjun", "cli")


@pytest.fixture(scope="module")
def graph() -> grimp.ImportGraph:
    return grimp.build_graph(*PACKAGES, cache_dir=None, exclude_type_checking_imports=True)


def where(graph: grimp.ImportGraph, importer: str, imported: str) -> str:
    lines = graph.get_import_details(importer=importer, imported=imported)
    return "; ".join(f"{importer}:{d['line_number']} {d['line_contents']}" for d in lines) \
        or f"{importer} -> {imported}"


def circles(graph: grimp.ImportGraph) -> list[str]:
    """Each import that is part of a circle, with the way back to its importer."""
    found = []
    for importer in sorted(graph.modules):
        for imported in sorted(graph.find_modules_directly_imported_by(importer)):
            if graph.chain_exists(importer=imported, imported=importer):
                back = graph.find_shortest_chain(importer=imported, imported=importer)
                found.append(" -> ".join((importer, *back)) + f"   ({where(graph, importer, imported)})")
    return found


def upward(graph: grimp.ImportGraph) -> list[str]:
    """Each import of a package by one that stands below it (FLOORS)."""
    found = []
    for importer in sorted(graph.modules):
        banned = FLOORS.get(importer.split(".")[0], ())
        for imported in sorted(graph.find_modules_directly_imported_by(importer)):
            if imported.split(".")[0] in banned:
                found.append(where(graph, importer, imported))
    return found


def dropped_tasks(source: str, name: str) -> list[str]:
    """Where ``source`` starts a task and keeps no reference to it: a call of
    ``create_task`` or ``ensure_future`` as an expression statement (a
    TaskGroup's own ``create_task`` excepted: the group holds its tasks)."""
    tree = ast.parse(source, name)
    groups = {item.optional_vars.id
              for node in ast.walk(tree) if isinstance(node, (ast.With, ast.AsyncWith))
              for item in node.items
              if isinstance(item.optional_vars, ast.Name) and isinstance(item.context_expr, ast.Call)
              and ast.unparse(item.context_expr.func).split(".")[-1] == "TaskGroup"}
    found = []
    for node in ast.walk(tree):
        if not (isinstance(node, ast.Expr) and isinstance(node.value, ast.Call)):
            continue
        func = node.value.func
        called = func.attr if isinstance(func, ast.Attribute) else getattr(func, "id", "")
        if called not in ("create_task", "ensure_future"):
            continue
        if isinstance(func, ast.Attribute) and isinstance(func.value, ast.Name) and func.value.id in groups:
            continue
        found.append(f"{name}:{node.lineno} {ast.unparse(node)}")
    return found


def test_no_module_of_ours_is_part_of_an_import_circle(graph):
    found = circles(graph)
    assert not found, "import circles (want none):\n" + "\n".join(found)


def test_the_ground_floor_and_the_controller_and_commands_import_nothing_above_or_beside_them(graph):
    found = upward(graph)
    assert not found, ("imports across floors (want none: lingjun/ imports no lingjund, "
                       "lingjun_agent or cli; lingjund and cli import no lingjun_agent):\n"
                       + "\n".join(found))


def test_no_daemon_drops_a_task_it_starts():
    found = [hit for pkg in TASK_PACKAGES for p in sorted((ROOT / pkg).rglob("*.py"))
             if "v1" not in p.relative_to(ROOT).parts
             for hit in dropped_tasks(p.read_text(), str(p.relative_to(ROOT)))]
    assert not found, "tasks started with no reference kept (want none):\n" + "\n".join(found)


def unexplained_local_imports(source: str, name: str) -> list[str]:
    """Imports of our packages inside a function with no comment on their
    line, their last line, or the line above."""
    lines = source.splitlines()
    found = []
    for fn in ast.walk(ast.parse(source, name)):
        if not isinstance(fn, (ast.FunctionDef, ast.AsyncFunctionDef)):
            continue
        for node in ast.walk(fn):
            if not isinstance(node, (ast.Import, ast.ImportFrom)):
                continue
            mods = ([a.name for a in node.names] if isinstance(node, ast.Import)
                    else [node.module or ""])
            if not any(m.split(".")[0] in PACKAGES for m in mods):
                continue
            near = (lines[node.lineno - 1], lines[node.end_lineno - 1],
                    lines[node.lineno - 2] if node.lineno > 1 else "")
            if not ("#" in near[0] or "#" in near[1] or near[2].lstrip().startswith("#")):
                found.append(f"{name}:{node.lineno} {lines[node.lineno - 1].strip()}")
    return sorted(set(found))


def test_each_import_of_our_code_inside_a_function_says_why():
    found = [hit for pkg in PACKAGES for p in sorted((ROOT / pkg).rglob("*.py"))
             if "v1" not in p.relative_to(ROOT).parts
             for hit in unexplained_local_imports(p.read_text(), str(p.relative_to(ROOT)))]
    assert not found, ("imports of our code inside functions with no comment saying why "
                       "(want one on each):\n" + "\n".join(found))


@pytest.mark.parametrize("source,unexplained", [
    ("def f():\n    from lingjun import config\n", True),
    ("def f():\n    from lingjun import config  # here: only with a file\n", False),
    ("def f():\n    # the SDK only when asked\n    from lingjun import sdk\n", False),
    ("def f():\n    import json\n", False),
], ids=["ours, unexplained", "ours, with its reason", "ours, the reason above", "the standard library"])
def test_the_local_import_check_wants_a_reason_for_ours_only(source, unexplained):
    assert bool(unexplained_local_imports(source, "x.py")) == unexplained


def test_the_graph_holds_every_package_and_their_function_local_imports(graph):
    """The checks see what they must: each package's modules (a folder without
    __init__.py would be missing), and imports made inside functions."""
    for pkg in PACKAGES:
        assert pkg in graph.modules
    assert "lingjund.sched.cycle" in graph.modules
    # a function-local import: stepd ends what a job left behind through procs
    assert graph.direct_import_exists(importer="lingjun_agent.launcher.stepd",
                                      imported="lingjun_agent.launcher.procs")


def test_the_circle_check_finds_a_circle_and_the_floor_check_an_upward_import():
    g = grimp.ImportGraph()
    for m in ("lingjun.a", "lingjun.b", "lingjund.c", "cli.d", "lingjun_agent.e"):
        g.add_module(m)
    g.add_import(importer="lingjun.a", imported="lingjun.b")
    g.add_import(importer="lingjun.b", imported="lingjun.a")
    g.add_import(importer="lingjun.a", imported="lingjund.c")
    g.add_import(importer="cli.d", imported="lingjun_agent.e")
    assert [c.split("   ")[0] for c in circles(g)] == ["lingjun.a -> lingjun.b -> lingjun.a",
                                                       "lingjun.b -> lingjun.a -> lingjun.b"]
    assert upward(g) == ["cli.d -> lingjun_agent.e", "lingjun.a -> lingjund.c"]


@pytest.mark.parametrize("source,dropped", [
    ("async def f():\n    asyncio.create_task(g())\n", True),
    ("async def f():\n    asyncio.ensure_future(g())\n", True),
    ("async def f(loop):\n    loop.create_task(g())\n", True),
    ("async def f(self):\n    self._keep(asyncio.create_task(g()))\n", False),
    ("async def f():\n    t = asyncio.create_task(g())\n    await t\n", False),
    ("async def f():\n    async with asyncio.TaskGroup() as tg:\n        tg.create_task(g())\n", False),
], ids=["a task started and forgotten", "a future ensured and forgotten",
        "a task started on the loop and forgotten", "a task handed to a keeper",
        "a task kept in a name and awaited", "a task started in a TaskGroup"])
def test_the_task_check_finds_exactly_the_dropped_ones(source, dropped):
    assert bool(dropped_tasks(source, "x.py")) == dropped, dropped_tasks(source, "x.py")
