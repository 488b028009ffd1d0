#!/bin/bash
# Reward 1 when the file is byte for byte what the case asks for, else 0 (Harbor takes a
# missing reward file for an error, not a failure).
mkdir -p /logs/verifier
if cmp -s /workspace/config.ini <(printf '[app]\nname = demo\ndebug = false\nport = 8080\n'); then echo 1; else echo 0; fi > /logs/verifier/reward.txt
