"""The documentation stays true: README.md as a short front door, links that resolve, the
architecture diagram equal to the import graph, benchmark figures only where a benchmark
writes them, and reference tables that parse (their content is checked against the
running nodes by test/project/test_docs_reference.py). Pure: no rclpy."""

from __future__ import annotations

import ast
import re
from pathlib import Path
from typing import Dict, Iterator, List, Set, Tuple

from docs_tables import KINDS, reference_tables

ROOT = Path(__file__).resolve().parents[2]
README = ROOT / "README.md"
DOCS = ROOT / "docs"
PAGES = [README, *sorted(DOCS.glob("*.md"))]
PACKAGE = ROOT / "cozmo_driver"
BENCH = ROOT / "bench"

# ----------------------------------------------------------------------------- helpers


def outside_fences(text: str) -> Iterator[Tuple[int, str]]:
    """(line number, line) of ``text`` outside fenced code blocks."""
    fenced = False
    for number, line in enumerate(text.split("\n"), 1):
        if line.lstrip().startswith("```"):
            fenced = not fenced
            continue
        if not fenced:
            yield number, line


def slug(heading: str) -> str:
    """GitHub's anchor of a heading: lower case, punctuation but ``-`` and ``_`` dropped,
    spaces to ``-``."""
    text = re.sub(r"[^\w\- ]", "", heading.strip().lower())
    return text.replace(" ", "-")


def anchors(path: Path) -> Set[str]:
    seen: Dict[str, int] = {}
    out: Set[str] = set()
    for _, line in outside_fences(path.read_text()):
        match = re.match(r"^#{1,6} (.+)$", line)
        if match:
            base = slug(match.group(1))
            count = seen.get(base, 0)
            seen[base] = count + 1
            out.add(base if count == 0 else f"{base}-{count}")
    return out


LINK = re.compile(r"!?\[[^\]]*\]\(([^)\s]+)\)")


def test_slug_follows_github():
    assert slug("What `./dev setup` does") == "what-dev-setup-does"
    assert slug("Topics subscribed (commands)") == "topics-subscribed-commands"
    assert slug("The simulator's camera (bench_world)") == "the-simulators-camera-bench_world"


# ----------------------------------------------------------------------------- README


def test_readme_is_a_front_door_of_at_most_300_lines():
    text = README.read_text()
    assert len(text.split("\n")) <= 300
    for heading in ("## Quick start", "## On a real robot: checklist", "## Safety", "## Documentation"):
        assert heading in text, heading
    for command in ("./dev demo", "./dev test"):
        assert command in text


def test_readme_links_every_docs_page():
    text = README.read_text()
    for page in sorted(DOCS.glob("*.md")):
        assert f"(docs/{page.name})" in text or f"(docs/{page.name}#" in text, page.name


# ----------------------------------------------------------------------------- links


def test_every_relative_link_points_to_a_file_and_heading():
    broken: List[str] = []
    for page in PAGES:
        for number, line in outside_fences(page.read_text()):
            for target in LINK.findall(line):
                if re.match(r"^[a-z]+:", target):
                    continue  # http(s), mailto
                file_part, _, anchor = target.partition("#")
                dest = (page.parent / file_part).resolve() if file_part else page
                where = f"{page.relative_to(ROOT)}:{number}: {target}"
                if not dest.exists():
                    broken.append(f"{where}: no file {dest}")
                elif anchor and dest.suffix == ".md" and anchor not in anchors(dest):
                    broken.append(f"{where}: no heading #{anchor} in {dest.name}")
    assert not broken, "\n".join(broken)


# ----------------------------------------------------------------------------- benchmarks

BLOCK = re.compile(r"<!-- (\w+): (begin|end) -->")
#: a table whose header row names one of these is a table of measured figures
FIGURE_WORDS = ("median", "p90", "p99", "cpu", "pycozmo", "ours", "rss", "resident", "time to",
                "% of", "latency", "fps measured")


def bench_blocks(text: str) -> List[Tuple[str, int, int]]:
    """(name, first line, last line) of each begin/end pair; AssertionError if unpaired."""
    blocks, open_at = [], None
    for number, line in enumerate(text.split("\n"), 1):
        match = BLOCK.fullmatch(line.strip())
        if not match:
            continue
        name, edge = match.groups()
        if edge == "begin":
            assert open_at is None, f"line {number}: {name} begins inside {open_at[0]}'s block"
            open_at = (name, number)
        else:
            assert open_at is not None and open_at[0] == name, f"line {number}: unpaired end of {name}"
            blocks.append((name, open_at[1], number))
            open_at = None
    assert open_at is None, f"{open_at[0]}'s block does not end"
    return blocks


