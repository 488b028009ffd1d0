"""Reading a trial's text artifact in the browser: GET /ui/trials/{id}/artifacts/{name}.

An artifact is agent-made bytes, so it is served as what it must be read as and nothing
else: `text/plain; charset=utf-8` with `nosniff`, so no browser guesses HTML from it, and a
`sandbox` Content-Security-Policy, so even a browser that rendered it would give it a unique
origin with scripts, forms and requests refused. Binary artifacts and ones larger than
VIEW_MAX_BYTES (service/web/artifact_text.py) are not shown: the answer says so and where
to download them (the API's artifact route, which the trial page also links).
"""

from __future__ import annotations

from fastapi import APIRouter, HTTPException
from fastapi.responses import Response

from service.api.access import get_trial
from service.api.context import Ctx
from service.artifact_names import artifact_name_problem
from service.store.trials import find_artifact
from service.web import pages
from service.web.artifact_text import view_problem
from service.web.routes import UiCaller, html

TEXT_HEADERS = {
    "Content-Security-Policy": "sandbox; default-src 'none'",
    "X-Content-Type-Options": "nosniff",
    "Referrer-Policy": "same-origin",
    "Cache-Control": "no-store",
}
TEXT = "text/plain; charset=utf-8"

# Pages, not API: left out of the OpenAPI schema. service/app.py includes the router.
router = APIRouter(include_in_schema=False)


@router.get("/ui/trials/{trial_id}/artifacts/{name}")
def view_artifact(trial_id: str, name: str, c: Ctx, caller: UiCaller) -> Response:
    with c.sessions() as session:
        try:
            get_trial(session, caller, trial_id)
        except HTTPException as exc:
            return html(pages.not_found_page(str(exc.detail), caller.name), exc.status_code)
        artifact = None if artifact_name_problem(name) else find_artifact(session, trial_id, name)
        if artifact is None:
            message = f"Trial {trial_id} has no artifact {name!r}."
            return html(pages.not_found_page(message, caller.name), 404)
        content = artifact.content
    problem = view_problem(content, pages.artifact_url(trial_id, name))
    if problem is not None:
        # 406: there is an artifact, but it cannot be had as the text this route serves.
        return Response(problem + "\n", status_code=406, media_type=TEXT, headers=TEXT_HEADERS)
    return Response(content, media_type=TEXT, headers=TEXT_HEADERS)
