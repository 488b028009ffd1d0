#!/bin/bash
# Runs as root after the agent has stopped. pytest is installed here, at test time, from a
# package index (PIP_INDEX_URL, else PyPI): this is the task that needs a network to verify.
# examhall hands the verifier its egress proxy in http(s)_proxy, which pip uses. The root
# file system is read-only, so pytest goes into a directory under /tmp.
set -u
mkdir -p /logs/verifier
echo "installing pytest from ${PIP_INDEX_URL:-https://pypi.org/simple, the default of pip}"
if ! python3 -m pip install --no-cache-dir --disable-pip-version-check --target /tmp/pytest \
        pytest==8.3.4 iniconfig==2.0.0 packaging==24.2 pluggy==1.5.0; then
    echo "FAIL: pytest could not be installed"
    echo 0 > /logs/verifier/reward.txt
    exit 0
fi
if PYTHONPATH=/tmp/pytest python3 -m pytest -q -p no:cacheprovider --rootdir=/tests /tests/test_outputs.py; then
    echo 1 > /logs/verifier/reward.txt
else
    echo 0 > /logs/verifier/reward.txt
fi
