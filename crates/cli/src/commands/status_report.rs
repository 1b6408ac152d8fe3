//! A run's status as `baton status` prints it (and `status --watch`
//! redraws it): its stages, gates, units, findings, costs and retries,
//! read by `baton_engine::view::Status`.

use baton_engine::view::Status;
use baton_engine::workspace::utc;

use super::errors::store_error;
use crate::args::Format;
use crate::output;

/// The status of a run as `baton status` prints it, in `format`. `Err`
/// carries the exit code, once the error is printed.
pub(super) async fn render(
    store: &baton_store::Store,
    run_id: &str,
    format: Format,
) -> Result<String, u8> {
    let status = Status::read(store, run_id)
        .await
        .map_err(|error| store_error(&error))?;
    Ok(match format {
        Format::Json | Format::Yaml => output::json_or_yaml(format, &status.json()),
        Format::Table => table(&status),
    })
}

/// The status for people: the run, its gates, a row per stage (and per
/// sub-run), the total cost and the failed units.
fn table(status: &Status) -> String {
    let Status {
        run,
        stages,
        gates,
        work,
        driver_gone: gone,
        subruns,
        costs,
        retries,
    } = status;
    let mut text = format!(
        "run: {}\nworkflow: {}\nstatus: {}{}\nworkspace: {}\n",
        run.run_id,
        run.workflow,
        run.status,
        if *gone {
            format!(" (driver gone — `baton resume {}`)", run.run_id)
        } else {
            String::new()
        },
        run.workspace
    );
    if let Some(error) = &run.error {
        text.push_str(&format!("error: {error}\n"));
    }
    for gate in gates {
        text.push_str(&format!("gate {}: {}", gate.stage, gate.state.as_str()));
        if let Some(row) = &gate.decision {
            text.push_str(&format!(
                " ({} by {} at {})",
                row.decision.replace('_', " "),
                row.decided_by,
                utc(row.decided_at)
            ));
        }
        text.push('\n');
    }
    text.push('\n');
    let rows: Vec<Vec<String>> = stages
        .iter()
        .flat_map(|stage| {
            let row = vec![
                format!("{:03}", stage.index),
                stage.name.clone(),
                stage.status.clone(),
                stage
                    .duration_ms()
                    .map(|ms| format!("{ms} ms"))
                    .unwrap_or_default(),
                stage.attempts.to_string(),
                costs.cost_cell(stage.index),
                costs.tokens_cell(stage.index),
                work.summary(stage.index)
                    .into_iter()
                    .chain(costs.continued_cells(stage.index))
                    .chain(stage.error.clone().or_else(|| stage.note.clone()))
                    .chain(retries.detail(stage))
                    .collect::<Vec<_>>()
                    .join("; "),
            ];
            let columns = row.len();
            std::iter::once(row).chain(subruns.rows(&run.run_id, &stage.name, columns))
        })
        .collect();
    text.push_str(&output::table(
        &[
            "index", "stage", "status", "duration", "attempts", "cost", "tokens", "detail",
        ],
        &rows,
    ));
    text.extend(costs.total_line());
    text.push_str(&work.failures());
    text
}
