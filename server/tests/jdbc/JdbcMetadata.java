// pgjdbc (Debian's libpostgresql-jdbc-java) reading a server's catalog as DBeaver and Metabase
// do: every DatabaseMetaData call they make (schemas, tables, columns, keys, indexes, types,
// functions, procedures, privileges, ...), the ResultSetMetaData of a query, uuid and jsonb
// parameters (setObject(UUID), a jsonb PGobject) read back with getObject, and Metabase's own
// sync queries (describe-database, table privileges, describe-fields, describe-fks,
// describe-indexes) as its postgres driver sends them. Every expected value below is what
// PostgreSQL 15 answers, and the program passes against PostgreSQL 15 unchanged.
//
// Against Sluice (its version() says so), the checks in KNOWN_DIFFERENCES are expected to fail,
// each for the reason given there; one of them that passes fails the run, so that the list stays
// true. Any other failed check fails the run against either server.
//
// Run by server/tests/it/jdbc.rs:
//   java -cp /usr/share/java/postgresql.jar JdbcMetadata.java <host> <port> <user> <database> <password>
// Prints "jdbc metadata ok" when every check held.

import java.math.BigDecimal;
import java.sql.Array;
import java.sql.Connection;
import java.sql.DatabaseMetaData;
import java.sql.DriverManager;
import java.sql.PreparedStatement;
import java.sql.ResultSet;
import java.sql.ResultSetMetaData;
import java.sql.SQLException;
import java.sql.SQLFeatureNotSupportedException;
import java.sql.Statement;
import java.sql.Types;
import java.util.ArrayList;
import java.util.Arrays;
import java.util.Collections;
import java.util.LinkedHashMap;
import java.util.List;
import java.util.Map;
import java.util.Properties;
import java.util.UUID;

import org.postgresql.util.PGobject;

public class JdbcMetadata {
    /** Checks Sluice fails, by name, with the reason. */
    static final Map<String, String> KNOWN_DIFFERENCES = new LinkedHashMap<>();

    static {
        String serial = "a serial column is bigint in Sluice (Delta identity columns are longs: engine/src/sql/ddl.rs "
            + "define_columns), integer in PostgreSQL";
        KNOWN_DIFFERENCES.put("getColumns shop.customers.id", serial);
        KNOWN_DIFFERENCES.put("getBestRowIdentifier shop.customers", serial);
        KNOWN_DIFFERENCES.put("metabase describe-fields shop.customers", serial);
        KNOWN_DIFFERENCES.put("getColumns shop.big_orders.amount", "a view's columns have no type modifier in "
            + "pg_attribute (numeric, not numeric(10,2)): datafusion-pg-catalog reads them from the view's Arrow schema");
        KNOWN_DIFFERENCES.put("ResultSetMetaData amount", "RowDescription gives a numeric(10,2) column the type "
            + "modifier -1 (server/src/pg/wire_types.rs names varchar(n) and char(n), not numeric(p,s)), so "
            + "getPrecision/getScale are 0/0 and not 10/2");
        String source = "RowDescription's table OID and column number are 0 for every column (arrow-pg's FieldInfo), "
            + "so pgjdbc cannot look a column up in pg_attribute: no table name, nullability or auto-increment";
        KNOWN_DIFFERENCES.put("ResultSetMetaData id", source + " (id reads int8, not bigserial)");
        KNOWN_DIFFERENCES.put("ResultSetMetaData sources", source);
    }

    static boolean sluice;
    static int checks;
    static final List<String> failures = new ArrayList<>();
    static final List<String> knownFailures = new ArrayList<>();

    /** Records one check: `ok`, or the difference `detail` describes. */
    static void check(String name, boolean ok, String detail) {
        checks++;
        boolean known = sluice && KNOWN_DIFFERENCES.containsKey(name);
        if (ok && known) {
            failures.add(name + ": now matches PostgreSQL; remove it from KNOWN_DIFFERENCES");
        } else if (!ok && known) {
            knownFailures.add(name + " (" + KNOWN_DIFFERENCES.get(name) + "): " + detail);
        } else if (!ok) {
            failures.add(name + ": " + detail);
        }
    }

    static void same(String name, Object expected, Object actual) {
        boolean ok = expected == null ? actual == null : expected.equals(actual);
        check(name, ok, "expected <" + expected + "> but got <" + actual + ">");
    }

    /** Compares rows (the columns `columns`, joined by |) with the expected ones, in order. */
    static void rows(String name, List<String> actual, String... expected) {
        if (actual == null) {
            return; // the query failed, and said so under its name
        }
        List<String> want = Arrays.asList(expected);
        if (want.equals(actual)) {
            check(name, true, "");
            return;
        }
        StringBuilder detail = new StringBuilder("\n    expected:");
        for (String row : want) {
            detail.append("\n      ").append(row);
        }
        detail.append("\n    got:");
        for (String row : actual) {
            detail.append("\n      ").append(row);
        }
        check(name, false, detail.toString());
    }

    interface Call {
        ResultSet run() throws SQLException;
    }

    /**
     * The rows of a metadata call, its `columns` joined by |; null (and the check `name` failed)
     * when the call throws.
     */
    static List<String> fetch(String name, Call call, String... columns) {
        try (ResultSet r = call.run()) {
            List<String> out = new ArrayList<>();
            while (r.next()) {
                StringBuilder row = new StringBuilder();
                for (String column : columns) {
                    row.append(row.length() > 0 ? "|" : "").append(r.getString(column));
                }
                out.add(row.toString());
            }
            return out;
        } catch (SQLException e) {
            check(name, false, "SQLSTATE " + e.getSQLState() + ": " + e.getMessage());
            return null;
        }
    }

    /** `fetch` then `rows`: a call that throws fails its check once. */
    static void expect(String name, Call call, String[] columns, String... expected) {
        List<String> actual = fetch(name, call, columns);
        if (actual != null) {
            rows(name, actual, expected);
        }
    }

    static String[] cols(String... names) {
        return names;
    }

    /** The rows of a query whose every column is read as text, joined by |. */
    static List<String> query(Connection c, String name, String sql) {
        return fetch(name, () -> c.createStatement().executeQuery(sql), columnsOf(c, sql));
    }

    static String[] columnsOf(Connection c, String sql) {
        try (PreparedStatement s = c.prepareStatement(sql)) {
            ResultSetMetaData m = s.getMetaData();
            String[] out = new String[m.getColumnCount()];
            for (int i = 0; i < out.length; i++) {
                out[i] = m.getColumnLabel(i + 1);
            }
            return out;
        } catch (SQLException e) {
            return new String[0];
        }
    }

    static void execute(Connection c, String sql) throws SQLException {
        try (Statement s = c.createStatement()) {
            s.execute(sql);
        }
    }

