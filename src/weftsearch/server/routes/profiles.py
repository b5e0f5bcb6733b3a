"""``/v1/profiles``: the HTTP side of ranking profiles (stored by :mod:`weftsearch.ranking.profiles`)."""

from __future__ import annotations

from typing import Annotated, Any

from fastapi import APIRouter
from pydantic import Field

from weftsearch.server.errors import about_field, answers
from weftsearch.server.models import NAME_PATTERN, ProfileIn, ProfileListResponse, ProfileOut
from weftsearch.server.state import Served

__all__ = ["router"]

router = APIRouter()


@router.get(
    "/v1/profiles",
    tags=["profiles"],
    summary="The newest version of every profile",
    **answers(ProfileListResponse),
)
def list_profiles(state: Served) -> dict[str, Any]:
    profiles = state.profiles
    with about_field(None):
        return {
            "profiles": [{**p.to_dict(), "versions": profiles.versions(p.name)} for p in profiles.latest()]
        }


@router.get(
    "/v1/profiles/{name}", tags=["profiles"], summary="A profile's newest version", **answers(ProfileOut)
)
def get_profile(name: Annotated[str, Field(pattern=NAME_PATTERN)], state: Served) -> dict[str, Any]:
    with about_field("name"):
        return state.profiles.get(name).to_dict()


@router.get(
    "/v1/profiles/{name}/{version}",
    tags=["profiles"],
    summary="One version of a profile",
    **answers(ProfileOut),
)
def get_profile_version(
    name: Annotated[str, Field(pattern=NAME_PATTERN)], version: Annotated[int, Field(ge=1)], state: Served
) -> dict[str, Any]:
    with about_field("version"):
        return state.profiles.get(name, version).to_dict()


@router.post(
    "/v1/profiles",
    tags=["profiles"],
    summary="Create the next version of a profile",
    status_code=201,
    **answers(ProfileOut),
)
def create_profile(body: ProfileIn, state: Served) -> dict[str, Any]:
    limits = state.limits
    state.check_length(body.spec, "spec")
    state.check_length(body.filter, "filter")
    if body.depth is not None and body.depth > limits.max_depth:
        raise state.too_large("depth", body.depth, limits.max_depth, "max_depth")
    with about_field("spec"):
        made = state.profiles.create(
            body.name,
            body.spec,
            depth=body.depth,
            filter=body.filter,
            description=body.description,
            provenance={"source": "api"},
        )
    if made.depth > limits.max_depth:
        raise state.too_large("depth", made.depth, limits.max_depth, "max_depth")
    return made.to_dict()
