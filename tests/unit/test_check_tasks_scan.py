"""check-tasks' scan of a task's test.sh for what it runs of the agent's as root: files of its
workspace, its package as a module, and git on its repository."""

from __future__ import annotations

from pathlib import Path

from service.cli.verifier_scan import runs_agent_files, runs_git, workspace_warnings

COOKBOOK = Path(__file__).parent.parent / "fixtures" / "harbor_cookbook"
WORKDIRS = {"/app", "/workspace", "/srv/task"}


def test_running_the_agents_files_as_root_is_flagged() -> None:
    script = (
        "#!/bin/bash\n"
        "bash /app/run_tests.sh\n"
        "source ./env.sh\n"
        "cd /tmp && python3 -u /srv/task/check.py --fast\n"
        "if /workspace/grade; then echo 1 > /logs/verifier/reward.txt; fi\n"
        "python3 grade.py\n"
    )
    found = runs_agent_files(script, WORKDIRS)
    assert [line.split(":")[0] for line in found] == [
        "line 2",
        "line 3",
        "line 4",
        "line 5",
        "line 6",
    ], found


def test_running_the_tests_own_files_and_modules_is_not() -> None:
    script = (
        "# bash /app/run.sh is only a comment\n"
        "bash /tests/run.sh\n"
        "source $HOME/.local/bin/env\n"
        "python3 -m pytest /tests/test_state.py\n"
        "curl -LsSf https://example.invalid/install.sh | sh\n"
        "cat /app/output.txt > /logs/verifier/seen.txt\n"
    )
    assert runs_agent_files(script, WORKDIRS) == []


def test_the_cookbook_task_is_not_warned_about_and_a_planted_runner_is(tmp_path: Path) -> None:
    assert workspace_warnings(COOKBOOK / "simple-task") == []
    task = tmp_path / "runs-agent-code"
    (task / "tests").mkdir(parents=True)
    (task / "environment").mkdir()
    (task / "environment" / "Dockerfile").write_text("FROM debian\nWORKDIR /srv/code/\n")
    (task / "tests" / "test.sh").write_text("/srv/code/check.sh > /logs/verifier/reward.txt\n")
    (warning,) = workspace_warnings(tmp_path)
    assert "runs-agent-code" in warning and "line 1" in warning and "heuristic" in warning


def test_a_variable_set_to_a_path_runs_nothing() -> None:
    # evals/harbor_demo/jq-filter/tests/test.sh names its reward file this way.
    script = "reward=/logs/verifier/reward.txt\nout=./result.json\nLANG=C ./grade.sh\n"
    assert [line.split(":")[0] for line in runs_agent_files(script, WORKDIRS)] == ["line 3"]
    shipped = workspace_warnings(Path(__file__).parent.parent.parent / "evals" / "harbor_demo")
    # Two shipped tasks run the agent's program in their tests, as Harbor's tasks often do.
    assert sorted(w.split(":")[1].strip() for w in shipped) == ["executable-tool", "module-cli"]


def test_a_here_documents_body_is_input_not_lines_of_the_script() -> None:
    script = (
        "python3 - <<'PY'\n"
        "import subprocess\n"
        "./not-a-command --really\n"
        "PY\n"
        "cat <<-EOF > /tmp/notes\n"
        "\tbash run.sh\n"
        "\tEOF\n"
        "bash run.sh\n"
    )
    assert [line.split(":")[0] for line in runs_agent_files(script, WORKDIRS)] == ["line 8"]


def test_git_on_the_agents_repository_is_found_and_a_copy_with_a_config_of_ours_is_not() -> None:
    script = (
        "count=$(git log -1 --format=%s)\n"
        '[ -z "$(git -C /app status --porcelain)" ] || exit 1\n'
        "git_app() { git -c safe.directory='*' -C /app \"$@\"; }\n"
        "git --git-dir=/tmp/copy.git --work-tree=/app status\n"
        "GIT_DIR=$copy git log\n"
        "git -C /tmp/clone log\n"
        "if git diff --quiet; then echo same; fi\n"
    )
    lines = [line.split(":")[0] for line in runs_git(script, WORKDIRS)]
    assert lines == ["line 1", "line 2", "line 3", "line 7"]


def test_the_shipped_git_verifier_reads_a_copy_of_the_repository() -> None:
    shipped = Path(__file__).parent.parent.parent / "evals" / "harbor_demo" / "git-commit"
    assert runs_git((shipped / "tests" / "test.sh").read_text(), WORKDIRS) == []


def test_a_module_of_the_agents_is_found_and_the_tools_and_the_standard_library_are_not() -> None:
    script = (
        "python3 -m pytest /tests/test_outputs.py\n"
        "python3 -m json.tool out.json\n"
        "got=$(cd /app && python3 -m tally /tmp/words.txt)\n"
        "uv run python -m unittest discover /tests\n"
    )
    assert [line.split(":")[0] for line in runs_agent_files(script, WORKDIRS)] == ["line 3"]
