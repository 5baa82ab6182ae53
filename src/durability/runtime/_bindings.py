"""`HostedBinding`: a binding whose objects the runtime hosts while `env` shows a façade.

A namespace of `object_class` is made under the binding's name (files under
`<path>/<NAME>/`, listed by `durability inspect` as that namespace), and `env.NAME` is
`wrap(namespace)`: how wrangler `workflows` bindings are served, one object per
workflow instance behind Cloudflare's Workflow API.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from ._object import DurableObject
    from ._stub import ObjectNamespace


@dataclass(frozen=True, slots=True)
class HostedBinding:
    """Objects of `object_class` in a namespace of their own; `env` holds `wrap(it)`."""

    object_class: type[DurableObject]
    wrap: Callable[[ObjectNamespace], object]
