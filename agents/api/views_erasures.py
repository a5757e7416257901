"""People's erasure API (issue 21): POST admin/erasures/preview/ and POST admin/erasures/.

Not an agent tool: only a signed-in person administering the workspace may call it (Django
session, CSRF enforced as DRF's SessionAuthentication does); an agent key is answered 403
`erasure_forbidden`. Bad selections are 400 `invalid_selection`, an empty one 400
`nothing_to_erase`, a workspace the person is not a member of 404."""

from __future__ import annotations

from typing import Any

from drf_spectacular.utils import extend_schema
from rest_framework.authentication import SessionAuthentication
from rest_framework.permissions import BasePermission
from rest_framework.request import Request
from rest_framework.response import Response
from rest_framework.views import APIView

from agents.api.schema import declared
from agents.auth import AgentKeyAuthentication
from agents.operations.inputs import refuse_unknown
from agents.operations.serializers_erasures import ErasureIn
from memory import access
from memory.actors import Actor
from memory.errors import InvalidInput, NotFound
from memory.models import Agent, Workspace
from memory.services import erasure


class IsPerson(BasePermission):
    """A signed-in person; an agent gets erasure_forbidden from the view (a stable code)."""

    def has_permission(self, request: Request, view: Any) -> bool:
        return request.user is not None and bool(getattr(request.user, "is_authenticated", False))


class _ErasureView(APIView):
    authentication_classes = [AgentKeyAuthentication, SessionAuthentication]
    permission_classes = [IsPerson]
    throttle_classes: list[Any] = []

    def plan(self, request: Request) -> erasure.ErasurePlan:
        if isinstance(request.user, Agent):
            raise erasure.ErasureForbidden()
        data = request.data if isinstance(request.data, dict) else {}
        refuse_unknown(request.query_params)
        refuse_unknown(data, allowed=ErasureIn().fields)
        slug = data.get("workspace")
        if not isinstance(slug, str) or not slug:
            raise InvalidInput("Name the workspace.", fields={"workspace": ["Required: the workspace's slug."]})
        workspace = access.workspaces(request.user, "view").filter(slug=slug).first()
        if workspace is None:
            raise NotFound("No such workspace.")
        if not access.is_workspace_admin(request.user, workspace):
            raise erasure.ErasureForbidden()
        plan = erasure.select_subject(workspace, erasure.parse_selection(data.get("selection")))
        if plan.is_empty:
            raise erasure.NothingToErase()
        return plan


class ErasurePreviewView(_ErasureView):
    @extend_schema(**declared("admin_erasure_preview"))
    def post(self, request: Request) -> Response:
        return Response(self.plan(request).as_dict())


class ErasureView(_ErasureView):
    @extend_schema(**declared("admin_erasure"))
    def post(self, request: Request) -> Response:
        plan = self.plan(request)  # the body is an object: plan() read the workspace from it
        data: dict[str, Any] = request.data if isinstance(request.data, dict) else {}
        previewed = data.get("fact_ids")
        if previewed is not None:
            if not isinstance(previewed, list) or not all(
                isinstance(i, int) and not isinstance(i, bool) for i in previewed
            ):
                raise InvalidInput("`fact_ids` lists fact ids.", fields={"fact_ids": ["A list of fact ids."]})
            erasure.check_previewed(plan, previewed)
        reason = data.get("reason", "")
        event = erasure.erase(
            plan=plan, reason=reason if isinstance(reason, str) else "", by=Actor.of_user(request.user)
        )
        return Response(tombstone_body(event, plan.workspace), status=201)


def tombstone_body(event: Any, workspace: Workspace) -> dict[str, Any]:
    detail = event.detail
    return {
        "tombstone": event.pk,
        "workspace": workspace.slug,
        "by": event.actor_label,
        "at": event.created_at.isoformat(),
        "reason": detail["reason"],
        "erased": detail["erased"],
        "counts": detail["counts"],
        "sha256": detail["sha256"],
    }
