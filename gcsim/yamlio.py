"""Bounded YAML reading: every YAML file gcsim reads goes through :func:`read_yaml`.

PyYAML's safe loader still has three ways to exhaust a machine: a huge file, nesting thousands of
levels deep (its composer recurses: ``RecursionError``), and an alias bomb (a few anchors referring to
each other expand to billions of nodes once anything walks the result). :func:`parse_yaml` refuses
them while composing, before any Python object is built:

* at most :data:`MAX_YAML_BYTES` of text (checked before reading a file);
* nesting at most :data:`MAX_YAML_DEPTH` collections deep;
* at most :data:`MAX_YAML_ALIASES` aliases, and at most :data:`MAX_YAML_NODES` nodes once every alias
  is expanded (recursive aliases refused).

A refusal is a :class:`YamlBoundsError` (a ``yaml.YAMLError``, so readers that already turn YAML errors
into one-line messages handle it) whose ``allowed`` / ``given`` say which bound and what was found.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

import yaml

MAX_YAML_BYTES = 1 << 20
MAX_YAML_DEPTH = 64
MAX_YAML_ALIASES = 1000
MAX_YAML_NODES = 100_000


class YamlBoundsError(yaml.YAMLError):
    """YAML input over one of the bounds. ``allowed``: the bound, ``given``: what the input has."""

    def __init__(self, allowed: str, given: str):
        self.allowed, self.given = allowed, given
        self.problem = f"expected {allowed}, got {given}"
        super().__init__(self.problem)


class _BoundedLoader(yaml.SafeLoader):
    """SafeLoader whose composer counts nesting depth and aliases as it goes."""

    def __init__(self, stream):
        super().__init__(stream)
        self._depth = 0
        self._aliases = 0

    def compose_node(self, parent, index):
        if self.check_event(yaml.AliasEvent):
            self._aliases += 1
            if self._aliases > MAX_YAML_ALIASES:
                raise YamlBoundsError(f"at most {MAX_YAML_ALIASES} aliases", f"more at line {self._line()}")
            return super().compose_node(parent, index)
        self._depth += 1
        try:
            if self._depth > MAX_YAML_DEPTH:
                raise YamlBoundsError(f"nesting at most {MAX_YAML_DEPTH} levels deep",
                                      f"deeper at line {self._line()}")
            return super().compose_node(parent, index)
        finally:
            self._depth -= 1

    def _line(self) -> int:
        return self.peek_event().start_mark.line + 1


def _expanded_size(root: yaml.Node) -> int:
    """Nodes in ``root`` with every alias expanded (memoised per node; raises on a cycle or when over
    :data:`MAX_YAML_NODES`)."""
    size: dict[int, int] = {}
    on_path: set[int] = set()

    def visit(node: yaml.Node) -> int:
        key = id(node)
        if key in size:
            return size[key]
        if key in on_path:
            raise YamlBoundsError("no recursive aliases", f"one at line {node.start_mark.line + 1}")
        on_path.add(key)
        total = 1
        if isinstance(node, yaml.SequenceNode):
            total += sum(visit(child) for child in node.value)
        elif isinstance(node, yaml.MappingNode):
            total += sum(visit(k) + visit(v) for k, v in node.value)
        on_path.discard(key)
        if total > MAX_YAML_NODES:
            raise YamlBoundsError(f"at most {MAX_YAML_NODES} values with aliases expanded",
                                  f"more (alias expansion) at line {node.start_mark.line + 1}")
        size[key] = total
        return total

    return visit(root)


def parse_yaml(text: str) -> tuple[yaml.Node | None, Any]:
    """Compose and construct one YAML document within the bounds (module docstring).

    Returns:
        ``(node, data)``: the composed node graph (None for an empty document) and the plain data.
    Raises:
        YamlBoundsError: the text is over a bound.
        yaml.YAMLError: the text is not valid YAML.
    """
    if len(text) > MAX_YAML_BYTES:
        raise YamlBoundsError(f"at most {MAX_YAML_BYTES} bytes", f"{len(text)} characters")
    loader = _BoundedLoader(text)
    try:
        node = loader.get_single_node()
        if node is None:
            return None, None
        _expanded_size(node)
        return node, loader.construct_document(node)
    finally:
        loader.dispose()


def read_yaml(path: str | Path) -> tuple[yaml.Node | None, Any]:
    """:func:`parse_yaml` of the file ``path``, its size checked before it is read.

    Raises:
        OSError, UnicodeDecodeError: unreadable file.
        YamlBoundsError, yaml.YAMLError: as :func:`parse_yaml`.
    """
    p = Path(path)
    size = p.stat().st_size
    if size > MAX_YAML_BYTES:
        raise YamlBoundsError(f"a file of at most {MAX_YAML_BYTES} bytes", f"{size} bytes")
    return parse_yaml(p.read_text())


__all__ = ["MAX_YAML_ALIASES", "MAX_YAML_BYTES", "MAX_YAML_DEPTH", "MAX_YAML_NODES", "YamlBoundsError",
           "parse_yaml", "read_yaml"]
