//! `baton verify RUN`: are a run's recorded outputs still what was
//! recorded? Reports; runs and records nothing.

use super::errors::unavailable;
use super::runtime::{block_on_exit, open_store};
use crate::args::{Format, VerifyArgs};
use crate::{exit_code, output};

pub(crate) fn run(args: &VerifyArgs) -> u8 {
    let format = args.format.format();
    block_on_exit(async {
        let store = open_store().await?;
        let code = verify(&store, &args.run, format).await;
        store.close_at_exit().await;
        code
    })
}

async fn verify(store: &baton_store::Store, reference: &str, format: Format) -> Result<u8, u8> {
    let run_id = super::run_ref::resolve(store, reference).await?;
    let verification = match baton_engine::verify::verify(store, &run_id).await {
        Ok(verification) => verification,
        Err(baton_engine::Error::Store(baton_store::Error::NoSuchRun(_))) => {
            output::stderr_line(&format!("error: no run with id {run_id}"));
            output::stderr_line(
                "hint: `baton runs` lists the recorded runs; a run's workspace directory names it too",
            );
            return Err(exit_code::INVALID_WORKFLOW);
        }
        Err(error) => return Err(unavailable(&error)),
    };
    let intact = verification.intact();
    let value = baton_engine::view::gates::verification_json(&verification);
    // Only the text's advice depends on who drives the run: JSON and YAML
    // do not read it.
    let external = format == Format::Table
        && store
            .run(&run_id)
            .await
            .is_ok_and(|run| baton_engine::external::is_external(&run));
    output::print(format, &value, || text(&verification, external));
    Ok(if intact {
        exit_code::SUCCESS
    } else {
        exit_code::OUTPUTS_CHANGED
    })
}

fn text(verification: &baton_engine::verify::Verification, external: bool) -> String {
    let run = &verification.run_id;
    let total = verification.outputs.len();
    let broken: Vec<_> = verification
        .outputs
        .iter()
        .filter(|output| output.state != baton_engine::verify::OutputState::Intact)
        .collect();
    if broken.is_empty() {
        return format!(
            "run {run} ({}): all {total} recorded output(s) intact\n",
            verification.status
        );
    }
    let mut text = output::table_of(&["stage", "output", "state"], &broken, |output| {
        vec![
            output.stage.clone(),
            output.path.clone(),
            output.state.as_str().to_owned(),
        ]
    });
    text.push_str(&format!(
        "\nrun {run} ({}): {} of {total} recorded output(s) changed or deleted since they were recorded\n",
        verification.status,
        broken.len()
    ));
    let stages: Vec<&str> = verification
        .rerun
        .iter()
        .map(|rerun| rerun.stage.as_str())
        .collect();
    if external {
        text.push_str(&format!(
            "run {run} is driven externally: `baton rerun {run} STAGE` resets a stage (and its dependants) for `baton next`
"
        ));
    } else if verification.status == "rejected" {
        text.push_str("the run was rejected at a gate: `baton resume` does not run it again\n");
    } else {
        text.push_str(&format!(
            "`baton resume {run}` runs again: {}\n",
            stages.join(", ")
        ));
    }
    text
}
