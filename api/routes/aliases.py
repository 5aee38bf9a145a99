"""Bank aliases (Hindsight's ``…/aliases`` family): extra ids a bank answers to on every
bank-scoped route (resolved before the access check, :mod:`api.auth`). Listing needs
``read``, changes ``admin``; the rules live in :mod:`rcll.banks.aliases`."""

from __future__ import annotations

from flask import Blueprint, jsonify
from pydantic import BaseModel, ConfigDict, Field

from api.auth import principal, requires
from api.deps import json_body, services
from api.openapi import doc
from api.schemas import check_bank_id
from rcll.validation import TextModel

bp = Blueprint("aliases", __name__)
_STRICT = ConfigDict(extra="forbid", strict=True)


class CreateBankAliasRequest(TextModel):
    model_config = _STRICT
    alias: str = Field(description="the extra id: the bank id rule, and neither a bank nor "
                       "another alias")
    primary: bool | None = Field(False, description="show the bank under this alias")


class SetBankAliasPrimaryRequest(TextModel):
    model_config = _STRICT
    primary: bool


class BankAliasEntry(BaseModel):
    model_config = ConfigDict(extra="allow")
    alias: str
    primary: bool = False


class BankAliasesResponse(BaseModel):
    model_config = ConfigDict(extra="allow")
    bank_id: str
    aliases: list[BankAliasEntry]


def _aliases():
    return services().bank_aliases


@bp.get("/v1/default/banks/<bank_id>/aliases")
@requires("read")
@doc({200: BankAliasesResponse}, tags=["aliases"])
def list_aliases(bank_id: str):
    """The bank's aliases, the primary one first, then oldest first → ``{bank_id,
    aliases: [{alias, primary}]}`` (``bank_id``: the bank's own id, also when the path
    named it by an alias)."""
    check_bank_id(bank_id)
    return jsonify(_aliases().list(principal(), bank_id))


@bp.post("/v1/default/banks/<bank_id>/aliases")
@requires("admin")
@doc({201: BankAliasesResponse}, body=CreateBankAliasRequest, tags=["aliases"],
     errors={400: ["invalid_bank_alias"], 409: ["bank_alias_taken", "too_many_bank_aliases"]})
def create_alias(bank_id: str):
    """Give the bank another id: ``{"alias", "primary"?}`` → 201 with its aliases. Every
    bank-scoped route then reaches the bank by the alias too. 409 ``bank_alias_taken``
    when a bank or another alias has that name."""
    check_bank_id(bank_id)
    body = json_body()
    req = CreateBankAliasRequest.model_validate(body)
    return jsonify(_aliases().create(principal(), bank_id, req.alias, bool(req.primary))), 201


@bp.patch("/v1/default/banks/<bank_id>/aliases/<alias>")
@requires("admin")
@doc({200: BankAliasesResponse}, body=SetBankAliasPrimaryRequest, tags=["aliases"],
     errors={400: ["invalid_bank_alias"], 404: ["bank_alias_not_found"]})
def set_alias_primary(bank_id: str, alias: str):
    """``{"primary": true}`` shows the bank under this alias (the previous primary alias
    no longer is); ``false`` goes back to its own id → its aliases. 404
    ``bank_alias_not_found``."""
    check_bank_id(bank_id)
    req = SetBankAliasPrimaryRequest.model_validate(json_body())
    return jsonify(_aliases().set_primary(principal(), bank_id, alias, req.primary))


@bp.delete("/v1/default/banks/<bank_id>/aliases/<alias>")
@requires("admin")
@doc({200: BankAliasesResponse}, tags=["aliases"],
     errors={400: ["invalid_bank_alias"], 404: ["bank_alias_not_found"]})
def delete_alias(bank_id: str, alias: str):
    """Remove the alias → the bank's aliases after it; the id then reaches nothing (and
    may become a bank of its own). 404 ``bank_alias_not_found``."""
    check_bank_id(bank_id)
    return jsonify(_aliases().delete(principal(), bank_id, alias))
