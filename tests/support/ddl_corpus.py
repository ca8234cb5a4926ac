"""DDL as clients, migration tools, dumps and online schema change tools write it, each
statement with the decision the stream must take for the followed table ``t`` when the
table's snapshot lies before it (``stream.schema_decisions``: after the chunks).

Written by us from the forms each tool produces (its documentation and its output);
``tests/unit/test_source_ddl_corpus.py`` checks every statement's decision, plain and
wrapped in the comments clients add, and ``tests/integration/test_ddl_corpus.py`` runs the
ones MariaDB takes on a real server and reads the decision back from the binlog.

``setup``: the tables the statement needs (see :data:`SETUPS`); ``mariadb=False``: MySQL's
syntax only (no MySQL server can be installed here, so it is checked as text only);
``decision`` None: the statement changes nothing of ``t``; ``logged=False``: MariaDB
writes no query event for it (the table was there already; a check), so the stream sees
nothing, which is what the decision says.
"""

from __future__ import annotations

from dataclasses import dataclass

__all__ = ["CORPUS", "SETUPS", "Ddl"]

_COLUMNS = """(id INT NOT NULL, a INT, b VARCHAR(20), note VARCHAR(20), qty INT,
    price DECIMAL(10,2), created DATETIME, email VARCHAR(100), PRIMARY KEY (id))"""

#: What each setup creates in an empty database (the statement then runs in it).
SETUPS: dict[str, tuple[str, ...]] = {
    "plain": (
        "CREATE TABLE u (id INT PRIMARY KEY)",
        f"CREATE TABLE t {_COLUMNS}",
        "CREATE INDEX i_a ON t (a)",
        "CREATE UNIQUE INDEX i_email ON t (email)",
    ),
    "none_indexed": (f"CREATE TABLE t {_COLUMNS}",),
    "fk": (
        "CREATE TABLE u (id INT PRIMARY KEY)",
        f"CREATE TABLE t {_COLUMNS}",
        "ALTER TABLE t ADD CONSTRAINT fk_u FOREIGN KEY (a) REFERENCES u (id)",
    ),
    "none": ("CREATE TABLE u (id INT PRIMARY KEY)",),
    "partitioned": (
        f"""CREATE TABLE t {_COLUMNS} PARTITION BY RANGE (id) (
            PARTITION p0 VALUES LESS THAN (100), PARTITION p1 VALUES LESS THAN (200),
            PARTITION p2 VALUES LESS THAN (300), PARTITION pmax VALUES LESS THAN MAXVALUE)""",
        f"CREATE TABLE t_arch {_COLUMNS}",
    ),
    "hash": (f"CREATE TABLE t {_COLUMNS} PARTITION BY HASH (id) PARTITIONS 4",),
    "ranged_open": (
        f"""CREATE TABLE t {_COLUMNS} PARTITION BY RANGE (id) (
            PARTITION p0 VALUES LESS THAN (100), PARTITION p1 VALUES LESS THAN (200))""",
    ),
    "shadow": (
        f"CREATE TABLE t {_COLUMNS}",
        "CREATE TABLE _t_new LIKE t",
        "CREATE TABLE _t_gho LIKE t",
        "CREATE TABLE t_new LIKE t",
    ),
    # A temporary t hides the real t in the session that made it (and runs the statement).
    "temporary": (
        "CREATE TABLE u (id INT PRIMARY KEY)",
        f"CREATE TABLE t {_COLUMNS}",
        "CREATE TEMPORARY TABLE t (id INT PRIMARY KEY, v INT)",
    ),
}


@dataclass(frozen=True)
class Ddl:
    source: str
    sql: str
    decision: str | None
    setup: str = "plain"
    mariadb: bool = True
    logged: bool = True


def _many(source: str, decision: str | None, *sqls: str, setup: str = "plain") -> list[Ddl]:
    return [Ddl(source, sql, decision, setup) for sql in sqls]