    public static void main(String[] args) throws Exception {
        String url = "jdbc:postgresql://" + args[0] + ":" + args[1] + "/" + args[3];
        Properties properties = new Properties();
        properties.setProperty("user", args[2]);
        properties.setProperty("password", args[4]);
        try (Connection c = DriverManager.getConnection(url, properties)) {
            try (Statement s = c.createStatement(); ResultSet r = s.executeQuery("SELECT version()")) {
                r.next();
                sluice = r.getString(1).contains("Sluice");
            }
            createSchema(c);
            DatabaseMetaData md = c.getMetaData();
            database(md, args[2]);
            schemasAndTables(md);
            columns(md);
            keys(md);
            indexes(md);
            types(md);
            routines(md);
            privileges(md);
            rowIdentifiers(md);
            resultSetMetaData(c);
            parameters(c);
            metabase(c);
        }
        System.out.println(checks + " checks against " + (sluice ? "Sluice" : "PostgreSQL") + ", "
            + knownFailures.size() + " known differences");
        for (String known : knownFailures) {
            System.out.println("  known difference: " + known);
        }
        if (!failures.isEmpty()) {
            throw new AssertionError(failures.size() + " checks failed:\n  " + String.join("\n  ", failures));
        }
        System.out.println("jdbc metadata ok");
    }

    /**
     * A table with a serial key and a UNIQUE constraint, one with an identity key, a UNIQUE index,
     * an index and everyday types, one with a composite key whose columns are not in table order,
     * foreign keys between them, and a view.
     */
    static void createSchema(Connection c) throws SQLException {
        for (String drop : new String[] {"DROP VIEW IF EXISTS shop.big_orders", "DROP TABLE IF EXISTS shop.order_lines",
                "DROP TABLE IF EXISTS shop.orders", "DROP TABLE IF EXISTS shop.customers", "DROP SCHEMA IF EXISTS shop"}) {
            execute(c, drop);
        }
        execute(c, "CREATE SCHEMA shop");
        execute(c, "CREATE TABLE shop.customers (id serial PRIMARY KEY, email varchar(20) NOT NULL, name text, "
            + "balance numeric(10,2) DEFAULT 0, CONSTRAINT customers_email_key UNIQUE (email))");
        execute(c, "CREATE TABLE shop.orders (id bigint GENERATED BY DEFAULT AS IDENTITY PRIMARY KEY, "
            + "customer_id integer NOT NULL, public_id uuid NOT NULL, amount numeric(10,2), details jsonb, tags text[], "
            + "placed_at timestamp, paid boolean DEFAULT false, note varchar(20))");
        execute(c, "CREATE UNIQUE INDEX orders_public_id_idx ON shop.orders (public_id)");
        execute(c, "CREATE INDEX orders_placed_at_idx ON shop.orders (placed_at)");
        execute(c, "CREATE TABLE shop.order_lines (line_no integer NOT NULL, order_id bigint NOT NULL, sku text, "
            + "qty smallint, price double precision, PRIMARY KEY (order_id, line_no))");
        execute(c, "CREATE VIEW shop.big_orders AS SELECT id, amount FROM shop.orders WHERE amount > 100");
        String refused = null;
        try {
            execute(c, "ALTER TABLE shop.orders ADD CONSTRAINT orders_customer_id_fkey "
                + "FOREIGN KEY (customer_id) REFERENCES shop.customers (id)");
            execute(c, "ALTER TABLE shop.order_lines ADD CONSTRAINT order_lines_order_id_fkey "
                + "FOREIGN KEY (order_id) REFERENCES shop.orders (id)");
        } catch (SQLException e) {
            refused = e.getSQLState() + " " + e.getMessage();
        }
        check("create foreign keys", refused == null, "refused: " + refused);
        execute(c, "INSERT INTO shop.customers (email, name, balance) VALUES ('ann@example.com', 'Ann', 10.50), "
            + "('bob@example.com', 'Bob', 0)");
    }

    static void database(DatabaseMetaData md, String user) throws SQLException {
        same("getDatabaseProductName", "PostgreSQL", md.getDatabaseProductName());
        String version = md.getDatabaseProductVersion();
        check("getDatabaseProductVersion", version.matches("\\d+\\.\\d+( .*)?") && md.getDatabaseMajorVersion() >= 12,
            "a PostgreSQL version of 12 or later, not " + version);
        same("getDriverName", "PostgreSQL JDBC Driver", md.getDriverName());
        same("getUserName", user, md.getUserName());
        same("getIdentifierQuoteString", "\"", md.getIdentifierQuoteString());
        String keywords = md.getSQLKeywords();
        check("getSQLKeywords", keywords.contains("limit") && keywords.contains("returning") && !keywords.contains("select"),
            "pg_get_keywords' non-SQL:2003 words, not " + keywords);
        same("getSearchStringEscape", "\\", md.getSearchStringEscape());
        same("getDefaultTransactionIsolation", Connection.TRANSACTION_READ_COMMITTED, md.getDefaultTransactionIsolation());
        same("getMaxColumnNameLength", 63, md.getMaxColumnNameLength());
        expect("getClientInfoProperties", md::getClientInfoProperties, cols("NAME", "MAX_LEN"), "ApplicationName|63");
    }

    static void schemasAndTables(DatabaseMetaData md) {
        // Sluice has one schema of its own, `sluice` (its system tables), which PostgreSQL has not.
        List<String> schemas = fetch("getSchemas", md::getSchemas, "TABLE_SCHEM", "TABLE_CATALOG");
        if (schemas != null) {
            schemas.remove("sluice|null");
            rows("getSchemas", schemas, "information_schema|null", "pg_catalog|null", "public|null", "shop|null");
        }
        expect("getSchemas sh%", () -> md.getSchemas(null, "sh%"), cols("TABLE_SCHEM"), "shop");
        expect("getCatalogs", md::getCatalogs, cols("TABLE_CAT"), "sluice");
        List<String> types = fetch("getTableTypes", md::getTableTypes, "TABLE_TYPE");
        check("getTableTypes", types != null && types.containsAll(List.of("TABLE", "VIEW", "MATERIALIZED VIEW",
            "INDEX", "SEQUENCE", "SYSTEM TABLE")), "got " + types);
        String[] tableColumns = cols("TABLE_CAT", "TABLE_SCHEM", "TABLE_NAME", "TABLE_TYPE", "REMARKS");
        // What DBeaver's navigator and Metabase ask (Metabase: the table types it syncs).
        expect("getTables shop TABLE VIEW", () -> md.getTables(null, "shop", "%", new String[] {"TABLE", "VIEW"}),
            tableColumns, "null|shop|customers|TABLE|null", "null|shop|order_lines|TABLE|null",
            "null|shop|orders|TABLE|null", "null|shop|big_orders|VIEW|null");
        expect("getTables metabase types", () -> md.getTables(null, "shop", "%", new String[] {"TABLE",
            "PARTITIONED TABLE", "VIEW", "FOREIGN TABLE", "MATERIALIZED VIEW", "EXTERNAL TABLE", "DYNAMIC_TABLE"}),
            tableColumns, "null|shop|customers|TABLE|null", "null|shop|order_lines|TABLE|null",
            "null|shop|orders|TABLE|null", "null|shop|big_orders|VIEW|null");
        expect("getTables order% TABLE", () -> md.getTables(null, null, "order%", new String[] {"TABLE"}),
            tableColumns, "null|shop|order_lines|TABLE|null", "null|shop|orders|TABLE|null");
        expect("getTables shop %_idx INDEX", () -> md.getTables(null, "shop", "%\\_idx", new String[] {"INDEX"}),
            tableColumns, "null|shop|orders_placed_at_idx|INDEX|null", "null|shop|orders_public_id_idx|INDEX|null");
        expect("getTables shop all types", () -> md.getTables(null, "shop", "%", null), cols("TABLE_NAME", "TABLE_TYPE"),
            "customers_email_key|INDEX", "customers_pkey|INDEX", "order_lines_pkey|INDEX", "orders_pkey|INDEX",
            "orders_placed_at_idx|INDEX", "orders_public_id_idx|INDEX", "customers_id_seq|SEQUENCE",
            "orders_id_seq|SEQUENCE", "customers|TABLE", "order_lines|TABLE", "orders|TABLE", "big_orders|VIEW");
        expect("getTables pg_catalog SYSTEM TABLE", () -> md.getTables(null, "pg_catalog", "pg_class",
            new String[] {"SYSTEM TABLE"}), tableColumns, "null|pg_catalog|pg_class|SYSTEM TABLE|null");
        expect("getTables pg_catalog SYSTEM VIEW", () -> md.getTables(null, "pg_catalog", "pg_tables",
            new String[] {"SYSTEM VIEW"}), tableColumns, "null|pg_catalog|pg_tables|SYSTEM VIEW|null");
        // Not implemented by pgjdbc: it answers 0A000 itself, whatever the server.
        for (Map.Entry<String, Call> call : Map.<String, Call>of(
                "getSuperTables", () -> md.getSuperTables(null, "shop", "%"),
                "getSuperTypes", () -> md.getSuperTypes(null, "shop", "%"),
                "getAttributes", () -> md.getAttributes(null, "shop", "%", "%"),
                "getPseudoColumns", () -> md.getPseudoColumns(null, "shop", "%", "%")).entrySet()) {
            String state;
            try {
                call.getValue().run().close();
                state = "no error";
            } catch (SQLFeatureNotSupportedException e) {
                state = e.getSQLState();
            } catch (SQLException e) {
                state = "a server error " + e.getSQLState();
            }
            same(call.getKey(), "0A000", state);
        }
    }

