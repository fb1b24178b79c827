"""The argparse options a module declares (python_inputs.declared_options): found by walking only the statements
whose lines say `add_argument`, with the same result, in the same order, as a walk of the whole module."""

from __future__ import annotations

import ast

from offlint.sources.python_inputs import declared_options

LAUNCHER = '''\
import argparse

DEFAULT_LAYERS = 4\f


def build_parser():
    parser = argparse.ArgumentParser()
    group = parser.add_argument_group("offload")
    if True:
        group.add_argument("-ol", "--activation_offload_layers", type=int, default=0)
    parser.add_argument("--recompute-layers", dest="recompute_num_layers", type=int)
    parser.add_argument("config")  # positional: not an option
    return parser


class Options:
    def add(self, parser):
        parser.\\
            add_argument("--offload", action="store_true")
        parser.add_argument("-ol", "--shadowed", type=int)  # a second declaration of a dest keeps the first


def late(parser):
    for flag in ("--a", "--b"):
        pass
    parser.add_argument("--cpu-offloading-num-layers", type=int); x = 1\r
    parser.add_argument("--activation_offload_layers", "-x")
'''


def test_the_options_are_those_and_in_the_order_of_a_walk_of_the_whole_module():
    module = ast.parse(LAUNCHER)
    lines = [line.encode("utf-8") for line in LAUNCHER.splitlines(keepends=True)]
    found = declared_options(module, lines)
    whole = declared_options(module)
    assert list(found.items()) == list(whole.items())
    # Breadth first, as ast.walk: late()'s declaration is less deep than the one under `if True:` in build_parser().
    assert found == {"activation_offload_layers": ("--activation_offload_layers", "-x"),
                     "recompute_num_layers": ("--recompute-layers",), "offload": ("--offload",),
                     "shadowed": ("-ol", "--shadowed"), "cpu_offloading_num_layers": ("--cpu-offloading-num-layers",)}
