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

# /app belongs to the agent's user: tell git that reading it as root is intended.
git_app() { git -c safe.directory='*' -C /app "$@"; }

[ -d /app/.git ] || fail "/app is not a git repository"
count=$(git_app rev-list --count HEAD 2>/dev/null) || fail "the repository has no commit"
[ "$count" = 1 ] || fail "expected exactly one commit, found $count"
message=$(git_app log -1 --format=%s)
[ "$message" = "$EXPECTED_MESSAGE" ] || fail "commit message is '$message', expected '$EXPECTED_MESSAGE'"
author=$(git_app log -1 --format='%an <%ae>')
[ "$author" = "Exam Hall <exam@example.com>" ] || fail "author is '$author'"
git_app ls-files --error-unmatch notes.txt >/dev/null 2>&1 || fail "notes.txt is not committed"
[ -z "$(git_app status --porcelain)" ] || fail "the working tree is not clean"
expected=$(printf '%s\n' 'Release 1.4.0' '' '- The parser accepts tabs as separators.' '- The --quiet flag silences progress output.')
[ "$(git_app show HEAD:notes.txt)" = "$expected" ] || fail "the committed notes.txt was changed"

echo PASS
echo 1 > "$reward"
