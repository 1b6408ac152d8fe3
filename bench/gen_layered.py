#!/usr/bin/env python3
"""Writes a layered workflow to stdout for process-level measurements.

Usage: python3 bench/gen_layered.py [LAYERS [WIDTH]] > layered.yaml

LAYERS layers (default 100) of WIDTH stages (default 100), each stage
depending on two stages of the previous layer, written last layer first and
each layer scrambled. With the defaults this is byte for byte the 10 000-stage
workflow that the hostile tests and the `compile` benchmark generate in Rust,
so `baton compile` on it can be timed as a whole process.
"""

import sys


def main() -> None:
    layers = int(sys.argv[1]) if len(sys.argv) > 1 else 100
    width = int(sys.argv[2]) if len(sys.argv) > 2 else 100
    out = sys.stdout
    out.write('name: hostile\nversion: "1"\ndescription: d\ntrigger:\n  source: manual\nstages:\n')
    for layer in reversed(range(layers)):
        for slot in range(width):
            # 37 is prime, so for any width that is not a multiple of 37 this
            # visits every index once, in an order unlike the sorted one.
            index = slot * 37 % width
            depends_on = (
                ""
                if layer == 0
                else f"s{layer - 1:03}-{index:03}, s{layer - 1:03}-{(index + 1) % width:03}"
            )
            name = f"s{layer:03}-{index:03}"
            out.write(
                f"  - name: {name}\n    kind: gather\n    description: d {name}\n"
                f"    agent: {{role: researcher}}\n    depends_on: [{depends_on}]\n"
            )


if __name__ == "__main__":
    main()