    static void columns(DatabaseMetaData md) {
        String[] columns = cols("COLUMN_NAME", "DATA_TYPE", "TYPE_NAME", "COLUMN_SIZE", "DECIMAL_DIGITS",
            "NUM_PREC_RADIX", "NULLABLE", "COLUMN_DEF", "CHAR_OCTET_LENGTH", "ORDINAL_POSITION", "IS_NULLABLE",
            "IS_AUTOINCREMENT", "IS_GENERATEDCOLUMN");
        Map<String, String[]> expected = new LinkedHashMap<>();
        expected.put("customers", new String[] {
            "id|4|serial|10|0|10|0|nextval('shop.customers_id_seq'::regclass)|10|1|NO|YES|NO",
            "email|12|varchar|20|0|10|0|null|20|2|NO|NO|NO",
            "name|12|text|2147483647|0|10|1|null|2147483647|3|YES|NO|NO",
            "balance|2|numeric|10|2|10|1|0|10|4|YES|NO|NO"});
        expected.put("orders", new String[] {
            "id|-5|int8|19|0|10|0|null|19|1|NO|YES|NO",
            "customer_id|4|int4|10|0|10|0|null|10|2|NO|NO|NO",
            "public_id|1111|uuid|2147483647|0|10|0|null|2147483647|3|NO|NO|NO",
            "amount|2|numeric|10|2|10|1|null|10|4|YES|NO|NO",
            "details|1111|jsonb|2147483647|0|10|1|null|2147483647|5|YES|NO|NO",
            "tags|2003|_text|2147483647|0|10|1|null|2147483647|6|YES|NO|NO",
            "placed_at|93|timestamp|29|6|10|1|null|29|7|YES|NO|NO",
            "paid|-7|bool|1|0|10|1|false|1|8|YES|NO|NO",
            "note|12|varchar|20|0|10|1|null|20|9|YES|NO|NO"});
        expected.put("order_lines", new String[] {
            "line_no|4|int4|10|0|10|0|null|10|1|NO|NO|NO",
            "order_id|-5|int8|19|0|10|0|null|19|2|NO|NO|NO",
            "sku|12|text|2147483647|0|10|1|null|2147483647|3|YES|NO|NO",
            "qty|5|int2|5|0|10|1|null|5|4|YES|NO|NO",
            "price|8|float8|17|17|10|1|null|17|5|YES|NO|NO"});
        expected.put("big_orders", new String[] {
            "id|-5|int8|19|0|10|1|null|19|1|YES|NO|NO",
            "amount|2|numeric|10|2|10|1|null|10|2|YES|NO|NO"});
        for (Map.Entry<String, String[]> table : expected.entrySet()) {
            String name = "getColumns shop." + table.getKey();
            List<String> actual = fetch(name, () -> md.getColumns(null, "shop", table.getKey(), "%"), columns);
            if (actual == null) {
                continue;
            }
            // One check per column, so that a difference names its column.
            for (int i = 0; i < Math.max(actual.size(), table.getValue().length); i++) {
                String want = i < table.getValue().length ? table.getValue()[i] : null;
                String got = i < actual.size() ? actual.get(i) : null;
                String column = (want != null ? want : got).split("\\|")[0];
                same(name + "." + column, want, got);
            }
        }
        // DBeaver and Metabase ask for every table of a schema at once, and for one column.
        List<String> all = fetch("getColumns shop.%", () -> md.getColumns(null, "shop", "%", "%"), "TABLE_NAME",
            "COLUMN_NAME");
        check("getColumns shop.%", all != null && all.size() == 20 && all.get(0).equals("big_orders|id")
            && all.get(19).equals("orders|note"), "20 columns by table and position, not " + all);
        expect("getColumns shop.orders.pub%", () -> md.getColumns(null, "shop", "orders", "pub%"),
            cols("TABLE_SCHEM", "TABLE_NAME", "COLUMN_NAME", "ORDINAL_POSITION"), "shop|orders|public_id|3");
    }

    static void keys(DatabaseMetaData md) {
        String[] primary = cols("TABLE_CAT", "TABLE_SCHEM", "TABLE_NAME", "COLUMN_NAME", "KEY_SEQ", "PK_NAME");
        expect("getPrimaryKeys shop.customers", () -> md.getPrimaryKeys(null, "shop", "customers"), primary,
            "null|shop|customers|id|1|customers_pkey");
        expect("getPrimaryKeys shop.orders", () -> md.getPrimaryKeys(null, "shop", "orders"), primary,
            "null|shop|orders|id|1|orders_pkey");
        // The key's order, not the table's.
        expect("getPrimaryKeys shop.order_lines", () -> md.getPrimaryKeys(null, "shop", "order_lines"), primary,
            "null|shop|order_lines|order_id|1|order_lines_pkey", "null|shop|order_lines|line_no|2|order_lines_pkey");
        expect("getPrimaryKeys shop.big_orders", () -> md.getPrimaryKeys(null, "shop", "big_orders"), primary);
        expect("getPrimaryKeys null schema", () -> md.getPrimaryKeys(null, null, "customers"), primary,
            "null|shop|customers|id|1|customers_pkey");

        String[] foreign = cols("PKTABLE_CAT", "PKTABLE_SCHEM", "PKTABLE_NAME", "PKCOLUMN_NAME", "FKTABLE_CAT",
            "FKTABLE_SCHEM", "FKTABLE_NAME", "FKCOLUMN_NAME", "KEY_SEQ", "UPDATE_RULE", "DELETE_RULE", "FK_NAME",
            "PK_NAME", "DEFERRABILITY");
        String customersOrders = "null|shop|customers|id|null|shop|orders|customer_id|1|3|3|orders_customer_id_fkey|"
            + "customers_pkey|7";
        String ordersLines = "null|shop|orders|id|null|shop|order_lines|order_id|1|3|3|order_lines_order_id_fkey|"
            + "orders_pkey|7";
        expect("getImportedKeys shop.orders", () -> md.getImportedKeys(null, "shop", "orders"), foreign,
            customersOrders);
        expect("getImportedKeys shop.order_lines", () -> md.getImportedKeys(null, "shop", "order_lines"), foreign,
            ordersLines);
        expect("getImportedKeys shop.customers", () -> md.getImportedKeys(null, "shop", "customers"), foreign);
        expect("getExportedKeys shop.customers", () -> md.getExportedKeys(null, "shop", "customers"), foreign,
            customersOrders);
        expect("getExportedKeys shop.orders", () -> md.getExportedKeys(null, "shop", "orders"), foreign, ordersLines);
        expect("getCrossReference shop.customers shop.orders",
            () -> md.getCrossReference(null, "shop", "customers", null, "shop", "orders"), foreign, customersOrders);
        expect("getCrossReference shop.customers shop.order_lines",
            () -> md.getCrossReference(null, "shop", "customers", null, "shop", "order_lines"), foreign);
    }

