"""Walking a statement's tokens (pure): words, names, balanced parentheses, top-level
comma lists, and a span given back as SQL."""

from __future__ import annotations

from collections.abc import Sequence

from airflow_cdc.model import TableId
from airflow_cdc.source.ddl.lexer import Token, TokenKind

__all__ = ["TokenStream", "split_top_level", "sql_of"]


class TokenStream:
    """A position in a token list; every method reads on from there."""

    def __init__(self, tokens: Sequence[Token]) -> None:
        self.tokens = list(tokens)
        self.i = 0

    @property
    def done(self) -> bool:
        return self.i >= len(self.tokens)

    def peek(self, ahead: int = 0) -> Token | None:
        at = self.i + ahead
        return self.tokens[at] if at < len(self.tokens) else None

    def next(self) -> Token | None:
        token = self.peek()
        self.i += token is not None
        return token

    def at_word(self, *words: str, ahead: int = 0) -> bool:
        token = self.peek(ahead)
        return token is not None and token.is_word(*words)

    def take(self, *words: str) -> bool:
        """Step over the next token if it is one of ``words``."""
        if self.at_word(*words):
            self.i += 1
            return True
        return False

    def take_all(self, *words: str) -> None:
        """Step over the next tokens while each is one of ``words``."""
        while self.take(*words):
            pass

    def take_sequence(self, *words: str) -> bool:
        """Step over ``words`` if the next tokens are exactly these."""
        if all(self.at_word(word, ahead=n) for n, word in enumerate(words)):
            self.i += len(words)
            return True
        return False

    def at_symbol(self, symbol: str) -> bool:
        token = self.peek()
        return token is not None and token.is_symbol(symbol)

    def take_symbol(self, symbol: str) -> bool:
        token = self.peek()
        if token is not None and token.is_symbol(symbol):
            self.i += 1
            return True
        return False

    def name(self) -> str | None:
        """A bare or quoted name, or None (the stream stays)."""
        token = self.peek()
        if token is None or not token.is_name:
            return None
        self.i += 1
        return token.text

    def table(self, database: str) -> TableId | None:
        """``name`` or ``db.name`` (``database`` when none is given), or None."""
        first = self.name()
        if first is None:
            return None
        if self.take_symbol("."):
            second = self.name()
            return None if second is None else TableId(first, second)
        return TableId(database, first)

    def group(self) -> list[Token]:
        """The tokens inside the parentheses that open here (the stream after the closing
        one), or [] when no parenthesis opens here."""
        if not self.take_symbol("("):
            return []
        depth, start = 1, self.i
        while not self.done:
            token = self.next()
            assert token is not None
            if token.is_symbol("("):
                depth += 1
            elif token.is_symbol(")"):
                depth -= 1
                if depth == 0:
                    return self.tokens[start : self.i - 1]
        return self.tokens[start:]

    def rest(self) -> list[Token]:
        found, self.i = self.tokens[self.i :], len(self.tokens)
        return found


def split_top_level(tokens: Sequence[Token], separator: str = ",") -> list[list[Token]]:
    """``tokens`` split at ``separator`` outside parentheses (empty parts dropped)."""
    parts: list[list[Token]] = [[]]
    depth = 0
    for token in tokens:
        if token.is_symbol("("):
            depth += 1
        elif token.is_symbol(")"):
            depth -= 1
        elif depth == 0 and token.is_symbol(separator):
            parts.append([])
            continue
        parts[-1].append(token)
    return [part for part in parts if part]


def sql_of(tokens: Sequence[Token]) -> str:
    """``tokens`` as SQL again: their written forms, spaced, but none inside parentheses,
    around a dot, before a comma or between a unary sign and its number."""
    text = ""
    for n, token in enumerate(tokens):
        before = tokens[n - 1] if n else None
        text += (
            token.raw
            if before is None or _glued(tokens[n - 2] if n > 1 else None, before, token)
            else " " + token.raw
        )
    return text


_VALUES = (TokenKind.NUMBER, TokenKind.STRING, TokenKind.NAME)


def _glued(earlier: Token | None, before: Token, token: Token) -> bool:
    if before.is_symbol("(") or before.is_symbol("."):
        return True
    if token.kind is TokenKind.SYMBOL and token.text in ",).":
        return True
    if token.is_symbol("("):
        return before.kind in (TokenKind.WORD, TokenKind.NAME)
    unary = before.kind is TokenKind.SYMBOL and before.text in "+-"
    value = earlier is not None and (earlier.kind in _VALUES or earlier.is_symbol(")"))
    return unary and token.kind is TokenKind.NUMBER and not value
