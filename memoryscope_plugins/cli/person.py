"""The commands over the person behind a user's memories: the entity ledger (entities, entity, and the
edits rename-entity, add-alias, merge-entities, delete-entity) and the profile (profile, profile
--history KEY, set-profile, remove-profile-value). Each reading command takes ``--json``."""

from __future__ import annotations

import argparse
import dataclasses
import enum
import json
from datetime import datetime
from typing import Any

from ..types import Entity
from .engine_args import CommandGroup, engine_from_args as _engine
from .wording import count_of


def _jsonable(value: Any) -> Any:
    """A record (`Entity`, `ProfileValue`, `EntityDetails`, `Memory`) as JSON-ready data."""
    if dataclasses.is_dataclass(value) and not isinstance(value, type):
        return {field.name: _jsonable(getattr(value, field.name)) for field in dataclasses.fields(value)}
    if isinstance(value, datetime):
        return value.isoformat()
    if isinstance(value, enum.Enum):
        return value.value
    if isinstance(value, dict):
        return {str(key): _jsonable(item) for key, item in value.items()}
    if isinstance(value, (list, tuple)):
        return [_jsonable(item) for item in value]
    return value


def _print_json(value: Any) -> None:
    print(json.dumps(_jsonable(value), ensure_ascii=False, indent=1))


def _day(moment: datetime | None) -> str:
    return "-" if moment is None else f"{moment:%Y-%m-%d}"


def _entity_line(entity) -> str:
    also = f" (also {', '.join(entity.aliases)})" if entity.aliases else ""
    return (f"{entity.name}{also}  [{entity.kind.value}]  {count_of(entity.mention_count, 'mention')}, "
            f"first {_day(entity.first_mentioned_at)}, last {_day(entity.last_mentioned_at)}  id {entity.id}")


def _value_line(value) -> str:
    span = f"{_day(value.valid_from)} .. {_day(value.valid_to) if value.valid_to else 'now'}"
    by = "  (set by the user)" if value.set_by == "user" else ""
    return f"{value.key}: {value.value}  [{span}]{by}  id {value.id}"


def cmd_entities(args: argparse.Namespace) -> int:
    with _engine(args) as memory:
        found = memory.entities(args.user, kind=args.kind, order=args.order, limit=args.limit)
    if args.json:
        _print_json(found)
    elif not found:
        print(f"{args.user!r} has no entities yet")
    for entity in [] if args.json else found:
        print(_entity_line(entity))
    return 0


def cmd_entity(args: argparse.Namespace) -> int:
    from ..timeparse import listing_line
    with _engine(args) as memory:
        details = memory.entity(args.user, args.name, limit=args.limit, bucket=args.bucket)
    if args.json:
        _print_json(details)
        return 0
    print(_entity_line(details.entity))
    if details.timeline:
        print("mentions: " + ", ".join(f"{start:%Y-%m-%d} {count}" for start, count in details.timeline))
    for value in details.profile:
        print(_value_line(value))
    for item in details.memories:
        print(listing_line(item))
    return 0


def cmd_profile(args: argparse.Namespace) -> int:
    with _engine(args) as memory:
        if args.history:
            values = memory.profile_history(args.user, args.history)
        else:
            values = [value for values in memory.profile(args.user).values() for value in values]
    if args.json:
        _print_json(values)
    elif not values:
        print(f"no values of {args.history!r} for {args.user!r}" if args.history
              else f"{args.user!r} has no profile yet")
    for value in [] if args.json else values:
        print(_value_line(value))
    return 0


def cmd_edit(args: argparse.Namespace) -> int:
    """rename-entity, add-alias, merge-entities, remove-profile-value: the engine method of that
    name with the command's arguments; prints the entity or the profile value it changed."""
    with _engine(args) as memory:
        changed = getattr(memory, args.edit_method)(args.user, *(getattr(args, a) for a in args.edit_arguments))
    print(_entity_line(changed) if isinstance(changed, Entity) else _value_line(changed))
    return 0


def cmd_delete_entity(args: argparse.Namespace) -> int:
    with _engine(args) as memory:
        links = memory.delete_entity(args.user, args.name)
    print(f"deleted {args.name!r} and {count_of(links, 'link')} to memories (the memories are kept)")
    return 0


def cmd_set_profile(args: argparse.Namespace) -> int:
    with _engine(args) as memory:
        print(_value_line(memory.set_profile(args.user, args.key, args.value, replace=not args.add)))
    return 0


def add_parsers(sub: CommandGroup) -> None:
    """Add the entity ledger's and the profile's commands to the CLI's subparsers."""
    p = sub.add_parser("entities", help="the people, places and things a user's conversations name, best first")
    p.add_argument("user")
    p.add_argument("--kind", default=None, help="person, place, organization, pet, object, topic or unknown")
    p.add_argument("--order", default="relevance", choices=("relevance", "frequency", "recency"))
    p.add_argument("--limit", type=int, default=20)
    p.add_argument("--json", action="store_true")
    p.set_defaults(func=cmd_entities)

    p = sub.add_parser("entity", help="one entity: its mentions over time and its memories")
    p.add_argument("user")
    p.add_argument("name", help="its name, an alias or its id")
    p.add_argument("--limit", type=int, default=20, help="memories shown")
    p.add_argument("--bucket", default="month", choices=("week", "month"))
    p.add_argument("--json", action="store_true")
    p.set_defaults(func=cmd_entity)

    p = sub.add_parser("profile", help="a user's profile as it is now, or one key's history")
    p.add_argument("user")
    p.add_argument("--history", metavar="KEY", default=None, help="every value KEY ever had, oldest first")
    p.add_argument("--json", action="store_true")
    p.set_defaults(func=cmd_profile)

    edits = (("rename-entity", "give an entity a new name (the old one stays as an alias)", ("name", "new_name")),
             ("add-alias", "another name an entity goes by", ("name", "alias")),
             ("merge-entities", "merge OTHER into KEEP (names, mentions); memories are kept", ("keep", "other")),
             ("delete-entity", "remove an entity and its links (never the memories)", ("name",)),
             ("remove-profile-value", "end a profile value now (kept in the key's history)", ("id",)))
    for command, help_text, arguments in edits:
        p = sub.add_parser(command, help=help_text)
        for argument in ("user", *arguments):
            p.add_argument(argument)
        p.set_defaults(func=cmd_delete_entity if command == "delete-entity" else cmd_edit,
                       edit_method=command.replace("-", "_"), edit_arguments=arguments)

    p = sub.add_parser("set-profile", help="set a profile value as the user states it (a correction)")
    p.add_argument("user")
    p.add_argument("key")
    p.add_argument("value")
    p.add_argument("--add", action="store_true", help="add to a multi-valued key (likes, pets...) instead of "
                                                      "replacing its values")
    p.set_defaults(func=cmd_set_profile)
