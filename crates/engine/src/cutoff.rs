//! Points in time typed on the command line: an age (`7d`, `12h`, `30m`,
//! `2w`, `90s`) counted back from now, or a UTC date (`2026-12-01`) or
//! instant (`2026-12-01T08:30:00Z`). `baton runs --since` and `baton prune
//! --older-than` take them.

/// A point in time as typed.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Cutoff {
    /// This many milliseconds before now.
    Ago(i64),
    /// This instant, in milliseconds since the Unix epoch.
    At(i64),
}

impl Cutoff {
    /// The instant, given the time now.
    pub fn at(self, now_ms: i64) -> i64 {
        match self {
            Cutoff::Ago(ms) => now_ms.saturating_sub(ms),
            Cutoff::At(ms) => ms,
        }
    }
}

const EXPECTED: &str = "write an age such as 7d, 12h, 30m or 2w, or a UTC date such as 2026-12-01 (or 2026-12-01T08:30:00Z)";

/// Reads an age or a date (a clap value parser).
pub fn parse(text: &str) -> Result<Cutoff, String> {
    let text = text.trim();
    if let Some(ms) = age_ms(text) {
        return Ok(Cutoff::Ago(ms));
    }
    if let Some(ms) = instant_ms(text) {
        return Ok(Cutoff::At(ms));
    }
    Err(format!("`{text}` is neither an age nor a date: {EXPECTED}"))
}

/// `<number><unit>`, unit one of s, m, h, d, w.
fn age_ms(text: &str) -> Option<i64> {
    let digits = text.bytes().take_while(u8::is_ascii_digit).count();
    if digits == 0 {
        return None;
    }
    let number: i64 = text[..digits].parse().ok()?;
    let unit: i64 = match &text[digits..] {
        "s" => 1_000,
        "m" => 60_000,
        "h" => 3_600_000,
        "d" => 86_400_000,
        "w" => 7 * 86_400_000,
        _ => return None,
    };
    number.checked_mul(unit)
}

/// `YYYY-MM-DD`, optionally followed by `THH:MM:SSZ` (or `THH:MMZ`), UTC.
fn instant_ms(text: &str) -> Option<i64> {
    let (date, time) = match text.split_once(['T', ' ']) {
        Some((date, time)) => (date, Some(time.strip_suffix('Z').unwrap_or(time))),
        None => (text, None),
    };
    let mut parts = date.split('-');
    let year: i64 = number(parts.next()?, 4)?;
    let month: i64 = number(parts.next()?, 2)?;
    let day: i64 = number(parts.next()?, 2)?;
    if parts.next().is_some() || !(1..=12).contains(&month) || day < 1 || day > days_in(year, month)
    {
        return None;
    }
    let mut seconds = days_from_civil(year, month, day) * 86_400;
    if let Some(time) = time {
        let mut fields = time.split(':');
        let hours: i64 = number(fields.next()?, 2)?;
        let minutes: i64 = number(fields.next()?, 2)?;
        let secs: i64 = fields.next().map_or(Some(0), |field| number(field, 2))?;
        if fields.next().is_some() || hours > 23 || minutes > 59 || secs > 59 {
            return None;
        }
        seconds += hours * 3600 + minutes * 60 + secs;
    }
    Some(seconds * 1000)
}

/// A field of exactly `width` ASCII digits.
fn number(field: &str, width: usize) -> Option<i64> {
    (field.len() == width && field.bytes().all(|byte| byte.is_ascii_digit()))
        .then(|| field.parse().ok())
        .flatten()
}

fn days_in(year: i64, month: i64) -> i64 {
    match month {
        2 if year % 4 == 0 && (year % 100 != 0 || year % 400 == 0) => 29,
        2 => 28,
        4 | 6 | 9 | 11 => 30,
        _ => 31,
    }
}

/// Days since 1970-01-01 (Howard Hinnant's civil-to-days algorithm).
fn days_from_civil(year: i64, month: i64, day: i64) -> i64 {
    let year = if month <= 2 { year - 1 } else { year };
    let era = year.div_euclid(400);
    let year_of_era = year - era * 400;
    let month_index = (month + 9) % 12;
    let day_of_year = (153 * month_index + 2) / 5 + day - 1;
    let day_of_era = year_of_era * 365 + year_of_era / 4 - year_of_era / 100 + day_of_year;
    era * 146_097 + day_of_era - 719_468
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn ages_count_back_from_now() {
        assert_eq!(parse("7d"), Ok(Cutoff::Ago(7 * 86_400_000)));
        assert_eq!(parse("2w"), Ok(Cutoff::Ago(14 * 86_400_000)));
        assert_eq!(parse("90s"), Ok(Cutoff::Ago(90_000)));
        assert_eq!(Cutoff::Ago(1_000).at(5_000), 4_000);
    }

    #[test]
    fn dates_are_utc_and_agree_with_the_formatter() {
        for ms in [0, 1_764_547_200_000, 1_709_164_800_000, 951_782_400_000] {
            let text = crate::workspace::utc(ms);
            assert_eq!(parse(&text), Ok(Cutoff::At(ms)), "{text}");
            assert_eq!(
                parse(&text[..10]),
                Ok(Cutoff::At(ms - ms % 86_400_000)),
                "{text}"
            );
        }
        assert_eq!(
            parse("2024-02-29T08:30Z"),
            Ok(Cutoff::At(1_709_195_400_000))
        );
    }

    #[test]
    fn anything_else_is_refused_with_what_to_write() {
        for text in [
            "",
            "7",
            "d",
            "7 days",
            "-7d",
            "2023-02-29",
            "2026-13-01",
            "26-12-01",
            "2026-12-01T25:00Z",
        ] {
            let error = parse(text).expect_err(text);
            assert!(error.contains("such as 7d"), "{error}");
        }
    }
}