def writers() -> Dict[str, Path]:
    """{block name: the bench script that writes it}: scripts calling bench_report("name", ...)."""
    out = {}
    for script in sorted(BENCH.glob("*.py")):
        for name in re.findall(r"bench_report\(\"(\w+)\"[,)]", script.read_text()):
            out[name] = script
    return out


def test_every_benchmark_block_is_written_by_its_benchmark_and_each_benchmark_has_one():
    blocks = bench_blocks((DOCS / "benchmarks.md").read_text())
    names = [b[0] for b in blocks]
    scripts = writers()
    quoted = [b[0] for b in bench_blocks(README.read_text())]
    assert set(quoted) <= set(names), "a README block quotes a benchmark that has no block"
    for name in quoted:  # the same script writes it, with bench_report("name", docs=README)
        assert re.search(rf'bench_report\("{name}", docs=ROOT / "README.md"\)',
                         scripts[name].read_text()), name
    assert len(names) == len(set(names)), names
    for name in names:
        assert name in scripts, f"no bench script writes the block {name}"
        # a block is named after its script, or after it and a variant (stop_cycles_launch)
        assert name == scripts[name].stem or name.startswith(scripts[name].stem + "_"), \
            (name, scripts[name])
    for script in sorted(BENCH.glob("bench_*.py")):
        assert script.stem in names, f"{script.name} has no block in docs/benchmarks.md"


def figure_tables(text: str, allowed: List[Tuple[str, int, int]]) -> List[int]:
    """Line numbers of table header rows that name a measured figure, outside ``allowed``."""
    found = []
    lines = text.split("\n")
    for number, line in outside_fences(text):
        nxt = lines[number] if number < len(lines) else ""
        if not (line.startswith("|") and nxt.startswith("|---")):
            continue  # only header rows: a header is followed by the |---| rule
        if any(first < number < last for _, first, last in allowed):
            continue
        if any(word in line.lower() for word in FIGURE_WORDS):
            found.append(number)
    return found


def test_no_hand_written_table_of_figures_remains():
    for page in PAGES:
        text = page.read_text()
        allowed = bench_blocks(text) if page in (README, DOCS / "benchmarks.md") else []
        assert not figure_tables(text, allowed), (page.name, figure_tables(text, allowed))


def test_the_figure_check_finds_a_table_of_figures():
    text = "x\n\n| what | ours | pycozmo |\n|---|---|---|\n| decode | 1 us | 9 us |\n"
    assert figure_tables(text, []) == [3]
    fenced = f"<!-- b: begin -->\n{text}<!-- b: end -->\n"
    assert figure_tables(fenced, bench_blocks(fenced)) == []


# ----------------------------------------------------------------------------- reference tables


def test_reference_tables_parse_and_have_rows():
    tables = reference_tables()
    assert tables
    for (node, kind), rows in tables.items():
        assert kind in KINDS and rows, (node, kind)
        assert len({r.name for r in rows}) == len(rows), (node, kind)


# ----------------------------------------------------------------------------- import graph

#: the top-level modules of cozmo_driver, by what they are (a new one must be placed here)
def _top_level_groups() -> dict:
    """{group: its top-level modules}, from docs/architecture.md's table of groups."""
    text = (DOCS / "architecture.md").read_text()
    groups = {}
    for group, cell in re.findall(r"^\| (\w+) \| ((?:`\w+\.py`(?:, )?)+) \|$", text, re.M):
        groups[group] = tuple(re.findall(r"`(\w+)\.py`", cell))
    return groups


TOP_LEVEL_GROUPS = _top_level_groups()
GROUP_OF = {module: group for group, modules in TOP_LEVEL_GROUPS.items() for module in modules}


def unit_of(module: str, package_dir: Path = PACKAGE) -> str:
    """The diagram's node of ``cozmo_driver.<...>``: its subpackage or its module's group."""
    first = module.split(".")[1]
    if (package_dir / first).is_dir():
        return first
    assert first in GROUP_OF, f"cozmo_driver/{first}.py is in no group of TOP_LEVEL_GROUPS"
    return GROUP_OF[first]


def import_graph(package_dir: Path = PACKAGE) -> Set[Tuple[str, str]]:
    """Edges (a, b): a module of unit a imports one of unit b (AST of every module)."""
    edges = set()
    for path in sorted(package_dir.rglob("*.py")):
        parts = path.relative_to(package_dir.parent).with_suffix("").parts
        is_init = parts[-1] == "__init__"
        module = ".".join(parts[:-1] if is_init else parts)
        package = module if is_init else module.rsplit(".", 1)[0]
        if module == "cozmo_driver":
            continue
        for node in ast.walk(ast.parse(path.read_text(), str(path))):
            targets: List[str] = []
            if isinstance(node, ast.Import):
                targets = [alias.name for alias in node.names]
            elif isinstance(node, ast.ImportFrom):
                if node.level:
                    base = package.split(".")[: len(package.split(".")) - node.level + 1]
                    origin = ".".join(base + ([node.module] if node.module else []))
                else:
                    origin = node.module or ""
                targets = [origin] + [f"{origin}.{alias.name}" for alias in node.names]
            for target in targets:
                if not target.startswith("cozmo_driver."):
                    continue
                head = target.split(".")[1]
                if not ((package_dir / head).is_dir() or (package_dir / f"{head}.py").exists()):
                    continue  # a name imported from cozmo_driver/__init__.py
                a, b = unit_of(module, package_dir), unit_of(target, package_dir)
                if a != b:
                    edges.add((a, b))
    return edges


