"""Tools for the demo and the tests: a throw-away local MariaDB, sample data."""
