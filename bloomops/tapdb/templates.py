"""Template lookup by semantic code (``category/type/subtype/version``).

Under TapDB 6 a template's ``category`` column holds its EUID prefix; the semantic
category lives in ``json_addl.semantic_category``. Code identifies templates only by
the semantic code, never by prefix.
"""

from __future__ import annotations

from dataclasses import dataclass

from django.db import connection

from bloomops.tapdb.db import fetch_all


@dataclass(frozen=True)
class TemplateRef:
    uid: int
    code: str
    category: str
    type: str
    subtype: str
    version: str
    polymorphic_identity: str
    semantic_category: str
    # An action template's definition (roles, lease requirement, allowed states), else {}.
    action_definition: dict
    # The properties (with defaults) the template declares for its instances.
    properties: dict


_cache: dict[str, dict[str, TemplateRef]] = {}


def _db_key() -> str:
    return str(connection.settings_dict["NAME"])


def clear_cache() -> None:
    _cache.clear()


def all_templates() -> dict[str, TemplateRef]:
    key = _db_key()
    if key not in _cache:
        rows = fetch_all(
            """
            SELECT uid, category, type, subtype, version,
                   coalesce(instance_polymorphic_identity, 'generic_instance') AS ident,
                   coalesce(json_addl->>'semantic_category', category) AS semantic,
                   coalesce(json_addl->'action_definition', '{}'::jsonb) AS definition,
                   coalesce(json_addl->'properties', '{}'::jsonb) AS properties
            FROM generic_template
            WHERE NOT is_deleted
            ORDER BY uid
            """
        )
        refs: dict[str, TemplateRef] = {}
        for row in rows:
            code = f"{row['semantic']}/{row['type']}/{row['subtype']}/{row['version']}"
            if code in refs:
                # Two writers seeded the same semantic code (say Bloom and bloomops): the
                # first row seeded is the one in use, on every process, every time.
                continue
            refs[code] = TemplateRef(
                uid=row["uid"],
                code=code,
                category=row["category"],
                type=row["type"],
                subtype=row["subtype"],
                version=row["version"],
                polymorphic_identity=row["ident"],
                semantic_category=row["semantic"],
                action_definition=row["definition"],
                properties=row["properties"] if isinstance(row["properties"], dict) else {},
            )
        if not refs:
            return {}
        _cache[key] = refs
    return _cache[key]


def template(code: str) -> TemplateRef:
    refs = all_templates()
    if code not in refs:
        clear_cache()
        refs = all_templates()
    try:
        return refs[code]
    except KeyError as exc:
        raise LookupError(f"TapDB template {code!r} is not seeded; run bootstrap_tapdb") from exc


def template_by_uid(uid: int) -> TemplateRef | None:
    for ref in all_templates().values():
        if ref.uid == uid:
            return ref
    return None


def template_defaults(code: str) -> dict:
    """The default properties a template declares for its instances (a fresh copy)."""
    from copy import deepcopy

    return deepcopy(template(code).properties)


def pack_action_definitions() -> dict[str, dict]:
    """bloomops' action policy (roles, lease requirement, allowed states) per action key,
    from its own template pack: it applies whichever writer seeded the action template in
    use (Bloom's carry no roles)."""
    if "__actions__" not in _pack_cache:
        import json
        from pathlib import Path

        pack = json.loads((Path(__file__).parent / "packs" / "actions.json").read_text())
        _pack_cache["__actions__"] = {
            t["subtype"]: t["json_addl"].get("action_definition") or {}
            for t in pack["templates"]
        }
    return _pack_cache["__actions__"]


_pack_cache: dict[str, dict] = {}