CORPUS: list[Ddl] = [
    # -- hand-written, in every spelling ---------------------------------------------------
    *_many(
        "hand",
        "evolve",
        "ALTER TABLE t ADD COLUMN c INT",
        "alter table t add c int",
        "ALTER TABLE `t` ADD `c` INT NULL",
        "ALTER TABLE t ADD COLUMN c INT NOT NULL DEFAULT 0",
        "ALTER TABLE t ADD COLUMN c VARCHAR(10) NOT NULL DEFAULT 'red'",
        "ALTER TABLE t ADD COLUMN c DATETIME DEFAULT CURRENT_TIMESTAMP",
        "ALTER TABLE t ADD COLUMN c INT FIRST",
        "ALTER TABLE t ADD COLUMN c INT AFTER a",
        "ALTER TABLE t ADD COLUMN IF NOT EXISTS c INT",
        "ALTER TABLE t ADD IF NOT EXISTS c INT",
        "ALTER TABLE t ADD COLUMN (c INT, d VARCHAR(5))",
        "ALTER TABLE t ADD COLUMN c INT, ADD COLUMN d INT",
        "ALTER TABLE t ADD c INT, ADD INDEX i_c (c)",
        "ALTER TABLE t ADD COLUMN c DECIMAL(14,4) DEFAULT -1.50",
        "ALTER TABLE t ADD COLUMN c ENUM('x','y') NOT NULL DEFAULT 'x'",
        "ALTER TABLE t ADD COLUMN c JSON",
        "ALTER TABLE t ADD COLUMN c INT AS (a + 1) VIRTUAL",
        "ALTER TABLE t ADD COLUMN c INT AS (a + 1) PERSISTENT",
        "ALTER TABLE t ADD COLUMN c TEXT COMMENT 'free text, with a comma'",
        "ALTER TABLE t ADD COLUMN c INT, ALGORITHM=INSTANT",
        "ALTER TABLE t ADD COLUMN c INT, ALGORITHM=INPLACE, LOCK=NONE",
        "ALTER ONLINE TABLE t ADD COLUMN c INT",
        "ALTER IGNORE TABLE t ADD COLUMN c INT",
        "ALTER TABLE IF EXISTS t ADD COLUMN c INT",
        "ALTER TABLE t WAIT 10 ADD COLUMN c INT",
        "ALTER TABLE t NOWAIT ADD COLUMN c INT",
        "ALTER TABLE t MODIFY qty BIGINT",
        "ALTER TABLE t MODIFY COLUMN qty BIGINT NOT NULL",
        "ALTER TABLE t MODIFY note VARCHAR(200)",
        "ALTER TABLE t MODIFY price DECIMAL(14,4)",
        "ALTER TABLE t MODIFY note VARCHAR(20) FIRST",
        "ALTER TABLE t MODIFY note VARCHAR(20) AFTER qty",
        "ALTER TABLE t MODIFY COLUMN IF EXISTS qty BIGINT",
        "ALTER TABLE t MODIFY note INT",
        "ALTER TABLE t CHANGE qty qty BIGINT",
        "ALTER TABLE t CHANGE COLUMN note remark VARCHAR(20)",
        "ALTER TABLE t CHANGE note remark VARCHAR(40) NOT NULL DEFAULT ''",
        "ALTER TABLE t RENAME COLUMN note TO remark",
        "ALTER TABLE t DROP COLUMN note",
        "ALTER TABLE t DROP note",
        "ALTER TABLE t DROP COLUMN IF EXISTS note",
        "ALTER TABLE t DROP COLUMN note, DROP COLUMN qty",
        "ALTER TABLE t DROP note, ADD remark VARCHAR(9)",
        "ALTER TABLE t CONVERT TO CHARACTER SET utf8mb4",
        "ALTER TABLE t CONVERT TO CHARACTER SET utf8mb4 COLLATE utf8mb4_unicode_ci",
        "ALTER TABLE t CONVERT TO CHARSET latin1",
        "ALTER TABLE t ADD COLUMN c INT;",
        "  ALTER TABLE t ADD COLUMN c INT  ;  ",
        "ALTER TABLE t\n  ADD COLUMN c INT\n    NULL",
        "ALTER\tTABLE\tt\tADD\tCOLUMN\tc\tINT",
    ),
    *_many(
        "hand",
        "nothing",
        "ALTER TABLE t ALTER COLUMN qty SET DEFAULT 3",
        "ALTER TABLE t ALTER qty DROP DEFAULT",
        "ALTER TABLE t ALTER COLUMN IF EXISTS qty SET DEFAULT 1",
        "ALTER TABLE t ADD INDEX i_b (b)",
        "ALTER TABLE t ADD KEY (a, b)",
        "ALTER TABLE t ADD UNIQUE INDEX u_email (email)",
        "ALTER TABLE t ADD UNIQUE KEY u_email (email)",
        "ALTER TABLE t ADD FULLTEXT INDEX f_note (note)",
        "ALTER TABLE t ADD INDEX IF NOT EXISTS i_a (a)",
        "ALTER TABLE t DROP INDEX i_a",
        "ALTER TABLE t ADD CONSTRAINT fk_a FOREIGN KEY (a) REFERENCES u (id)",
        "ALTER TABLE t ADD CONSTRAINT chk_qty CHECK (qty >= 0)",
        "ALTER TABLE t ADD CHECK (qty >= 0)",
        "ALTER TABLE t ENGINE=InnoDB",
        "ALTER TABLE t ENGINE = InnoDB",
        "ALTER TABLE t FORCE",
        "ALTER TABLE t ROW_FORMAT=DYNAMIC",
        "ALTER TABLE t ENGINE=InnoDB ROW_FORMAT=DYNAMIC",
        "ALTER TABLE t ENGINE=InnoDB, ROW_FORMAT=COMPACT",
        "ALTER TABLE t AUTO_INCREMENT=1000",
        "ALTER TABLE t COMMENT = 'orders, paid and not'",
        "ALTER TABLE t COMMENT 'x'",
        "ALTER TABLE t CHARACTER SET utf8mb4",
        "ALTER TABLE t DEFAULT CHARACTER SET utf8mb4 COLLATE utf8mb4_bin",
        "ALTER TABLE t DEFAULT CHARSET=latin1",
        "ALTER TABLE t COLLATE utf8mb4_general_ci",
        "ALTER TABLE t STATS_PERSISTENT=1",
        "ALTER TABLE t KEY_BLOCK_SIZE=8",
        "ALTER TABLE t DISABLE KEYS",
        "ALTER TABLE t ENABLE KEYS",
        "ALTER TABLE t ORDER BY a",
        "ALTER TABLE t ALGORITHM=COPY, FORCE",
        "ALTER TABLE t RENAME INDEX i_a TO i_a2",
        "ALTER TABLE t ALTER INDEX i_a IGNORED",
        "ALTER TABLE t MAX_ROWS=1000000",
        "ALTER TABLE t PAGE_COMPRESSED=1",
        "CREATE INDEX i_b ON t (b)",
        "CREATE UNIQUE INDEX u_b ON t (b)",
        "CREATE INDEX IF NOT EXISTS i_b ON t (b)",
        "CREATE OR REPLACE INDEX i_b ON t (b)",
        "DROP INDEX i_a ON t",
        "CREATE TRIGGER t_ins BEFORE INSERT ON t FOR EACH ROW SET NEW.qty = 0",
        "CREATE DEFINER=CURRENT_USER TRIGGER t_upd AFTER UPDATE ON t FOR EACH ROW "
        "INSERT INTO u (id) VALUES (NEW.id)",
        "CREATE TRIGGER IF NOT EXISTS t_del AFTER DELETE ON t FOR EACH ROW DELETE FROM u "
        "WHERE id = OLD.id",
    ),
    *_many(
        "hand",
        "replace",
        "ALTER TABLE t DROP PRIMARY KEY, ADD PRIMARY KEY (id, a)",
        "ALTER TABLE t DROP PRIMARY KEY, ADD CONSTRAINT pk2 PRIMARY KEY (id, qty)",
        "ALTER TABLE t ADD SYSTEM VERSIONING",
        "ALTER TABLE t DISCARD TABLESPACE",
    ),
    Ddl("hand", "ALTER TABLE t DROP PRIMARY KEY", "replace"),
    Ddl("hand", "CREATE TABLE IF NOT EXISTS t (id INT PRIMARY KEY)", "nothing", logged=False),
    Ddl("hand", "CREATE TABLE IF NOT EXISTS t LIKE u", "nothing", logged=False),
    Ddl("partitions", "ALTER TABLE t CHECK PARTITION p1", "nothing", "partitioned", logged=False),
    Ddl("hand", "TRUNCATE TABLE t", "truncate"),
    Ddl("hand", "TRUNCATE t", "truncate"),
    Ddl("hand", "truncate table `t`;", "truncate"),
    Ddl("hand", "DROP TABLE t", "drop"),
    Ddl("hand", "DROP TABLE IF EXISTS t", "drop"),
    Ddl("hand", "DROP TABLE t, u", "drop"),
    Ddl("hand", "DROP TABLE IF EXISTS u, t RESTRICT", "drop"),
    Ddl("hand", "RENAME TABLE t TO t2", "drop"),
    Ddl("hand", "RENAME TABLE t TO t2, u TO u2", "drop"),
    Ddl("hand", "ALTER TABLE t RENAME TO t2", "drop"),
    Ddl("hand", "ALTER TABLE t RENAME AS t2", "drop"),
    Ddl("hand", "CREATE TABLE t (id INT PRIMARY KEY, v INT)", "nothing", "none"),
    Ddl("hand", "CREATE TABLE t LIKE u", "nothing", "none"),
    Ddl("hand", "CREATE OR REPLACE TABLE t (id INT PRIMARY KEY, v INT)", "recreate"),
    Ddl("hand", "CREATE OR REPLACE TABLE t LIKE u", "recreate"),
    Ddl("hand", "CREATE OR REPLACE TABLE t SELECT id FROM u", "recreate"),
    Ddl("hand", "CREATE TABLE t SELECT id, 1 AS v FROM u", "nothing", "none"),
    Ddl("hand", "CREATE TABLE t AS SELECT id FROM u", "nothing", "none"),
    Ddl("hand", "DROP DATABASE {db}", "drop"),
    Ddl("hand", "DROP SCHEMA IF EXISTS {db}", "drop"),
    # -- not DDL of t -------------------------------------------------------------------------
    *_many(
        "hand",
        None,
        "ALTER TABLE u ADD COLUMN c INT",
        "DROP TABLE u",
        "CREATE TABLE v (id INT PRIMARY KEY)",
        "CREATE TEMPORARY TABLE tmp (id INT)",
        "CREATE VIEW vt AS SELECT id FROM t",
        "CREATE OR REPLACE VIEW vt AS SELECT id, a FROM t",
        "ALTER DATABASE {db} CHARACTER SET utf8mb4",
        "CREATE DATABASE IF NOT EXISTS other_db_x",
        "TRUNCATE TABLE u",
        "RENAME TABLE u TO u2",
    ),
    # -- GUI clients ------------------------------------------------------------------------
    *_many(
        "DBeaver",
        "evolve",
        "/* ApplicationName=DBeaver 24.2.0 - SQLEditor <Script-3.sql> */ ALTER TABLE t "
        "ADD COLUMN tag VARCHAR(10)",
        "/* ApplicationName=DBeaver 24.2.0 - SQLEditor <Script-3.sql> */ ALTER TABLE "
        "{db}.t MODIFY COLUMN qty bigint NULL",
        "/* ApplicationName=DBeaver 24.2.0 - Main */ ALTER TABLE {db}.t CHANGE note remark "
        "varchar(20) CHARACTER SET utf8mb4 COLLATE utf8mb4_general_ci NULL",
        "/* ApplicationName=DBeaver 24.2.0 - Main */ ALTER TABLE {db}.t DROP COLUMN note",
    ),
    Ddl(
        "DBeaver",
        "/* ApplicationName=DBeaver 24.2.0 - SQLEditor <Script-3.sql> */ TRUNCATE TABLE t",
        "truncate",
    ),
    *_many(
        "MySQL Workbench",
        "evolve",
        "ALTER TABLE `{db}`.`t` \nADD COLUMN `tag` VARCHAR(45) NULL AFTER `id`",
        "ALTER TABLE `{db}`.`t` \nCHANGE COLUMN `qty` `qty` BIGINT NULL DEFAULT NULL",
        "ALTER TABLE `{db}`.`t` \nCHANGE COLUMN `note` `remark` VARCHAR(20) NULL DEFAULT "
        "NULL ,\nADD COLUMN `tag` INT NULL AFTER `remark`",
        "ALTER TABLE `{db}`.`t` \nDROP COLUMN `note`",
    ),
    Ddl(
        "MySQL Workbench",
        "ALTER TABLE `{db}`.`t` \nADD INDEX `idx_a` (`a` ASC) VISIBLE",
        "nothing",
        mariadb=False,
    ),
    *_many(
        "phpMyAdmin",
        "evolve",
        "ALTER TABLE `t` ADD `tag` INT NOT NULL AFTER `id`",
        "ALTER TABLE `t` CHANGE `qty` `qty` BIGINT(20) NULL DEFAULT NULL",
        "ALTER TABLE `t` DROP `note`",
        "ALTER TABLE `t` ADD `c1` INT NULL AFTER `a`, ADD `c2` INT NULL AFTER `c1`",
    ),
    Ddl("phpMyAdmin", "ALTER TABLE `t` ADD INDEX(`a`)", "nothing"),
    *_many(
        "HeidiSQL",
        "evolve",
        "ALTER TABLE `t`\n\tADD COLUMN `tag` INT NULL DEFAULT NULL AFTER `email`",
        "ALTER TABLE `t`\n\tCHANGE COLUMN `qty` `qty` BIGINT NULL DEFAULT NULL AFTER `note`",
        '/* Entering session "local" */ ALTER TABLE `t`\n\tDROP COLUMN `note`',
    ),
    Ddl("HeidiSQL", "ALTER TABLE `t`\n\tADD INDEX `a` (`a`)", "nothing"),
    Ddl("DataGrip", "alter table t\n    add tag int null after id", "evolve"),
    Ddl("DataGrip", "alter table t\n    modify qty bigint null", "evolve"),
    Ddl("DataGrip", "create index t_a_index\n    on t (a)", "nothing"),
    Ddl("TablePlus", "ALTER TABLE `t` ADD COLUMN `tag` int;", "evolve"),
    Ddl("Sequel Ace", "ALTER TABLE `t` ADD `tag` INT  NULL  DEFAULT NULL  AFTER `a`", "evolve"),
    Ddl("mysql client", "-- add a tag\nALTER TABLE t ADD COLUMN tag INT", "evolve"),
    Ddl("mysql client", "# add a tag\nALTER TABLE t ADD COLUMN tag INT", "evolve"),
    Ddl("mysql client", "ALTER TABLE t ADD COLUMN tag INT -- the tag", "evolve"),
    Ddl("mysql client", "ALTER TABLE t /* inline */ ADD /* more */ COLUMN tag INT", "evolve"),
    Ddl("mysql client", "ALTER TABLE t ADD COLUMN tag INT /* trailing */", "evolve"),
    # -- ORMs' migration tools ------------------------------------------------------------
    *_many(
        "Rails",
        "evolve",
        "ALTER TABLE `t` ADD `email2` varchar(255)",
        "ALTER TABLE `t` ADD `flag` tinyint(1) DEFAULT 0 NOT NULL",
        "ALTER TABLE `t` CHANGE `qty` `qty` bigint DEFAULT NULL",
        "ALTER TABLE `t` RENAME COLUMN `note` TO `remark`",
        "ALTER TABLE `t` DROP COLUMN `note`",
        "ALTER TABLE `t` ADD `created_at` datetime(6) NOT NULL",
        "ALTER TABLE `t` MODIFY `qty` bigint NOT NULL",
    ),
    *_many(
        "Rails",
        "nothing",
        "CREATE INDEX `index_t_on_email` ON `t` (`email`)",
        "ALTER TABLE `t` ADD INDEX `index_t_on_a` (`a`)",
        "ALTER TABLE `t` ADD CONSTRAINT `fk_rails_0123456789` FOREIGN KEY (`a`) "
        "REFERENCES `u` (`id`)",
        "ALTER TABLE `t` ALTER COLUMN `qty` SET DEFAULT 0",
    ),
    Ddl("Rails", "DROP TABLE `t`", "drop"),
    Ddl("Rails", "DROP TABLE IF EXISTS `t` CASCADE", "drop"),
    Ddl("Rails", "RENAME TABLE `t` TO `orders`", "drop"),
    *_many(
        "Django",
        "evolve",
        "ALTER TABLE `t` ADD COLUMN `field` integer DEFAULT 0 NOT NULL",
        "ALTER TABLE `t` MODIFY `note` varchar(200) NOT NULL",
        "ALTER TABLE `t` MODIFY `qty` bigint NULL",
        "ALTER TABLE `t` RENAME COLUMN `email` TO `mail`",
        "ALTER TABLE `t` DROP COLUMN `email`",
        "ALTER TABLE `t` CHANGE `note` `remark` varchar(20) NULL",
    ),
    *_many(
        "Django",
        "nothing",
        "ALTER TABLE `t` ALTER COLUMN `qty` DROP DEFAULT",
        "CREATE INDEX `t_a_0123abcd` ON `t` (`a`)",
        "ALTER TABLE `t` ADD CONSTRAINT `t_email_uniq` UNIQUE (`email`)",
        "ALTER TABLE `t` ADD CONSTRAINT `t_a_fk_u_id` FOREIGN KEY (`a`) REFERENCES `u` (`id`)",
        "ALTER TABLE `t` DROP INDEX `i_email`",
    ),
    Ddl("Django", "ALTER TABLE `t` DROP FOREIGN KEY `fk_u`", "nothing", "fk"),
    Ddl("Django", "DROP TABLE `t` CASCADE", "drop"),
    Ddl("Django", "RENAME TABLE `t` TO `app_order`", "drop"),
    *_many(
        "Laravel",
        "evolve",
        "alter table `t` add `votes` int unsigned not null default '0' after `email`",
        "alter table `t` modify `note` varchar(50) not null",
        "alter table `t` change `note` `remark` varchar(255) not null",
        "alter table `t` rename column `note` to `remark`",
        "alter table `t` drop `note`",
        "alter table `t` drop `note`, drop `qty`",
        "alter table `t` add `meta` json null",
    ),
    *_many(
        "Laravel",
        "nothing",
        "alter table `t` add index `t_email_index`(`email`)",
        "alter table `t` add unique `t_email_unique`(`email`)",
        "alter table `t` drop index `i_a`",
        "alter table `t` comment = 'orders'",
    ),
    Ddl("Laravel", "drop table if exists `t`", "drop"),
    Ddl("Laravel", "rename table `t` to `orders_old`", "drop"),
    *_many(
        "Flyway",
        "evolve",
        "-- V2__add_tag.sql\nALTER TABLE t ADD COLUMN tag VARCHAR(20);",
        "/*\n * V3: widen qty\n */\nALTER TABLE t MODIFY qty BIGINT NOT NULL;",
        "# V4\nALTER TABLE t DROP COLUMN note;",
    ),
    Ddl(
        "Flyway",
        "-- V5: partitions\nALTER TABLE t TRUNCATE PARTITION p0;",
        "truncate_partitions",
        "partitioned",
    ),
    *_many(
        "Liquibase",
        "evolve",
        "ALTER TABLE {db}.t ADD tag VARCHAR(20) NULL",
        "ALTER TABLE {db}.t MODIFY qty BIGINT",
        "ALTER TABLE {db}.t CHANGE note remark VARCHAR(20)",
        "ALTER TABLE {db}.t DROP COLUMN note",
        "ALTER TABLE {db}.t ADD c1 INT NULL, ADD c2 INT NULL",
    ),
    Ddl("Liquibase", "CREATE INDEX IDX_T_A ON {db}.t(a)", "nothing"),
    Ddl(
        "Liquibase",
        "ALTER TABLE {db}.t ADD CONSTRAINT FK_T_U FOREIGN KEY (a) REFERENCES {db}.u (id)",
        "nothing",
    ),
    *_many(
        "Prisma",
        "evolve",
        "-- AlterTable\nALTER TABLE `t` ADD COLUMN `tag` VARCHAR(191) NULL;",
        "-- AlterTable\nALTER TABLE `t` MODIFY `qty` BIGINT NOT NULL;",
        "-- AlterTable\nALTER TABLE `t` DROP COLUMN `note`,\n    ADD COLUMN `remark` VARCHAR(191) NULL;",
    ),
    Ddl("Prisma", "-- CreateIndex\nCREATE INDEX `t_a_idx` ON `t`(`a`);", "nothing"),
    Ddl("Prisma", "-- DropTable\nDROP TABLE `t`;", "drop"),
    *_many(
        "Alembic",
        "evolve",
        "ALTER TABLE t ADD COLUMN tag VARCHAR(20)",
        "ALTER TABLE t MODIFY qty BIGINT NULL",
        "ALTER TABLE t CHANGE note remark VARCHAR(20) NULL",
        "ALTER TABLE t DROP COLUMN email",
    ),
    *_many(
        "Hibernate",
        "evolve",
        "alter table t add column tag varchar(255)",
        "alter table t add column version integer not null",
    ),
    Ddl(
        "Hibernate",
        "alter table t add constraint FKabc123 foreign key (a) references u (id)",
        "nothing",
    ),
    *_many(
        "TypeORM",
        "evolve",
        "ALTER TABLE `t` ADD `tag` varchar(255) NULL",
        "ALTER TABLE `t` CHANGE `email` `mail` varchar(100) NULL",
    ),
    Ddl("Sequelize", "ALTER TABLE `t` ADD `tag` VARCHAR(255);", "evolve"),
    Ddl("Sequelize", "ALTER TABLE `t` CHANGE `qty` `qty` BIGINT;", "evolve"),
    Ddl(
        "Doctrine",
        "ALTER TABLE t ADD tag VARCHAR(255) DEFAULT NULL, CHANGE qty qty BIGINT NOT NULL",
        "evolve",
    ),
    Ddl("Doctrine", "CREATE INDEX IDX_T_A ON t (a)", "nothing"),
    Ddl("Ecto", "ALTER TABLE `t` ADD `tag` varchar(255), MODIFY `qty` bigint", "evolve"),
    # -- mysqldump ---------------------------------------------------------------------------
    Ddl("mysqldump", "DROP TABLE IF EXISTS `t`", "drop"),
    Ddl("mysqldump", "/*!40000 ALTER TABLE `t` DISABLE KEYS */", "nothing"),
    Ddl("mysqldump", "/*!40000 ALTER TABLE `t` ENABLE KEYS */", "nothing"),
    Ddl(
        "mysqldump",
        "CREATE TABLE `t` (\n  `id` int(11) NOT NULL,\n  `v` int(11) DEFAULT NULL,\n"
        "  PRIMARY KEY (`id`)\n) ENGINE=InnoDB DEFAULT CHARSET=utf8mb4 "
        "COLLATE=utf8mb4_general_ci\n /*!50100 PARTITION BY RANGE (`id`)\n"
        "(PARTITION `p0` VALUES LESS THAN (100) ENGINE = InnoDB,\n"
        " PARTITION `pmax` VALUES LESS THAN MAXVALUE ENGINE = InnoDB) */",
        "nothing",
        "none",
    ),
    Ddl("mysqldump", "/*!40101 SET character_set_client = utf8 */", None),
    # -- partition maintenance ------------------------------------------------------------
    *_many(
        "partitions",
        "truncate_partitions",
        "ALTER TABLE t TRUNCATE PARTITION p1",
        "ALTER TABLE t TRUNCATE PARTITION p0, p1",
        "ALTER TABLE t DROP PARTITION p0",
        "ALTER TABLE t DROP PARTITION p0, p1",
        "ALTER TABLE t DROP PARTITION IF EXISTS p0",
        "/* monthly retention */ ALTER TABLE t DROP PARTITION p0",
        "ALTER TABLE `t` TRUNCATE PARTITION `p2`",
        "ALTER TABLE t CONVERT PARTITION p0 TO TABLE t_p0",
        setup="partitioned",
    ),
    Ddl("partitions", "ALTER TABLE t TRUNCATE PARTITION ALL", "truncate", "partitioned"),
    Ddl("partitions", "ALTER TABLE t TRUNCATE PARTITION p3", "truncate_partitions", "hash"),
    *_many(
        "partitions",
        "nothing",
        "ALTER TABLE t REORGANIZE PARTITION pmax INTO (PARTITION p3 VALUES LESS THAN (400), "
        "PARTITION pmax VALUES LESS THAN MAXVALUE)",
        "ALTER TABLE t REORGANIZE PARTITION p0, p1 INTO (PARTITION p01 VALUES LESS THAN (200))",
        "ALTER TABLE t ANALYZE PARTITION p0",
        "ALTER TABLE t OPTIMIZE PARTITION p1",
        "ALTER TABLE t REBUILD PARTITION p0, p1",
        "ALTER TABLE t REPAIR PARTITION ALL",
        "ALTER TABLE t REMOVE PARTITIONING",
        "ALTER TABLE t PARTITION BY HASH (id) PARTITIONS 2",
        "ALTER TABLE t PARTITION BY RANGE (id) (PARTITION q0 VALUES LESS THAN (1000), "
        "PARTITION qmax VALUES LESS THAN MAXVALUE)",
        "ALTER TABLE t ENGINE=InnoDB PARTITION BY KEY (id) PARTITIONS 3",
        setup="partitioned",
    ),
    *_many(
        "partitions",
        "nothing",
        "ALTER TABLE t COALESCE PARTITION 2",
        "ALTER TABLE t ADD PARTITION PARTITIONS 2",
        "ALTER TABLE t REORGANIZE PARTITION",
        setup="hash",
    ),
    Ddl(
        "partitions",
        "ALTER TABLE t PARTITION BY RANGE (id) (PARTITION p0 VALUES LESS THAN (10), "
        "PARTITION p1 VALUES LESS THAN MAXVALUE)",
        "nothing",
        "none_indexed",
    ),
    Ddl(
        "partitions",
        "ALTER TABLE t /*!50100 PARTITION BY RANGE (id) (PARTITION p0 VALUES LESS THAN (10), "
        "PARTITION p1 VALUES LESS THAN MAXVALUE) */",
        "nothing",
        "none_indexed",
    ),
    Ddl(
        "partitions",
        "ALTER TABLE t EXCHANGE PARTITION p1 WITH TABLE t_arch",
        "replace",
        "partitioned",
    ),
    Ddl(
        "partitions",
        "ALTER TABLE t EXCHANGE PARTITION p1 WITH TABLE t_arch WITHOUT VALIDATION",
        "replace",
        "partitioned",
        mariadb=False,  # MariaDB 11.4 and MySQL
    ),
    Ddl(
        "partitions",
        "ALTER TABLE t_arch EXCHANGE PARTITION p1 WITH TABLE t",
        "replace",
        mariadb=False,  # t is the partitioned one here: MariaDB refuses, as MySQL does
    ),
    Ddl(
        "partitions",
        "ALTER TABLE t ADD PARTITION (PARTITION p9 VALUES LESS THAN (900))",
        "nothing",
        "ranged_open",
    ),
    Ddl(
        "partitions",
        "ALTER TABLE t DISCARD PARTITION p0 TABLESPACE",
        "replace",
        mariadb=False,
    ),
    Ddl("partitions", "ALTER TABLE t IMPORT PARTITION p0 TABLESPACE", "replace", mariadb=False),
    # -- pt-online-schema-change -----------------------------------------------------------
    Ddl(
        "pt-online-schema-change",
        "CREATE TABLE `{db}`.`_t_new` (\n  `id` int(11) NOT NULL,\n  `a` int(11) DEFAULT NULL,"
        "\n  PRIMARY KEY (`id`)\n) ENGINE=InnoDB DEFAULT CHARSET=utf8mb4",
        "nothing",
    ),
    Ddl(
        "pt-online-schema-change",
        "ALTER TABLE `{db}`.`_t_new` ADD COLUMN color VARCHAR(10) NOT NULL DEFAULT 'red', "
        "MODIFY qty BIGINT",
        "nothing",
        "shadow",
    ),
    Ddl(
        "pt-online-schema-change",
        "CREATE TRIGGER `pt_osc_{db}_t_del` AFTER DELETE ON `{db}`.`t` FOR EACH ROW BEGIN "
        "DECLARE CONTINUE HANDLER FOR 1146 begin end; DELETE IGNORE FROM `{db}`.`_t_new` "
        "WHERE `{db}`.`_t_new`.`id` <=> OLD.`id`; END",
        "nothing",
        "shadow",
    ),
    Ddl(
        "pt-online-schema-change",
        "CREATE TRIGGER `pt_osc_{db}_t_ins` AFTER INSERT ON `{db}`.`t` FOR EACH ROW BEGIN "
        "DECLARE CONTINUE HANDLER FOR 1146 begin end; REPLACE INTO `{db}`.`_t_new` (`id`, "
        "`a`) VALUES (NEW.`id`, NEW.`a`);END",
        "nothing",
        "shadow",
    ),
    Ddl(
        "pt-online-schema-change",
        "RENAME TABLE `{db}`.`t` TO `{db}`.`_t_old`, `{db}`.`_t_new` TO `{db}`.`t`",
        "replace",  # a replacement unless the shadow's record says otherwise (table_swaps)
        "shadow",
    ),
    Ddl("pt-online-schema-change", "DROP TABLE IF EXISTS `{db}`.`_t_new`", "nothing", "shadow"),
    Ddl("pt-online-schema-change", "ANALYZE TABLE `{db}`.`_t_new` /* pt-osc */", None, "shadow"),
    # -- gh-ost ------------------------------------------------------------------------------
    Ddl("gh-ost", "create /* gh-ost */ table `{db}`.`_t_gho` like `{db}`.`t`", "nothing"),
    Ddl(
        "gh-ost",
        "alter /* gh-ost */ table `{db}`.`_t_gho` add column color varchar(10) not null "
        "default 'red'",
        "nothing",
        "shadow",
    ),
    Ddl(
        "gh-ost",
        "create /* gh-ost */ table `{db}`.`_t_ghc` (\n\t\t\tid bigint auto_increment,\n\t\t\t"
        "last_update timestamp not null DEFAULT CURRENT_TIMESTAMP ON UPDATE "
        "CURRENT_TIMESTAMP,\n\t\t\thint varchar(64) charset ascii not null,\n\t\t\tvalue "
        "varchar(4096) charset ascii not null,\n\t\t\tprimary key(id),\n\t\t\tunique key "
        "hint_uidx(hint)\n\t\t) auto_increment=256",
        "nothing",
    ),
    Ddl(
        "gh-ost",
        "create /* gh-ost */ table `{db}`.`_t_del` (\n\t\t\tid int auto_increment primary key"
        "\n\t\t) engine=InnoDB comment='ghost-cut-over-sentry'",
        "nothing",
    ),
    Ddl(
        "gh-ost",
        "rename /* gh-ost */ table `{db}`.`t` to `{db}`.`_t_del`, `{db}`.`_t_gho` to `{db}`.`t`",
        "replace",
        "shadow",
    ),
    Ddl("gh-ost", "drop /* gh-ost */ table if exists `{db}`.`_t_gho`", "nothing", "shadow"),
    # -- the hand-made copy and swap ----------------------------------------------------
    Ddl("copy and swap", "CREATE TABLE t_new LIKE t", None),
    Ddl("copy and swap", "RENAME TABLE t TO t_old, t_new TO t", "replace", "shadow"),
    Ddl("copy and swap", "RENAME TABLE t TO tmp, t_new TO t, tmp TO t_old", "replace", "shadow"),
    # -- temporary tables named like t (ROW format: MariaDB writes none of them) ------------
    *_many(
        "temporary tables",
        None,
        "CREATE TEMPORARY TABLE t (id INT PRIMARY KEY, v INT)",
        "create temporary table if not exists `{db}`.`t` (id int)",
        "CREATE TEMPORARY TABLE t LIKE u",
        "CREATE TEMPORARY TABLE t AS SELECT * FROM u",
        "CREATE TEMPORARY TABLE t (id INT PRIMARY KEY) ENGINE=MEMORY SELECT id FROM u",
        "CREATE OR REPLACE TEMPORARY TABLE t (id INT)",
        "CREATE /*!40005 TEMPORARY */ TABLE t (id INT)",
        "CREATE /* a note */ TEMPORARY -- here\n TABLE `t` (id INT)",
    ),
    *_many(
        "temporary tables",
        None,
        "DROP TEMPORARY TABLE t",
        "drop temporary table if exists t",
        "DROP TEMPORARY TABLE IF EXISTS `{db}`.`t`",
        "DROP TEMPORARY TABLES IF EXISTS t, nothing_here",
        "DROP /*!40005 TEMPORARY */ TABLE IF EXISTS `t`",
        "DROP /* a note */ TEMPORARY /* another */ TABLE {db}.t",
        setup="temporary",
    ),
    # The server drops, alters or truncates the temporary t and logs nothing of it.
    Ddl("temporary tables", "DROP TABLE `{db}`.t", "drop", "temporary", logged=False),
    Ddl(
        "temporary tables",
        "ALTER TABLE t ADD COLUMN only_temp INT",
        "evolve",
        "temporary",
        logged=False,
    ),
    Ddl("temporary tables", "TRUNCATE TABLE {db}.t", "truncate", "temporary", logged=False),
    Ddl("temporary tables", "CREATE INDEX i_v ON t (v)", "nothing", "temporary", logged=False),
]
