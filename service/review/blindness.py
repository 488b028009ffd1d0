"""Blind review: when a reviewer may see what the judges said of a sampled trial.

In a blind sample a reviewer sees the task, the transcript and the workspace's artifacts,
and the judges' verdict (outcome, score, each judge's detail, the judges' own artifacts)
only once they have saved a review of that trial in that sample, so that agreement measures
what people see in the trial, not their view of the judge. A reviewer is told apart by the
token they use (its team and prefix; a web session stands for the token it was opened
with): the names reviewers type are not checked, and a team's shared token is one reviewer.
"""

from __future__ import annotations

from collections.abc import Iterable

# Who reviews: (team, token prefix); the prefix is None for the box's bootstrap admin token.
ReviewerKey = tuple[str, str | None]

# Artifacts that are a judge's output rather than the workspace's: a task's verifier log
# (sandbox/supervisor.py writes it) says whether its tests passed.
JUDGE_ARTIFACTS = frozenset({"verifier.log"})


def verdict_shown(
    blind: bool | None, reviewed_by: Iterable[ReviewerKey], viewer: ReviewerKey
) -> bool:
    """Whether `viewer` may see a trial's verdict, given who reviewed it in the sample.
    A sample not drawn blind (or drawn before blindness existed, None) hides nothing."""
    if not blind:
        return True
    return viewer in set(reviewed_by)


def shown_artifacts(names: Iterable[str], verdict_is_shown: bool) -> list[str]:
    """The artifacts a reviewer may open: the judges' own only with the verdict."""
    return [name for name in names if verdict_is_shown or name not in JUDGE_ARTIFACTS]
