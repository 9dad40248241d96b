"""``safe_load`` with libyaml's parser where PyYAML was built with it.

PyYAML's own parser is pure Python; its libyaml one (``CSafeLoader``, in the PyPI wheels
and in the distributions' python3-yaml) reads the same documents into the same objects
about eight times faster: 8 ms instead of 62 ms for the built-in animations and the
behavior defaults here, most of it on the driver's start-up. The constructor is the same
(``SafeConstructor``), so the same tags are refused. PyYAML is imported at the call, as
its callers do (some say what to install when it is missing).

``unique_keys``: a key given twice in one mapping is refused (``yaml.YAMLError`` naming
the key and both places) instead of the last one silently replacing the first, as YAML
1.2 requires and PyYAML does not check; keys a merge (``<<``) brings in may still be
given again.
"""

from __future__ import annotations

from typing import IO, Any, Dict, Union

__all__ = ["loader", "safe_load"]

_LOADERS: Dict[type, type] = {}  # a loader -> its subclass that refuses a key given twice


def _unique_keys(base: type) -> type:
    import yaml

    if base in _LOADERS:
        return _LOADERS[base]

    class UniqueKeyLoader(base):  # type: ignore[misc, valid-type]
        def construct_mapping(self, node: Any, deep: bool = False) -> Any:
            if isinstance(node, yaml.MappingNode):
                seen: Dict[Any, Any] = {}
                for key_node, _ in node.value:
                    if not isinstance(key_node, yaml.ScalarNode) or key_node.tag == "tag:yaml.org,2002:merge":
                        continue
                    key = self.construct_object(key_node)
                    try:
                        first = seen.get((type(key), key))
                    except TypeError:  # (unhashable: the constructor says so)
                        continue
                    if first is not None:
                        raise yaml.constructor.ConstructorError(
                            "while constructing a mapping", node.start_mark,
                            f"found duplicate key {key!r} (first given on line {first.line + 1}): YAML "
                            "would keep only the last", key_node.start_mark)
                    seen[(type(key), key)] = key_node.start_mark
            return super().construct_mapping(node, deep)

    _LOADERS[base] = UniqueKeyLoader
    return UniqueKeyLoader


def safe_load(document: Union[str, bytes, IO], unique_keys: bool = False) -> Any:
    """``yaml.safe_load(document)``, through libyaml where this PyYAML has it. Raises
    what ``yaml.safe_load`` raises (``yaml.YAMLError`` for a document that is not YAML);
    with ``unique_keys``, also for a key given twice in one mapping."""
    import yaml

    return yaml.load(document, Loader=loader(unique_keys))


def loader(unique_keys: bool = False) -> type:
    """The loader class :func:`safe_load` reads with (for a reader that walks the nodes
    itself, as the bring-up's parameter file reader does)."""
    import yaml

    base = getattr(yaml, "CSafeLoader", yaml.SafeLoader)
    return _unique_keys(base) if unique_keys else base
