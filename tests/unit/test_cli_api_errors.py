"""What the CLI prints when the control plane refuses a request: text, a problem a line."""

from __future__ import annotations

from examhall import ApiError, detail_lines


def test_server_errors_are_lines_of_text() -> None:
    # Recorded 422 bodies: an upload with two malformed tasks, and an unknown case.
    upload = [
        {
            "loc": ["body"],
            "msg": "task one: task.toml [verifier].timeout_sec: Input should be a valid number, "
            "unable to parse string as a number\ntask two: task.toml [verifier].timeout_sec: "
            "Input should be a valid number, unable to parse string as a number",
            "type": "value_error",
        }
    ]
    error = ApiError("POST /v1/suites", 422, detail_lines(upload))
    assert str(error).splitlines() == [
        "POST /v1/suites: HTTP 422:",
        "  task one: task.toml [verifier].timeout_sec: Input should be a valid number, unable "
        "to parse string as a number",
        "  task two: task.toml [verifier].timeout_sec: Input should be a valid number, unable "
        "to parse string as a number",
    ]
    case = [
        {
            "loc": ["body", "cases", 0],
            "msg": "Unknown case 'nope' in suite harbor_demo; its cases: count-lines.",
            "type": "value_error",
        }
    ]
    assert str(ApiError("POST /v1/jobs", 422, detail_lines(case))) == (
        "POST /v1/jobs: HTTP 422: cases.0: Unknown case 'nope' in suite harbor_demo; its "
        "cases: count-lines."
    )
    assert detail_lines("Job job-1 not found.") == ["Job job-1 not found."]
