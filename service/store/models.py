"""Tables. Everything a report needs is here; the report is a pure function of these rows."""

from __future__ import annotations

import secrets
from datetime import datetime
from typing import Any

from sqlalchemy import (
    JSON,
    BigInteger,
    Boolean,
    DateTime,
    Float,
    ForeignKey,
    Index,
    Integer,
    LargeBinary,
    String,
    Text,
    text,
)
from sqlalchemy.orm import DeclarativeBase, Mapped, mapped_column

from service.domain.status import TrialStatus

# A trial's `changed` is 0 until its status first changes; ix_trials_changed holds only
# those past it, and a query that names this very condition may read it.
CHANGED_SINCE_PLANNED = "changed > 0"
HAS_IMAGE = "image IS NOT NULL"
# A trial that hit a limit: nearly none do, and their `limits_hit` is JSON "[]" (or null).
# Written as the query writes it, term for term, so that SQLite's planner may read
# ix_trials_limits for it (it matches a partial index's terms literally, never a parameter).
HIT_A_LIMIT = "limits_hit IS NOT NULL AND CAST(limits_hit AS TEXT) NOT IN ('[]', 'null')"
FINISHED = "status = 'finished'"

# Ids of tables that grow with every trial. A box can outlive PostgreSQL's 32-bit serial
# (2**31 events); SQLite's INTEGER PRIMARY KEY is 64-bit already, and only that exact
# type makes it the autoincrementing rowid.
ROW_ID = BigInteger().with_variant(Integer, "sqlite")


class Base(DeclarativeBase):
    type_annotation_map = {dict[str, Any]: JSON, list[Any]: JSON}


class Suite(Base):
    __tablename__ = "suites"
    sha256: Mapped[str] = mapped_column(String(64), primary_key=True)
    name: Mapped[str] = mapped_column(String(200))
    source: Mapped[str] = mapped_column(Text)
    created_at: Mapped[datetime] = mapped_column(DateTime)
    # The format's kind (service/suites/registry.py). 'python': an examhall suite module, in
    # `source`, sha256 of that source. 'harbor': an uploaded tree of Harbor tasks
    # (service/suites/archives.py), its archive's bytes as uploaded in `archive` (source
    # empty), sha256 of those bytes.
    kind: Mapped[str] = mapped_column(String(20), default="python", server_default="python")
    archive: Mapped[bytes | None] = mapped_column(LargeBinary)


class SuiteUpload(Base):
    """Who uploaded a suite tree, and what they named it. The tree's bytes are stored once
    (suites), but whether a team has them, and by which name, is that team's alone: what
    POST /v1/suites answers a team depends on its own uploads, never on another's."""

    __tablename__ = "suite_uploads"
    # A team's id, or ADMIN_OWNER (service/store/suites.py) for admin tokens, which have none.
    owner: Mapped[str] = mapped_column(String(40), primary_key=True)
    sha256: Mapped[str] = mapped_column(ForeignKey("suites.sha256"), primary_key=True)
    name: Mapped[str] = mapped_column(String(200))
    created_at: Mapped[datetime] = mapped_column(DateTime)


class SuiteSet(Base):
    """A version of a named task set (`examhall suites push NAME@VERSION DIR`): an owner's
    name for a stored tree, immutable once pushed. A job naming `NAME` runs the newest."""

    __tablename__ = "suite_sets"
    # A team's id, or ADMIN_OWNER (service/store/suites.py), as for suite_uploads.
    owner: Mapped[str] = mapped_column(String(40), primary_key=True)
    name: Mapped[str] = mapped_column(String(100), primary_key=True)
    version: Mapped[str] = mapped_column(String(60), primary_key=True)
    sha256: Mapped[str] = mapped_column(ForeignKey("suites.sha256"))
    created_at: Mapped[datetime] = mapped_column(DateTime)


class SuiteSetShare(Base):
    """A team an admin shared an owner's set with: every version of it, later ones too."""

    __tablename__ = "suite_set_shares"
    owner: Mapped[str] = mapped_column(String(40), primary_key=True)
    name: Mapped[str] = mapped_column(String(100), primary_key=True)
    team_id: Mapped[str] = mapped_column(ForeignKey("teams.id"), primary_key=True)
    created_at: Mapped[datetime] = mapped_column(DateTime)


