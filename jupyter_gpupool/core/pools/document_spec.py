"""Pool and quota documents: their exact shapes, as :mod:`~jupyter_gpupool.core.documents.spec` records.

gpuctl's files load unchanged::

    kind: pool            # gpuctl also wrote `kind: resource`
    version: v0.1
    pool: {name: training-pool, description: "Large model training"}
    nodes:
      gpu-node-1: {gpu-type: A100-80G}    # or gpuType; "" = CPU-only node

Our extensions are optional extra sections of the same document (``selector``, ``access``,
``quota``, ``defaults``, ``limits``, ``platforms``, ``default-platform``, ``template``,
``placement``); ``kind: quota`` documents carry gpuctl's cluster-wide caps plus per-pool quotas
(``pools``) and the per-group default pool order (``default-pools``); ``kind: booking``
documents book GPUs for a window of time (:mod:`..time.bookings`). ``docs/pools.md`` is the
reference; :data:`POOL_DOCUMENT`, :data:`QUOTA_DOCUMENT` and :data:`BOOKING_DOCUMENT` below are
the exact shapes, and the
JSON Schema in ``schema/pool.schema.json`` is generated from them. They live apart from the
loader (:mod:`~jupyter_gpupool.core.pools.reading`) because the schema generator and the docs need the
shapes without the rules between documents.
"""

from __future__ import annotations

from ..documents.spec import (
    AnyValue,
    Bool,
    Enum,
    Field,
    Int,
    ListOf,
    MapOf,
    Number,
    Quantity,
    Record,
    Str,
)
from .model import PLACEMENTS
from .recut_policy import RECUT
from .time_specs import Clock, Date, LocalDateTime, TimeZone, Weekday

VERSION = "v0.1"
POOL_KINDS = ("pool", "resource")
QUOTA_KIND = "quota"

_GPUS = "A number of GPUs (a whole number, 0 or more)."

QUOTA_ENTRY = Record(
    description="A subject's share of the pool.",
    fields=(
        Field("guaranteed", Int(description="GPUs reserved for this subject in the pool.")),
        Field(
            "limit",
            Int(description="Hard cap on the subject's GPUs in the pool, borrowing included."),
        ),
    ),
)

POOL_QUOTA = Record(
    description="Per-pool quota: guarantees, limits and whether idle GPUs may be borrowed.",
    fields=(
        Field(
            "borrowing",
            Bool(
                description="Whether subjects may use idle GPUs beyond their guarantee "
                "(over quota; such servers can be reclaimed). Default true."
            ),
        ),
        Field(
            "user-default",
            Record(
                description="Quota of every user without an entry under 'users'. Its limit is "
                "the per-user cap on all of a user's GPUs in this pool.",
                fields=QUOTA_ENTRY.fields,
            ),
        ),
        Field("groups", MapOf(value=QUOTA_ENTRY, description="Quota per JupyterHub group.")),
        Field(
            "users",
            MapOf(
                value=QUOTA_ENTRY,
                description="Quota per JupyterHub user. The limit caps all of the user's GPUs "
                "in this pool.",
            ),
        ),
    ),
)

IDLE = Record(
    description="The idle-GPU policy: servers whose GPUs all stay under below_percent for "
    "'after' are warned, then stopped (or only reported).",
    fields=(
        Field(
            "below_percent",
            Number(description="GPU utilization (%) under which a GPU is idle. Default 5."),
        ),
        Field(
            "after",
            Str(syntax="duration", description="How long idle before the action. Default 2h."),
        ),
        Field(
            "warn",
            Str(
                syntax="duration",
                description="How long before the action the user is warned. Default 15m.",
            ),
        ),
        Field(
            "action",
            Enum(
                values=("stop", "report"),
                description="stop: stop the server through JupyterHub; report: only list it. "
                "Default stop.",
            ),
        ),
        Field(
            "exempt",
            Record(
                description="Users and groups whose servers the policy never touches.",
                fields=(
                    Field("users", ListOf(item=Str(nonempty=True), unique=True)),
                    Field("groups", ListOf(item=Str(nonempty=True), unique=True)),
                ),
            ),
        ),
    ),
)

