//! Many-row statements on SQLite: a `VALUES` list of `?` placeholders, as
//! many rows a statement as SQLite's limit on values allows.
//!
//! SQLite takes `$N` for a name and looks each one up among the names
//! before it, when it parses the statement and again when sqlx binds it:
//! for a statement of a few thousand values, that lookup cost more than
//! everything else the commit did. A `?` is only counted.

use sqlx::{AssertSqlSafe, SqliteConnection};

use super::{arguments, bind};
use crate::Result;
use crate::batch::{Rows, Shape};
use crate::error::query_error;

/// Most rows one statement writes.
const ROWS_PER_STATEMENT: usize = 500;
/// Most values one statement binds (SQLite allows 32 766).
const VALUES_PER_STATEMENT: usize = 30_000;

/// Writes `rows` of the run in statements of `shape`.
pub(crate) async fn write(
    connection: &mut SqliteConnection,
    run_id: &str,
    shape: &Shape,
    what: &'static str,
    rows: &Rows<'_>,
) -> Result<()> {
    let width = rows.width();
    if rows.is_empty() {
        return Ok(());
    }
    let per_statement = (VALUES_PER_STATEMENT / (width + 1)).min(ROWS_PER_STATEMENT);
    for chunk in rows.chunks(per_statement) {
        let count = chunk.len() / width;
        // Only placeholders are spliced in; every value is bound.
        let sql = AssertSqlSafe(text(shape, count, width));
        let mut query = sqlx::query_with(sql, arguments(count * (width + 1) + 1));
        if let Shape::DeleteIn { .. } = shape {
            query = query.bind(run_id);
        }
        for row in chunk.chunks(width) {
            if let Shape::Insert { .. } = shape {
                query = query.bind(run_id);
            }
            query = row.iter().fold(query, bind);
        }
        if let Shape::Update { .. } = shape {
            query = query.bind(run_id);
        }
        let done = query.execute(&mut *connection).await;
        done.map_err(query_error(what))?;
    }
    Ok(())
}

/// The statement for `count` rows of `width` values, written into one
/// string: a commit writes a few of these.
fn text(shape: &Shape, count: usize, width: usize) -> String {
    let mut sql = String::with_capacity(160 + count * (3 * width + 16));
    match shape {
        Shape::Insert { into, tail, end } => {
            push(&mut sql, &["INSERT INTO ", into, " VALUES "]);
            placeholders(&mut sql, count, width + 1, tail);
            sql.push_str(end);
        }
        Shape::Update {
            table,
            set,
            matches,
        } => {
            push(
                &mut sql,
                &["UPDATE ", table, " SET ", set, " FROM (VALUES "],
            );
            placeholders(&mut sql, count, width, "");
            push(
                &mut sql,
                &[") AS v WHERE ", table, ".run_id = ? AND ", matches],
            );
        }
        Shape::DeleteIn { table, column } => {
            push(
                &mut sql,
                &[
                    "DELETE FROM ",
                    table,
                    " WHERE run_id = ? AND ",
                    column,
                    " IN (",
                ],
            );
            marks(&mut sql, count);
            sql.push(')');
        }
    }
    sql
}

fn push(sql: &mut String, parts: &[&str]) {
    parts.iter().for_each(|part| sql.push_str(part));
}

/// Appends `count` rows of `columns` placeholders, each row ending in the
/// constant SQL `tail`: `(?, ?, 'pending'), (?, ?, 'pending')`.
fn placeholders(sql: &mut String, count: usize, columns: usize, tail: &str) {
    for row in 0..count {
        if row > 0 {
            sql.push_str(", ");
        }
        sql.push('(');
        marks(sql, columns);
        push(sql, &[tail, ")"]);
    }
}

/// Appends `count` placeholders: `?, ?, ?`.
fn marks(sql: &mut String, count: usize) {
    for mark in 0..count {
        sql.push_str(if mark > 0 { ", ?" } else { "?" });
    }
}

#[cfg(test)]
mod tests {
    use super::{Shape, text};

    #[test]
    fn statements_have_a_placeholder_per_value() {
        let insert = Shape::Insert {
            into: "t (run_id, a, b)",
            tail: ", 'pending'",
            end: " ON CONFLICT DO NOTHING",
        };
        assert_eq!(
            text(&insert, 2, 2),
            "INSERT INTO t (run_id, a, b) VALUES (?, ?, ?, 'pending'), (?, ?, ?, 'pending') ON CONFLICT DO NOTHING"
        );
        let update = Shape::Update {
            table: "t",
            set: "a = v.column2",
            matches: "t.k = v.column1",
        };
        assert_eq!(
            text(&update, 2, 2),
            "UPDATE t SET a = v.column2 FROM (VALUES (?, ?), (?, ?)) AS v WHERE t.run_id = ? AND t.k = v.column1"
        );
        let delete = Shape::DeleteIn {
            table: "t",
            column: "k",
        };
        assert_eq!(
            text(&delete, 3, 1),
            "DELETE FROM t WHERE run_id = ? AND k IN (?, ?, ?)"
        );
    }
}
