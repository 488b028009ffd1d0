#!/bin/bash
# What the smoke suite's solution script leaves in the workspace.
printf '[app]\nname = demo\ndebug = false\nport = 8080\n' > /workspace/config.ini