    static void indexes(DatabaseMetaData md) {
        // CARDINALITY and PAGES are the planner's estimates: not compared.
        String[] columns = cols("TABLE_CAT", "TABLE_SCHEM", "TABLE_NAME", "NON_UNIQUE", "INDEX_QUALIFIER",
            "INDEX_NAME", "TYPE", "ORDINAL_POSITION", "COLUMN_NAME", "ASC_OR_DESC", "FILTER_CONDITION");
        expect("getIndexInfo shop.orders", () -> md.getIndexInfo(null, "shop", "orders", false, true), columns,
            "null|shop|orders|f|null|orders_pkey|3|1|id|A|null",
            "null|shop|orders|f|null|orders_public_id_idx|3|1|public_id|A|null",
            "null|shop|orders|t|null|orders_placed_at_idx|3|1|placed_at|A|null");
        expect("getIndexInfo shop.customers unique", () -> md.getIndexInfo(null, "shop", "customers", true, true),
            columns, "null|shop|customers|f|null|customers_email_key|3|1|email|A|null",
            "null|shop|customers|f|null|customers_pkey|3|1|id|A|null");
        expect("getIndexInfo shop.order_lines", () -> md.getIndexInfo(null, "shop", "order_lines", false, false),
            columns, "null|shop|order_lines|f|null|order_lines_pkey|3|1|order_id|A|null",
            "null|shop|order_lines|f|null|order_lines_pkey|3|2|line_no|A|null");
        expect("getIndexInfo shop.big_orders", () -> md.getIndexInfo(null, "shop", "big_orders", false, true), columns);
    }

    static void types(DatabaseMetaData md) {
        String[] columns = cols("TYPE_NAME", "DATA_TYPE", "PRECISION", "LITERAL_PREFIX", "LITERAL_SUFFIX",
            "NULLABLE", "CASE_SENSITIVE", "SEARCHABLE", "UNSIGNED_ATTRIBUTE", "FIXED_PREC_SCALE", "AUTO_INCREMENT",
            "MINIMUM_SCALE", "MAXIMUM_SCALE", "NUM_PREC_RADIX");
        List<String> all = fetch("getTypeInfo", md::getTypeInfo, columns);
        if (all == null) {
            return;
        }
        Map<String, String> byName = new LinkedHashMap<>();
        for (String row : all) {
            byName.putIfAbsent(row.substring(0, row.indexOf('|')), row);
        }
        for (String want : new String[] {
                "bool|-7|0|'|'|1|f|3|t|f|f|0|0|10",
                "int2|5|0|null|null|1|f|3|f|f|f|0|0|10",
                "int4|4|0|null|null|1|f|3|f|f|f|0|0|10",
                "serial|4|0|null|null|1|f|3|f|f|t|0|0|10",
                "int8|-5|0|null|null|1|f|3|f|f|f|0|0|10",
                "bigserial|-5|0|null|null|1|f|3|f|f|t|0|0|10",
                "float4|7|0|null|null|1|f|3|f|f|f|0|0|10",
                "float8|8|0|null|null|1|f|3|f|f|f|0|0|10",
                "numeric|2|1000|null|null|1|f|3|f|f|f|0|1000|10",
                "text|12|0|'|'|1|t|3|t|f|f|0|0|10",
                "varchar|12|10485760|'|'|1|t|3|t|f|f|0|0|10",
                "bpchar|1|10485760|'|'|1|t|3|t|f|f|0|0|10",
                "bytea|-2|0|'|'|1|t|3|t|f|f|0|0|10",
                "date|91|0|'|'|1|f|3|t|f|f|0|0|10",
                "time|92|6|'|'|1|f|3|t|f|f|0|0|10",
                "timestamp|93|6|'|'|1|f|3|t|f|f|0|0|10",
                "timestamptz|93|6|'|'|1|f|3|t|f|f|0|0|10",
                "interval|1111|6|'|'|1|f|3|t|f|f|0|0|10",
                "uuid|1111|0|'|'|1|t|3|t|f|f|0|0|10",
                "json|1111|0|'|'|1|t|3|t|f|f|0|0|10",
                "jsonb|1111|0|'|'|1|t|3|t|f|f|0|0|10",
                "_text|2003|0|'|'|1|t|3|t|f|f|0|0|10",
                "_int4|2003|0|'|'|1|f|3|f|f|f|0|0|10",
                "_varchar|2003|10485760|'|'|1|t|3|t|f|f|0|0|10"}) {
            String name = want.substring(0, want.indexOf('|'));
            same("getTypeInfo " + name, want, byName.get(name));
        }
        // JDBC's order: by DATA_TYPE, then how closely the type maps to it.
        boolean ordered = true;
        int previous = Integer.MIN_VALUE;
        for (String row : all) {
            int dataType = Integer.parseInt(row.split("\\|")[1]);
            ordered &= dataType >= previous;
            previous = dataType;
        }
        check("getTypeInfo order", ordered, "rows not sorted by DATA_TYPE");
        // The row types of tables and views, which getUDTs lists as STRUCTs.
        expect("getUDTs shop", () -> md.getUDTs(null, "shop", "%", null),
            cols("TYPE_CAT", "TYPE_SCHEM", "TYPE_NAME", "CLASS_NAME", "DATA_TYPE", "REMARKS", "BASE_TYPE"),
            "null|shop|big_orders|null|2002|null|null", "null|shop|customers|null|2002|null|null",
            "null|shop|order_lines|null|2002|null|null", "null|shop|orders|null|2002|null|null");
        expect("getUDTs shop DISTINCT", () -> md.getUDTs(null, "shop", "%", new int[] {Types.DISTINCT}),
            cols("TYPE_NAME"));
        List<String> udts = fetch("getUDTs", () -> md.getUDTs(null, null, null, null), "TYPE_SCHEM", "TYPE_NAME",
            "DATA_TYPE", "BASE_TYPE");
        check("getUDTs", udts != null && udts.contains("information_schema|cardinal_number|2001|4")
            && udts.contains("shop|orders|2002|null"), "information_schema's domains and shop's row types, not " + udts);
    }

