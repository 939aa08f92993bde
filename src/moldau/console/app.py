"""The console's web app: Starlette routes rendering Jinja2 templates.

Handlers are thin: they read the request, call :mod:`.queries` or :mod:`.browser` in a
worker thread (confluent-kafka blocks), and render. Every failure a person can cause
(CliError: a missing topic, an invalid config, a group that is not empty) is rendered as
one message on an error page with status 4xx; the process keeps serving. Destructive
actions take two POSTs: the first shows what will happen, the second (with ``confirm``)
does it.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from pathlib import Path
from typing import Any, TypeVar
from urllib.parse import quote, urlencode, urlsplit

from confluent_kafka import KafkaException
from confluent_kafka.admin import ConfigResource, NewTopic, ResourceType
from starlette.applications import Starlette
from starlette.concurrency import run_in_threadpool
from starlette.datastructures import FormData
from starlette.requests import Request
from starlette.responses import RedirectResponse, Response
from starlette.routing import Mount, Route
from starlette.staticfiles import StaticFiles
from starlette.templating import Jinja2Templates

from ..cli.assignments import parse_assignments
from ..cli.configs import alter_configs, is_default
from ..cli.connection import Connection
from ..cli.errors import CliError, as_cli_error
from ..cli.group import Strategy, apply_reset, parse_topic_partitions, plan_reset
from ..cli.topic import TopicMissing, add_partitions, create_topic, delete_topic
from . import browser, queries
from .charts import bars, human_size, sparkline
from .client import LazyAdmin
from .decode import FORMATS, AvroDecoder
from .metrics import MAX_ROWS, scrape
from .throughput import History

HERE = Path(__file__).parent
T = TypeVar("T")


def _int(form: Mapping[str, Any], name: str, label: str, *,
         required: bool = True, minimum: int | None = None) -> int | None:
    """A whole number from a form or query field, or a CliError saying which field."""
    text = str(form.get(name) or "").strip()
    if not text:
        if required:
            raise CliError(f"{label} is required")
        return None
    try:
        value = int(text)
    except ValueError:
        raise CliError(f"{label} must be a whole number, not {text!r}") from None
    if minimum is not None and value < minimum:
        raise CliError(f"{label} must be at least {minimum}, not {value}")
    return value


class CrossSiteRequest(CliError):
    """A form posted from another site's page: refused before anything is read or done."""


async def _posted(request: Request) -> FormData:
    """The posted form, if it came from the console's own pages.

    Browsers send ``Origin`` with every cross-site POST; without this check any web page a
    person opens could post "delete topic X, confirmed" to a console on their localhost.
    """
    origin = request.headers.get("origin")
    if origin is not None and urlsplit(origin).netloc != request.headers.get("host"):
        raise CrossSiteRequest(f"refused a form posted from {origin}: the console only "
                               "accepts its own forms")
    return await request.form()


def _status_of(exc: Exception, message: str) -> int:
    """The HTTP status of a failure: whose fault it was, as a status code says it."""
    if isinstance(exc, CrossSiteRequest):
        return 403
    if isinstance(exc, TopicMissing) or "does not exist" in message:
        return 404
    if message.startswith(("cannot reach a broker", "cannot read metrics")) or (
            "no answer" in message):
        return 503  # the cluster is away: nothing wrong with the request
    return 400


