"""MySQL/MariaDB access: connections, server facts, validation, catalog, read views, keyset SQL."""