    static void routines(DatabaseMetaData md) {
        // PostgreSQL 15 has no procedures of its own (prokind 'p'); Sluice none of any kind.
        expect("getProcedures", () -> md.getProcedures(null, null, null), cols("PROCEDURE_NAME"));
        expect("getProcedures shop", () -> md.getProcedures(null, "shop", "%"), cols("PROCEDURE_NAME"));
        String[] functions = cols("FUNCTION_CAT", "FUNCTION_SCHEM", "FUNCTION_NAME", "REMARKS", "FUNCTION_TYPE",
            "SPECIFIC_NAME");
        expect("getFunctions pg_catalog.abs", () -> md.getFunctions(null, "pg_catalog", "abs"), functions,
            "sluice|pg_catalog|abs|absolute value|1|abs_1394", "sluice|pg_catalog|abs|absolute value|1|abs_1395",
            "sluice|pg_catalog|abs|absolute value|1|abs_1396", "sluice|pg_catalog|abs|absolute value|1|abs_1397",
            "sluice|pg_catalog|abs|absolute value|1|abs_1398", "sluice|pg_catalog|abs|absolute value|1|abs_1705");
        // A set-returning function is functionReturnsTable (2): pgjdbc reads pg_get_function_result's SETOF.
        // (PostgreSQL 15 has 8 of them; Sluice's catalog data, from a later PostgreSQL, 9.)
        List<String> series = fetch("getFunctions pg_catalog.generate_series",
            () -> md.getFunctions(null, "pg_catalog", "generate_series"), "FUNCTION_NAME", "FUNCTION_TYPE");
        check("getFunctions pg_catalog.generate_series", series != null && series.size() >= 8
            && series.stream().allMatch("generate_series|2"::equals), "FUNCTION_TYPE 2 for each, not " + series);
        expect("getFunctions shop", () -> md.getFunctions(null, "shop", "%"), functions);
        List<String> all = fetch("getFunctions", () -> md.getFunctions(null, null, "%"), "FUNCTION_NAME");
        check("getFunctions", all != null && all.size() > 2000 && all.contains("upper") && all.contains("now"),
            "the built-in functions, not " + (all == null ? null : all.size() + " rows"));
        String[] arguments = cols("PROCEDURE_SCHEM", "PROCEDURE_NAME", "COLUMN_NAME", "COLUMN_TYPE", "DATA_TYPE",
            "TYPE_NAME", "NULLABLE", "ORDINAL_POSITION", "SPECIFIC_NAME");
        expect("getProcedureColumns pg_catalog.abs", () -> md.getProcedureColumns(null, "pg_catalog", "abs", null),
            arguments,
            "pg_catalog|abs|returnValue|5|7|float4|2|0|abs_1394", "pg_catalog|abs|$1|1|7|float4|2|1|abs_1394",
            "pg_catalog|abs|returnValue|5|8|float8|2|0|abs_1395", "pg_catalog|abs|$1|1|8|float8|2|1|abs_1395",
            "pg_catalog|abs|returnValue|5|-5|int8|2|0|abs_1396", "pg_catalog|abs|$1|1|-5|int8|2|1|abs_1396",
            "pg_catalog|abs|returnValue|5|4|int4|2|0|abs_1397", "pg_catalog|abs|$1|1|4|int4|2|1|abs_1397",
            "pg_catalog|abs|returnValue|5|5|int2|2|0|abs_1398", "pg_catalog|abs|$1|1|5|int2|2|1|abs_1398",
            "pg_catalog|abs|returnValue|5|2|numeric|2|0|abs_1705", "pg_catalog|abs|$1|1|2|numeric|2|1|abs_1705");
        String[] functionArguments = cols("FUNCTION_SCHEM", "FUNCTION_NAME", "COLUMN_NAME", "COLUMN_TYPE",
            "DATA_TYPE", "TYPE_NAME", "ORDINAL_POSITION", "SPECIFIC_NAME");
        expect("getFunctionColumns pg_catalog.upper", () -> md.getFunctionColumns(null, "pg_catalog", "upper", null),
            functionArguments, "pg_catalog|upper|returnValue|4|1111|anyelement|0|upper_3849",
            "pg_catalog|upper|$1|1|1111|anyrange|1|upper_3849",
            "pg_catalog|upper|returnValue|4|1111|anyelement|0|upper_4236",
            "pg_catalog|upper|$1|1|1111|anymultirange|1|upper_4236",
            "pg_catalog|upper|returnValue|4|12|text|0|upper_871", "pg_catalog|upper|$1|1|12|text|1|upper_871");
    }

    static void privileges(DatabaseMetaData md) throws SQLException {
        String user = md.getUserName();
        List<String> expected = new ArrayList<>();
        for (String table : new String[] {"big_orders", "customers", "order_lines", "orders"}) {
            for (String privilege : new String[] {"DELETE", "INSERT", "REFERENCES", "SELECT", "TRIGGER", "TRUNCATE",
                    "UPDATE"}) {
                expected.add("shop|" + table + "|" + user + "|" + user + "|" + privilege + "|YES");
            }
        }
        expect("getTablePrivileges shop", () -> md.getTablePrivileges(null, "shop", "%"),
            cols("TABLE_SCHEM", "TABLE_NAME", "GRANTOR", "GRANTEE", "PRIVILEGE", "IS_GRANTABLE"),
            expected.toArray(new String[0]));
        expected.clear();
        for (String column : new String[] {"balance", "email", "id", "name"}) {
            for (String privilege : new String[] {"DELETE", "INSERT", "REFERENCES", "SELECT", "TRIGGER", "TRUNCATE",
                    "UPDATE"}) {
                expected.add("customers|" + column + "|" + user + "|" + privilege + "|YES");
            }
        }
        expect("getColumnPrivileges shop.customers", () -> md.getColumnPrivileges(null, "shop", "customers", "%"),
            cols("TABLE_NAME", "COLUMN_NAME", "GRANTEE", "PRIVILEGE", "IS_GRANTABLE"), expected.toArray(new String[0]));
    }

    static void rowIdentifiers(DatabaseMetaData md) {
        String[] columns = cols("SCOPE", "COLUMN_NAME", "DATA_TYPE", "TYPE_NAME", "COLUMN_SIZE", "DECIMAL_DIGITS",
            "PSEUDO_COLUMN");
        expect("getBestRowIdentifier shop.customers",
            () -> md.getBestRowIdentifier(null, "shop", "customers", DatabaseMetaData.bestRowSession, true), columns,
            "2|id|4|int4|10|0|1");
        expect("getBestRowIdentifier shop.order_lines",
            () -> md.getBestRowIdentifier(null, "shop", "order_lines", DatabaseMetaData.bestRowSession, true),
            columns, "2|line_no|4|int4|10|0|1", "2|order_id|-5|int8|19|0|1");
        expect("getVersionColumns shop.customers", () -> md.getVersionColumns(null, "shop", "customers"),
            cols("SCOPE", "COLUMN_NAME", "DATA_TYPE", "TYPE_NAME", "PSEUDO_COLUMN"), "null|ctid|1111|tid|2");
    }

