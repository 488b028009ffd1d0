"""The migrations, every one of them, on SQLite and PostgreSQL."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import pytest
from alembic import command
from alembic.autogenerate import compare_metadata
from alembic.config import Config
from alembic.migration import MigrationContext
from alembic.script import ScriptDirectory
from sqlalchemy import Connection, Engine, inspect, text
from sqlalchemy.exc import IntegrityError

from service.store.db import MIGRATIONS, make_engine, migrate
from service.store.models import Base


def _config() -> Config:
    config = Config()
    config.set_main_option("script_location", str(MIGRATIONS))
    return config


def _version(engine: Engine) -> str | None:
    with engine.connect() as connection:
        return MigrationContext.configure(connection).get_current_revision()


def test_migrations_reach_head_and_build_exactly_the_models(engine: Engine) -> None:
    assert _version(engine) == ScriptDirectory.from_config(_config()).get_current_head()
    assert set(inspect(engine).get_table_names()) == {*Base.metadata.tables, "alembic_version"}
    # Columns, types, nullability, indexes, uniques and foreign keys as the models declare:
    # a model change without its migration (or one PostgreSQL reads differently) shows here.
    with engine.connect() as connection:
        assert compare_metadata(MigrationContext.configure(connection), Base.metadata) == []


def test_migrating_again_is_a_no_op_and_down_and_up_works(engine: Engine) -> None:
    head = _version(engine)
    migrate(engine)
    assert _version(engine) == head
    config = _config()
    with engine.begin() as connection:
        config.attributes["connection"] = connection
        command.downgrade(config, "base")
    assert set(inspect(engine).get_table_names()) == {"alembic_version"}
    migrate(engine)
    assert _version(engine) == head
    with engine.connect() as connection:
        assert connection.execute(text("SELECT count(*) FROM trials")).scalar_one() == 0


MIGRATE_AT_GO = """
import sys, time
from pathlib import Path
from service.store.db import make_engine, migrate
while not Path(sys.argv[2]).exists():
    time.sleep(0.002)
migrate(make_engine(sys.argv[1]))
"""


def test_control_planes_starting_together_migrate_one_after_the_other(
    database_url: str, tmp_path: Path
) -> None:
    go = tmp_path / "go"
    processes = [
        subprocess.Popen(
            [sys.executable, "-c", MIGRATE_AT_GO, database_url, str(go)],
            stdout=subprocess.PIPE,
            stderr=subprocess.STDOUT,
            text=True,
        )
        for _ in range(3)
    ]
    go.touch()
    outputs = [process.communicate(timeout=120)[0] for process in processes]
    assert [p.returncode for p in processes] == [0, 0, 0], "\n".join(outputs)[-3000:]
    engine = make_engine(database_url)
    try:
        assert _version(engine) == ScriptDirectory.from_config(_config()).get_current_head()
    finally:
        engine.dispose()


def test_0008_marks_existing_suites_python_and_adds_what_environments_need(
    database_url: str,
) -> None:
    """A store at 0007 with a suite and a job in it: 0008 keeps them, makes the suite a
    'python' one, and down again drops exactly what it added."""
    engine = make_engine(database_url)
    config = _config()
    try:
        with engine.begin() as connection:
            config.attributes["connection"] = connection
            command.upgrade(config, "0007")
            connection.execute(
                text(
                    "INSERT INTO suites (sha256, name, source, created_at) "
                    "VALUES ('ab', 'smoke', 'CASES = []', '2024-01-01 00:00:00')"
                )
            )
            command.upgrade(config, "0008")
        with engine.connect() as connection:
            row = connection.execute(text("SELECT kind, archive FROM suites")).one()
            assert tuple(row) == ("python", None)
        columns = {
            table: {c["name"] for c in inspect(engine).get_columns(table)}
            for table in ("suites", "jobs", "trials")
        }
        assert {"kind", "archive"} <= columns["suites"]
        assert "error" in columns["jobs"]
        assert {"image", "image_digest"} <= columns["trials"]
        builds = {c["name"]: c for c in inspect(engine).get_columns("environment_builds")}
        assert set(builds) == {
            "content_hash",
            "name",
            "image",
            "digest",
            "status",
            "log",
            "started_at",
            "finished_at",
        }
        assert inspect(engine).get_pk_constraint("environment_builds")["constrained_columns"] == [
            "content_hash"
        ]
        with engine.begin() as connection:
            config.attributes["connection"] = connection
            command.downgrade(config, "0007")
        assert "environment_builds" not in inspect(engine).get_table_names()
        assert "kind" not in {c["name"] for c in inspect(engine).get_columns("suites")}
        with engine.connect() as connection:
            assert connection.execute(text("SELECT name FROM suites")).scalar_one() == "smoke"
    finally:
        engine.dispose()


def _store_a_running_job(connection: Connection, *, planned: int) -> None:
    """A suite and a running job 'job-1' of it, as an older revision's tables hold them."""
    connection.execute(
        text(
            "INSERT INTO suites (sha256, name, source, created_at) "
            "VALUES ('ab', 'smoke', 'CASES = []', '2024-01-01 00:00:00')"
        )
    )
    connection.execute(
        text(
            "INSERT INTO jobs (id, status, suite_sha256, suite_name, spec, rounds, "
            "seed, max_infra_retries, planned, image, service_version, created_at) "
            "VALUES ('job-1', 'running', 'ab', 'smoke', '{}', 1, 0, 1, :planned, 'img', "
            "'t', '2024-01-01 00:00:00')"
        ),
        {"planned": planned},
    )


