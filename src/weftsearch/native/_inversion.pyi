"""A segment's postings inverted in C (src/weftsearch/native/_inversion.c)."""

from collections.abc import Mapping, Sequence

class UnsupportedInputError(ValueError):
    """Input the compiled inversion leaves to the Python path."""

class Inverter:
    """Documents added a slice at a time, then inverted once (see the module source)."""

    def add(
        self, term_maps: list[Mapping[str, int]], position_maps: list[Mapping[str, Sequence[int]]] | None, /
    ) -> None:
        """Append the next documents' term counts (and positions)."""

    def finish(self) -> tuple[list[str], bytearray, bytearray, bytearray, bytearray | None]:
        """The vocabulary sorted, the term offsets, ids, tfs and positions (bytearrays)."""

class DecodeError(ValueError):
    """Postings that do not decode as their table says (numpy's message)."""

def unpack(
    data: object,
    offsets: object,
    block_offsets: object,
    blocks: object,
    data_offsets: object,
    n_docs: int,
    lengths: object | None,
    /,
) -> tuple[bytearray, bytearray, bool | None]:
    """Postings decoded and checked (see the module source)."""