    /** What a client's result grid shows of a query's columns (DBeaver's, Metabase's native queries). */
    static void resultSetMetaData(Connection c) throws SQLException {
        try (Statement s = c.createStatement(); ResultSet r = s.executeQuery(
                "SELECT id, customer_id, public_id, amount, details, tags, placed_at, paid, note, amount * 2 AS doubled, "
                + "'x'::varchar(5) AS five FROM shop.orders")) {
            ResultSetMetaData m = r.getMetaData();
            List<String> actual = new ArrayList<>();
            for (int i = 1; i <= m.getColumnCount(); i++) {
                actual.add(m.getColumnLabel(i) + "|" + m.getColumnTypeName(i) + "|" + m.getColumnType(i) + "|"
                    + m.getPrecision(i) + "|" + m.getScale(i) + "|" + m.getColumnDisplaySize(i) + "|"
                    + m.getColumnClassName(i));
            }
            String[] expected = {
                // pgjdbc names an auto-increment bigint column bigserial.
                "id|bigserial|-5|19|0|20|java.lang.Long",
                "customer_id|int4|4|10|0|11|java.lang.Integer",
                "public_id|uuid|1111|2147483647|0|2147483647|java.util.UUID",
                "amount|numeric|2|10|2|12|java.math.BigDecimal",
                "details|jsonb|1111|2147483647|0|2147483647|java.lang.String",
                "tags|_text|2003|2147483647|0|2147483647|java.sql.Array",
                "placed_at|timestamp|93|29|6|29|java.sql.Timestamp",
                "paid|bool|-7|1|0|1|java.lang.Boolean",
                "note|varchar|12|20|0|20|java.lang.String",
                "doubled|numeric|2|0|0|131089|java.math.BigDecimal",
                "five|varchar|12|5|0|5|java.lang.String"};
            same("ResultSetMetaData columns", expected.length, actual.size());
            for (int i = 0; i < Math.min(expected.length, actual.size()); i++) {
                same("ResultSetMetaData " + expected[i].split("\\|")[0], expected[i], actual.get(i));
            }
            // Where a column comes from: pgjdbc looks the table oid and column number of
            // RowDescription up in pg_class and pg_attribute (DBeaver edits rows through them).
            actual.clear();
            for (int i = 1; i <= m.getColumnCount(); i++) {
                actual.add(m.getColumnLabel(i) + "|" + m.getTableName(i) + "|" + m.isNullable(i) + "|"
                    + m.isAutoIncrement(i));
            }
            rows("ResultSetMetaData sources", actual,
                "id|orders|0|true", "customer_id|orders|0|false", "public_id|orders|0|false", "amount|orders|1|false",
                "details|orders|1|false", "tags|orders|1|false", "placed_at|orders|1|false", "paid|orders|1|false",
                "note|orders|1|false", "doubled||2|false", "five||2|false");
        }
    }

    /** setObject(UUID), a jsonb PGobject and a text[] as parameters, read back as Java objects. */
    static void parameters(Connection c) throws SQLException {
        UUID id = UUID.fromString("a0eebc99-9c0b-4ef8-bb6d-6bb9bd380a11");
        PGobject details = new PGobject();
        details.setType("jsonb");
        details.setValue("{\"gift\": true, \"items\": [1, 2]}");
        long orderId;
        try (PreparedStatement insert = c.prepareStatement("INSERT INTO shop.orders (customer_id, public_id, amount, "
                + "details, tags, placed_at, note) VALUES (?, ?, ?, ?, ?, ?, ?)", Statement.RETURN_GENERATED_KEYS)) {
            insert.setInt(1, 1);
            insert.setObject(2, id);
            insert.setBigDecimal(3, new BigDecimal("120.50"));
            insert.setObject(4, details);
            insert.setArray(5, c.createArrayOf("text", new String[] {"gift", "rush"}));
            insert.setObject(6, java.time.LocalDateTime.of(2024, 1, 2, 3, 4, 5));
            insert.setString(7, "first");
            same("insert with uuid and jsonb parameters", 1, insert.executeUpdate());
            try (ResultSet keys = insert.getGeneratedKeys()) {
                check("getGeneratedKeys", keys.next(), "no generated key row");
                orderId = keys.getLong("id");
                same("getGeneratedKeys id", 1L, orderId);
            }
        }
        try (PreparedStatement select = c.prepareStatement(
                "SELECT public_id, details, tags, amount, placed_at, id FROM shop.orders WHERE public_id = ?")) {
            select.setObject(1, id);
            try (ResultSet r = select.executeQuery()) {
                check("select by uuid parameter", r.next(), "no row for the uuid");
                Object uuid = r.getObject("public_id");
                same("getObject uuid", id, uuid);
                same("getObject uuid class", UUID.class, uuid == null ? null : uuid.getClass());
                same("getObject(UUID.class)", id, r.getObject("public_id", UUID.class));
                Object json = r.getObject("details");
                check("getObject jsonb", json instanceof PGobject && "jsonb".equals(((PGobject) json).getType())
                    && "{\"gift\": true, \"items\": [1, 2]}".equals(((PGobject) json).getValue()),
                    "a jsonb PGobject with PostgreSQL's text, not " + json);
                Array tags = r.getArray("tags");
                same("getArray text[]", List.of("gift", "rush"),
                    tags == null ? null : Arrays.asList((Object[]) tags.getArray()));
                same("getBigDecimal numeric(10,2)", new BigDecimal("120.50"), r.getBigDecimal("amount"));
                same("getObject timestamp", java.time.LocalDateTime.of(2024, 1, 2, 3, 4, 5),
                    r.getObject("placed_at", java.time.LocalDateTime.class));
                same("getObject bigint", orderId, r.getObject("id"));
            }
        }
        // A jsonb parameter compared in SQL, and a uuid[] parameter.
        try (PreparedStatement select = c.prepareStatement(
                "SELECT count(*) FROM shop.orders WHERE details @> ? AND public_id = ANY (?)")) {
            PGobject probe = new PGobject();
            probe.setType("jsonb");
            probe.setValue("{\"gift\": true}");
            select.setObject(1, probe);
            select.setArray(2, c.createArrayOf("uuid", new UUID[] {id, UUID.randomUUID()}));
            try (ResultSet r = select.executeQuery()) {
                r.next();
                same("jsonb and uuid[] parameters", 1L, r.getLong(1));
            }
        }
    }