class Team(Base):
    __tablename__ = "teams"
    id: Mapped[str] = mapped_column(String(40), primary_key=True)
    name: Mapped[str] = mapped_column(String(100), unique=True)
    # Containers this team's trials may hold at once, on top of the box's own limit.
    max_containers: Mapped[int | None] = mapped_column(Integer)
    created_at: Mapped[datetime] = mapped_column(DateTime)
    # The egress policies its jobs may name, comma-separated; None: every policy of the box.
    egress: Mapped[str | None] = mapped_column(Text)
    # Its weight when teams take turns at the queue (service/store/queue.py); None: 1.
    share: Mapped[int | None] = mapped_column(Integer)


class Token(Base):
    """An API token, kept only as its sha256: the token itself is shown once, at creation."""

    __tablename__ = "tokens"
    id: Mapped[str] = mapped_column(String(40), primary_key=True)
    # None for an admin token, which belongs to no team and sees every team's jobs.
    team_id: Mapped[str | None] = mapped_column(ForeignKey("teams.id"))
    admin: Mapped[bool] = mapped_column(Boolean)
    sha256: Mapped[str] = mapped_column(String(64), unique=True)
    # The token's first characters, so an admin can tell tokens apart without the secret.
    prefix: Mapped[str] = mapped_column(String(16))
    created_at: Mapped[datetime] = mapped_column(DateTime)
    revoked_at: Mapped[datetime | None] = mapped_column(DateTime)


class WebSession(Base):
    """A signed-in browser. The cookie holds a random id; only its sha256 is kept, so the
    store cannot be read back into working cookies. The session stands for the token it was
    opened with (by that token's hash): revoking the token ends its sessions too."""

    __tablename__ = "web_sessions"
    sha256: Mapped[str] = mapped_column(String(64), primary_key=True)
    token_sha256: Mapped[str] = mapped_column(String(64))
    created_at: Mapped[datetime] = mapped_column(DateTime)
    expires_at: Mapped[datetime] = mapped_column(DateTime, index=True)


class Plane(Base):
    """A control plane using this store. Its trials are its own while it keeps beating."""

    __tablename__ = "planes"
    # The owner name it writes on its trials and containers: host:pid:random.
    owner: Mapped[str] = mapped_column(String(200), primary_key=True)
    started_at: Mapped[datetime] = mapped_column(DateTime)
    seen_at: Mapped[datetime] = mapped_column(DateTime)


class Job(Base):
    __tablename__ = "jobs"
    id: Mapped[str] = mapped_column(String(40), primary_key=True)
    # queued -> running -> finished, or cancelled from either of the first two
    status: Mapped[str] = mapped_column(String(20), index=True)
    # The submitting team; None for jobs an admin token submitted.
    team_id: Mapped[str | None] = mapped_column(ForeignKey("teams.id"), index=True)
    suite_sha256: Mapped[str] = mapped_column(ForeignKey("suites.sha256"))
    suite_name: Mapped[str] = mapped_column(String(200))
    # The validated request, as submitted (model, cases, rounds, limits, seed, ...).
    spec: Mapped[dict[str, Any]] = mapped_column(JSON)
    rounds: Mapped[int] = mapped_column(Integer)
    # The API accepts seeds up to 2**32 - 1; PostgreSQL's integer stops at 2**31 - 1.
    seed: Mapped[int] = mapped_column(BigInteger)
    max_infra_retries: Mapped[int] = mapped_column(Integer)
    planned: Mapped[int] = mapped_column(Integer)
    image: Mapped[str] = mapped_column(String(200))
    image_digest: Mapped[str | None] = mapped_column(String(100))
    service_version: Mapped[str] = mapped_column(String(40))
    created_at: Mapped[datetime] = mapped_column(DateTime)
    finished_at: Mapped[datetime | None] = mapped_column(DateTime)
    # Why the job ended without running its trials (e.g. an environment failed to build).
    error: Mapped[str | None] = mapped_column(Text)
    # At most this many of its trials run at once, box-wide; None: as the caps allow.
    concurrency: Mapped[int | None] = mapped_column(Integer)
    # Within its team, a job of higher priority is served first, then the older.
    priority: Mapped[int] = mapped_column(Integer, default=0, server_default="0")
    # While the job is `building`: each task's environment build, case id -> its state, as
    # the preparer last wrote it (service/scheduler/build_progress.py). On the job's row so
    # that the event stream of any control plane reads it with the job it reads anyway.
    builds: Mapped[dict[str, Any] | None] = mapped_column(JSON)


