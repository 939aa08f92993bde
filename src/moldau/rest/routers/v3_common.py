"""What every v3 resource shares: the cluster check, URLs, metadata blocks, list bodies."""

from __future__ import annotations

from typing import Any

from starlette.requests import Request

from ..errors import RestError
from ..services import services


async def checked_cluster(request: Request) -> str:
    """The path's cluster id, 404 unless it is the cluster the proxy talks to."""
    wanted = request.path_params["cluster_id"]
    actual = await services(request).admin.cluster_id()
    if wanted != actual:
        raise RestError(404, 404, f"Cluster {wanted} cannot be found.")
    return actual


def url(request: Request, *parts: object) -> str:
    base = str(request.base_url).rstrip("/")
    return "/".join([base, "v3", *(str(p) for p in parts)])


def crn(*pairs: tuple[str, object]) -> str:
    return "crn:///" + "/".join(f"{k}={v}" for k, v in pairs)


def metadata(self_url: str, resource_name: str | None = None) -> dict[str, Any]:
    block: dict[str, Any] = {"self": self_url}
    if resource_name is not None:
        block["resource_name"] = resource_name
    return block


def related(link: str) -> dict[str, str]:
    return {"related": link}


def listing(kind: str, self_url: str, data: list[dict[str, Any]]) -> dict[str, Any]:
    return {"kind": kind, "metadata": {"self": self_url, "next": None}, "data": data}