MAX_RUNTIME = Record(
    description="How long a server with GPUs may run: after 'after' from its start it is "
    "stopped through JupyterHub, its user warned 'warn' before.",
    fields=(
        Field(
            "after",
            Str(syntax="duration", description="The longest run, such as 8h or 2d."),
            required=True,
        ),
        Field(
            "warn",
            Str(
                syntax="duration",
                description="How long before the stop the user is warned. Default 15m.",
            ),
        ),
        Field(
            "exempt",
            Record(
                description="Users and groups whose servers the limit never touches.",
                fields=(
                    Field("users", ListOf(item=Str(nonempty=True), unique=True)),
                    Field("groups", ListOf(item=Str(nonempty=True), unique=True)),
                ),
            ),
        ),
    ),
)

DEFAULTS = Record(
    description="CPU and memory requested for a server: fixed part plus a part per GPU.",
    fields=(
        Field("cpu", Quantity(description="CPU cores every server gets, e.g. 1 or 500m.")),
        Field("memory", Quantity(description="Memory every server gets, e.g. 4Gi.")),
        Field("cpu-per-gpu", Quantity(description="CPU cores added per GPU.")),
        Field("memory-per-gpu", Quantity(description="Memory added per GPU, e.g. 32Gi.")),
    ),
)

_TOLERATION = Record(
    fields=(
        Field("key", Str()),
        Field("operator", Enum(values=("Exists", "Equal"))),
        Field("value", Str()),
        Field("effect", Enum(values=("NoSchedule", "PreferNoSchedule", "NoExecute", ""))),
        Field("tolerationSeconds", Int()),
    )
)
_ENV_VAR = Record(
    fields=(
        Field("name", Str(nonempty=True), required=True),
        Field("value", Str()),
        Field("valueFrom", AnyValue()),
    )
)

TEMPLATE = Record(
    description="Pod settings merged in order (pool, then platform): mappings deep, lists of "
    "named items by name, later wins.",
    fields=(
        Field(
            "nodeSelector",
            MapOf(value=Str(syntax="label-value"), key_syntax="label-key"),
        ),
        Field("tolerations", ListOf(item=_TOLERATION)),
        Field("labels", MapOf(value=Str(syntax="label-value"), key_syntax="label-key")),
        Field("annotations", MapOf(value=Str(), key_syntax="label-key")),
        Field("env", ListOf(item=_ENV_VAR)),
        Field("image", Str(nonempty=True, description="Notebook image for this pool.")),
        Field(
            "resources",
            Record(
                fields=(
                    Field("requests", MapOf(value=Quantity())),
                    Field("limits", MapOf(value=Quantity())),
                )
            ),
        ),
    ),
)

POOL_SHAPES = ListOf(
    item=Record(
        fields=(
            Field(
                "id",
                Str(
                    syntax="label-value",
                    description="A shape's id: whole, mig-<profile>, shared-<n>, mps-<n>, hami-<n>.",
                ),
                required=True,
            ),
            Field("name", Str(nonempty=True, description="Its name on the spawn form.")),
            Field(
                "max-per-user",
                Int(minimum=1, description="Most servers of this shape one user may run here."),
            ),
            Field("max-runtime", MAX_RUNTIME),
        ),
    ),
    description="The shapes the pool offers, in the order the spawn form lists them (without "
    "it: every shape its nodes offer); a shape not listed is not admitted here.",
)

PLATFORM = Record(
    description="A GPU type inside the pool, with its own template and defaults.",
    fields=(
        Field(
            "gpu-type",
            Str(syntax="label-value", description="The nodes' GPU type."),
            required=True,
            aliases=("gpuType",),
        ),
        Field("description", Str(nullable=True)),
        Field("defaults", DEFAULTS),
        Field("template", TEMPLATE),
    ),
)


def _named(key: str, name_description: str) -> Field:
    """A document's ``KEY: {name, description}``, its name a label value (pools, bookings)."""
    name = Str(syntax="label-value", nonempty=True, description=name_description)
    fields = (Field("name", name, required=True), Field("description", Str(nullable=True)))
    return Field(key, Record(fields=fields), required=True)


