"""The PostgreSQL state backend (`state.backend: "postgres"`): psycopg 3 with its pool, one
module per stateful domain, numbered migrations in `sql/`."""