class JobCounts(Base):
    """A job's trials counted by their latest attempt (as `GET /v1/jobs/{id}` shows them),
    kept in the same transaction as every change of a trial's status, so reading a job never
    counts its trials. `version` goes up with every such change: the job's change marker
    (the event stream polls it, and reads only the trials whose `changed` is past it)."""

    __tablename__ = "job_counts"
    job_id: Mapped[str] = mapped_column(ForeignKey("jobs.id"), primary_key=True)
    attempts: Mapped[int] = mapped_column(Integer, default=0)
    queued: Mapped[int] = mapped_column(Integer, default=0)
    running: Mapped[int] = mapped_column(Integer, default=0)
    finished: Mapped[int] = mapped_column(Integer, default=0)
    passed: Mapped[int] = mapped_column(Integer, default=0)
    failed: Mapped[int] = mapped_column(Integer, default=0)
    error: Mapped[int] = mapped_column(Integer, default=0)
    version: Mapped[int] = mapped_column(BigInteger, default=0)
    # Whether the job's `JobTally` rows have been kept since it was submitted (`tallies`);
    # a job stored before them, or by a bulk load, is tallied from its trials when counted.
    tallied: Mapped[bool] = mapped_column(Boolean, default=False, server_default=text("false"))


class JobTally(Base):
    """What a report would otherwise read every trial's wide row for, kept per job with the
    counts: a judge's passes over the scored trials of a variant (`kind` "judge"), and the
    trials whose answers named a model (`kind` "model", variant "")."""

    __tablename__ = "job_tallies"
    job_id: Mapped[str] = mapped_column(ForeignKey("jobs.id"), primary_key=True)
    kind: Mapped[str] = mapped_column(String(16), primary_key=True)
    variant: Mapped[str] = mapped_column(String(100), primary_key=True)
    name: Mapped[str] = mapped_column(Text, primary_key=True)
    passed: Mapped[int] = mapped_column(Integer, default=0)
    count: Mapped[int] = mapped_column(Integer, default=0)


class Trial(Base):
    __tablename__ = "trials"
    __table_args__ = (
        Index("ix_trials_queue", "status", "job_id", "order", "attempt"),
        # Covers what a report reads of every trial, so a large job's report reads this
        # index, not its wide rows (judges, timings, final text).
        Index(
            "ix_trials_report",
            "job_id",
            "variant",
            "order",
            "attempt",
            "case_id",
            "round",
            "status",
            "outcome",
            "error_kind",
        ),
        # Only trials that ran in an image of their own (a task environment): the report's
        # record reads them without a pass over every trial of a job that has none.
        Index(
            "ix_trials_images",
            "job_id",
            "case_id",
            "variant",
            "image",
            "image_digest",
            sqlite_where=text(HAS_IMAGE),
            postgresql_where=text(HAS_IMAGE),
        ),
        # What a comparison's report reads of every finished trial (its outcome and
        # telemetry), so that it reads this index, not the wide rows. Only finished trials:
        # a job's planned (queued) rows, inserted by the thousand, add no entry. `status`
        # is a column too, for SQLite takes a partial index as covering only when it holds
        # the columns of the query's own condition.
        Index(
            "ix_trials_compared",
            "job_id",
            "variant",
            "order",
            "attempt",
            "case_id",
            "round",
            "status",
            "outcome",
            "error_kind",
            "model_returned",
            "tool_calls",
            "system_prompt_sha256",
            "input_tokens",
            "output_tokens",
            "latency_s",
            "cost_usd",
            sqlite_where=text(FINISHED),
            postgresql_where=text(FINISHED),
        ),
        # Only trials that hit a limit: a report reads them without a pass over every row.
        Index(
            "ix_trials_limits",
            "job_id",
            "variant",
            "order",
            "attempt",
            sqlite_where=text(HIT_A_LIMIT),
            postgresql_where=text(HIT_A_LIMIT),
        ),
        # Only trials that changed since they were planned: the event stream's reads
        # (`trials.started_trials`), and none of a new job's queued rows.
        Index(
            "ix_trials_changed",
            "job_id",
            "changed",
            sqlite_where=text(CHANGED_SINCE_PLANNED),
            postgresql_where=text(CHANGED_SINCE_PLANNED),
        ),
    )
    id: Mapped[str] = mapped_column(String(40), primary_key=True)
    job_id: Mapped[str] = mapped_column(ForeignKey("jobs.id"))
    case_id: Mapped[str] = mapped_column(String(200))
    variant: Mapped[str] = mapped_column(String(100))
    round: Mapped[int] = mapped_column(Integer)
    # Position in the job's plan; retries keep it and raise `attempt`.
    order: Mapped[int] = mapped_column(Integer)
    attempt: Mapped[int] = mapped_column(Integer, default=1)
    # queued -> running -> finished
    status: Mapped[str] = mapped_column(String(20))
    outcome: Mapped[str | None] = mapped_column(String(20))
    score: Mapped[float | None] = mapped_column(Float)
    error_kind: Mapped[str | None] = mapped_column(String(40))
    error_message: Mapped[str | None] = mapped_column(Text)
    failed_step: Mapped[str | None] = mapped_column(String(40))
    model_requested: Mapped[str | None] = mapped_column(String(200))
    model_returned: Mapped[str | None] = mapped_column(String(200))
    tool_calls: Mapped[int | None] = mapped_column(Integer)
    usage: Mapped[dict[str, Any] | None] = mapped_column(JSON)
    judges: Mapped[list[Any] | None] = mapped_column(JSON)
    timings: Mapped[dict[str, Any] | None] = mapped_column(JSON)
    final_text: Mapped[str | None] = mapped_column(Text)
    system_prompt_sha256: Mapped[str | None] = mapped_column(String(64))
    limits_hit: Mapped[list[Any] | None] = mapped_column(JSON)
    container_id: Mapped[str | None] = mapped_column(String(80))
    # The machine the sandbox ran on: a swarm node's name, or the engine's on one box.
    node: Mapped[str | None] = mapped_column(String(200))
    owner: Mapped[str | None] = mapped_column(String(200))
    started_at: Mapped[datetime | None] = mapped_column(DateTime)
    finished_at: Mapped[datetime | None] = mapped_column(DateTime)
    wall_s: Mapped[float | None] = mapped_column(Float)
    # The environment the trial ran in; None: the job's image.
    image: Mapped[str | None] = mapped_column(String(200))
    image_digest: Mapped[str | None] = mapped_column(String(100))
    # The job's change marker (`JobCounts.version`) when this row last changed status.
    changed: Mapped[int] = mapped_column(BigInteger, default=0, server_default="0")
    # The agent's telemetry a comparison's report reads of every trial, kept as columns
    # (ix_trials_compared holds them) beside the JSON they come from: `usage`'s tokens and
    # cost, and `timings`' run_agent (the agent's run time).
    input_tokens: Mapped[int | None] = mapped_column(BigInteger)
    output_tokens: Mapped[int | None] = mapped_column(BigInteger)
    latency_s: Mapped[float | None] = mapped_column(Float)
    cost_usd: Mapped[float | None] = mapped_column(Float)


