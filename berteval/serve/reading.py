"""How much of an input the model read, so the page can say when it cut one.

Every encoder reads at most `max_length` tokens (128 for the app's heads); longer input is
truncated silently by the tokenizer, so a 900-character review ending "terrible" and the
same review ending "wonderful" got the identical P(negative). Each live answer now carries
a `Reading`: tokens read, tokens in the whole input, and for a sentence pair what each
sentence lost (pairs are cut longest-first, from the end of the longer sentence), which
the page shows as one line ("read the first 128 of 212 tokens"). It also counts the word pieces
that became `[UNK]`: "😡💩" is one unknown token to an uncased WordPiece vocabulary, and a head then
answers "99% positive" about nothing; the page says so when half or more of the input is unknown.
"""

from __future__ import annotations

from dataclasses import dataclass


@dataclass(frozen=True)
class Reading:
    read: int  # tokens the model read, [CLS] and [SEP] included
    total: int  # tokens of the whole input, the same special tokens included
    max_length: int  # the limit the input was cut to
    lost: tuple[int, ...] = ()  # pairs only: tokens cut from the end of sentence A and of sentence B
    chars: tuple[int, int] | None = None  # a cut sentence: (characters read, characters in all), where known
    pieces: int = 0  # word pieces read, special tokens not counted
    unknown: int = 0  # ... of which the tokenizer could only call [UNK] (no piece of its vocabulary fits)

    @property
    def truncated(self) -> bool:
        return self.read < self.total

    @property
    def mostly_unknown(self) -> bool:
        """Half or more of what was read is [UNK]: the model saw almost nothing of the input."""
        return self.pieces > 0 and 2 * self.unknown >= self.pieces

    def unknown_note(self) -> str:
        """One line for the page when the input was mostly unknown tokens; empty otherwise."""
        if not self.mostly_unknown:
            return ""
        some = ("the one word piece it read is" if self.pieces == 1 else
                f"all {self.pieces} word pieces it read are" if self.unknown == self.pieces else
                f"{self.unknown} of the {self.pieces} word pieces it read are")
        return (f"mostly unknown to this model: {some} [UNK] (its vocabulary has no piece for emoji, most symbols "
                f"or other scripts), so any such text reads alike and the answer below says little about this one")

    def note(self) -> str:
        """One line for the page; empty when the whole input was read."""
        if not self.truncated:
            return ""
        if not self.lost:
            where = f", up to character {self.chars[0]:,} of {self.chars[1]:,}" if self.chars else ""
            return (f"read the first {self.read} of {self.total} tokens (the limit){where}; "
                    f"the last {self.total - self.read} tokens were not read")
        cut = [f"the last {n} tokens of sentence {name}" for name, n in zip("AB", self.lost) if n]
        return f"read {self.read} of {self.total} tokens (the limit); not read: {' and '.join(cut)}"


def measure(tokenizer, text: str | tuple[str, str], max_length: int) -> Reading:
    """The Reading of one input (a sentence, or a pair read as [CLS] A [SEP] B [SEP]) under the truncation
    berteval's encoders use (`features.tokenise`: plain for a sentence, longest-first for a pair)."""
    if isinstance(text, tuple):
        whole = tokenizer(*text, verbose=False)
        kept = tokenizer(*text, truncation="longest_first", max_length=max_length, verbose=False)
        lost = tuple(_segment_lengths(whole)[i] - _segment_lengths(kept)[i] for i in (0, 1))
        return Reading(len(kept["input_ids"]), len(whole["input_ids"]), max_length, lost, **_unknown(tokenizer, kept))
    whole = tokenizer(text, verbose=False)
    kept = tokenizer(text, truncation=True, max_length=max_length, verbose=False,
                     return_offsets_mapping=bool(getattr(tokenizer, "is_fast", False)))
    chars = None
    if "offset_mapping" in kept and len(kept["input_ids"]) < len(whole["input_ids"]):
        chars = (max(end for _, end in kept["offset_mapping"]), len(text))  # where the last token read ends
    return Reading(len(kept["input_ids"]), len(whole["input_ids"]), max_length, chars=chars, **_unknown(tokenizer, kept))


def _unknown(tokenizer, enc) -> dict:
    """{"pieces": word pieces read, "unknown": how many of them are [UNK]} (special tokens not counted)."""
    special = set(getattr(tokenizer, "all_special_ids", ()))
    unk = getattr(tokenizer, "unk_token_id", None)
    ids = [i for i in enc["input_ids"] if i not in special or i == unk]
    return {"pieces": len(ids), "unknown": sum(i == unk for i in ids) if unk is not None else 0}


def _segment_lengths(enc) -> tuple[int, int]:
    """Tokens of sentence A and of sentence B in an encoded pair, special tokens not counted."""
    ids = enc.sequence_ids() if getattr(enc, "encodings", None) else None  # fast tokenizers know each token's side
    if ids is None:  # slow tokenizers: BERT's token types ([CLS] A [SEP] are 0, B [SEP] are 1)
        types = enc["token_type_ids"]
        return types.count(0) - 2, types.count(1) - 1
    return ids.count(0), ids.count(1)