def create_app(conn: Connection, history: History | None = None,
               avro: AvroDecoder | None = None, admin: LazyAdmin | None = None,
               metrics_url: str | None = None, root: str = "") -> Starlette:
    """The ASGI app for one cluster; ``history`` is fed by a sampler the caller runs.

    ``avro`` decodes Avro values through a schema registry in the message browser;
    ``admin`` is the AdminClient to share with that sampler (a new one by default);
    ``metrics_url`` is a Prometheus endpoint whose samples the metrics page shows;
    ``root`` is the path the app is served under behind a proxy (e.g. ``/console`` on a
    broker's metrics port): every link, form and redirect starts with it.
    """
    cluster = admin or LazyAdmin(conn)
    rates = history or History()
    templates = Jinja2Templates(directory=str(HERE / "templates"))
    templates.env.globals.update(sparkline=sparkline, bars=bars, is_default=is_default,
                                 size=human_size,
                                 quote=quote, formats=FORMATS, metrics_url=metrics_url,
                                 root=root)

    async def call(fn: Callable[..., T], *args: Any, **kwargs: Any) -> T:
        return await run_in_threadpool(fn, conn, cluster(), *args, **kwargs)

    def page(request: Request, template: str, status: int = 200, **context: Any) -> Response:
        context.setdefault("notice", request.query_params.get("notice"))
        return templates.TemplateResponse(request, template, context, status_code=status)

    def redirect(path: str, notice: str) -> Response:
        return RedirectResponse(f"{root}{path}?{urlencode({'notice': notice})}",
                                status_code=303)

    async def overview(request: Request) -> Response:
        summary = await call(queries.overview)
        return page(request, "overview.html", summary=summary,
                    total=rates.total_in_rates(), sample_error=rates.last_error)

    async def topics(request: Request) -> Response:
        query = request.query_params.get("q", "")
        internal = request.query_params.get("internal") == "1"
        rows = await call(queries.topics, internal=internal, query=query)
        return page(request, "topics.html", rows=rows, q=query, internal=internal)

    async def topic_new(request: Request) -> Response:
        return page(request, "topic_new.html", form={})

    async def topic_create(request: Request) -> Response:
        form = await _posted(request)
        name = str(form.get("name") or "").strip()
        if not name:
            raise CliError("a topic needs a name")
        partitions = _int(form, "partitions", "partitions", required=False, minimum=1)
        replication = _int(form, "replication", "replication factor", required=False,
                           minimum=1)
        lines = [line.strip() for line in str(form.get("configs") or "").splitlines()]
        configs = parse_assignments([line for line in lines if line], "config")
        new_topic = NewTopic(name, num_partitions=partitions or -1,
                             replication_factor=replication or -1, config=configs)
        if form.get("confirm") != "yes":
            # Ask the broker whether it would accept this before asking the person.
            await call(create_topic, new_topic, validate_only=True)
            return page(request, "topic_confirm.html", form=form, name=name,
                        partitions=partitions, replication=replication, configs=configs)
        await call(create_topic, new_topic)
        return redirect(f"/topics/{quote(name, safe='')}", f"Created topic {name}.")

    async def topic(request: Request) -> Response:
        name = request.path_params["name"]
        all_configs = request.query_params.get("configs") == "all"
        detail = await call(queries.topic_detail, name, all_configs=all_configs)
        return page(request, "topic.html", name=name, detail=detail, all_configs=all_configs)

    async def topic_config(request: Request) -> Response:
        name = request.path_params["name"]
        form = await _posted(request)
        key = str(form.get("key") or "").strip()
        value = str(form.get("value") or "").strip()
        reset = form.get("reset") == "yes"
        if not key:
            raise CliError("give the config key to change")
        if form.get("confirm") != "yes":
            current = await call(queries.config_value, name, key)
            return page(request, "config_confirm.html", name=name, key=key, value=value,
                        reset=reset, current=current)
        resource = ConfigResource(ResourceType.TOPIC, name)
        if reset:
            await call(alter_configs, resource, {}, [key])
            return redirect(f"/topics/{quote(name, safe='')}", f"Reset {key} to its default.")
        await call(alter_configs, resource, {key: value}, [])
        return redirect(f"/topics/{quote(name, safe='')}", f"Set {key}={value}.")

    async def topic_partitions(request: Request) -> Response:
        name = request.path_params["name"]
        form = await _posted(request)
        total = _int(form, "partitions", "the new partition count", minimum=1)
        if form.get("confirm") != "yes":
            detail = await call(queries.topic_detail, name, all_configs=False)
            return page(request, "partitions_confirm.html", name=name, total=total,
                        current=len(detail.partitions))
        await call(add_partitions, name, total)
        return redirect(f"/topics/{quote(name, safe='')}", f"{name} now has {total} partitions.")

    async def topic_delete(request: Request) -> Response:
        name = request.path_params["name"]
        form = await _posted(request)
        if form.get("confirm") != "yes":
            await call(queries.topic_detail, name, all_configs=False)  # exists?
            return page(request, "delete_confirm.html", name=name)
        if str(form.get("typed") or "").strip() != name:
            raise CliError(f"type the topic name {name!r} to confirm the deletion; "
                           "nothing was deleted")
        await call(delete_topic, name)
        return redirect("/topics", f"Deleted topic {name}.")

    async def messages(request: Request) -> Response:
        name = request.path_params["name"]
        params = request.query_params
        how = params.get("decode", "auto")
        if how not in FORMATS:
            raise CliError(f"unknown decoding {how!r}: choose one of {', '.join(FORMATS)}")
        partition = _int(params, "partition", "partition", required=False, minimum=0) or 0
        offset = _int(params, "offset", "offset", required=False, minimum=0)
        time_text = (params.get("timestamp") or "").strip()
        timestamp_ms = browser.parse_time(time_text) if time_text else None
        limit = _int(params, "limit", "limit", required=False, minimum=1) or 20
        result = await call(browser.read_page, name, partition, offset=offset,
                            timestamp_ms=timestamp_ms, limit=limit, how=how, avro=avro)
        return page(request, "messages.html", name=name, result=result, how=how,
                    offset=params.get("offset", ""), timestamp=time_text, limit=limit)

    async def groups(request: Request) -> Response:
        rows = await call(queries.groups)
        return page(request, "groups.html", rows=rows)

    async def group(request: Request) -> Response:
        group_id = request.path_params["group"]
        detail = await call(queries.group_detail, group_id)
        lag_items = [(f"{r.topic}:{r.partition}", r.lag) for r in detail.offsets
                     if r.lag is not None]
        return page(request, "group.html", detail=detail, lag_items=lag_items)

    async def group_reset(request: Request) -> Response:
        group_id = request.path_params["group"]
        form = await _posted(request)
        how = str(form.get("strategy") or "")
        target = str(form.get("target") or "").strip()
        if not str(form.get("topic") or "").strip():
            raise CliError("give the topic to reset (TOPIC or TOPIC:P,P)")
        specs = [parse_topic_partitions(str(form.get("topic")).strip())]
        if how == "earliest":
            strategy = Strategy(earliest=True)
        elif how == "latest":
            strategy = Strategy(latest=True)
        elif how == "offset":
            strategy = Strategy(offset=_int(form, "target", "the offset", minimum=0))
        elif how == "shift":
            strategy = Strategy(shift_by=_int(form, "target", "the shift"))
        elif how == "datetime":
            if not target:
                raise CliError("give the time to reset to")
            strategy = Strategy(timestamp_ms=browser.parse_time(target))
        else:
            raise CliError("choose where to move the offsets: earliest, latest, offset, "
                           "shift or datetime")
        plan = await call(plan_reset, group_id, strategy, specs)
        if form.get("confirm") != "yes":
            return page(request, "reset_plan.html", group_id=group_id, plan=plan, form=form)
        await call(apply_reset, group_id, plan.new)
        return redirect(f"/groups/{quote(group_id, safe='')}",
                        f"Reset {len(plan.new)} partition(s) of group {group_id}.")

    async def metrics(request: Request) -> Response:
        needle = request.query_params.get("q", "moldau_")
        if metrics_url is None:
            return page(request, "metrics.html", rows=None, q=needle)
        rows = await run_in_threadpool(scrape, metrics_url, needle, conn.timeout)
        return page(request, "metrics.html", rows=rows, q=needle, max_rows=MAX_ROWS)

    async def live(request: Request) -> Response:
        return page(request, "live.html", **_live_context())

    async def live_charts(request: Request) -> Response:
        return page(request, "live_charts.html", **_live_context())

    def _live_context() -> dict[str, Any]:
        series = {t: rates.in_rates(t) for t in rates.topics()}
        return {"series": series, "total": rates.total_in_rates(),
                "sample_error": rates.last_error}

    async def cli_error(request: Request, exc: Exception) -> Response:
        message = exc.format_message() if isinstance(exc, CliError) else str(exc)
        status = _status_of(exc, message)
        return page(request, "error.html", status=status, message=message)

    async def kafka_error(request: Request, exc: Exception) -> Response:
        message = as_cli_error(exc, "the cluster refused the request").format_message()
        return page(request, "error.html", status=502, message=message)

    routes = [
        Route("/", overview),
        Route("/topics", topics),
        Route("/topics/new", topic_new),
        Route("/topics/new", topic_create, methods=["POST"]),
        Route("/topics/{name}", topic),
        Route("/topics/{name}/config", topic_config, methods=["POST"]),
        Route("/topics/{name}/partitions", topic_partitions, methods=["POST"]),
        Route("/topics/{name}/delete", topic_delete, methods=["POST"]),
        Route("/topics/{name}/messages", messages),
        Route("/groups", groups),
        Route("/groups/{group}", group),
        Route("/groups/{group}/reset", group_reset, methods=["POST"]),
        Route("/live", live),
        Route("/metrics", metrics),
        Route("/live/charts", live_charts),
        Mount("/static", StaticFiles(directory=str(HERE / "static")), name="static"),
    ]
    return Starlette(routes=routes, exception_handlers={
        CliError: cli_error, KafkaException: kafka_error})
