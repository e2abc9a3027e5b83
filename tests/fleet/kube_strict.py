"""Load a manifest into the `kubernetes` client's models, refusing any field they do not have.

The client's own deserializer drops unknown keys silently (a typo would pass), so this walks
the document against each model's `attribute_map` / `openapi_types` and then builds the model
(whose constructor checks required fields and enums). No cluster is involved.
"""

from __future__ import annotations

import re
from typing import Any

from kubernetes import client

KINDS = {
    ("v1", "ConfigMap"): "V1ConfigMap",
    ("v1", "ServiceAccount"): "V1ServiceAccount",
    ("batch/v1", "Job"): "V1Job",
    ("rbac.authorization.k8s.io/v1", "Role"): "V1Role",
    ("rbac.authorization.k8s.io/v1", "RoleBinding"): "V1RoleBinding",
}
_LIST = re.compile(r"^[Ll]ist\[(.+)\]$")
_DICT = re.compile(r"^[Dd]ict\[str, ?(.+)\]$|^dict\(str, ?(.+)\)$")
_SCALARS = {"str": str, "int": int, "bool": bool, "float": (int, float)}


def _load(value: Any, type_name: str, where: str) -> Any:
    if (m := _LIST.match(type_name)) is not None:
        if not isinstance(value, list):
            raise ValueError(f"{where}: expected a list")
        return [_load(v, m[1], f"{where}[{i}]") for i, v in enumerate(value)]
    if (m := _DICT.match(type_name)) is not None:
        if not isinstance(value, dict):
            raise ValueError(f"{where}: expected a mapping")
        return {k: _load(v, m[1] or m[2], f"{where}.{k}") for k, v in value.items()}
    if type_name in _SCALARS:
        if not isinstance(value, _SCALARS[type_name]) or (type_name == "int" and isinstance(value, bool)):
            raise ValueError(f"{where}: expected {type_name}, got {type(value).__name__}")
        return value
    if type_name == "object":
        return value
    model = getattr(client, type_name)
    if not isinstance(value, dict):
        raise ValueError(f"{where}: expected a {type_name} mapping")
    by_json = {json_key: attr for attr, json_key in model.attribute_map.items()}
    kwargs = {}
    for key, item in value.items():
        if key not in by_json:
            raise ValueError(f"{where}.{key}: not a field of {type_name}")
        attr = by_json[key]
        kwargs[attr] = _load(item, model.openapi_types[attr], f"{where}.{key}")
    return model(**kwargs)


def load(doc: dict[str, Any]) -> Any:
    kind = KINDS.get((doc.get("apiVersion", ""), doc.get("kind", "")))
    if kind is None:
        raise ValueError(f"unknown apiVersion/kind {doc.get('apiVersion')}/{doc.get('kind')}")
    return _load(doc, kind, doc["kind"])