def new_trial_id() -> str:
    # 64 random bits, as uuid4().hex[:16] gave (which drew 128 to keep 64): "trial-" and 16
    # hex digits. A job's planned trials have ids of their own (store/planned_trials.py).
    return f"trial-{secrets.token_hex(8)}"


def queued_row(
    job_id: str,
    case_id: str,
    variant: str,
    round_: int,
    order: int,
    attempt: int = 1,
    *,
    image: str | None = None,
    image_digest: str | None = None,
) -> dict[str, Any]:
    """`queued_trial`'s row: every column a new trial sets."""
    return {
        "id": new_trial_id(),
        "job_id": job_id,
        "case_id": case_id,
        "variant": variant,
        "round": round_,
        "order": order,
        "attempt": attempt,
        "status": TrialStatus.QUEUED,
        "image": image,
        "image_digest": image_digest,
        "changed": 0,
    }


def queued_trial(
    job_id: str,
    case_id: str,
    variant: str,
    round_: int,
    order: int,
    attempt: int = 1,
    *,
    image: str | None = None,
    image_digest: str | None = None,
) -> Trial:
    """A new trial row waiting for the scheduler: a planned trial or a retry of one; a task's
    trial names its environment's image."""
    row = queued_row(
        job_id, case_id, variant, round_, order, attempt, image=image, image_digest=image_digest
    )
    return Trial(**row)


class EnvironmentBuild(Base):
    """One build of a task environment, by the content hash of everything that went into
    it: a built one is reused by every job (and control plane) that needs it, a failed one
    keeps its log to show."""

    __tablename__ = "environment_builds"
    content_hash: Mapped[str] = mapped_column(String(64), primary_key=True)
    name: Mapped[str] = mapped_column(String(300))
    image: Mapped[str | None] = mapped_column(String(200))
    digest: Mapped[str | None] = mapped_column(String(100))
    # 'built' | 'failed'
    status: Mapped[str] = mapped_column(String(20))
    log: Mapped[str] = mapped_column(Text)
    started_at: Mapped[datetime] = mapped_column(DateTime)
    finished_at: Mapped[datetime | None] = mapped_column(DateTime)


