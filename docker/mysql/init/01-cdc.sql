-- MySQL 8.4 first start (empty data volume), run as root by the image's entrypoint.
--
-- The entrypoint has already created the CDC user from MYSQL_USER / MYSQL_PASSWORD (set in
-- docker-compose.yaml from CDC_SOURCE_USER / CDC_SOURCE_PASSWORD), with no privileges and
-- no database (MYSQL_DATABASE is unset). The user name below must equal MYSQL_USER: a unit
-- test (tests/unit/test_docker_compose.py) checks that and runs airflow_cdc's own
-- validation of these grants.

-- Exactly what airflow_cdc.source.validation and the low watermark need:
--   REPLICATION SLAVE   read the binlog
--   REPLICATION CLIENT  SHOW BINARY LOG STATUS (MySQL 8.4 has no SHOW MASTER STATUS)
--   SELECT              the snapshot's chunk reads and the catalog, on the demo tables
--   CREATE, INSERT, UPDATE on airflow_cdc.*: the heartbeat table airflow_cdc_heartbeat
--     written when a chunk's low watermark is taken (airflow_cdc.source.watermark)
CREATE DATABASE IF NOT EXISTS airflow_cdc;
GRANT REPLICATION SLAVE, REPLICATION CLIENT ON *.* TO 'cdc'@'%';
GRANT SELECT ON demo.* TO 'cdc'@'%';
GRANT CREATE, INSERT, UPDATE ON airflow_cdc.* TO 'cdc'@'%';

-- The sample schema (like devtools/sample_data.py, which uses MariaDB's seq_
-- tables; MySQL fills the rows with a recursive CTE): an integer key and a composite string
-- key in a case-insensitive collation.
CREATE DATABASE demo CHARACTER SET utf8mb4 COLLATE utf8mb4_general_ci;

CREATE TABLE demo.orders (
    id BIGINT NOT NULL PRIMARY KEY,
    customer_email VARCHAR(64) NOT NULL,
    status ENUM('new', 'paid', 'shipped', 'cancelled') NOT NULL,
    quantity INT NOT NULL,
    amount DECIMAL(12, 2) NOT NULL,
    note VARCHAR(200) NULL,
    created_at DATETIME(6) NOT NULL,
    updated_at TIMESTAMP(6) NOT NULL DEFAULT CURRENT_TIMESTAMP(6)
);

CREATE TABLE demo.customers (
    country CHAR(2) NOT NULL,
    email VARCHAR(64) NOT NULL,
    name VARCHAR(100) NOT NULL,
    vip TINYINT(1) NOT NULL DEFAULT 0,
    signed_up DATE NOT NULL,
    PRIMARY KEY (country, email)
);

SET SESSION cte_max_recursion_depth = 100000;

INSERT INTO demo.orders
WITH RECURSIVE seq (n) AS (SELECT 1 UNION ALL SELECT n + 1 FROM seq WHERE n < 50000)
SELECT n,
       CONCAT('user', n % 5000, '@example.com'),
       ELT(1 + n % 4, 'new', 'paid', 'shipped', 'cancelled'),
       1 + n % 7,
       ROUND(n * 0.37 % 1000, 2),
       IF(n % 10 = 0, CONCAT('note ', n, ' – ünïcödé ✓'), NULL),
       TIMESTAMP('2024-01-01 00:00:00') + INTERVAL n SECOND,
       TIMESTAMP('2024-06-01 00:00:00') + INTERVAL n SECOND
FROM seq;

INSERT INTO demo.customers
WITH RECURSIVE seq (n) AS (SELECT 1 UNION ALL SELECT n + 1 FROM seq WHERE n < 5000)
SELECT ELT(1 + n % 6, 'DE', 'FR', 'US', 'jp', 'Br', 'IN'),
       CONCAT(IF(n % 3 = 0, 'User', 'user'), n, '@Example.com'),
       CONCAT('Customer ', n),
       n % 2,
       DATE('2020-01-01') + INTERVAL n % 1500 DAY
FROM seq;
