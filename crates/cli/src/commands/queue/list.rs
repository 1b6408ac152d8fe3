//! `baton queue list`: jobs are read a page at a time and written as they
//! come, so listing a large queue takes the memory of one page.

use std::io::{self, Write};

use baton_store::{JobFilter, JobRow, Store};
use serde_json::Value;

use crate::args::Format;
use crate::args::queue::QueueListArgs;
use crate::{exit_code, output};
use baton_engine::view::queue::job_json;

/// Jobs per query: enough to amortise a round trip to the store, few
/// enough that a page's memory does not matter.
const PAGE: usize = 500;

const HEADER: [&str; 7] = [
    "id", "queue", "kind", "status", "attempts", "priority", "error",
];

/// Runs `baton queue list`. A closed stdout ends the listing quietly.
pub(super) async fn list(store: &Store, args: &QueueListArgs) -> Result<u8, baton_engine::Error> {
    let mut out = io::BufWriter::with_capacity(64 * 1024, io::stdout().lock());
    match args.format.format() {
        Format::Table => table(store, args, &mut out).await?,
        format => {
            let mut listing = Listing::new(&mut out, format);
            each_job(store, args, None, |job| {
                listing.item(&job_json(job)).is_ok()
            })
            .await?;
            let _ = listing.finish();
        }
    }
    let _ = out.flush();
    Ok(exit_code::SUCCESS)
}

/// Hands the jobs `args` selects to `each`, oldest first, until it returns
/// false; with `last`, none past that id.
async fn each_job(
    store: &Store,
    args: &QueueListArgs,
    last: Option<i64>,
    mut each: impl FnMut(&JobRow) -> bool,
) -> Result<(), baton_engine::Error> {
    let mut left = args.limit.map_or(usize::MAX, |limit| {
        usize::try_from(limit).unwrap_or(usize::MAX)
    });
    let mut after = None;
    while left > 0 {
        let asked = left.min(PAGE);
        let page = store
            .jobs(&JobFilter {
                status: args.status.clone(),
                queue: args.queue.clone(),
                limit: Some(i64::try_from(asked).unwrap_or(i64::MAX)),
                after,
            })
            .await?;
        for job in &page {
            if last.is_some_and(|last| job.id > last) || !each(job) {
                return Ok(());
            }
        }
        if page.len() < asked {
            break;
        }
        left -= page.len();
        after = page.last().map(|job| job.id);
    }
    Ok(())
}

/// The table takes two passes: one to size the columns, one to print.
/// Only jobs the first pass saw are printed, so jobs enqueued meanwhile
/// cannot overflow the columns.
async fn table(
    store: &Store,
    args: &QueueListArgs,
    out: &mut impl Write,
) -> Result<(), baton_engine::Error> {
    let mut columns = output::Columns::new(&HEADER);
    let mut last = None;
    each_job(store, args, None, |job| {
        columns.fit(&row(job));
        last = Some(job.id);
        true
    })
    .await?;
    if out.write_all(columns.line(&HEADER).as_bytes()).is_err() {
        return Ok(());
    }
    let Some(last) = last else {
        output::stderr_line("No job matches.");
        return Ok(());
    };
    each_job(store, args, Some(last), |job| {
        out.write_all(columns.line(&row(job)).as_bytes()).is_ok()
    })
    .await
}

fn row(job: &JobRow) -> [String; 7] {
    [
        job.id.to_string(),
        job.queue.clone(),
        job.kind.clone(),
        job.status.clone(),
        format!("{}/{}", job.attempts, job.max_attempts),
        job.priority.to_string(),
        job.error
            .as_deref()
            .map(|e| e.lines().next().unwrap_or("").chars().take(60).collect())
            .unwrap_or_default(),
    ]
}

/// A JSON or YAML array written an element at a time, byte for byte what
/// `output::json` or `output::yaml` make of the whole array.
struct Listing<W> {
    out: W,
    format: Format,
    items: usize,
}

impl<W: Write> Listing<W> {
    fn new(out: W, format: Format) -> Self {
        Listing {
            out,
            format,
            items: 0,
        }
    }

    fn item(&mut self, value: &Value) -> io::Result<()> {
        let text = if self.format == Format::Yaml {
            output::yaml(&[value])
        } else {
            // A pretty array indents its elements by one level; strings
            // escape their newlines, so every line is the element's own.
            let element = serde_json::to_string_pretty(value).expect("results are plain data");
            let opening = if self.items == 0 { "[\n  " } else { ",\n  " };
            format!("{opening}{}", element.replace('\n', "\n  "))
        };
        self.items += 1;
        self.out.write_all(text.as_bytes())
    }

    fn finish(mut self) -> io::Result<()> {
        let text = match (self.format, self.items) {
            (Format::Yaml, 0) => output::yaml(&Vec::<Value>::new()),
            (Format::Yaml, _) => String::new(),
            (_, 0) => "[]\n".to_owned(),
            _ => "\n]\n".to_owned(),
        };
        self.out.write_all(text.as_bytes())
    }
}

#[cfg(test)]
mod tests {
    use serde_json::json;

    use super::*;

    fn streamed(format: Format, values: &[Value]) -> String {
        let mut out = Vec::new();
        let mut listing = Listing::new(&mut out, format);
        for value in values {
            listing.item(value).unwrap();
        }
        listing.finish().unwrap();
        String::from_utf8(out).unwrap()
    }

    #[test]
    fn a_streamed_listing_is_the_whole_array_printed_at_once() {
        let jobs = [
            json!({"id": 1, "payload": {"script": "echo 'a\nb'"}, "error": null}),
            json!({"id": 2, "payload": [1, {"x": []}], "error": "boom\nagain"}),
            json!({"id": 3, "payload": "plain", "error": ""}),
        ];
        for count in 0..=jobs.len() {
            let array = Value::Array(jobs[..count].to_vec());
            assert_eq!(streamed(Format::Json, &jobs[..count]), output::json(&array));
            assert_eq!(streamed(Format::Yaml, &jobs[..count]), output::yaml(&array));
        }
    }
}
