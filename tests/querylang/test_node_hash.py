"""A BoolNode's hash: computed once, equal to the dataclass's, and not carried across processes.

Scorers look a parsed tree up in per-snapshot caches on every search, and the
dataclass's own hash walks the whole tree each time; the node keeps it instead.
"""

from __future__ import annotations

import copy
import os
import pickle
import subprocess
import sys
from unittest import mock

from hypothesis import given, settings

from tests.querylang.strategies import leaves, trees
from weftsearch.querylang import BoolNode, Node, PhraseNode, TermNode, parse


def _rebuilt(node: Node) -> Node:
    """An equal tree made of new node objects (no hash carried over)."""
    if isinstance(node, BoolNode):
        return BoolNode(
            tuple(_rebuilt(c) for c in node.must),
            tuple(_rebuilt(c) for c in node.should),
            tuple(_rebuilt(c) for c in node.must_not),
            node.boost,
        )
    return copy.copy(node)


@settings(max_examples=200, deadline=None)
@given(trees(leaves()))
def test_the_hash_is_the_dataclass_hash_of_the_compared_fields(tree: Node) -> None:
    if isinstance(tree, BoolNode):
        assert hash(tree) == hash((tree.must, tree.should, tree.must_not, tree.boost))
    again = _rebuilt(tree)
    assert again == tree and hash(again) == hash(tree)
    assert {tree: 1}[again] == 1
    unpickled = pickle.loads(pickle.dumps(tree))
    assert unpickled == tree and hash(unpickled) == hash(tree)


def test_the_hash_is_kept_not_recomputed_from_the_clauses() -> None:
    tree = BoolNode(must=(TermNode("a"), BoolNode(should=(TermNode("b"), PhraseNode(("c", "d"))))))
    expected = hash((tree.must, tree.should, tree.must_not, tree.boost))

    def refuse(self: object) -> int:
        raise AssertionError("a clause was hashed again")

    with mock.patch.object(TermNode, "__hash__", refuse), mock.patch.object(PhraseNode, "__hash__", refuse):
        assert hash(tree) == expected


_CHILD = """
import pickle, sys
from weftsearch.querylang import parse
tree = pickle.loads(sys.stdin.buffer.read())
fresh = parse(sys.argv[1])
assert hash(tree) == hash(fresh), "the unpickled tree kept another process's hash"
assert {fresh: "found"}[tree] == "found"
assert {tree: "found"}[fresh] == "found"
print("ok")
"""


def test_a_pickled_tree_hashes_as_a_fresh_one_in_another_process() -> None:
    # str hashes differ between processes: a hash pickled with the tree would be stale there.
    text = '+alpha (beta "gamma delta"~2)^2 -eps* title:zeta'
    tree = parse(text)
    env = {**os.environ, "PYTHONHASHSEED": "12345"}
    paths = [p for p in sys.path if p]
    env["PYTHONPATH"] = os.pathsep.join(paths)
    for seed in ("12345", "54321"):
        env["PYTHONHASHSEED"] = seed
        done = subprocess.run(
            [sys.executable, "-c", _CHILD, text],
            input=pickle.dumps(tree),
            env=env,
            capture_output=True,
            timeout=60,
            check=False,
        )
        assert done.returncode == 0, done.stderr.decode()
        assert done.stdout.decode().strip() == "ok"