def test_0010_counts_the_existing_jobs_by_their_latest_attempts(database_url: str) -> None:
    """A store at 0009 with a job whose trials include a retried attempt: 0010 counts it as
    the API used to count its trials, marks every trial unchanged since (0), and down again
    drops what it added."""
    engine = make_engine(database_url)
    config = _config()
    trial = (
        'INSERT INTO trials (id, job_id, case_id, variant, round, "order", attempt, status, '
        "outcome) VALUES (:id, 'job-1', 'c', 'v', 1, :order, :attempt, :status, :outcome)"
    )
    try:
        with engine.begin() as connection:
            config.attributes["connection"] = connection
            command.upgrade(config, "0009")
            _store_a_running_job(connection, planned=4)
            for values in (
                ("t1", 0, 1, "finished", "error"),  # retried:
                ("t2", 0, 2, "finished", "passed"),  # its latest attempt passed
                ("t3", 1, 1, "finished", "failed"),
                ("t4", 2, 1, "running", None),
                ("t5", 3, 1, "finished", "error"),  # retried, the retry queued
                ("t6", 3, 2, "queued", None),
            ):
                keys = ("id", "order", "attempt", "status", "outcome")
                connection.execute(text(trial), dict(zip(keys, values, strict=True)))
            command.upgrade(config, "0010")
        with engine.connect() as connection:
            row = connection.execute(
                text(
                    "SELECT attempts, queued, running, finished, passed, failed, error "
                    "FROM job_counts WHERE job_id = 'job-1'"
                )
            ).one()
            assert tuple(row) == (6, 1, 1, 2, 1, 1, 0)
            changed = connection.execute(text("SELECT DISTINCT changed FROM trials")).all()
            assert [tuple(r) for r in changed] == [(0,)]
        indexes = {i["name"] for i in inspect(engine).get_indexes("trials")}
        assert {"ix_trials_report", "ix_trials_changed"} <= indexes
        with engine.begin() as connection:
            config.attributes["connection"] = connection
            command.downgrade(config, "0009")
        assert "job_counts" not in inspect(engine).get_table_names()
        assert "changed" not in {c["name"] for c in inspect(engine).get_columns("trials")}
        with engine.connect() as connection:
            assert connection.execute(text("SELECT COUNT(*) FROM trials")).scalar_one() == 6
    finally:
        engine.dispose()


def test_0015_fills_the_telemetry_columns_from_the_json_and_indexes_finished_trials(
    database_url: str,
) -> None:
    """A store at 0014 with finished trials whose telemetry is only in `usage` and
    `timings` JSON: 0015 copies it into the columns a comparison's report reads (as the
    report read it from the JSON), a trial without it stays empty, and down again drops
    the columns and the index."""
    engine = make_engine(database_url)
    config = _config()
    trial = (
        'INSERT INTO trials (id, job_id, case_id, variant, round, "order", attempt, status, '
        "outcome, usage, timings) VALUES (:id, 'job-1', 'c', 'v', 1, :order, 1, :status, "
        ":outcome, :usage, :timings)"
    )
    try:
        with engine.begin() as connection:
            config.attributes["connection"] = connection
            command.upgrade(config, "0014")
            _store_a_running_job(connection, planned=3)
            usage = '{"input_tokens": 1200, "output_tokens": 34, "requests": 2, "cost_usd": 0.5}'
            for values in (
                ("t1", 0, "finished", "passed", usage, '{"run_agent": 2.25, "judge": 0.01}'),
                ("t2", 1, "finished", "error", None, None),  # an infra error: nothing measured
                ("t3", 2, "queued", None, None, None),
            ):
                keys = ("id", "order", "status", "outcome", "usage", "timings")
                connection.execute(text(trial), dict(zip(keys, values, strict=True)))
            command.upgrade(config, "0015")
        with engine.connect() as connection:
            rows = connection.execute(
                text(
                    "SELECT id, input_tokens, output_tokens, latency_s, cost_usd FROM trials "
                    "ORDER BY id"
                )
            ).all()
        assert [tuple(row) for row in rows] == [
            ("t1", 1200, 34, 2.25, 0.5),
            ("t2", None, None, None, None),
            ("t3", None, None, None, None),
        ]
        assert "ix_trials_compared" in {i["name"] for i in inspect(engine).get_indexes("trials")}
        with engine.begin() as connection:
            config.attributes["connection"] = connection
            command.downgrade(config, "0014")
        columns = {c["name"] for c in inspect(engine).get_columns("trials")}
        assert not {"input_tokens", "output_tokens", "latency_s", "cost_usd"} & columns
        indexes = {i["name"] for i in inspect(engine).get_indexes("trials")}
        assert "ix_trials_compared" not in indexes
        with engine.connect() as connection:
            assert connection.execute(text("SELECT COUNT(*) FROM trials")).scalar_one() == 3
    finally:
        engine.dispose()


