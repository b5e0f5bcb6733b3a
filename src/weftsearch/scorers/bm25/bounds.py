"""Upper bounds of a term's BM25F contribution over a block of documents, from per-field block maxima.

:class:`~weftsearch.scorers.BM25Scorer` with ``fields=`` scores term t in document d as::

    qtf * idf(t) * tf~ * (k1 + 1) / (tf~ + k1)
    tf~ = sum_f w_f * tf_f / (1 - b_f + b_f * len_f / avglen_f)

(each field's ``avglen_f`` read as 1 when the field is empty everywhere). A
block-max search keeps, per term, field and block of postings, the largest
``tf_f`` and the smallest ``len_f`` among the block's documents holding t in
f. Then, per field, ``w_f * maxtf_f / (1 - b_f + b_f * minlen_f / avglen_f)``
is at least every document's ``w_f * tf_f / norm_f`` (the ratio grows with
``tf`` and shrinks with the length, for every ``b_f`` in [0, 1] and ``w_f >
0``; a field the block does not hold the term in adds 0), so their sum ``B``
is at least every ``tf~``, and since ``x (k1 + 1) / (x + k1)`` grows with x
(``k1 >= 0``), ``qtf * idf * B (k1 + 1) / (B + k1)`` bounds the block, for
any weights: :func:`bm25f_bound`.

**Rounding.** The scorer evaluates the formula in float64, and a bound must
hold for the numbers it returns, not only the real ones. :func:`bm25f_bound`
evaluates the same expressions in the same order (``1.0 - b + b * len / avg``,
``w * tf / norm``, the fields summed in name order from 0.0, ``x * (k1 + 1) /
(x + k1)``, times ``qtf * idf``). Every step up to ``B`` is one correctly
rounded operation that is monotone in the operand that grows (IEEE 754 rounding
is monotone), so the float ``B`` is at least every document's float ``tf~``.
The saturation is not monotone once rounded (its numerator and its denominator
both grow), so each side is compared with the real value instead: the
scorer's impact is within 3 units of rounding (u = 2**-53, a factor
``(1 + u)**2 / (1 - u)``) above the real saturation of its ``tf~``, which is
at most the real saturation of ``B``, which is within 3u above this
function's float saturation; the final product by ``qtf * idf`` adds u on each
side. So the scorer's contribution is at most this function's float result
times ``(1 + u)**4 / (1 - u)**4 < 1 + 9u``. The result is multiplied by ``1 +
2**-48`` (= 1 + 32u) and moved one float up (:func:`numpy.nextafter`), which
covers that factor and the rounding of the multiplication itself.
"""

from __future__ import annotations

import numpy as np
from numpy.typing import ArrayLike, NDArray

__all__ = ["BOUND_MARGIN", "bm25f_bound"]

#: The relative margin :func:`bm25f_bound` adds for float rounding (see the module docstring).
BOUND_MARGIN = 2.0**-48


def bm25f_bound(
    weight: float,
    k1: float,
    field_weights: ArrayLike,
    field_b: ArrayLike,
    average_lengths: ArrayLike,
    max_tf: ArrayLike,
    min_length: ArrayLike,
) -> NDArray[np.float64]:
    """The largest BM25F contribution one term can make to any document of a block (safe, see the module).

    Args:
        weight: ``qtf * idf(t)``, the term's query weight (>= 0).
        k1: the scorer's saturation (>= 0).
        field_weights: ``w_f`` per field (> 0), in field-name order (the scorer's summing order).
        field_b: ``b_f`` per field, in [0, 1].
        average_lengths: ``avglen_f`` per field as the scorer reads it (1.0 where the field is empty).
        max_tf: the block's largest ``tf_f`` of the term per field (0: the block lacks the term in
            that field); shape ``(fields,)`` or ``(fields, blocks)``.
        min_length: the smallest ``len_f`` among the block's documents holding the term in that
            field (any value where ``max_tf`` is 0); the shape of ``max_tf``.

    Returns:
        float64, shape ``()`` for one block or ``(blocks,)``: at least the float64 score the scorer
        gives the term in every document of the block (0 where no field holds it).

    Complexity: O(fields x blocks), vectorised over blocks.

    """
    tf = np.asarray(max_tf, dtype=np.float64)
    length = np.asarray(min_length, dtype=np.float64)
    w = np.asarray(field_weights, dtype=np.float64)
    b = np.asarray(field_b, dtype=np.float64)
    average = np.asarray(average_lengths, dtype=np.float64)
    fields = w.shape[0]
    shape = (fields,) + (1,) * (tf.ndim - 1)
    w, b, average = w.reshape(shape), b.reshape(shape), average.reshape(shape)
    held = tf > 0
    with np.errstate(divide="ignore", invalid="ignore"):
        # The scorer's expressions, operand for operand (weftsearch.scorers.bm25, _field_postings).
        norm = 1.0 - b + b * length / average
        per_field = np.where(held, w * tf / norm, 0.0)
    pseudo = np.zeros(tf.shape[1:], dtype=np.float64)
    for field in range(fields):  # from 0.0, in field order, as np.bincount sums them
        pseudo = pseudo + per_field[field]
    with np.errstate(divide="ignore", invalid="ignore"):
        impact = np.where(pseudo > 0, pseudo * (float(k1) + 1.0) / (pseudo + float(k1)), 0.0)
    bound = float(weight) * impact * (1.0 + BOUND_MARGIN)
    return np.where(bound > 0, np.nextafter(bound, np.inf), 0.0)
