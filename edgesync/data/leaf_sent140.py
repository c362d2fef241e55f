"""LEAF's Sent140 (tweets by Twitter user, sentiment 0 or 1): the tweets' text into word indices, as LEAF's
reference model reads them (models/utils/language_utils.py and models/sent140/stacked_lstm.py).

Each sample's x in LEAF's files is the tweet's five fields as strings, `[tweet_id, date, query, user, text]`
(LEAF's data_to_json.py keeps a Sentiment140 CSV row after its polarity); y is 1 for a positive tweet (the
CSV's polarity 4), 0 otherwise. Only the text is read, as LEAF's `process_x` reads `x[4]`:

- words as LEAF's `split_line` cuts them: `re.findall(r"[\\w']+|[.,!?;]", text)`, runs of word characters and
  apostrophes, and the punctuation marks . , ! ? ; each a word of its own; no lower-casing, nothing else
  normalised (a mention `@name` is the word `name`, a link `http://a.bc/d` the words http, a, ., bc, d);
- LEAF's `line_to_indices` with max_words 25: the first 25 words' indices, a shorter tweet padded at the end
  to 25; unknown words and the padding share one index, which LEAF makes the vocabulary's size.

The departure from LEAF: LEAF's vocabulary is GloVe's 400,000 words (models/sent140/get_embs.py, built from
glove.6B.300d.txt, a download this reader does not make). Here it is built from the training split only (every
train/ file, before `dataset.train_size` cuts): the `VOCABULARY_CAP` most frequent words, ranked by count and
then alphabetically (code points), so the same files always give the same indices; a word of the test split
that is not in it is unknown. The index space is fixed whatever the files hold: words are 0..9,999 (a smaller
vocabulary leaves the top ones unused), `UNKNOWN` = 10,000 is unknown and padding, so every int64 (N, 25)
array takes `TOKEN_INDICES` = 10,001 indices and the model (models/leaf.py, `leaf_sent140_lstm`) is sized
without the data.
"""

from __future__ import annotations

import re
from collections import Counter
from collections.abc import Iterable
from pathlib import Path

import numpy as np

from edgesync.data.arrays import class_labels

MAX_WORDS = 25  # LEAF's sequence length for Sent140 (MODEL_PARAMS 'sent140.stacked_lstm': seq_len 25)
VOCABULARY_CAP = 10_000  # the most frequent training words kept
UNKNOWN = VOCABULARY_CAP  # the index of an unknown word and of the padding (LEAF: len(word2id))
TOKEN_INDICES = VOCABULARY_CAP + 1  # indices 0..UNKNOWN
SENT140_CLASSES = 2
TWEET_FIELDS = ("tweet_id", "date", "query", "user", "text")
TEXT = TWEET_FIELDS.index("text")

_WORD = re.compile(r"[\w']+|[.,!?;]")  # LEAF's split_line

Samples = tuple[np.ndarray, np.ndarray]


def split_line(line: str) -> list[str]:
    """LEAF's words of a tweet: runs of word characters and apostrophes, and . , ! ? ; alone."""
    return _WORD.findall(line)


def build_vocabulary(texts: Iterable[str], cap: int = VOCABULARY_CAP) -> dict[str, int]:
    """{word: index} of the `cap` most frequent words of texts, ranked by count (most first), ties
    alphabetically: index 0 is the most frequent word."""
    counts = Counter(word for text in texts for word in split_line(text))
    ranked = sorted(counts.items(), key=lambda item: (-item[1], item[0]))[:cap]
    return {word: i for i, (word, _) in enumerate(ranked)}


def line_to_indices(line: str, word2id: dict[str, int], max_words: int = MAX_WORDS,
                    unknown: int = UNKNOWN) -> list[int]:
    """LEAF's line_to_indices: the indices of the first max_words words (unknown ones `unknown`), padded with
    `unknown` at the end to max_words."""
    indices = [word2id.get(word, unknown) for word in split_line(line)[:max_words]]
    return indices + [unknown] * (max_words - len(indices))


def tweets(x: list, y: list, where: str) -> Samples:
    """One user's samples as LEAF stores them -> (their texts as an object array, int64 labels 0 or 1); the
    texts become indices once the vocabulary is known (`tokenise`)."""
    for i, fields in enumerate(x):
        if (not isinstance(fields, list) or len(fields) != len(TWEET_FIELDS)
                or not all(isinstance(f, str) for f in fields)):
            got = (f"a list of {len(fields)}" if isinstance(fields, list) and len(fields) != len(TWEET_FIELDS)
                   else f"{fields!r:.80}")
            raise ValueError(f"{where}, sample {i}: x is {got}, expected LEAF's {len(TWEET_FIELDS)} strings "
                             f"[{', '.join(TWEET_FIELDS)}]")
    texts = np.empty(len(x), dtype=object)
    texts[:] = [fields[TEXT] for fields in x]
    return texts, class_labels(y, SENT140_CLASSES, where)


def tokenise(folder: Path, splits: dict[str, dict[str, Samples]]) -> dict[str, dict[str, Samples]]:
    """Both splits' texts as int64 (n, 25) indices of the vocabulary of the training texts (`folder`, where they
    were read, is not needed: the vocabulary comes from the files)."""
    del folder
    vocabulary = build_vocabulary(text for user in sorted(splits["train"]) for text in splits["train"][user][0])
    return {split: {user: (encode(texts, vocabulary), labels) for user, (texts, labels) in users.items()}
            for split, users in splits.items()}


def encode(texts: Iterable[str], vocabulary: dict[str, int]) -> np.ndarray:
    """Texts -> int64 (n, MAX_WORDS) indices, as line_to_indices gives them."""
    rows = [line_to_indices(text, vocabulary) for text in texts]
    return np.asarray(rows, dtype=np.int64).reshape(len(rows), MAX_WORDS)