def test_0016_keys_events_by_trial_and_seq_and_keeps_them(database_url: str) -> None:
    """A store at 0015 with a transcript: 0016 keeps every event as it was, keyed by (trial,
    seq) without the id, still refusing a second event of one seq; down again numbers them
    with an id and brings back the unique index."""
    engine = make_engine(database_url)
    config = _config()
    event = (
        "INSERT INTO events (trial_id, seq, type, payload) VALUES ('t1', :seq, 'lifecycle', "
        ":payload)"
    )
    payloads = [(seq, f'{{"step": "s{seq}"}}') for seq in (1, 2, 3)]
    try:
        with engine.begin() as connection:
            config.attributes["connection"] = connection
            command.upgrade(config, "0015")
            _store_a_running_job(connection, planned=1)
            connection.execute(
                text(
                    'INSERT INTO trials (id, job_id, case_id, variant, round, "order", '
                    "attempt, status) VALUES ('t1', 'job-1', 'c', 'v', 1, 0, 1, 'running')"
                )
            )
            for seq, payload in payloads:
                connection.execute(text(event), {"seq": seq, "payload": payload})
            command.upgrade(config, "0016")
        assert inspect(engine).get_pk_constraint("events")["constrained_columns"] == [
            "trial_id",
            "seq",
        ]
        assert "id" not in {c["name"] for c in inspect(engine).get_columns("events")}
        assert [i["name"] for i in inspect(engine).get_indexes("events")] == []
        with engine.connect() as connection:
            stored = connection.execute(
                text("SELECT seq, CAST(payload AS TEXT) FROM events ORDER BY seq")
            ).all()
            assert [tuple(row) for row in stored] == payloads
        with pytest.raises(IntegrityError), engine.begin() as connection:
            connection.execute(text(event), {"seq": 2, "payload": "{}"})
        with engine.begin() as connection:
            config.attributes["connection"] = connection
            command.downgrade(config, "0015")
        assert inspect(engine).get_pk_constraint("events")["constrained_columns"] == ["id"]
        indexes = {i["name"]: i for i in inspect(engine).get_indexes("events")}
        assert indexes["ix_events_trial_seq"]["unique"]
        with engine.connect() as connection:
            ids = connection.execute(text("SELECT id FROM events")).scalars().all()
        assert len(set(ids)) == 3 and None not in ids
        with engine.begin() as connection:  # the id's sequence goes on from there
            connection.execute(text(event), {"seq": 4, "payload": "{}"})
    finally:
        engine.dispose()


def test_0017_gives_each_team_that_ran_a_tree_its_upload(database_url: str) -> None:
    """A store at 0016 with a tree two teams and an admin ran jobs on, and one no job used:
    0017 records an upload per team (admins as one) under its first job's name, none for the
    unused tree, and down again drops the table and keeps the trees."""
    engine = make_engine(database_url)
    config = _config()
    tree = (
        "INSERT INTO suites (sha256, name, source, kind, archive, created_at) "
        "VALUES (:sha, :name, '', 'harbor', :data, '2024-01-01 00:00:00')"
    )
    job = (
        "INSERT INTO jobs (id, status, team_id, suite_sha256, suite_name, spec, rounds, seed, "
        "max_infra_retries, planned, image, service_version, created_at) VALUES (:id, "
        "'finished', :team, :sha, :name, '{}', 1, 0, 1, 0, 'img', 't', :at)"
    )
    try:
        with engine.begin() as connection:
            config.attributes["connection"] = connection
            command.upgrade(config, "0016")
            for team in ("team-blue", "team-red"):
                connection.execute(
                    text(
                        "INSERT INTO teams (id, name, created_at) "
                        "VALUES (:id, :id, '2024-01-01 00:00:00')"
                    ),
                    {"id": team},
                )
            connection.execute(text(tree), {"sha": "aa", "name": "first", "data": b"x"})
            connection.execute(text(tree), {"sha": "bb", "name": "unused", "data": b"y"})
            for values in (
                ("j1", "team-blue", "blue-later", "2024-01-03 00:00:00"),
                ("j2", "team-blue", "blue-first", "2024-01-02 00:00:00"),
                ("j3", "team-red", "red", "2024-01-02 00:00:00"),
                ("j4", None, "admins", "2024-01-04 00:00:00"),
            ):
                connection.execute(
                    text(job),
                    dict(zip(("id", "team", "name", "at"), values, strict=True)) | {"sha": "aa"},
                )
            command.upgrade(config, "0017")
        with engine.connect() as connection:
            uploads = connection.execute(
                text("SELECT owner, sha256, name FROM suite_uploads ORDER BY owner")
            ).all()
        assert [tuple(row) for row in uploads] == [
            ("admin", "aa", "admins"),
            ("team-blue", "aa", "blue-first"),
            ("team-red", "aa", "red"),
        ]
        with engine.begin() as connection:
            config.attributes["connection"] = connection
            command.downgrade(config, "0016")
        assert "suite_uploads" not in inspect(engine).get_table_names()
        with engine.connect() as connection:
            assert connection.execute(text("SELECT count(*) FROM suites")).scalar_one() == 2
    finally:
        engine.dispose()


