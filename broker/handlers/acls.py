"""CreateAcls, DescribeAcls and DeleteAcls: the ACLs the authorizer enforces. Reading them needs
Describe on the cluster, changing them Alter on the cluster; without an authorizer
(``authorizer_enabled`` false) there are none: SECURITY_DISABLED."""

from __future__ import annotations

from typing import Any

from broker.context import BrokerContext
from broker.security.authorizer import AclAuthorizer
from protocol.acls import AclBinding, AclBindingFilter
from protocol.apis import ApiKey
from protocol.errors import ErrorCode, SecurityDisabledError
from protocol.wire import Request


def _authorizer(ctx: BrokerContext, api: ApiKey) -> AclAuthorizer:
    if ctx.security.authorizer is None:
        raise SecurityDisabledError(
            "this broker runs without an authorizer (authorizer_enabled = false): it keeps no "
            "ACLs")
    ctx.security.require_cluster(api)
    return ctx.security.authorizer


async def describe_acls(ctx: BrokerContext, request: Request) -> dict[str, Any]:
    authorizer = _authorizer(ctx, ApiKey.DESCRIBE_ACLS)
    try:
        acl_filter = AclBindingFilter.from_wire(request.body["filter"])
    except ValueError as exc:
        return {"error_code": ErrorCode.INVALID_REQUEST, "error_message": f"bad filter: {exc}",
                "acls": []}
    return {"error_code": ErrorCode.NONE, "error_message": None,
            "acls": [acl.to_wire() for acl in authorizer.matching(acl_filter)]}


async def create_acls(ctx: BrokerContext, request: Request) -> dict[str, Any]:
    _authorizer(ctx, ApiKey.CREATE_ACLS)
    results: list[dict[str, Any]] = []
    valid: list[AclBinding] = []
    for creation in request.body["creations"]:
        try:
            valid.append(AclBinding.from_wire(creation))
        except ValueError as exc:
            results.append({"error_code": ErrorCode.INVALID_REQUEST,
                            "error_message": f"invalid ACL: {exc}"})
            continue
        results.append({"error_code": ErrorCode.NONE, "error_message": None})
    if valid:
        await ctx.security.change_acls(valid, [])
    return {"results": results}


async def delete_acls(ctx: BrokerContext, request: Request) -> dict[str, Any]:
    authorizer = _authorizer(ctx, ApiKey.DELETE_ACLS)
    results: list[dict[str, Any]] = []
    doomed: list[AclBinding] = []
    for entry in request.body["filters"]:
        try:
            acl_filter = AclBindingFilter.from_wire(entry)
        except ValueError as exc:
            results.append({"error_code": ErrorCode.INVALID_REQUEST,
                            "error_message": f"bad filter: {exc}", "matching_acls": []})
            continue
        matching = authorizer.matching(acl_filter)
        doomed += matching
        results.append({"error_code": ErrorCode.NONE, "error_message": None,
                        "matching_acls": [acl.to_wire() for acl in matching]})
    if doomed:
        await ctx.security.change_acls([], list(dict.fromkeys(doomed)))
    return {"filter_results": results}
