"""The /v1 routes over a user's entity ledger and profile: list and read entities, rename, alias, merge and
delete them; read the profile and a key's history, set a value, end one.

An entity is named in the path by its name, one of its aliases or its id, percent-encoded as one segment
(a name may hold "/": "AC/DC" is sent as ``AC%2FDC``); the routes of an entity's actions end in a fixed
word (``/aliases``, ``/merge``), so a name that itself ends in such a word is still read whole.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

from starlette.concurrency import run_in_threadpool
from starlette.requests import Request
from starlette.responses import JSONResponse, Response
from starlette.routing import Route

from ..engine import MemoryScope
from ..person import name_rules
from .entity_json import details_json, entity_json, profile_json, profile_value_json
from .route_support import given, int_param, json_body, request_key, store_user

#: how a message names the entity's name in the path (the PATCH body has a `name` of its own)
PATH_NAME = "the name in the path"


def entity_routes(engine: MemoryScope, base: str) -> list[Route]:
    """The routes under ``{base}/{user}/entities`` and ``{base}/{user}/profile``. Each handler runs the
    engine call in a worker thread."""
    entities, profile = base + "/{user}/entities", base + "/{user}/profile"
    return [*_entity_edit_routes(engine, entities), *_entity_read_routes(engine, entities),
            *_profile_routes(engine, profile)]


def _entity_read_routes(engine: MemoryScope, entities: str) -> list[Route]:
    """Listing a user's entities and reading one."""

    async def list_entities(request: Request) -> Response:
        """
        summary: A user's entities, best first (query kind, order relevance|frequency|recency, limit, now).
        """
        key = request_key(request)
        user = store_user(key, request.path_params["user"])
        query = request.query_params
        items = await run_in_threadpool(lambda: engine.entities(
            user, kind=query.get("kind") or None, order=query.get("order", "relevance"),
            limit=int_param(request, "limit", 20), now=query.get("now") or None))
        return JSONResponse({"entities": [entity_json(e, key.tenant) for e in items]})

    async def get_entity(request: Request) -> Response:
        """
        summary: One entity (by name, alias or id) with its timeline, its memories and, for the user, the profile (query limit, bucket week|month).
        """  # noqa: E501 - one line of the OpenAPI schema
        key = request_key(request)
        user = store_user(key, request.path_params["user"])
        name = name_rules.check_name(request.path_params["name"], PATH_NAME)
        details = await run_in_threadpool(lambda: engine.entity(
            user, name, limit=int_param(request, "limit", 20),
            bucket=request.query_params.get("bucket", "month")))
        return JSONResponse(details_json(details, key.tenant))

    return [Route(entities, list_entities, methods=["GET"]),
            Route(entities + "/{name:path}", get_entity, methods=["GET"])]


def _entity_edit_routes(engine: MemoryScope, entities: str) -> list[Route]:
    """Renaming, aliasing, merging and deleting an entity. The routes of an action end in a fixed word,
    so they come before the bare ``{name:path}`` ones."""

    async def edit(request: Request, field: str, check: Callable[[Any, str], str], call) -> Response:
        """An edit of the entity the path names with the body's one `field` (checked by `check`, which
        names it as the body does); answers the entity."""
        key = request_key(request)
        user = store_user(key, request.path_params["user"])
        body = await json_body(request, {field})
        name = name_rules.check_name(request.path_params["name"], PATH_NAME)
        entity = await run_in_threadpool(call, user, name, check(given(body, field), field))
        return JSONResponse(entity_json(entity, key.tenant))

    async def rename_entity(request: Request) -> Response:
        """
        summary: Rename an entity (body name); its old name stays as an alias.
        """
        return await edit(request, "name", name_rules.check_new_name, engine.rename_entity)

    async def add_alias(request: Request) -> Response:
        """
        summary: Give an entity another name (body alias).
        """
        return await edit(request, "alias", name_rules.check_new_name, engine.add_alias)

    async def merge_entities(request: Request) -> Response:
        """
        summary: Merge another entity into this one (body other); its names become aliases, its mentions move here.
        """  # noqa: E501 - one line of the OpenAPI schema
        return await edit(request, "other", name_rules.check_name, engine.merge_entities)

    async def delete_entity(request: Request) -> Response:
        """
        summary: Delete an entity and its links to memories (never the memories).
        """
        key = request_key(request)
        user = store_user(key, request.path_params["user"])
        name = name_rules.check_name(request.path_params["name"], PATH_NAME)
        links = await run_in_threadpool(engine.delete_entity, user, name)
        return JSONResponse({"deleted": name, "links": links})

    return [Route(entities + "/{name:path}/aliases", add_alias, methods=["POST"]),
            Route(entities + "/{name:path}/merge", merge_entities, methods=["POST"]),
            Route(entities + "/{name:path}", rename_entity, methods=["PATCH"]),
            Route(entities + "/{name:path}", delete_entity, methods=["DELETE"])]


def _profile_routes(engine: MemoryScope, profile: str) -> list[Route]:
    """Reading the profile and a key's history, setting a value, ending one."""

    async def get_profile(request: Request) -> Response:
        """
        summary: A user's profile, each key with its current values.
        """
        key = request_key(request)
        user = store_user(key, request.path_params["user"])
        profile = await run_in_threadpool(engine.profile, user)
        return JSONResponse({"profile": profile_json(profile, key.tenant)})

    async def profile_history(request: Request) -> Response:
        """
        summary: Every value a profile key ever had, oldest first (ended ones with valid_to and superseded_by), under its canonical key.
        """  # noqa: E501 - one line of the OpenAPI schema
        key = request_key(request)
        user = store_user(key, request.path_params["user"])
        canonical = name_rules.canonical_key(request.path_params["key"], "key")  # 家 is home: say so
        values = await run_in_threadpool(engine.profile_history, user, request.path_params["key"])
        return JSONResponse({"key": canonical,
                             "history": [profile_value_json(v, key.tenant) for v in values]})

    async def set_profile(request: Request) -> Response:
        """
        summary: Set a profile value as the user's correction (body value, replace? default true, which ends the key's current values).
        """  # noqa: E501 - one line of the OpenAPI schema
        key = request_key(request)
        user = store_user(key, request.path_params["user"])
        body = await json_body(request, {"value", "replace"})
        value = await run_in_threadpool(lambda: engine.set_profile(
            user, request.path_params["key"], given(body, "value"), replace=body.get("replace", True)))
        return JSONResponse(profile_value_json(value, key.tenant))

    async def remove_profile_value(request: Request) -> Response:
        """
        summary: End a profile value now (it stays in the key's history).
        """
        key = request_key(request)
        user = store_user(key, request.path_params["user"])
        value = await run_in_threadpool(engine.remove_profile_value, user, request.path_params["value_id"])
        return JSONResponse(profile_value_json(value, key.tenant))

    return [Route(profile, get_profile, methods=["GET"]),
            Route(profile + "/values/{value_id}", remove_profile_value, methods=["DELETE"]),
            Route(profile + "/{key}/history", profile_history, methods=["GET"]),
            Route(profile + "/{key}", set_profile, methods=["PUT"])]
