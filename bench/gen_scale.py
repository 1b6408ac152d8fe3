#!/usr/bin/env python3
"""Writes a large workflow to stdout, for timing `baton lint` and `baton compile`.

Usage: python3 bench/gen_scale.py chain N > chain.yaml
       python3 bench/gen_scale.py warnings N > warnings.yaml

chain:    N inline stages, each depending on the one before; the same
          workflow as `run_vs_make.py --shapes chain --sizes N`.
warnings: N independent stages whose descriptions each name a variable that
          `trigger.params` does not declare, so `baton lint` reports exactly
          N warnings (`lint::undeclared-variable`), one per stage.
"""

import sys

from run_vs_make import workflow


def warnings(n):
    lines = ["name: bench", "version: '1'", "description: d", "trigger: {source: manual}", "stages:"]
    for i in range(n):
        lines.append(f"  - {{name: s{i}, kind: gather, description: 'read {{v{i}}}', agent: {{role: researcher}}}}")
    return "\n".join(lines) + "\n"


def main() -> None:
    if len(sys.argv) != 3 or sys.argv[1] not in ("chain", "warnings"):
        sys.exit(__doc__)
    shape, n = sys.argv[1], int(sys.argv[2])
    sys.stdout.write(workflow("chain", n) if shape == "chain" else warnings(n))


if __name__ == "__main__":
    main()
