// pgjdbc (Debian's libpostgresql-jdbc-java) against a server: transactions as a JDBC application
// uses them. setAutoCommit(false) + rollback() / commit(), savepoints, an error inside a
// transaction (23505, then 25P02 until rollback), a read-only transaction (25006), a batch in
// autocommit mode (one implicit transaction up to Sync: a failing row drops the whole batch), and
// prepared statements with parameters. Run by server/tests/it/jdbc.rs:
//   java -cp /usr/share/java/postgresql.jar JdbcTransactions.java <port>
// Prints "jdbc ok" when every check held; a failed check throws with what differed.

import java.sql.BatchUpdateException;
import java.sql.Connection;
import java.sql.DriverManager;
import java.sql.PreparedStatement;
import java.sql.ResultSet;
import java.sql.SQLException;
import java.sql.Savepoint;
import java.sql.Statement;

public class JdbcTransactions {
    static void check(boolean ok, String what) {
        if (!ok) {
            throw new AssertionError(what);
        }
    }

    static long scalar(Connection c, String sql) throws SQLException {
        try (Statement s = c.createStatement(); ResultSet r = s.executeQuery(sql)) {
            check(r.next(), "no row from " + sql);
            return r.getLong(1);
        }
    }

    static String sqlState(ThrowingRunnable action) {
        try {
            action.run();
        } catch (SQLException e) {
            return e.getSQLState();
        }
        return "no error";
    }

    interface ThrowingRunnable {
        void run() throws SQLException;
    }

    public static void main(String[] args) throws Exception {
        String url = "jdbc:postgresql://127.0.0.1:" + args[0] + "/sluice?user=jdbc";
        try (Connection app = DriverManager.getConnection(url); Connection other = DriverManager.getConnection(url)) {
            try (Statement s = app.createStatement()) {
                s.execute("CREATE TABLE accounts (id int PRIMARY KEY, balance int NOT NULL)");
                s.execute("CREATE TABLE audit (id int, note text)");
                s.executeUpdate("INSERT INTO accounts VALUES (1, 100), (2, 100)");
            }

            // rollback() undoes what the transaction wrote, in both tables.
            app.setAutoCommit(false);
            try (Statement s = app.createStatement()) {
                check(s.executeUpdate("UPDATE accounts SET balance = balance - 30 WHERE id = 1") == 1, "update count");
                s.executeUpdate("INSERT INTO audit VALUES (1, 'moved 30')");
            }
            check(scalar(app, "SELECT balance FROM accounts WHERE id = 1") == 70, "own write not visible");
            check(scalar(other, "SELECT balance FROM accounts WHERE id = 1") == 100, "uncommitted write visible to others");
            app.rollback();
            check(scalar(app, "SELECT balance FROM accounts WHERE id = 1") == 100, "rollback() kept the update");
            check(scalar(app, "SELECT count(*) FROM audit") == 0, "rollback() kept the insert");

            // commit() makes a transfer between two rows visible at once.
            try (PreparedStatement move = app.prepareStatement("UPDATE accounts SET balance = balance + ? WHERE id = ?")) {
                move.setInt(1, -25);
                move.setInt(2, 1);
                move.executeUpdate();
                move.setInt(1, 25);
                move.setInt(2, 2);
                move.executeUpdate();
            }
            check(scalar(other, "SELECT sum(balance) FROM accounts") == 200, "total changed before commit");
            check(scalar(other, "SELECT balance FROM accounts WHERE id = 2") == 100, "uncommitted transfer visible");
            app.commit();
            check(scalar(other, "SELECT balance FROM accounts WHERE id = 2") == 125, "commit() not visible to others");
            check(scalar(other, "SELECT sum(balance) FROM accounts") == 200, "total not conserved");

            // Savepoints: rollback(savepoint) undoes what followed it, the rest commits.
            try (Statement s = app.createStatement()) {
                s.executeUpdate("INSERT INTO audit VALUES (2, 'kept')");
                Savepoint sp = app.setSavepoint("before_bad");
                s.executeUpdate("INSERT INTO audit VALUES (3, 'undone')");
                app.rollback(sp);
                s.executeUpdate("INSERT INTO audit VALUES (4, 'kept too')");
                app.commit();
            }
            check(scalar(other, "SELECT count(*) FROM audit") == 2, "savepoint rollback: wrong audit rows");
            check(scalar(other, "SELECT count(*) FROM audit WHERE id = 3") == 0, "rollback(savepoint) kept a row");

            // An error aborts the transaction: 25P02 until rollback(), and nothing of it commits.
            try (Statement s = app.createStatement()) {
                s.executeUpdate("INSERT INTO audit VALUES (5, 'lost with the error')");
                String duplicate = sqlState(() -> s.executeUpdate("INSERT INTO accounts VALUES (1, 0)"));
                check("23505".equals(duplicate), "duplicate key gave " + duplicate);
                String aborted = sqlState(() -> s.executeQuery("SELECT 1"));
                check("25P02".equals(aborted), "statement after an error gave " + aborted);
                app.rollback();
            }
            check(scalar(app, "SELECT count(*) FROM audit WHERE id = 5") == 0, "aborted transaction kept a row");
            app.commit();

            // A read-only transaction refuses writes.
            app.setReadOnly(true);
            try (Statement s = app.createStatement()) {
                check(scalar(app, "SELECT count(*) FROM accounts") == 2, "read in a read-only transaction");
                String refused = sqlState(() -> s.executeUpdate("DELETE FROM accounts"));
                check("25006".equals(refused), "write in a read-only transaction gave " + refused);
            }
            app.rollback();
            app.setReadOnly(false);
            app.setAutoCommit(true);
            check(scalar(app, "SELECT count(*) FROM accounts") == 2, "read-only transaction deleted rows");

            // A batch in autocommit mode is one implicit transaction (one Sync): a failing row
            // drops the rows before it, as PostgreSQL does.
            try (PreparedStatement insert = app.prepareStatement("INSERT INTO accounts VALUES (?, ?)")) {
                for (int id : new int[] {10, 11, 1, 12}) {
                    insert.setInt(1, id);
                    insert.setInt(2, 0);
                    insert.addBatch();
                }
                String failed = "no error";
                try {
                    insert.executeBatch();
                } catch (BatchUpdateException e) {
                    failed = e.getNextException() != null ? e.getNextException().getSQLState() : e.getSQLState();
                }
                check("23505".equals(failed), "batch with a duplicate gave " + failed);
            }
            check(scalar(other, "SELECT count(*) FROM accounts") == 2, "a failed batch kept some of its rows");
            try (PreparedStatement insert = app.prepareStatement("INSERT INTO accounts VALUES (?, ?)")) {
                for (int id : new int[] {10, 11, 12}) {
                    insert.setInt(1, id);
                    insert.setInt(2, 0);
                    insert.addBatch();
                }
                int[] counts = insert.executeBatch();
                check(counts.length == 3, "batch counts");
            }
            check(scalar(other, "SELECT count(*) FROM accounts") == 5, "a batch's rows are not all there");

            // A transaction's isolation level, as the server reports it.
            int level = app.getTransactionIsolation();
            check(level == Connection.TRANSACTION_READ_COMMITTED || level == Connection.TRANSACTION_REPEATABLE_READ
                    || level == Connection.TRANSACTION_SERIALIZABLE, "isolation level " + level);
        }
        System.out.println("jdbc ok");
    }
}
