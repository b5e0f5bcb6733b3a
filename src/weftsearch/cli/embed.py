"""``weft-search embed``: texts (or a judged collection) embedded with all-MiniLM-L6-v2, offline."""

from __future__ import annotations

import argparse
from pathlib import Path

from weftsearch._argtypes import positive_int
from weftsearch.cli._common import _error, _os_message
from weftsearch.embed import (
    _TEXT_SOURCES,
    DEFAULT_BATCH_SIZE,
    DIMS,
    INSTALL_HINT,
    Encoder,
    embed_texts_to,
    read_texts_file,
)
from weftsearch.errors import InvalidParameterError, WeftError

__all__ = ["add_embed_command", "embed_command"]


def add_embed_command(commands: argparse._SubParsersAction[argparse.ArgumentParser]) -> None:
    """Add ``embed`` to the subcommands of a ``weft-search`` parser; its handler is :func:`embed_command`.

    ``weft-search embed --texts FILE.jsonl|FILE.txt --out DIR [--name NAME]``
    writes ``DIR/NAME.npy``, ``NAME_ids.txt`` and ``NAME.json`` (``NAME``
    defaults to the file's stem); ``weft-search embed --collection NAME
    --data DIR --out DIR`` writes a judged collection's five files. Both take
    ``--batch-size``, ``--threads``, ``--overwrite`` and ``--no-progress``.
    """
    embed = commands.add_parser(
        "embed",
        help="embed texts (or a judged collection) with all-MiniLM-L6-v2, offline",
        description=(
            "Embed texts with all-MiniLM-L6-v2 (int8 ONNX, CPU, no network), the model of the frozen "
            "vectors: --texts FILE writes DIR/NAME.npy, NAME_ids.txt and the record NAME.json; "
            "--collection NAME writes the five files of a frozen vectors folder. Files already there "
            "that match (same model, same texts) are kept. Needs: " + INSTALL_HINT
        ),
    )
    source = embed.add_mutually_exclusive_group(required=True)
    source.add_argument(
        "--texts",
        metavar="FILE",
        help='.jsonl ({"id": ..., "text": ...} a line) or .txt (one text a line; ids = line numbers)',
    )
    source.add_argument(
        "--collection", choices=tuple(_TEXT_SOURCES), help="a judged collection (needs --data)"
    )
    embed.add_argument(
        "--data", metavar="DIR", help="the collection's folder, or its parent (with --collection)"
    )
    embed.add_argument("--out", required=True, metavar="DIR", help="output folder (created when missing)")
    embed.add_argument("--name", help="output file stem with --texts (default: the file's stem)")
    embed.add_argument(
        "--batch-size",
        type=positive_int,
        default=DEFAULT_BATCH_SIZE,
        metavar="N",
        help="texts per model call (32)",
    )
    embed.add_argument(
        "--threads", type=positive_int, metavar="N", help="onnxruntime threads (default: one per core)"
    )
    embed.add_argument("--overwrite", action="store_true", help="replace files that do not match")
    embed.add_argument("--no-progress", action="store_true", help="never show a progress bar")
    embed.set_defaults(handler=embed_command)


def embed_command(args: argparse.Namespace) -> int:
    """Run ``weft-search embed`` with parsed ``args``; return the exit status.

    0 on success; 2 on a user error (bad file, missing extra, files that do
    not match), printed as one line ``weft-search: error: <message>`` on stderr.
    """
    try:
        return _embed(args)
    except WeftError as exc:
        return _error(str(exc))
    except OSError as exc:
        return _error(_os_message(exc))


def _embed(args: argparse.Namespace) -> int:
    progress = False if args.no_progress else None
    batch_size, threads = args.batch_size, args.threads

    def make() -> Encoder:
        return Encoder(batch_size=batch_size, threads=threads)

    if args.collection is not None:
        if args.data is None:
            raise InvalidParameterError(
                "--collection needs --data DIR (the collection's folder or its parent)"
            )
        if args.name is not None:
            raise InvalidParameterError("--name applies to --texts; a collection's files have fixed names")
        # Imported here: the evaluation package is not read unless a collection is embedded.
        from weftsearch.eval.embedding import embed_collection

        done = embed_collection(
            args.collection, args.data, args.out, encoder=make, overwrite=args.overwrite, progress=progress
        )
        counts = f"{len(done.document_ids)} documents and {len(done.query_ids)} queries"
        if done.source == "existing":
            print(
                f"{done.collection}: {done.folder} already holds vectors of these texts and model "
                f"({counts}); nothing encoded"
            )
        elif done.source == "frozen":
            print(
                f"{done.collection}: copied the frozen vectors ({counts}, same model and texts) into "
                f"{done.folder}; nothing encoded"
            )
        else:
            total = len(done.document_ids) + len(done.query_ids)
            print(
                f"{done.collection}: embedded {counts} into {done.folder} in {done.seconds:.1f} s "
                f"({total / max(done.seconds, 1e-9):.1f} texts/s)"
            )
        return 0

    if args.data is not None:
        raise InvalidParameterError("--data applies to --collection, not to --texts")
    path = Path(args.texts)
    name = args.name if args.name is not None else path.stem
    ids, texts = read_texts_file(path)
    if not texts:
        raise InvalidParameterError(f"{path}: no texts in the file")
    result = embed_texts_to(
        args.out, name, ids, texts, encoder=make, overwrite=args.overwrite, progress=progress
    )
    if result.reused:
        print(
            f"{result.npy_path} already holds these {len(result.ids)} texts embedded with the same model; "
            "nothing encoded"
        )
    else:
        rate = len(result.ids) / max(result.seconds, 1e-9)
        print(
            f"embedded {len(result.ids)} texts ({DIMS} dims) into {result.npy_path} "
            f"in {result.seconds:.1f} s ({rate:.1f} texts/s)"
        )
    return 0
