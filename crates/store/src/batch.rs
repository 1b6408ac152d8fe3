//! Statements that write many rows at once, written once as rows of values
//! and written by each database in its best form.
//!
//! SQLite takes a multi-row `VALUES` list: a statement is parsed in the
//! process, and a `?` placeholder costs next to nothing (`sqlite/batch.rs`).
//! PostgreSQL parses and plans every statement text it has not prepared on
//! the connection before, and a `VALUES` list of a new length is a new
//! text: a drive's commits, each with its own number of rows, had the
//! server parse about one statement for every two it ran. There the rows
//! go as one array per column, unnested by the server, so each kind of
//! write is one statement text, prepared once per connection whatever the
//! batch's size (`postgres/batch.rs`).

use crate::columns::Arg;

/// Rows of values, the run left out (every row is the run's), in one
/// vector: a commit writes a few rows to each of several statements, and a
/// vector a row was an allocation a row.
#[derive(Debug)]
pub(crate) struct Rows<'a> {
    width: usize,
    values: Vec<Arg<'a>>,
}

impl<'a> Rows<'a> {
    /// Values a row.
    pub(crate) fn width(&self) -> usize {
        self.width
    }

    pub(crate) fn is_empty(&self) -> bool {
        self.values.is_empty()
    }

    /// The rows, `chunk` of them at a time, each chunk a run of values.
    pub(crate) fn chunks(&self, chunk: usize) -> impl Iterator<Item = &[Arg<'a>]> {
        self.values.chunks(chunk * self.width.max(1))
    }

    /// Column `column` of every row.
    pub(crate) fn column(&self, column: usize) -> impl Iterator<Item = Arg<'a>> + '_ {
        self.values
            .iter()
            .skip(column)
            .step_by(self.width.max(1))
            .copied()
    }
}

impl<'a, const N: usize> FromIterator<[Arg<'a>; N]> for Rows<'a> {
    fn from_iter<I: IntoIterator<Item = [Arg<'a>; N]>>(rows: I) -> Rows<'a> {
        Rows {
            width: N,
            values: rows.into_iter().flatten().collect(),
        }
    }
}

/// A many-row statement, as each database writes it.
#[derive(Debug)]
pub(crate) struct Statement {
    /// SQLite's form.
    pub(crate) sqlite: Shape,
    /// PostgreSQL's text: `$1` is the run, `$2`, `$3`, … one array per
    /// column of the rows, in order.
    pub(crate) postgres: &'static str,
    /// What it does, for errors.
    pub(crate) what: &'static str,
}

/// A statement's form on SQLite.
#[derive(Debug)]
pub(crate) enum Shape {
    /// `INSERT INTO {into} VALUES (?, …{tail}), …{end}`: each row is the
    /// run, then its values.
    Insert {
        into: &'static str,
        tail: &'static str,
        end: &'static str,
    },
    /// `UPDATE {table} SET {set} FROM (VALUES (?, …), …) AS v WHERE
    /// {table}.run_id = ? AND {matches}`: a row's values are `v.column1`,
    /// `v.column2`, … in `set` and `matches`.
    Update {
        table: &'static str,
        set: &'static str,
        matches: &'static str,
    },
    /// `DELETE FROM {table} WHERE run_id = ? AND {column} IN (?, …)`: one
    /// value a row.
    DeleteIn {
        table: &'static str,
        column: &'static str,
    },
}

/// Appends a batch's events (time, kind, detail) to the run's log; the
/// log's sequence numbers follow the batch's order.
pub(crate) const INSERT_EVENTS: Statement = Statement {
    sqlite: Shape::Insert {
        into: "events (run_id, at, kind, detail)",
        tail: "",
        end: "",
    },
    postgres: "INSERT INTO events (run_id, at, kind, detail) \
               SELECT $1, e.at, e.kind, e.detail \
               FROM UNNEST($2::BIGINT[], $3::TEXT[], $4::TEXT[]) WITH ORDINALITY AS e(at, kind, detail, n) \
               ORDER BY e.n",
    what: "log events",
};

/// Plans a stage's units, all pending; a key the stage has already is left
/// as it is.
pub(crate) const PLAN_UNITS: Statement = Statement {
    sqlite: Shape::Insert {
        into: "units (run_id, idx, unit_key, ordinal, kind, cycle, label, spec, status)",
        tail: ", 'pending'",
        end: " ON CONFLICT (run_id, idx, unit_key) DO NOTHING",
    },
    postgres: "INSERT INTO units (run_id, idx, unit_key, ordinal, kind, cycle, label, spec, status) \
               SELECT $1, u.*, 'pending' FROM UNNEST($2::BIGINT[], $3::TEXT[], $4::BIGINT[], \
               $5::TEXT[], $6::BIGINT[], $7::TEXT[], $8::TEXT[]) AS u \
               ON CONFLICT (run_id, idx, unit_key) DO NOTHING",
    what: "plan units",
};
