"""Prometheus metrics, in the text exposition format (0.0.4), read from the store.

Counts come from the database rather than from counters in this process, so they survive a
restart and agree across control planes sharing one store. Only `examhall_containers_running`
is this process's own.
"""

from __future__ import annotations

from sqlalchemy.orm import Session

from service.backends.base import NodeStatus
from service.domain.status import JobStatus, Outcome, TrialStatus
from service.environments.cache import CacheState
from service.store import metrics as stored

# Trial wall times run from under a second (a trivial trial) to the longest agent timeouts.
DURATION_BUCKETS = (0.5, 1.0, 2.5, 5.0, 10.0, 30.0, 60.0, 300.0, 1800.0)


def _escaped(value: str) -> str:
    # The exposition format's escapes in label values (a node's name is the operator's).
    return value.replace("\\", "\\\\").replace('"', '\\"').replace("\n", "\\n")


def _line(name: str, value: float, **labels: str) -> str:
    # repr keeps every digit of a float; Prometheus parses it as Go's ParseFloat does.
    number = repr(float(value)) if isinstance(value, float) else str(int(value))
    if labels:
        inner = ",".join(f'{k}="{_escaped(v)}"' for k, v in labels.items())
        return f"{name}{{{inner}}} {number}"
    return f"{name} {number}"


NODE_STATES = ("ready", "drained", "down")


def render(
    session: Session,
    containers_running: int,
    nodes: list[NodeStatus],
    image_cache: CacheState | None = None,
) -> str:
    lines: list[str] = []

    def family(name: str, kind: str, help_text: str) -> None:
        lines.extend([f"# HELP {name} {help_text}", f"# TYPE {name} {kind}"])

    by_outcome = stored.finished_by_outcome(session)
    family("examhall_trials_total", "counter", "Finished trial attempts, by outcome.")
    for outcome in Outcome:
        lines.append(
            _line("examhall_trials_total", by_outcome.get(outcome, 0), outcome=outcome.value)
        )

    by_status = stored.active_by_status(session)
    family("examhall_queue_depth", "gauge", "Trials waiting for a container.")
    lines.append(_line("examhall_queue_depth", by_status.get(TrialStatus.QUEUED, 0)))
    teams = stored.queue_by_team(session)
    family("examhall_team_queue_depth", "gauge", "Trials waiting, by team (served by share).")
    for team in teams:
        lines.append(_line("examhall_team_queue_depth", team.queued, team=team.team))
    family("examhall_team_trials_running", "gauge", "Trials running, by team.")
    for team in teams:
        lines.append(_line("examhall_team_trials_running", team.running, team=team.team))
    family("examhall_team_share", "gauge", "Each waiting or running team's share of the turns.")
    for team in teams:
        lines.append(_line("examhall_team_share", team.share, team=team.team))
    family("examhall_trials_running", "gauge", "Trials running, across every control plane.")
    lines.append(_line("examhall_trials_running", by_status.get(TrialStatus.RUNNING, 0)))
    family("examhall_containers_running", "gauge", "Sandbox containers this control plane runs.")
    lines.append(_line("examhall_containers_running", containers_running))

    # The backend's machines, as it sees them now (not the store's: a node is not a row).
    family("examhall_nodes", "gauge", "Machines trials run on, by state.")
    for state in NODE_STATES:
        lines.append(_line("examhall_nodes", sum(n.state == state for n in nodes), state=state))
    family("examhall_node_state", "gauge", "Each machine's state: 1 for the one it is in.")
    for node in nodes:
        for state in NODE_STATES:
            lines.append(
                _line("examhall_node_state", int(node.state == state), node=node.name, state=state)
            )
    family("examhall_node_trials", "gauge", "examhall's sandboxes running on each machine.")
    for node in nodes:
        lines.append(_line("examhall_node_trials", node.trials, node=node.name))

    jobs = stored.jobs_by_status(session)
    family("examhall_jobs", "gauge", "Jobs, by status.")
    for status in JobStatus:
        lines.append(_line("examhall_jobs", jobs.get(status, 0), status=status.value))

    if image_cache is not None:
        family("examhall_image_cache_bytes", "gauge", "Disk of built environments and agents.")
        lines.append(_line("examhall_image_cache_bytes", image_cache.bytes))
        family("examhall_image_cache_images", "gauge", "Built environments and agents kept.")
        lines.append(_line("examhall_image_cache_images", image_cache.images))
        if image_cache.limit_bytes is not None:
            family("examhall_image_cache_limit_bytes", "gauge", "EXAMHALL_IMAGE_CACHE_GB.")
            lines.append(_line("examhall_image_cache_limit_bytes", image_cache.limit_bytes))
        family("examhall_image_cache_removed_total", "counter", "Images removed by last use.")
        lines.append(_line("examhall_image_cache_removed_total", image_cache.removed))

    durations = stored.finished_durations(session, DURATION_BUCKETS)
    count, total, cumulative = durations.count, durations.total_s, durations.cumulative
    family("examhall_trial_duration_seconds", "histogram", "Wall time of finished trials.")
    for bucket, value in zip(DURATION_BUCKETS, cumulative, strict=True):
        lines.append(_line("examhall_trial_duration_seconds_bucket", value or 0, le=f"{bucket:g}"))
    lines.append(_line("examhall_trial_duration_seconds_bucket", count, le="+Inf"))
    lines.append(_line("examhall_trial_duration_seconds_sum", total))
    lines.append(_line("examhall_trial_duration_seconds_count", count))
    return "\n".join(lines) + "\n"