def test_0022_makes_each_jobs_newest_sample_its_sample_of_record(database_url: str) -> None:
    """A store at 0021 with a job sampled twice and reviewed in both samples, and a job
    sampled once: 0022 keeps what agreement counted (every review of a trial of any sample),
    in one sample of record per job, the newest, holding every sampled trial in plan order;
    the older sample is retired when the newer was drawn; blindness is unknown (null); and
    down again drops what it added and keeps the rows."""
    engine = make_engine(database_url)
    config = _config()
    trial = (
        'INSERT INTO trials (id, job_id, case_id, variant, round, "order", attempt, status, '
        "outcome) VALUES (:id, 'job-1', :id, 'v', 1, :order, 1, 'finished', 'passed')"
    )
    sample = (
        "INSERT INTO review_samples (id, job_id, size, seed, algorithm, trial_ids, "
        "created_by, created_at) VALUES (:id, 'job-1', 2, :seed, 1, :trials, 'red', :at)"
    )
    review = (
        "INSERT INTO reviews (job_id, trial_id, verdict, note, team, token_prefix, via, "
        "reviewer, created_at) VALUES ('job-1', :trial, 'pass', '', 'red', NULL, 'api', "
        "'ann', '2024-01-05 00:00:00')"
    )
    try:
        with engine.begin() as connection:
            config.attributes["connection"] = connection
            command.upgrade(config, "0021")
            _store_a_running_job(connection, planned=4)
            for order, trial_id in enumerate(("t0", "t1", "t2", "t3")):
                connection.execute(text(trial), {"id": trial_id, "order": order})
            for values in (
                ("s-old", 1, '["t3", "t1"]', "2024-01-02 00:00:00"),
                ("s-new", 2, '["t2", "t1"]', "2024-01-03 00:00:00"),
            ):
                keys = ("id", "seed", "trials", "at")
                connection.execute(text(sample), dict(zip(keys, values, strict=True)))
            for trial_id in ("t3", "t1", "t2"):
                connection.execute(text(review), {"trial": trial_id})
            command.upgrade(config, "0022")
        with engine.connect() as connection:
            samples = connection.execute(
                text("SELECT id, trial_ids, blind, retired_at FROM review_samples ORDER BY id")
            ).all()
            reviews = connection.execute(
                text("SELECT DISTINCT sample_id, verdict_seen FROM reviews")
            ).all()
        by_id = {row[0]: row for row in samples}
        trials = by_id["s-new"][1]
        assert (json.loads(trials) if isinstance(trials, str) else trials) == ["t1", "t2", "t3"]
        assert by_id["s-new"][2:] == (None, None)  # blindness unknown, of record
        assert str(by_id["s-old"][3]).startswith("2024-01-03 00:00:00")
        assert [tuple(row) for row in reviews] == [("s-new", None)]
        # One sample of record per job: a second one not retired is refused.
        with pytest.raises(IntegrityError), engine.begin() as connection:
            connection.execute(text("UPDATE review_samples SET retired_at = NULL"))
        with engine.begin() as connection:
            config.attributes["connection"] = connection
            command.downgrade(config, "0021")
        columns = {c["name"] for c in inspect(engine).get_columns("reviews")}
        assert not {"sample_id", "verdict_seen"} & columns
        with engine.connect() as connection:
            assert connection.execute(text("SELECT count(*) FROM reviews")).scalar_one() == 3
            assert connection.execute(text("SELECT count(*) FROM review_samples")).scalar_one() == 2
    finally:
        engine.dispose()
