"""Parsing SHOW GRANTS lines (MariaDB and MySQL spellings)."""

from __future__ import annotations

import pytest

from airflow_cdc.model import TableId
from airflow_cdc.source.grants import Grant, Grants, parse_grant

T = TableId("shop", "orders")


def test_mariadb_global_line() -> None:
    line = (
        "GRANT SELECT, RELOAD, SHOW DATABASES, REPLICATION SLAVE, BINLOG MONITOR ON *.* TO "
        "`cdc`@`%` IDENTIFIED BY PASSWORD '*8B2AB69632A9F9EB93E6D3710AE739A30FB461C6'"
    )
    grant = parse_grant(line)
    assert grant == Grant(
        frozenset({"SELECT", "RELOAD", "SHOW DATABASES", "REPLICATION SLAVE", "BINLOG MONITOR"}),
        None,
        None,
    )


@pytest.mark.parametrize(
    "line",
    [
        "GRANT `reader` TO `cdc`@`%`",
        "GRANT PROXY ON ''@'%' TO 'root'@'localhost' WITH GRANT OPTION",
        "GRANT EXECUTE ON PROCEDURE `shop`.`p` TO `cdc`@`%`",
        "GRANT EXECUTE ON FUNCTION `shop`.`f` TO `cdc`@`%`",
        "SET DEFAULT ROLE `reader` FOR `cdc`@`%`",
    ],
)
def test_lines_without_table_privileges(line: str) -> None:
    assert parse_grant(line) is None


def test_all_privileges_global() -> None:
    grants = Grants.parse(["GRANT ALL PRIVILEGES ON *.* TO `root`@`%` WITH GRANT OPTION"])
    assert grants.has_global("REPLICATION SLAVE")
    assert grants.can_select(T)


def test_database_level_and_wildcards() -> None:
    grants = Grants.parse(
        [
            "GRANT USAGE ON *.* TO `cdc`@`%`",
            "GRANT SELECT ON `shop`.* TO `cdc`@`%`",
            "GRANT ALL PRIVILEGES ON `an\\_other`.* TO `cdc`@`%`",
            "GRANT SELECT ON `logs_%`.* TO `cdc`@`%`",
        ]
    )
    assert not grants.has_global("REPLICATION SLAVE")
    assert grants.can_select(T)
    assert grants.can_select(TableId("an_other", "x"))
    assert not grants.can_select(TableId("anXother", "x"))  # \_ is a literal underscore
    assert grants.can_select(TableId("logs_2024", "x"))
    assert not grants.can_select(TableId("shop2", "orders"))


def test_table_level_with_backticks_and_dots() -> None:
    grants = Grants.parse(
        [
            "GRANT SELECT, INSERT ON `we.ird``db`.`or.ders` TO `cdc`@`%`",
            "GRANT SELECT (`id`, `name`), UPDATE ON `shop`.`customers` TO `cdc`@`%`",
        ]
    )
    assert grants.can_select(TableId("we.ird`db", "or.ders"))
    assert not grants.can_select(TableId("we.ird`db", "other"))
    # A column-level SELECT does not allow SELECT * of the table.
    assert not grants.can_select(TableId("shop", "customers"))


def test_mysql_dynamic_privileges_and_roles_lines() -> None:
    grants = Grants.parse(
        [
            "GRANT REPLICATION SLAVE, REPLICATION CLIENT ON *.* TO `cdc`@`%`",
            "GRANT BACKUP_ADMIN,REPLICATION_SLAVE_ADMIN ON *.* TO `cdc`@`%`",
            "GRANT `r_read`@`%` TO `cdc`@`%`",
            "GRANT SELECT ON shop.orders TO cdc@'%'",
        ]
    )
    assert grants.has_global("REPLICATION CLIENT")
    assert grants.has_global("REPLICATION_SLAVE_ADMIN")
    assert grants.can_select(T)


def test_case_insensitive_names_when_server_folds_case() -> None:
    lines = ["GRANT SELECT ON `Shop`.`Orders` TO `cdc`@`%`"]
    assert not Grants.parse(lines).can_select(T)
    assert Grants.parse(lines, case_sensitive=False).can_select(T)