class Event(Base):
    __tablename__ = "events"
    # A transcript is read by trial and seq, its key (no surrogate id: migration 0016).
    trial_id: Mapped[str] = mapped_column(ForeignKey("trials.id"), primary_key=True)
    seq: Mapped[int] = mapped_column(Integer, primary_key=True, autoincrement=False)
    type: Mapped[str] = mapped_column(String(20))
    payload: Mapped[dict[str, Any]] = mapped_column(JSON)


class Artifact(Base):
    __tablename__ = "artifacts"
    __table_args__ = (Index("ix_artifacts_trial_name", "trial_id", "name", unique=True),)
    id: Mapped[int] = mapped_column(ROW_ID, primary_key=True, autoincrement=True)
    trial_id: Mapped[str] = mapped_column(ForeignKey("trials.id"))
    name: Mapped[str] = mapped_column(String(200))
    sha256: Mapped[str] = mapped_column(String(64))
    size: Mapped[int] = mapped_column(Integer)
    content: Mapped[bytes] = mapped_column(LargeBinary)


# A sample not retired is its job's sample of record: one per job at a time.
OF_RECORD = "retired_at IS NULL"


class ReviewSample(Base):
    """A seeded, stratified sample of a job's scored trials for people to review
    (`service.review.sampling`); the drawn trial ids are kept so the queue stays as drawn.
    Drawing another retires it (`retired_at`); its reviews stay, but stop counting."""

    __tablename__ = "review_samples"
    __table_args__ = (
        # Two draws at once cannot both become the sample of record: the second one's insert
        # fails, and service/api/reviewing.py answers it 409.
        Index(
            "ix_review_samples_of_record",
            "job_id",
            unique=True,
            sqlite_where=text(OF_RECORD),
            postgresql_where=text(OF_RECORD),
        ),
    )
    id: Mapped[str] = mapped_column(String(40), primary_key=True)
    job_id: Mapped[str] = mapped_column(ForeignKey("jobs.id"), index=True)
    size: Mapped[int] = mapped_column(Integer)
    # Seeds up to 2**32 - 1, as a job's.
    seed: Mapped[int] = mapped_column(BigInteger)
    # The sampling algorithm's version, so a later change cannot silently redraw old samples.
    algorithm: Mapped[int] = mapped_column(Integer)
    trial_ids: Mapped[list[Any]] = mapped_column(JSON)
    created_by: Mapped[str] = mapped_column(String(100))
    created_at: Mapped[datetime] = mapped_column(DateTime)
    # Whether the judges' verdicts are hidden from a reviewer until they review the trial;
    # None: drawn before migration 0022, when nothing was hidden nor recorded.
    blind: Mapped[bool | None] = mapped_column(Boolean)
    retired_at: Mapped[datetime | None] = mapped_column(DateTime)


class Review(Base):
    """A person's verdict on one trial. Reviews are never changed: a revision is a new row,
    and the newest row of a trial is its review (the older ones are its history)."""

    __tablename__ = "reviews"
    __table_args__ = (Index("ix_reviews_job_trial", "job_id", "trial_id", "id"),)
    id: Mapped[int] = mapped_column(ROW_ID, primary_key=True, autoincrement=True)
    job_id: Mapped[str] = mapped_column(ForeignKey("jobs.id"))
    trial_id: Mapped[str] = mapped_column(ForeignKey("trials.id"))
    # 'pass' | 'fail'
    verdict: Mapped[str] = mapped_column(String(10))
    note: Mapped[str] = mapped_column(Text)
    # Who: the team of the token (or "admin"), the token's prefix (None for the box's
    # bootstrap admin token), whether it came over the API or the web UI, and the name the
    # reviewer gave, since a team's tokens are shared by its people.
    team: Mapped[str] = mapped_column(String(100))
    token_prefix: Mapped[str | None] = mapped_column(String(16))
    via: Mapped[str] = mapped_column(String(10))
    reviewer: Mapped[str] = mapped_column(String(100))
    created_at: Mapped[datetime] = mapped_column(DateTime)
    # The sample it was made in: agreement counts the sample of record's reviews only.
    sample_id: Mapped[str] = mapped_column(ForeignKey("review_samples.id"))
    # Whether the reviewer had the judges' verdict in view when saving it (a sample drawn
    # not blind, or a revision of their own earlier review); None before migration 0022.
    verdict_seen: Mapped[bool | None] = mapped_column(Boolean)
