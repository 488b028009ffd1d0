#!/bin/bash
# Runs as root after the agent has stopped; needs git and nothing from the network.
set -u
mkdir -p /logs/verifier
reward=/logs/verifier/reward.txt
# From task.toml's [verifier.env]; without it this is a broken verifier, not a failed agent,
# so it stops before writing any reward.
: "${EXPECTED_MESSAGE:?is not set: the verifier did not get task.toml [verifier.env]}"

fail() {
    echo "FAIL: $*"
    echo 0 > "$reward"
    exit 0
}

[ -d /app/.git ] || fail "/app is not a git repository"
# git runs what a repository's own configuration names (core.fsmonitor on status, hooks,
# pagers, filter drivers, a commondir's config, a submodule's own .git), and this script runs
# as root: read a copy of the repository's objects, refs and index alone, under a
# configuration of ours, with every command git could run from the agent's files turned off.
copy=$(mktemp -d)
for part in HEAD refs packed-refs objects index; do
    [ -e "/app/.git/$part" ] && { cp -R "/app/.git/$part" "$copy/" || fail "/app/.git cannot be read"; }
done
printf '[core]\n\trepositoryformatversion = 0\n\tbare = false\n' > "$copy/config"
git_app() {
    GIT_CONFIG_NOSYSTEM=1 GIT_CONFIG_GLOBAL=/dev/null GIT_COMMON_DIR="$copy" \
        git --git-dir="$copy" --work-tree=/app -c safe.directory='*' -c core.fsmonitor=false \
        -c core.hooksPath=/dev/null -c core.pager=cat "$@"
}
count=$(git_app rev-list --count HEAD 2>/dev/null) || fail "the repository has no commit"
[ "$count" = 1 ] || fail "expected exactly one commit, found $count"
message=$(git_app log -1 --format=%s)
[ "$message" = "$EXPECTED_MESSAGE" ] || fail "commit message is '$message', expected '$EXPECTED_MESSAGE'"
author=$(git_app log -1 --format='%an <%ae>')
[ "$author" = "Exam Hall <exam@example.com>" ] || fail "author is '$author'"
git_app ls-files --error-unmatch notes.txt >/dev/null 2>&1 || fail "notes.txt is not committed"
[ -z "$(git_app status --porcelain --ignore-submodules=all)" ] || fail "the working tree is not clean"
expected=$(printf '%s\n' 'Release 1.4.0' '' '- The parser accepts tabs as separators.' '- The --quiet flag silences progress output.')
[ "$(git_app show HEAD:notes.txt)" = "$expected" ] || fail "the committed notes.txt was changed"

echo PASS
echo 1 > "$reward"
