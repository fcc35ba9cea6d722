#!/usr/bin/env python3
"""An external policy for `arbiter simulate --policy external --policy-cmd ...`: shortest job first.

Standard library only. Reads one JSON object per line on stdin (docs/policies.md, "External policies"):
`start` once, an `observation` per scheduling point (answer it with one line), `end` at the end of
the episode. Orders the jobs by their (oracle) duration, ties by id: the built-in `sjf`. A learning
agent would choose the order from the observation's features and learn from `reward`
(-jobs in the system x seconds since the previous observation: the episode's sum is -sum of JCTs).
"""
import json
import sys


def main():
    total_reward = 0.0
    for line in sys.stdin:
        message = json.loads(line)
        kind = message["type"]
        if kind == "observation":
            total_reward += message["reward"]
            jobs = sorted(message["jobs"], key=lambda j: (j["duration_s"], j["id"]))
            print(json.dumps({"order": [j["id"] for j in jobs]}), flush=True)
        elif kind == "end":
            total_reward += message["reward"]
            print(f"sjf_agent: episode over at {message['time_s']:.0f} s, total reward {total_reward:.0f}", file=sys.stderr)
            return


if __name__ == "__main__":
    main()