def diagram_edges() -> Set[Tuple[str, str]]:
    """The ``a --> b`` edges of the mermaid block of docs/architecture.md."""
    text = (DOCS / "architecture.md").read_text()
    blocks = re.findall(r"```mermaid\n(.*?)```", text, re.S)
    assert len(blocks) == 1, "docs/architecture.md has one mermaid diagram"
    assert blocks[0].lstrip().startswith("graph TD")
    return set(re.findall(r"^\s*(\w+)(?:\[[^\]]*\])?\s*-->\s*(\w+)", blocks[0], re.M))


def test_every_top_level_module_is_in_a_group_of_the_diagram():
    modules = {p.stem for p in PACKAGE.glob("*.py") if p.stem != "__init__"}
    assert modules == set(GROUP_OF), (sorted(modules - set(GROUP_OF)), sorted(set(GROUP_OF) - modules))


def test_architecture_diagram_matches_the_import_graph():
    real, drawn = import_graph(), diagram_edges()
    assert drawn == real, (f"in the diagram but not imported: {sorted(drawn - real)}; "
                           f"imported but not in the diagram: {sorted(real - drawn)}")


def test_the_graph_sees_absolute_and_relative_imports(tmp_path):
    pkg = tmp_path / "cozmo_driver"
    for name, text in {"__init__.py": "", "robot_geometry.py": "",
                       "ros/__init__.py": "from .node import x  # noqa\n",
                       "ros/node.py": "from ..protocol import messages\nimport cozmo_driver.robot_geometry\nx = 1\n",
                       "protocol/__init__.py": "", "protocol/messages.py": "",
                       "client/__init__.py": "from cozmo_driver.protocol.messages import *  # noqa\n"}.items():
        (pkg / name).parent.mkdir(parents=True, exist_ok=True)
        (pkg / name).write_text(text)
    assert import_graph(pkg) == {("ros", "protocol"), ("ros", "common"), ("client", "protocol")}


def test_the_simulators_option_table_names_every_option_of_cozmo_sim():
    """docs/simulator.md's table of cozmo-sim's options against its argument parser, both
    ways (--help is always there and not in the table)."""
    from cozmo_driver.sim.cli import build_parser
    parser_options = {opt for action in build_parser()._actions for opt in action.option_strings
                      if opt.startswith("--") and opt != "--help"}
    text = (DOCS / "simulator.md").read_text()
    table = text[text.index("| option | meaning |"):]
    table = table[:table.index("\n\n")]
    documented: Set[str] = set()
    for row in table.split("\n")[2:]:
        for name in re.findall(r"`(--[a-z-]+)`", row):
            documented.add(name)
        for stem, a, b in re.findall(r"`(--[a-z]+)-(up|down)/-(up|down)`", row):
            documented |= {f"{stem}-{a}", f"{stem}-{b}"}
    assert parser_options - documented == set(), "options missing from docs/simulator.md"
    assert documented - parser_options == set(), "docs/simulator.md names options cozmo-sim lacks"


#: pages whose commands are bring-up commands (cozmo_bringup, ros2 launch ... cozmo.launch.py)
BRINGUP_PAGES = [README, DOCS / "real-robot.md", DOCS / "bringup.md", DOCS / "simulator.md", DOCS / "demo.md"]


def driver_parameters_as_arguments(text: str) -> List[Tuple[int, str]]:
    """(line, name) of each ``name:=`` in ``text`` that names a driver parameter the bring-up
    has no argument for, unless it follows ``-p `` (``--ros-args -p name:=value``)."""
    from cozmo_driver import bringup_plan
    from cozmo_driver.driver.parameters import PARAMETERS_BY_NAME

    arguments = {argument.name for argument in bringup_plan.ARGUMENTS}
    found = []
    for number, line in enumerate(text.split("\n"), 1):
        for match in re.finditer(r"(-p\s+)?\b([a-z_]+):=", line):
            name = match.group(2)
            if match.group(1) is None and name in PARAMETERS_BY_NAME and name not in arguments:
                found.append((number, name))
    return found


