"""Reads the reference tables of docs/*.md: the tables that describe a node's interfaces.

A reference table is a markdown table right after a marker line
``<!-- reference: <node> <kind> -->``, where ``kind`` is one of :data:`KINDS`. Its
first column is the name in backticks (relative to the node's namespace unless it starts
with ``/``), its second the type (``pkg/Name``, the first such word of the cell); a
``parameters`` table has a third column, the default in backticks as YAML
(``"text"``, ``5551``, ``0.5``, ``true``, ``[]``). Other columns are free text.
Pure: used by test/project/test_docs_reference.py (against the running nodes) and test/project/test_docs.py.
"""

from __future__ import annotations

import re
from pathlib import Path
from typing import Any, Dict, List, NamedTuple, Tuple

import yaml

ROOT = Path(__file__).resolve().parent.parent
DOCS = ROOT / "docs"

KINDS = ("published", "subscribed", "services", "service-clients", "actions", "action-clients",
         "parameters")
MARKER = re.compile(r"^<!-- reference: (\S+) (\S+) -->$")
TYPE = re.compile(r"\b([a-z][a-z0-9_]*)/([A-Z][A-Za-z0-9]*)\b")


class Row(NamedTuple):
    name: str
    type: str
    default: Any  # parameters only, else None
    where: str    # file:line, for messages


def _cells(line: str) -> List[str]:
    return [c.strip() for c in line.strip().strip("|").split(" | ")]


def reference_tables() -> Dict[Tuple[str, str], List[Row]]:
    """{(node, kind): rows} over every docs/*.md. Raises ValueError on a malformed table,
    an unknown kind or a (node, kind) given twice."""
    tables: Dict[Tuple[str, str], List[Row]] = {}
    for path in sorted(DOCS.glob("*.md")):
        lines = path.read_text().split("\n")
        for i, line in enumerate(lines):
            match = MARKER.match(line.strip())
            if not match:
                continue
            node, kind = match.groups()
            where = f"{path.name}:{i + 1}"
            if kind not in KINDS:
                raise ValueError(f"{where}: unknown kind {kind!r} (known: {', '.join(KINDS)})")
            if (node, kind) in tables:
                raise ValueError(f"{where}: a second {kind} table of {node}")
            if i + 2 >= len(lines) or not lines[i + 1].startswith("|") or not lines[i + 2].startswith("|---"):
                raise ValueError(f"{where}: no table right after the marker")
            rows: List[Row] = []
            for j in range(i + 3, len(lines)):
                if not lines[j].startswith("|"):
                    break
                cells = _cells(lines[j])
                at = f"{path.name}:{j + 1}"
                if not (cells[0].startswith("`") and cells[0].endswith("`") and cells[0].count("`") == 2):
                    raise ValueError(f"{at}: the first cell must be one name in backticks: {cells[0]!r}")
                name = cells[0].strip("`")
                if kind == "parameters":
                    if len(cells) < 3 or not (cells[2].startswith("`") and cells[2].endswith("`")):
                        raise ValueError(f"{at}: a parameter row is | `name` | type | `default` | ...")
                    rows.append(Row(name, cells[1], yaml.safe_load(cells[2].strip("`")), at))
                else:
                    found = TYPE.search(cells[1]) if len(cells) > 1 else None
                    if not found:
                        raise ValueError(f"{at}: no pkg/Name type in the second cell")
                    rows.append(Row(name, f"{found.group(1)}/{found.group(2)}", None, at))
            tables[(node, kind)] = rows
    return tables
