#!/bin/bash
# What the smoke suite's solution script leaves in the workspace.
printf 'Hello, exam hall!\n' > /workspace/hello.txt