def test_bring_up_pages_give_no_driver_parameter_as_a_launch_argument():
    """docs/real-robot.md told a user with a dark image to use camera_auto_exposure:=true,
    which cozmo_bringup and the launch file refuse as an unknown argument: a driver parameter
    goes in a parameter file (config:=) or `ros2 param set`."""
    found = {path.name: driver_parameters_as_arguments(path.read_text()) for path in BRINGUP_PAGES}
    assert {name: lines for name, lines in found.items() if lines} == {}


def test_the_argument_check_finds_a_driver_parameter_in_argument_form():
    assert driver_parameters_as_arguments(
        "with `camera_auto_exposure:=true` (the default)\n`robot_ip:=172.31.1.1`\n"
        "--ros-args -p max_wheel_speed:=0.1") == [(1, "camera_auto_exposure")]


def _demo_excerpt() -> List[str]:
    """The lines of docs/demo.md's excerpt of a demo run on the simulator."""
    text = (DOCS / "demo.md").read_text()
    start = text.index("```\n", text.index("An excerpt of its output")) + len("```\n")
    return text[start:text.index("```", start)].split("\n")


def _graph_settle_s() -> float:
    """Demonstration.GRAPH_SETTLE_S of cozmo_driver/ros/demo_node.py, read from its source
    (importing the module needs rclpy): its expression with name_guard's CHECKS_S."""
    def assigned(path: Path, name: str) -> ast.expr:
        for node in ast.walk(ast.parse(path.read_text())):
            targets = node.targets if isinstance(node, ast.Assign) else \
                [node.target] if isinstance(node, ast.AnnAssign) else []
            if any(isinstance(t, ast.Name) and t.id == name for t in targets):
                return node.value
        raise AssertionError(f"no {name} in {path}")

    checks = ast.literal_eval(assigned(PACKAGE / "ros" / "name_guard.py", "CHECKS_S"))
    expression = ast.Expression(assigned(PACKAGE / "ros" / "demo_node.py", "GRAPH_SETTLE_S"))
    return eval(compile(expression, "GRAPH_SETTLE_S", "eval"), {"max": max, "CHECKS_S": checks})


def test_the_demo_excerpt_says_what_the_demo_says(tmp_path):
    """docs/demo.md's excerpt had the driver connected at 1.6 s, sooner than the demo takes
    it (GRAPH_SETTLE_S on the graph), without the "waiting for" line before; its "started"
    lines lacked the face node's note, and the robot_state_publisher fallback line, as the
    bring-up prints them, was missing. The start-up lines are those of the bring-up for the
    excerpt's plan (the fallback taken where the description publisher runs)."""
    from cozmo_driver import bringup_plan as plan
    from cozmo_driver.bringup import Bringup

    lines = _demo_excerpt()
    plan_line = next(line for line in lines if line.startswith("cozmo-demo: bring-up plan ("))
    values = dict(re.findall(r"(\w+):=(\S+?)[ )]", plan_line))
    entries = plan.make_plan(plan.resolve_arguments(values), description=lambda prefix: "<robot/>")
    started = [line for line in lines if line.startswith("cozmo-demo: started ")]
    ran = {re.match(r"cozmo-demo: started (\w+) ", line).group(1) for line in started}
    said: List[str] = []
    bringup = Bringup(entries, say=lambda text: said.append(f"cozmo-demo: {text}"),
                      locate=lambda package, executable: None if executable == "robot_state_publisher"
                      and "description_publisher" in ran else tmp_path / executable)
    try:
        chosen = bringup.resolve()
    finally:
        bringup.remove_parameter_files()
    expected = said + [f"cozmo-demo: started {entry.name} ({entry.executable}, pid N)"
                       + (f" - {entry.note}" if entry.note else "") for entry, _ in chosen]
    first = lines.index(plan_line) + 1
    shown = [re.sub(r"pid \d+\)", "pid N)", line) for line in lines[first:first + len(expected)]]
    assert shown == expected
    stamp = re.compile(r"^\[ *([\d.]+) s\] ")
    waiting = next(i for i, line in enumerate(lines) if stamp.match(line)
                   and "] waiting for /cozmo_driver to connect to 127.0.0.1:" in line)
    connected = next(i for i, line in enumerate(lines) if "] driver connected to the robot:" in line)
    assert waiting < connected
    settle = _graph_settle_s()
    assert float(stamp.match(lines[connected]).group(1)) >= settle
    assert f"for {settle:g} s (`GRAPH_SETTLE_S`)" in (DOCS / "demo.md").read_text()
    last = max(float(stamp.match(line).group(1)) for line in lines if stamp.match(line))
    done = re.search(r"^cozmo-demo: done in (\d+) s;", "\n".join(lines), re.M)
    assert done and int(done.group(1)) >= round(last)
