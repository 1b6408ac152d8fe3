//! Placeholders for statements built with many rows (SQLite's `VALUES`
//! lists, and the units a stage plans on either database).

/// A statement's placeholders, written in the order they appear in its
/// text and bound in that order: `$1, $2, …` on PostgreSQL, `?` on SQLite.
///
/// SQLite takes `$N` for a name and looks each one up among the names
/// before it, when it parses the statement and again when sqlx binds it:
/// for a statement of a few thousand values, that lookup cost more than
/// everything else the commit did. A `?` is only counted.
pub(crate) struct Placeholders {
    numbered: bool,
    next: usize,
}

impl Placeholders {
    /// Numbered (`$N`, PostgreSQL) or anonymous (`?`, SQLite).
    pub(crate) fn new(numbered: bool) -> Placeholders {
        Placeholders { numbered, next: 1 }
    }

    /// Appends the next placeholder.
    pub(crate) fn push(&mut self, sql: &mut String) {
        if self.numbered {
            use std::fmt::Write;
            let _ = write!(sql, "${}", self.next);
        } else {
            sql.push('?');
        }
        self.next += 1;
    }

    /// `UPDATE table SET set FROM (VALUES rows) AS v WHERE table.run_id = ?
    /// AND matches`: `count` rows of `columns` values, then the run. The
    /// values are `v.column1`, `v.column2`, … in `set` and `matches`.
    pub(crate) fn update_from_values(
        numbered: bool,
        table: &str,
        set: &str,
        count: usize,
        columns: usize,
        matches: &str,
    ) -> String {
        let mut marks = Placeholders::new(numbered);
        let mut sql = format!("UPDATE {table} SET {set} FROM (VALUES ");
        marks.rows(&mut sql, count, columns);
        sql.push_str(") AS v WHERE ");
        sql.push_str(table);
        sql.push_str(".run_id = ");
        marks.push(&mut sql);
        sql.push_str(" AND ");
        sql.push_str(matches);
        sql
    }

    /// Appends `count` rows of `columns` placeholders: `(?, ?), (?, ?)`.
    /// Only placeholders are spliced into the SQL; every value is bound.
    pub(crate) fn rows(&mut self, sql: &mut String, count: usize, columns: usize) {
        self.rows_with(sql, count, columns, "");
    }

    /// [`rows`](Placeholders::rows), each row ending in the constant SQL
    /// `tail`: `(?, ?, 'pending')`.
    pub(crate) fn rows_with(&mut self, sql: &mut String, count: usize, columns: usize, tail: &str) {
        sql.reserve(count * (columns * 6 + tail.len()));
        for row in 0..count {
            if row > 0 {
                sql.push_str(", ");
            }
            sql.push('(');
            for column in 0..columns {
                if column > 0 {
                    sql.push_str(", ");
                }
                self.push(sql);
            }
            sql.push_str(tail);
            sql.push(')');
        }
    }
}

/// The insert of `count` planned units of a stage (8 values each); a key
/// the stage has already is left as it is.
pub(crate) fn insert_units(numbered: bool, count: usize) -> String {
    let mut sql = String::from(
        "INSERT INTO units (run_id, idx, unit_key, ordinal, kind, cycle, label, spec, status) VALUES ",
    );
    Placeholders::new(numbered).rows_with(&mut sql, count, 8, ", 'pending'");
    sql.push_str(" ON CONFLICT (run_id, idx, unit_key) DO NOTHING");
    sql
}

#[cfg(test)]
mod tests {
    use super::Placeholders;

    #[test]
    fn placeholders_follow_the_text_in_either_style() {
        let mut sql = String::new();
        let mut numbered = Placeholders::new(true);
        numbered.rows(&mut sql, 2, 2);
        sql.push_str(" WHERE ");
        numbered.push(&mut sql);
        assert_eq!(sql, "($1, $2), ($3, $4) WHERE $5");
        let mut sql = String::new();
        Placeholders::new(false).rows(&mut sql, 2, 3);
        assert_eq!(sql, "(?, ?, ?), (?, ?, ?)");
        assert_eq!(
            Placeholders::update_from_values(true, "t", "a = v.column2", 2, 2, "t.k = v.column1"),
            "UPDATE t SET a = v.column2 FROM (VALUES ($1, $2), ($3, $4)) AS v WHERE t.run_id = $5 AND t.k = v.column1"
        );
    }
}