POOL_DOCUMENT = Record(
    title="gpupool pool document",
    description="A gpuctl pool (kind: pool, version: v0.1) with optional gpupool extensions.",
    fields=(
        Field("kind", Enum(values=POOL_KINDS), required=True),
        Field("version", Enum(values=(VERSION,))),
        _named("pool", "Pool name; also the value of the nodes' pool label."),
        Field(
            "nodes",
            MapOf(
                key_syntax="node-name",
                description="Nodes of the pool by hostname; creating the pool labels them.",
                value=Record(
                    fields=(
                        Field(
                            "gpu-type",
                            Str(
                                syntax="label-value",
                                description='GPU type of the node ("" for a CPU-only node).',
                            ),
                            required=True,
                            aliases=("gpuType",),
                        ),
                    )
                ),
            ),
        ),
        Field(
            "selector",
            MapOf(
                value=Str(syntax="label-value"),
                key_syntax="label-key",
                description="Node labels that make a node a member, instead of the pool label "
                "(as Run:ai lets any label key and value define a pool).",
            ),
        ),
        Field(
            "access",
            Record(
                description="Who may use the pool; without it, everyone.",
                fields=(
                    Field("users", ListOf(item=Str(nonempty=True), unique=True)),
                    Field("groups", ListOf(item=Str(nonempty=True), unique=True)),
                ),
            ),
        ),
        Field("quota", POOL_QUOTA),
        Field("idle", IDLE),
        Field("max-runtime", MAX_RUNTIME),
        Field("shapes", POOL_SHAPES),
        Field("recut", RECUT),
        Field("defaults", DEFAULTS),
        Field(
            "limits",
            Record(
                description="What a single server may ask for in this pool.",
                fields=(
                    Field("max-gpus", Int(description="Most GPUs one server may use.")),
                    Field("min-gpus", Int(description="Fewest GPUs one server may use.")),
                    Field(
                        "allowed-gpus",
                        ListOf(item=Int(), unique=True, description="The GPU counts allowed."),
                    ),
                ),
            ),
        ),
        Field(
            "platforms",
            MapOf(
                value=PLATFORM,
                key_syntax="label-value",
                description="GPU types inside the pool (OSMO platforms).",
            ),
        ),
        Field(
            "default-platform",
            Str(
                syntax="label-value",
                description="Platform used when a request names no GPU type.",
            ),
        ),
        Field("template", TEMPLATE),
        Field(
            "placement",
            Enum(
                values=PLACEMENTS,
                description="binpack fills the fullest node that fits; spread the emptiest.",
            ),
        ),
    ),
)

_CAP = Record(
    description="gpuctl quota entry; only gpu is enforced by gpupool.",
    fields=(
        Field("cpu", Quantity()),
        Field("memory", Quantity()),
        Field("gpu", Int(allow_str=True, description=_GPUS)),
    ),
)

BUDGET = Record(
    description="GPU-hours a user or a group may use over a rolling window. Give either 'user' "
    "or 'group'.",
    fields=(
        Field("user", Str(nonempty=True, description="The JupyterHub user it is for.")),
        Field(
            "group",
            Str(
                nonempty=True,
                description="The JupyterHub group it is for: it counts the servers charged to "
                "the group.",
            ),
        ),
        Field(
            "gpu_hours",
            Number(description="GPU-hours over the window (a GPU for an hour is 1)."),
            required=True,
        ),
        Field(
            "window",
            Str(
                syntax="window",
                description="The rolling window: hours or days, such as 24h or 30d. Default 30d.",
            ),
        ),
        Field(
            "pools",
            ListOf(
                item=Str(nonempty=True),
                unique=True,
                description="Count only servers in these pools (default: all pools).",
            ),
        ),
        Field(
            "on_exhausted",
            Enum(
                values=("stop", "report"),
                description="What happens to the running servers it pays for once it is spent: "
                "stop (warned, then stopped after the service's budget_grace) or report (warned "
                "only). Default report (stop when the service's stop_over_budget is set).",
            ),
        ),
        Field(
            "warn_percent",
            Number(
                description="The share spent (%) at which the users of the servers it pays for "
                "are warned. Default: the service's budget_warn_percent (90)."
            ),
        ),
    ),
)

