//! What both databases' code shares about a statement: the values bound to
//! it ([`Arg`]) and how a row it returns becomes a model type
//! ([`FromColumns`]).
//!
//! A query whose text is the same on SQLite and PostgreSQL is written once,
//! with its values as a slice of [`Arg`]s; each database's module binds them
//! and decodes the rows it gets back through [`Columns`], which reads a
//! column of either row type. Decoding a model type is then one function,
//! whichever database the row came from.

use sqlx::postgres::PgRow;
use sqlx::sqlite::SqliteRow;
use sqlx::{ColumnIndex, Decode, Postgres, Row, Sqlite, Type};

/// One value bound to a statement.
#[derive(Debug, Clone, Copy)]
pub(crate) enum Arg<'a> {
    Int(i64),
    Text(&'a str),
    MaybeInt(Option<i64>),
    MaybeText(Option<&'a str>),
}

impl From<i64> for Arg<'_> {
    fn from(value: i64) -> Self {
        Arg::Int(value)
    }
}

impl<'a> From<&'a str> for Arg<'a> {
    fn from(value: &'a str) -> Self {
        Arg::Text(value)
    }
}

impl<'a> From<&'a String> for Arg<'a> {
    fn from(value: &'a String) -> Self {
        Arg::Text(value)
    }
}

impl From<Option<i64>> for Arg<'_> {
    fn from(value: Option<i64>) -> Self {
        Arg::MaybeInt(value)
    }
}

impl<'a> From<Option<&'a str>> for Arg<'a> {
    fn from(value: Option<&'a str>) -> Self {
        Arg::MaybeText(value)
    }
}

impl<'a> From<&'a Option<String>> for Arg<'a> {
    fn from(value: &'a Option<String>) -> Self {
        Arg::MaybeText(value.as_deref())
    }
}

/// A value either database can decode (text, integers, and their `Option`s).
pub(crate) trait Value: Sized {
    fn sqlite(row: &SqliteRow, column: impl ColumnIndex<SqliteRow>) -> sqlx::Result<Self>;
    fn postgres(row: &PgRow, column: impl ColumnIndex<PgRow>) -> sqlx::Result<Self>;
}

impl<T> Value for T
where
    T: for<'r> Decode<'r, Sqlite> + Type<Sqlite> + for<'r> Decode<'r, Postgres> + Type<Postgres>,
{
    fn sqlite(row: &SqliteRow, column: impl ColumnIndex<SqliteRow>) -> sqlx::Result<Self> {
        row.try_get(column)
    }

    fn postgres(row: &PgRow, column: impl ColumnIndex<PgRow>) -> sqlx::Result<Self> {
        row.try_get(column)
    }
}

/// A row of either database, read by column name or position.
pub(crate) trait Columns {
    fn get<T: Value>(&self, column: &str) -> sqlx::Result<T>;
    fn at<T: Value>(&self, position: usize) -> sqlx::Result<T>;
}

impl Columns for SqliteRow {
    fn get<T: Value>(&self, column: &str) -> sqlx::Result<T> {
        T::sqlite(self, column)
    }

    fn at<T: Value>(&self, position: usize) -> sqlx::Result<T> {
        T::sqlite(self, position)
    }
}

impl Columns for PgRow {
    fn get<T: Value>(&self, column: &str) -> sqlx::Result<T> {
        T::postgres(self, column)
    }

    fn at<T: Value>(&self, position: usize) -> sqlx::Result<T> {
        T::postgres(self, position)
    }
}

/// A type read from one returned row.
pub(crate) trait FromColumns: Sized {
    fn from_columns(row: &impl Columns) -> sqlx::Result<Self>;
}

/// That a row was returned, whatever it holds.
impl FromColumns for () {
    fn from_columns(_: &impl Columns) -> sqlx::Result<Self> {
        Ok(())
    }
}

/// A single column (a count, an id, a status).
impl FromColumns for i64 {
    fn from_columns(row: &impl Columns) -> sqlx::Result<Self> {
        row.at(0)
    }
}

impl FromColumns for String {
    fn from_columns(row: &impl Columns) -> sqlx::Result<Self> {
        row.at(0)
    }
}

impl<A: Value, B: Value> FromColumns for (A, B) {
    fn from_columns(row: &impl Columns) -> sqlx::Result<Self> {
        Ok((row.at(0)?, row.at(1)?))
    }
}

impl<A: Value, B: Value, C: Value> FromColumns for (A, B, C) {
    fn from_columns(row: &impl Columns) -> sqlx::Result<Self> {
        Ok((row.at(0)?, row.at(1)?, row.at(2)?))
    }
}