    /**
     * Metabase's sync (its postgres driver, metabase/metabase src/metabase/driver/postgres.clj) runs
     * these queries as HoneySQL writes them, with the schema it syncs: describe-database, the
     * current user's table privileges, describe-fields, describe-fks and describe-indexes.
     */
    static void metabase(Connection c) throws SQLException {
        try (Statement s = c.createStatement(); ResultSet r = s.executeQuery("show timezone;")) {
            check("metabase show timezone", r.next() && !r.getString(1).isEmpty(), "no time zone");
        }
        rows("metabase enum types", query(c, "metabase enum types", "SELECT nspname, typname FROM pg_type t JOIN "
            + "pg_namespace n ON n.oid = t.typnamespace WHERE t.oid IN (SELECT DISTINCT enumtypid FROM pg_enum e)"));
        List<String> tables = query(c, "metabase describe-database", "SELECT \"n\".\"nspname\" AS \"schema\", "
            + "\"c\".\"relname\" AS \"name\", CASE \"c\".\"relkind\" WHEN 'r' THEN 'TABLE' WHEN 'p' THEN "
            + "'PARTITIONED TABLE' WHEN 'v' THEN 'VIEW' WHEN 'f' THEN 'FOREIGN TABLE' WHEN 'm' THEN 'MATERIALIZED VIEW' "
            + "ELSE NULL END AS \"type\", \"d\".\"description\" AS \"description\", \"stat\".\"n_live_tup\" AS "
            + "\"estimated_row_count\" FROM \"pg_catalog\".\"pg_class\" AS \"c\" INNER JOIN \"pg_catalog\".\"pg_namespace\" "
            + "AS \"n\" ON \"c\".\"relnamespace\" = \"n\".\"oid\" LEFT JOIN \"pg_catalog\".\"pg_description\" AS \"d\" ON "
            + "(\"c\".\"oid\" = \"d\".\"objoid\") AND (\"d\".\"objsubid\" = 0) AND (\"d\".\"classoid\" = 'pg_class'::regclass) "
            + "LEFT JOIN \"pg_stat_user_tables\" AS \"stat\" ON (\"n\".\"nspname\" = \"stat\".\"schemaname\") AND "
            + "(\"c\".\"relname\" = \"stat\".\"relname\") WHERE (\"c\".\"relnamespace\" = \"n\".\"oid\") AND "
            + "(\"n\".\"nspname\" !~ '^pg_') AND (\"n\".\"nspname\" <> 'information_schema') AND "
            + "c.relkind in ('r', 'p', 'v', 'f', 'm') AND (\"n\".\"nspname\" IN ('shop')) "
            + "ORDER BY \"type\" ASC, \"schema\" ASC, \"name\" ASC");
        if (tables != null) {
            // The estimated row count is the statistics collector's, which lags: not compared.
            tables.replaceAll(row -> row.substring(0, row.lastIndexOf('|')));
            rows("metabase describe-database", tables, "shop|customers|TABLE|null", "shop|order_lines|TABLE|null",
                "shop|orders|TABLE|null", "shop|big_orders|VIEW|null");
        }
        List<String> privileges = query(c, "metabase table privileges", String.join("\n",
            "with table_privileges as (",
            " select",
            "   NULL as role,",
            "   t.schemaname as schema,",
            "   t.objectname as table,",
            "   pg_catalog.has_any_column_privilege(current_user, '\"' || replace(t.schemaname, '\"', '\"\"') || '\"' || '.' || '\"' || replace(t.objectname, '\"', '\"\"') || '\"',  'update') as update,",
            "   pg_catalog.has_any_column_privilege(current_user, '\"' || replace(t.schemaname, '\"', '\"\"') || '\"' || '.' || '\"' || replace(t.objectname, '\"', '\"\"') || '\"',  'select') as select,",
            "   pg_catalog.has_any_column_privilege(current_user, '\"' || replace(t.schemaname, '\"', '\"\"') || '\"' || '.' || '\"' || replace(t.objectname, '\"', '\"\"') || '\"',  'insert') as insert,",
            "   pg_catalog.has_table_privilege(     current_user, '\"' || replace(t.schemaname, '\"', '\"\"') || '\"' || '.' || '\"' || replace(t.objectname, '\"', '\"\"') || '\"',  'delete') as delete",
            " from (",
            "   select schemaname, tablename as objectname from pg_catalog.pg_tables",
            "   union",
            "   select schemaname, viewname as objectname from pg_catalog.pg_views",
            "   union",
            "   select schemaname, matviewname as objectname from pg_catalog.pg_matviews",
            " ) t",
            " where t.schemaname !~ '^pg_'",
            "   and t.schemaname <> 'information_schema'",
            "   and pg_catalog.has_schema_privilege(current_user, t.schemaname, 'usage')",
            ")",
            "select t.*",
            "from table_privileges t"));
        if (privileges != null) {
            // Sluice's own system tables (schema `sluice`) are listed too: only shop's are compared.
            privileges.removeIf(row -> !row.startsWith("null|shop|"));
            Collections.sort(privileges);
            rows("metabase table privileges", privileges, "null|shop|big_orders|t|t|t|t", "null|shop|customers|t|t|t|t",
                "null|shop|order_lines|t|t|t|t", "null|shop|orders|t|t|t|t");
        }
        List<String> fields = query(c, "metabase describe-fields", "SELECT \"c\".\"column_name\" AS \"name\", "
            + "CASE WHEN \"c\".\"udt_schema\" IN ('public', 'pg_catalog') THEN FORMAT('%s', \"c\".\"udt_name\") "
            + "ELSE FORMAT('\"%s\".\"%s\"', \"c\".\"udt_schema\", \"c\".\"udt_name\") END AS \"database-type\", "
            + "\"c\".\"ordinal_position\" - 1 AS \"database-position\", \"c\".\"table_schema\" AS \"table-schema\", "
            + "\"c\".\"table_name\" AS \"table-name\", \"pk\".\"column_name\" IS NOT NULL AS \"pk?\", "
            + "COL_DESCRIPTION(CAST(CAST(FORMAT('%I.%I', CAST(\"c\".\"table_schema\" AS TEXT), "
            + "CAST(\"c\".\"table_name\" AS TEXT)) AS REGCLASS) AS OID), \"c\".\"ordinal_position\") AS \"field-comment\", "
            + "((\"column_default\" IS NULL) OR (LOWER(\"column_default\") = 'null')) AND (\"is_nullable\" = 'NO') AND "
            + "NOT (((\"column_default\" IS NOT NULL) AND (\"column_default\" LIKE '%nextval(%')) OR "
            + "(\"is_identity\" <> 'NO')) AS \"database-required\", ((\"column_default\" IS NOT NULL) AND "
            + "(\"column_default\" LIKE '%nextval(%')) OR (\"is_identity\" <> 'NO') AS \"database-is-auto-increment\" "
            + "FROM \"information_schema\".\"columns\" AS \"c\" LEFT JOIN (SELECT \"tc\".\"table_schema\", "
            + "\"tc\".\"table_name\", \"kc\".\"column_name\" FROM \"information_schema\".\"table_constraints\" AS \"tc\" "
            + "INNER JOIN \"information_schema\".\"key_column_usage\" AS \"kc\" ON (\"tc\".\"constraint_name\" = "
            + "\"kc\".\"constraint_name\") AND (\"tc\".\"table_schema\" = \"kc\".\"table_schema\") AND "
            + "(\"tc\".\"table_name\" = \"kc\".\"table_name\") WHERE \"tc\".\"constraint_type\" = 'PRIMARY KEY') AS \"pk\" "
            + "ON (\"c\".\"table_schema\" = \"pk\".\"table_schema\") AND (\"c\".\"table_name\" = \"pk\".\"table_name\") AND "
            + "(\"c\".\"column_name\" = \"pk\".\"column_name\") WHERE c.table_schema !~ '^information_schema|catalog_history|pg_' "
            + "AND (\"c\".\"table_schema\" IN ('shop')) "
            + "UNION ALL SELECT \"pa\".\"attname\" AS \"name\", CASE WHEN \"ptn\".\"nspname\" IN ('public', 'pg_catalog') "
            + "THEN FORMAT('%s', \"pt\".\"typname\") ELSE FORMAT('\"%s\".\"%s\"', \"ptn\".\"nspname\", \"pt\".\"typname\") END "
            + "AS \"database-type\", \"pa\".\"attnum\" - 1 AS \"database-position\", \"pn\".\"nspname\" AS \"table-schema\", "
            + "\"pc\".\"relname\" AS \"table-name\", FALSE AS \"pk?\", NULL AS \"field-comment\", FALSE AS "
            + "\"database-required\", FALSE AS \"database-is-auto-increment\" FROM \"pg_catalog\".\"pg_class\" AS \"pc\" "
            + "INNER JOIN \"pg_catalog\".\"pg_namespace\" AS \"pn\" ON \"pn\".\"oid\" = \"pc\".\"relnamespace\" INNER JOIN "
            + "\"pg_catalog\".\"pg_attribute\" AS \"pa\" ON \"pa\".\"attrelid\" = \"pc\".\"oid\" INNER JOIN "
            + "\"pg_catalog\".\"pg_type\" AS \"pt\" ON \"pt\".\"oid\" = \"pa\".\"atttypid\" INNER JOIN "
            + "\"pg_catalog\".\"pg_namespace\" AS \"ptn\" ON \"ptn\".\"oid\" = \"pt\".\"typnamespace\" WHERE "
            + "(\"pc\".\"relkind\" = 'm') AND (\"pa\".\"attnum\" >= 1) AND (\"pn\".\"nspname\" IN ('shop')) "
            + "ORDER BY \"table-schema\" ASC, \"table-name\" ASC, \"database-position\" ASC");
        String[] expectedFields = {
            "id|int8|0|shop|big_orders|f|null|f|f", "amount|numeric|1|shop|big_orders|f|null|f|f",
            "id|int4|0|shop|customers|t|null|f|t", "email|varchar|1|shop|customers|f|null|t|f",
            "name|text|2|shop|customers|f|null|f|f", "balance|numeric|3|shop|customers|f|null|f|f",
            "line_no|int4|0|shop|order_lines|t|null|t|f", "order_id|int8|1|shop|order_lines|t|null|t|f",
            "sku|text|2|shop|order_lines|f|null|f|f", "qty|int2|3|shop|order_lines|f|null|f|f",
            "price|float8|4|shop|order_lines|f|null|f|f",
            "id|int8|0|shop|orders|t|null|f|t", "customer_id|int4|1|shop|orders|f|null|t|f",
            "public_id|uuid|2|shop|orders|f|null|t|f", "amount|numeric|3|shop|orders|f|null|f|f",
            "details|jsonb|4|shop|orders|f|null|f|f", "tags|_text|5|shop|orders|f|null|f|f",
            "placed_at|timestamp|6|shop|orders|f|null|f|f", "paid|bool|7|shop|orders|f|null|f|f",
            "note|varchar|8|shop|orders|f|null|f|f"};
        if (fields != null) {
            // One check per table, so that a difference names its table.
            for (String table : new String[] {"big_orders", "customers", "order_lines", "orders"}) {
                String in = "|shop|" + table + "|";
                List<String> want = new ArrayList<>();
                for (String row : expectedFields) {
                    if (row.contains(in)) {
                        want.add(row);
                    }
                }
                List<String> got = new ArrayList<>();
                for (String row : fields) {
                    if (row.contains(in)) {
                        got.add(row);
                    }
                }
                rows("metabase describe-fields shop." + table, got, want.toArray(new String[0]));
            }
            same("metabase describe-fields rows", expectedFields.length, fields.size());
        }
        rows("metabase describe-fks", query(c, "metabase describe-fks", "SELECT \"fk_ns\".\"nspname\" AS "
            + "\"fk-table-schema\", \"fk_table\".\"relname\" AS \"fk-table-name\", \"fk_column\".\"attname\" AS "
            + "\"fk-column-name\", \"pk_ns\".\"nspname\" AS \"pk-table-schema\", \"pk_table\".\"relname\" AS "
            + "\"pk-table-name\", \"pk_column\".\"attname\" AS \"pk-column-name\" FROM \"pg_constraint\" AS \"c\" "
            + "INNER JOIN \"pg_class\" AS \"fk_table\" ON \"c\".\"conrelid\" = \"fk_table\".\"oid\" INNER JOIN "
            + "\"pg_namespace\" AS \"fk_ns\" ON \"c\".\"connamespace\" = \"fk_ns\".\"oid\" INNER JOIN \"pg_attribute\" AS "
            + "\"fk_column\" ON \"c\".\"conrelid\" = \"fk_column\".\"attrelid\" INNER JOIN \"pg_class\" AS \"pk_table\" ON "
            + "\"c\".\"confrelid\" = \"pk_table\".\"oid\" INNER JOIN \"pg_namespace\" AS \"pk_ns\" ON "
            + "\"pk_table\".\"relnamespace\" = \"pk_ns\".\"oid\" INNER JOIN \"pg_attribute\" AS \"pk_column\" ON "
            + "\"c\".\"confrelid\" = \"pk_column\".\"attrelid\" WHERE (fk_ns.nspname !~ '^information_schema|catalog_history|pg_') "
            + "AND (\"c\".\"contype\" = 'f'::char) AND (\"fk_column\".\"attnum\" = ANY(c.conkey)) AND "
            + "(\"pk_column\".\"attnum\" = ANY(c.confkey)) AND (\"fk_ns\".\"nspname\" IN ('shop')) "
            + "ORDER BY \"fk-table-schema\" ASC, \"fk-table-name\" ASC"),
            "shop|order_lines|order_id|shop|orders|id", "shop|orders|customer_id|shop|customers|id");
        List<String> indexes = query(c, "metabase describe-indexes", "SELECT \"tmp\".\"table-schema\", "
            + "\"tmp\".\"table-name\", TRIM(BOTH '\"' FROM PG_CATALOG.PG_GET_INDEXDEF(\"tmp\".\"ci_oid\", \"tmp\".\"pos\", "
            + "FALSE)) AS \"field-name\" FROM (SELECT \"n\".\"nspname\" AS \"table-schema\", \"ct\".\"relname\" AS "
            + "\"table-name\", \"ci\".\"oid\" AS \"ci_oid\", (INFORMATION_SCHEMA._PG_EXPANDARRAY(\"i\".\"indkey\")).\"n\" AS "
            + "\"pos\" FROM \"pg_catalog\".\"pg_class\" AS \"ct\" INNER JOIN \"pg_catalog\".\"pg_namespace\" AS \"n\" ON "
            + "\"ct\".\"relnamespace\" = \"n\".\"oid\" INNER JOIN \"pg_catalog\".\"pg_index\" AS \"i\" ON \"ct\".\"oid\" = "
            + "\"i\".\"indrelid\" INNER JOIN \"pg_catalog\".\"pg_class\" AS \"ci\" ON \"ci\".\"oid\" = \"i\".\"indexrelid\" "
            + "WHERE (PG_CATALOG.PG_GET_EXPR(\"i\".\"indpred\", \"i\".\"indrelid\") IS NULL) AND "
            + "n.nspname !~ '^information_schema|catalog_history|pg_' AND (\"n\".\"nspname\" IN ('shop'))) AS \"tmp\" "
            + "WHERE \"tmp\".\"pos\" = 1");
        if (indexes != null) {
            // No ORDER BY: compared sorted.
            Collections.sort(indexes);
            rows("metabase describe-indexes", indexes, "shop|customers|email",
                "shop|customers|id", "shop|order_lines|order_id", "shop|orders|id", "shop|orders|placed_at",
                "shop|orders|public_id");
        }
    }
}
