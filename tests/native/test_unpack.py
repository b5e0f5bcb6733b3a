"""The compiled postings decoding (``_inversion.c`` ``unpack``) against numpy's, verdict for verdict.

numpy's :func:`~weftsearch.storage.postings.unpack_postings` and the reader's
table check (:func:`~weftsearch.storage.postings.derive_blocks` compared with
the stored table) are the oracle: on any input, whole or damaged, the compiled
decoding gives the same ids, tfs and table verdict, or refuses with the same
message. It is what a term's first read on a reader runs (a query's cold cost),
so the reader must take it when it is built.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

import numpy as np
import pytest
from hypothesis import HealthCheck, example, given, settings
from hypothesis import strategies as st
from numpy.typing import NDArray

from weftsearch import RRF, BM25Scorer, Document, Index
from weftsearch.native import inversion
from weftsearch.storage import postings
from weftsearch.storage.postings import PostingsDecodeError

pytestmark = pytest.mark.skipif(
    inversion._unpacking_module is None, reason="the compiled inversion module is not built here"
)

Verdict = tuple[bytes, bytes, bool | None] | str
#: data, offsets, block_offsets, blocks, data_offsets
Arrays = tuple[NDArray[Any], NDArray[Any], NDArray[Any], NDArray[Any], NDArray[Any]]


def _numpy(arrays: Arrays, n_docs: int, lengths: NDArray[np.uint32] | None) -> Verdict:
    data, offsets, block_offsets, blocks, data_offsets = arrays
    with pytest.MonkeyPatch.context() as patch:
        patch.setattr(postings, "_unpacking", None)
        try:
            if lengths is None:
                ids, tfs = postings.unpack_postings(
                    data, offsets, block_offsets, blocks, data_offsets, n_docs
                )
                return ids.tobytes(), tfs.tobytes(), None
            ids, tfs, agrees = postings.unpack_checked(
                data, offsets, block_offsets, blocks, data_offsets, n_docs, lengths
            )
            return ids.tobytes(), tfs.tobytes(), agrees
        except PostingsDecodeError as exc:
            return str(exc)


def _compiled(arrays: Arrays, n_docs: int, lengths: NDArray[np.uint32] | None) -> Verdict:
    try:
        got = inversion.unpack(*arrays, n_docs, lengths)
    except PostingsDecodeError as exc:
        return str(exc)
    assert got is not None
    return got[0].tobytes(), got[1].tobytes(), got[2]


def _packed(seed: int, n_docs: int, sizes: list[int], big: bool) -> tuple[Arrays, NDArray[np.uint32]]:
    rng = np.random.default_rng(seed)
    terms = [np.sort(rng.choice(n_docs, size=min(size, n_docs), replace=False)) for size in sizes]
    ids = np.concatenate([*terms, np.zeros(0, np.int64)]).astype(np.uint32)
    tfs = np.asarray(rng.integers(1, 2**32 if big else 6, size=ids.shape[0], dtype=np.uint64)).astype(
        np.uint32
    )
    lengths = np.asarray(rng.integers(0, 2**32 if big else 300, size=n_docs, dtype=np.uint64)).astype(
        np.uint32
    )
    offsets = np.zeros(len(terms) + 1, dtype=np.uint64)
    np.cumsum([t.shape[0] for t in terms], out=offsets[1:])
    packed = postings.pack_postings(ids, tfs, offsets, lengths)
    arrays = (packed.data, offsets, packed.block_offsets, packed.blocks, packed.data_offsets)
    return arrays, lengths


#: What a damage does: flip one bit of the words or of the table, move one cut, or lower n_docs.
DAMAGES = ("none", "data bit", "table bit", "cut", "n_docs")


def _damaged(arrays: Arrays, n_docs: int, damage: str, where: int, bit: int) -> tuple[Arrays, int]:
    data, offsets, block_offsets, blocks, data_offsets = (np.array(a, copy=True) for a in arrays)
    if damage == "data bit" and data.shape[0]:
        data[where % data.shape[0]] ^= np.uint32(1 << bit)
    elif damage == "table bit" and blocks.shape[0]:
        blocks[where % blocks.shape[0]] ^= np.uint32(1 << bit)
    elif damage == "cut":
        cut = (offsets, block_offsets, data_offsets)[where % 3]
        cut[(where // 3) % cut.shape[0]] += np.uint64(1 + bit % 3)
    elif damage == "n_docs":
        n_docs = max(0, n_docs - 1 - bit)
    return (data, offsets, block_offsets, blocks, data_offsets), n_docs


def test_the_compiled_unpacking_is_handed_to_storage() -> None:
    assert postings._unpacking is inversion.unpack


@settings(max_examples=300, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(
    seed=st.integers(0, 2**32 - 1),
    n_docs=st.integers(1, 2000),
    sizes=st.lists(st.integers(0, 400), max_size=6),
    big=st.booleans(),
    damage=st.sampled_from(DAMAGES),
    where=st.integers(0, 2**20),
    bit=st.integers(0, 31),
    with_lengths=st.booleans(),
)
@example(seed=1, n_docs=2000, sizes=[300], big=True, damage="none", where=0, bit=0, with_lengths=True)
@example(seed=2, n_docs=500, sizes=[128, 3], big=False, damage="table bit", where=1, bit=0, with_lengths=True)
@example(seed=3, n_docs=500, sizes=[200], big=False, damage="n_docs", where=0, bit=0, with_lengths=False)
# A cut moved past the next: a term of -1 postings (numpy once passed it as empty).
@example(seed=0, n_docs=1, sizes=[0], big=False, damage="cut", where=0, bit=0, with_lengths=False)
def test_unpack_gives_numpys_postings_verdict_or_message(
    seed: int,
    n_docs: int,
    sizes: list[int],
    big: bool,
    damage: str,
    where: int,
    bit: int,
    with_lengths: bool,
) -> None:
    arrays, lengths = _packed(seed, n_docs, sizes, big)
    arrays, n_docs = _damaged(arrays, n_docs, damage, where, bit)
    given_lengths = lengths if with_lengths else None
    want = _numpy(arrays, n_docs, given_lengths)
    assert _compiled(arrays, n_docs, given_lengths) == want
    if damage == "none":
        assert not isinstance(want, str) and want[2] in (True, None)


def test_every_width_of_an_id_gap_to_22_and_a_tf_of_2_to_the_32_less_one() -> None:
    # (a 32-bit gap: the test after this one, crafted)
    gaps = [0, *(2**w - 1 for w in range(1, 23))]
    ids = (np.cumsum(np.array(gaps, dtype=np.int64) + 1) - 1).astype(np.uint32)
    tfs = np.full(ids.shape[0], 2**32 - 1, dtype=np.uint32)
    n_docs = int(ids[-1]) + 1
    offsets = np.array([0, ids.shape[0]], dtype=np.uint64)
    packed = postings.pack_postings(ids, tfs, offsets, np.ones(n_docs, dtype=np.uint32))
    arrays = (packed.data, offsets, packed.block_offsets, packed.blocks, packed.data_offsets)
    got = inversion.unpack(*arrays, n_docs, None)
    assert got is not None
    assert got[0].tolist() == ids.tolist() and got[1].tolist() == tfs.tolist()
    assert _compiled(arrays, n_docs, None) == _numpy(arrays, n_docs, None)


def test_a_gap_that_carries_an_id_past_2_to_the_32_is_refused_as_numpy_refuses_it() -> None:
    # 130 gaps of 2^32 - 1 in one full block and a partial one: ids pass 2^32 at the second.
    ids_words = np.full(4 * 32, 0xFFFFFFFF, dtype=np.uint32)
    data = np.concatenate([ids_words, np.full(2, 0xFFFFFFFF, dtype=np.uint32)])
    blocks = np.array([0, 0, 1, 1, 0, 0, 32, 32], dtype=np.uint32)
    arrays = (data, np.array([0, 130]), np.array([0, 2]), blocks, np.array([0, 130]))
    want = _numpy(arrays, 2**40, None)
    assert isinstance(want, str)
    assert _compiled(arrays, 2**40, None) == want


@pytest.mark.parametrize(
    ("offsets", "block_offsets", "blocks"),
    [
        # A term that claims 2^40 postings in one block: the cuts disagree, nothing is allocated.
        ([0, 2**40], [0, 1], 4),
        # Cuts that agree with 2^33 blocks, over a table of one block: the size is refused first.
        ([0, 2**40], [0, 2**33], 4),
        # Descending postings counts.
        ([5, 2], [0, 0], 0),
    ],
)
def test_a_table_that_claims_more_postings_than_it_holds_is_refused_before_allocation(
    offsets: list[int], block_offsets: list[int], blocks: int
) -> None:
    arrays = (
        np.zeros(4, dtype=np.uint32),
        np.array(offsets, dtype=np.int64),
        np.array(block_offsets, dtype=np.int64),
        np.zeros(blocks, dtype=np.uint32),
        np.array([0, 4], dtype=np.int64),
    )
    with pytest.raises(PostingsDecodeError):
        inversion.unpack(*arrays, 2**40, None)


def test_what_the_compiled_decoding_does_not_take_is_left_to_numpy() -> None:
    arrays, lengths = _packed(7, 100, [50], False)
    data, offsets, block_offsets, blocks, data_offsets = arrays
    assert (
        inversion.unpack(data.astype(np.int64), offsets, block_offsets, blocks, data_offsets, 100, None)
        is None
    )
    assert inversion.unpack(*arrays, 100, lengths[:10]) is None  # fewer lengths than documents
    assert inversion.unpack(*arrays, 100, lengths.astype(np.int64)) is None


def _index(tmp_path: Path) -> Path:
    path = tmp_path / "index"
    with Index.create(path) as index:
        index.add_many(
            Document(f"d{i}", text=f"graph ranking {'graph ' * (i % 5)} note {i}") for i in range(400)
        )
        index.commit()
    return path


def test_a_terms_first_read_on_a_reader_decodes_and_checks_in_c(tmp_path: Path) -> None:
    """The cold cost of a query: a fresh reader's first search runs no numpy decoding or derivation."""
    path = _index(tmp_path)
    with pytest.MonkeyPatch.context() as patch:
        called: list[str] = []
        original_numpy, original_derive = postings._unpack_numpy, postings.derive_blocks

        def spy_numpy(*args: Any) -> Any:
            called.append("numpy decode")
            return original_numpy(*args)

        def spy_derive(*args: Any) -> Any:
            called.append("derive")
            return original_derive(*args)

        patch.setattr(postings, "_unpack_numpy", spy_numpy)
        patch.setattr(postings, "derive_blocks", spy_derive)
        with Index.open(path, readonly=True) as index:
            keys = index.search("graph ranking", 5, RRF(), BM25Scorer()).keys
        assert len(keys) == 5
        assert called == []


def test_the_self_check_refuses_a_decoding_that_disagrees() -> None:
    """A module whose unpack gives other postings, or another message, is not handed to storage."""
    real: Any = inversion._unpacking_module
    assert real is not None and inversion._unpacks_as_numpy(real)

    class WrongIds:
        DecodeError = real.DecodeError

        @staticmethod
        def unpack(*arguments: Any) -> Any:
            ids, tfs, agrees = real.unpack(*arguments)
            return ids[4:] + ids[:4], tfs, agrees

    class OtherMessage:
        DecodeError = real.DecodeError

        @staticmethod
        def unpack(*arguments: Any) -> Any:
            try:
                return real.unpack(*arguments)
            except real.DecodeError:
                raise real.DecodeError("something else") from None

    class Old:  # a module built before unpack existed
        pass

    for module in (WrongIds, OtherMessage, Old):
        assert not inversion._unpacks_as_numpy(module)  # type: ignore[arg-type]  # a stand-in module