QUOTA_DOCUMENT = Record(
    title="gpupool quota document",
    description="A gpuctl quota (kind: quota, version: v0.1) with optional gpupool extensions.",
    fields=(
        Field("kind", Enum(values=(QUOTA_KIND,)), required=True),
        Field("version", Enum(values=(VERSION,))),
        Field(
            "quota",
            Record(
                fields=(
                    Field("name", Str(nonempty=True), required=True),
                    Field("description", Str(nullable=True)),
                )
            ),
            required=True,
        ),
        Field(
            "namespace",
            MapOf(
                value=_CAP,
                description="gpuctl namespaces; each caps the JupyterHub group of that name "
                "across all pools.",
            ),
        ),
        Field(
            "users",
            MapOf(value=_CAP, description="Caps one JupyterHub user across all pools."),
        ),
        Field("default", _CAP),
        Field(
            "pools",
            MapOf(value=POOL_QUOTA, description="Per-pool quota, as a pool's 'quota' section."),
        ),
        Field(
            "default-pools",
            Record(
                description="Pool priority lists for users who choose none.",
                fields=(
                    Field(
                        "groups",
                        MapOf(value=ListOf(item=Str(nonempty=True), unique=True)),
                    ),
                    Field("fallback", ListOf(item=Str(nonempty=True), unique=True)),
                ),
            ),
        ),
        Field(
            "budgets",
            ListOf(
                item=BUDGET,
                description="GPU-hour budgets: a server is not started for a subject whose "
                "budget is spent.",
            ),
        ),
    ),
)

BOOKING_KIND = "booking"

_WEEKLY = Record(
    description="The same hours on some weekdays, from 'from' to 'until'.",
    fields=(
        Field(
            "days",
            ListOf(item=Weekday(), unique=True, description="Weekdays: mon, tue, ... sun."),
            required=True,
        ),
        Field("start", Clock(description='Local start time, quoted: "10:00".'), required=True),
        Field(
            "end",
            Clock(description='Local end time, the same day, after the start: "12:00".'),
            required=True,
        ),
    ),
)

_ONCE = Record(
    description="One stretch of local time.",
    fields=(
        Field("start", LocalDateTime(description='"2027-01-12T10:00"'), required=True),
        Field(
            "end", LocalDateTime(description='"2027-01-12T12:00", after the start'), required=True
        ),
    ),
)

BOOKING_WINDOW = Record(
    description="When the booking holds: 'once' or 'weekly', in an IANA time zone. Local "
    "times are the zone's clocks, daylight saving included.",
    fields=(
        Field("once", _ONCE),
        Field("weekly", _WEEKLY),
        Field("from", Date(description="First day of a weekly booking (inclusive).")),
        Field("until", Date(description="Last day of a weekly booking (inclusive).")),
        Field("timezone", TimeZone(description="Such as Europe/Berlin."), required=True),
    ),
)

BOOKING_DOCUMENT = Record(
    title="gpupool booking document",
    description="GPUs of a shape in a pool for a group or users during a window (kind: "
    "booking): in its window its members are admitted first and its unused GPUs are only lent.",
    fields=(
        Field("kind", Enum(values=(BOOKING_KIND,)), required=True),
        Field("version", Enum(values=(VERSION,))),
        _named("booking", "Unique among bookings."),
        Field("pool", Str(nonempty=True, description="The pool booked."), required=True),
        Field(
            "shape",
            Str(
                syntax="label-value",
                description="The shape booked: whole (the default), mig-<profile>, "
                "shared-<n>, mps-<n>, hami-<n>.",
            ),
        ),
        Field("gpus", Int(minimum=1, description="How many units of the shape."), required=True),
        Field("groups", ListOf(item=Str(nonempty=True), unique=True)),
        Field("users", ListOf(item=Str(nonempty=True), unique=True)),
        Field("window", BOOKING_WINDOW, required=True),
    ),
)
