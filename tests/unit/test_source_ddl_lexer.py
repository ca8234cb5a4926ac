"""``source.ddl.lexer``: a statement's tokens as the server reads them."""

from __future__ import annotations

from hypothesis import given
from hypothesis import strategies as st

from airflow_cdc.source.ddl.lexer import LexError, Token, TokenKind, tokens

TEXT = st.text(st.characters(min_codepoint=1, max_codepoint=0x10FFFF, exclude_categories=["Cs"]))


def _kinds(sql: str) -> list[tuple[TokenKind, str]]:
    return [(t.kind, t.text) for t in tokens(sql)]


@given(TEXT)
def test_a_string_comes_back_as_written(value: str) -> None:
    literal = "'" + value.replace("\\", "\\\\").replace("'", "''") + "'"
    assert _kinds(f"COMMENT {literal}") == [(TokenKind.WORD, "COMMENT"), (TokenKind.STRING, value)]


@given(TEXT.filter(bool))
def test_a_quoted_name_comes_back_as_written(name: str) -> None:
    quoted = "`" + name.replace("`", "``") + "`"
    (token,) = tokens(quoted)
    assert token == Token(TokenKind.NAME, name, quoted)


COMMENT_TEXT = st.text(st.characters(min_codepoint=32, max_codepoint=0x2FF)).filter(
    lambda s: "*/" not in s and not s.startswith(("!", "M!"))
)


@given(COMMENT_TEXT, st.sampled_from(["ALTER TABLE t ADD c INT", "DROP TABLE `a.b`, c"]))
def test_a_comment_anywhere_between_tokens_is_nothing(comment: str, sql: str) -> None:
    plain = _kinds(sql)
    words = sql.split(" ")
    for at in range(len(words) + 1):
        commented = " ".join([*words[:at], f"/*{comment}*/", *words[at:]])
        assert _kinds(commented) == plain


def test_line_comments_need_their_space_and_end_at_the_line() -> None:
    assert _kinds("a -- b\nc # d\ne") == [(TokenKind.WORD, w) for w in "ace"]
    assert _kinds("1--2") == [
        (TokenKind.NUMBER, "1"),
        (TokenKind.SYMBOL, "-"),
        (TokenKind.SYMBOL, "-"),
        (TokenKind.NUMBER, "2"),
    ]


def test_executable_comments_are_read_as_the_statement() -> None:
    assert _kinds("/*!50100 PARTITION BY */ x") == _kinds("PARTITION BY x")
    assert _kinds("/*!PARTITION*/") == _kinds("PARTITION")
    assert _kinds("/*M!100100 ONLINE */ x") == _kinds("ONLINE x")
    assert [t.text for t in tokens("/*M!100100 ONLINE */ x", mariadb=False)] == ["x"]
    assert _kinds("/*+ hint */ x") == _kinds("x")


def test_quotes_inside_quotes_and_escapes() -> None:
    assert _kinds("""'it''s' "say \\"hi\\"" `a``b` 'x\\\\'""") == [
        (TokenKind.STRING, "it's"),
        (TokenKind.STRING, 'say "hi"'),
        (TokenKind.NAME, "a`b"),
        (TokenKind.STRING, "x\\"),
    ]


def test_an_unclosed_quote_is_an_error() -> None:
    for sql in ("'abc", "`abc", "/* abc", "/*!50100 abc"):
        try:
            tokens(sql)
        except LexError:
            continue
        raise AssertionError(sql)


def test_numbers_and_trailing_semicolons() -> None:
    assert _kinds("1.5e-3 0x1F 1abc;;") == [
        (TokenKind.NUMBER, "1.5e-3"),
        (TokenKind.NUMBER, "0x1F"),
        (TokenKind.WORD, "1abc"),
    ]
