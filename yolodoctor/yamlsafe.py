"""YAML that yolodoctor reads but does not trust (data.yaml, rule files): ``yaml.safe_load``, then a bound on the
document's size once its aliases are expanded. A few anchors can stand for a billion nodes ("billion laughs", nine
aliases of nine aliases ...) or for a structure that contains itself; safe_load builds either in microseconds, as
shared references, and whatever walks the result afterwards - str(), a schema, JSON output - hangs or overflows."""

from __future__ import annotations

from typing import Any

import yaml

MAX_NODES = 100_000  # a data.yaml with 1,000 class names is about 2,000 nodes


class YamlTooLarge(yaml.YAMLError):
    """The document refers to itself, or its aliases expand to more than MAX_NODES nodes."""


def safe_load(text: str, limit: int = MAX_NODES) -> Any:
    try:
        data = yaml.safe_load(text)
    except RecursionError:
        raise YamlTooLarge("nested too deeply") from None
    expanded_size(data, limit)
    return data


def expanded_size(obj: Any, limit: int = MAX_NODES) -> int:
    """Nodes of ``obj`` with every shared reference counted each time it is reached (what a walk would visit);
    YamlTooLarge beyond ``limit`` or on a cycle. Linear in the distinct containers (memoised), not recursive."""
    sizes: dict[int, int] = {}
    active: set[int] = set()
    stack: list[tuple[Any, bool]] = [(obj, False)]
    while stack:
        node, done = stack.pop()
        if not isinstance(node, (list, dict)):
            continue
        key = id(node)
        children = [*node.keys(), *node.values()] if isinstance(node, dict) else node
        if done:
            active.discard(key)
            total = 1 + sum(sizes.get(id(c), 1) if isinstance(c, (list, dict)) else 1 for c in children)
            if total > limit:
                raise YamlTooLarge(f"its aliases expand to more than {limit} nodes")
            sizes[key] = total
            continue
        if key in sizes:
            continue
        if key in active:
            raise YamlTooLarge("it refers to itself (a recursive alias)")
        active.add(key)
        stack.append((node, True))
        stack.extend((c, False) for c in children if isinstance(c, (list, dict)))
    return sizes.get(id(obj), 1)
