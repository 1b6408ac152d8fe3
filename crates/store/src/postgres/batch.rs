//! Many-row statements on PostgreSQL: each column of the rows bound as one
//! array, so the statement's text is the same whatever the number of rows.

use sqlx::PgConnection;

use crate::Result;
use crate::batch::Rows;
use crate::columns::Arg;
use crate::error::query_error;

/// Writes `rows` of the run with `statement` (`$1` the run, then one array
/// per column).
pub(crate) async fn write(
    connection: &mut PgConnection,
    run_id: &str,
    statement: &'static str,
    what: &'static str,
    rows: &Rows<'_>,
) -> Result<()> {
    let Some(first) = rows.chunks(1).next() else {
        return Ok(());
    };
    let mut query = sqlx::query(statement).bind(run_id);
    for (column, kind) in first.iter().enumerate() {
        let values = rows.column(column);
        query = match kind {
            Arg::Int(_) | Arg::MaybeInt(_) => query.bind(values.map(int).collect::<Vec<_>>()),
            Arg::Text(_) | Arg::MaybeText(_) => query.bind(values.map(text).collect::<Vec<_>>()),
        };
    }
    let done = query.execute(connection).await;
    done.map_err(query_error(what))?;
    Ok(())
}

/// An integer column's value.
fn int(value: Arg<'_>) -> Option<i64> {
    match value {
        Arg::Int(value) => Some(value),
        Arg::MaybeInt(value) => value,
        Arg::Text(_) | Arg::MaybeText(_) => None,
    }
}

/// A text column's value.
fn text(value: Arg<'_>) -> Option<&str> {
    match value {
        Arg::Text(value) => Some(value),
        Arg::MaybeText(value) => value,
        Arg::Int(_) | Arg::MaybeInt(_) => None,
    }
}
