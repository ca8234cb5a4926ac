"""A statement's tokens as the server reads them (pure): comments dropped, the text of
executable comments kept, strings and quoted names unquoted.

Clients, migration tools and ``mysqldump`` wrap DDL in comments the server ignores
(``/* ApplicationName=DBeaver ... */ ALTER TABLE ...``, a ``-- `` or ``#`` line first) and
in comments it executes (``/*!50100 PARTITION BY ... */``; MariaDB's ``/*M!100100 ... */``),
and the binlog keeps the statement as it was sent. Reading tokens, not the raw text, gives
the same statement whatever surrounds it.
"""

from __future__ import annotations

from dataclasses import dataclass
from enum import StrEnum

__all__ = ["Token", "TokenKind", "tokens"]


class TokenKind(StrEnum):
    WORD = "word"  # a keyword or a bare name
    NAME = "name"  # a name in backticks (``text`` is the name)
    STRING = "string"  # ``text`` is the string's value
    NUMBER = "number"
    SYMBOL = "symbol"  # one character: ( ) , . ; = ...


@dataclass(frozen=True, slots=True)
class Token:
    kind: TokenKind
    #: The value: a name or string without its quotes, a word or symbol as written.
    text: str
    #: As written in the statement (quotes included), to give a span of tokens back as SQL.
    raw: str

    def is_word(self, *words: str) -> bool:
        return self.kind is TokenKind.WORD and self.text.upper() in words

    def is_symbol(self, symbol: str) -> bool:
        return self.kind is TokenKind.SYMBOL and self.text == symbol

    @property
    def is_name(self) -> bool:
        """A word or a quoted name: what can name a table or a column."""
        return self.kind in (TokenKind.WORD, TokenKind.NAME)


class LexError(ValueError):
    """The text ends inside a string, a quoted name or a comment."""


def tokens(sql: str, *, mariadb: bool = True) -> list[Token]:
    """``sql``'s tokens. ``mariadb``: whether ``/*M! ... */`` is executed (MariaDB) or a
    comment (MySQL). Raises :class:`LexError` for text that ends inside a quote."""
    return _Lexer(sql, mariadb).run()


_QUOTES = {"'": TokenKind.STRING, '"': TokenKind.STRING, "`": TokenKind.NAME}


class _Lexer:
    def __init__(self, sql: str, mariadb: bool) -> None:
        self.sql, self.mariadb = sql, mariadb
        self.i = 0
        self.found: list[Token] = []
        #: Inside an executable comment: its ``*/`` closes it and is no token.
        self.executable = False

    def run(self) -> list[Token]:
        while self.i < len(self.sql):
            self._next()
        if self.executable:
            raise LexError("the statement ends inside an executable comment")
        while self.found and self.found[-1].is_symbol(";"):
            self.found.pop()
        return self.found

    def _next(self) -> None:
        sql, i = self.sql, self.i
        ch = sql[i]
        if ch.isspace():
            self.i += 1
        elif sql.startswith("*/", i) and self.executable:
            self.executable, self.i = False, i + 2
        elif sql.startswith("/*", i):
            self._comment()
        elif ch == "#" or (sql.startswith("--", i) and (i + 2 == len(sql) or sql[i + 2] <= " ")):
            end = sql.find("\n", i)
            self.i = len(sql) if end < 0 else end + 1
        elif ch in _QUOTES:
            self._quoted(ch)
        elif ch.isdigit() or (ch == "." and sql[i + 1 : i + 2].isdigit()):
            self._number()
        elif ch.isalnum() or ch in "_$@" or ord(ch) > 127:
            self._word()
        else:
            self._add(TokenKind.SYMBOL, ch, ch, i + 1)

    def _comment(self) -> None:
        """``/* ... */`` skipped; ``/*!NNNNN`` (and ``/*M!`` on MariaDB) opens text that is
        read as the statement's own."""
        sql, i = self.sql, self.i
        marker = 3 if sql.startswith("/*!", i) else 4 if sql.startswith("/*M!", i) else 0
        if marker and not self.executable and (marker == 3 or self.mariadb):
            j = i + marker
            while j < len(sql) and sql[j].isdigit():  # the version it runs from
                j += 1
            self.executable, self.i = True, j
            return
        end = sql.find("*/", i + 2)
        if end < 0:
            raise LexError("the statement ends inside a comment")
        self.i = end + 2

    def _quoted(self, quote: str) -> None:
        sql, start = self.sql, self.i
        value: list[str] = []
        i = start + 1
        while i < len(sql):
            ch = sql[i]
            if ch == quote and sql[i + 1 : i + 2] == quote:
                value.append(quote)
                i += 2
            elif ch == quote:
                self._add(_QUOTES[quote], "".join(value), sql[start : i + 1], i + 1)
                return
            elif ch == "\\" and quote != "`" and i + 1 < len(sql):
                value.append(sql[i + 1])
                i += 2
            else:
                value.append(ch)
                i += 1
        raise LexError(f"the statement ends inside {quote}...{quote}")

    def _number(self) -> None:
        sql, start = self.sql, self.i
        i = start
        while i < len(sql) and (sql[i].isalnum() or sql[i] in "._"):
            if sql[i] in "eE" and sql[i + 1 : i + 2] in ("+", "-"):
                i += 1
            i += 1
        text = sql[start:i]
        kind = TokenKind.NUMBER if _is_number(text) else TokenKind.WORD  # 1abc is a name
        self._add(kind, text, text, i)

    def _word(self) -> None:
        sql, start = self.sql, self.i
        i = start
        while i < len(sql) and (sql[i].isalnum() or sql[i] in "_$@" or ord(sql[i]) > 127):
            i += 1
        self._add(TokenKind.WORD, sql[start:i], sql[start:i], i)

    def _add(self, kind: TokenKind, text: str, raw: str, end: int) -> None:
        self.found.append(Token(kind, text, raw))
        self.i = end


def _is_number(text: str) -> bool:
    if text.lower().startswith("0x"):
        return all(c in "0123456789abcdefABCDEF" for c in text[2:])
    try:
        float(text)
    except ValueError:
        return False
    return True
