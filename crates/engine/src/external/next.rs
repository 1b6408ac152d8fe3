//! `next`: records what became ready as started, runs ready inline scripts
//! itself, and lists every stage and unit handed out.

use super::*;

/// Lists the stages ready for the orchestrator, recording each as started.
/// Stages handed out before and not completed are listed again. Inline
/// scripts that are ready run here, and their dependants are looked at
/// again.
///
/// # Errors
///
/// No such run, a run not driven externally, a stage the protocol cannot
/// drive, a changed workflow, a live process holding the run, or the store
/// failing.
pub async fn next(store: &Store, run_id: &str) -> Result<Standing> {
    let opened = open(store, run_id).await?;
    if ended(&opened.run.status) {
        return standing(store, &opened, Vec::new(), Vec::new()).await;
    }
    let mut lease = take(store, run_id).await?;
    let result = next_owned(store, &mut lease, &opened).await;
    let _ = store.release(&lease).await;
    result
}

#[expect(
    clippy::too_many_lines,
    reason = "one pass of the protocol's scheduling reads best in one piece"
)]
pub(super) async fn next_owned(
    store: &Store,
    lease: &mut Lease,
    opened: &Opened,
) -> Result<Standing> {
    let plan = &opened.plan;
    let workspace = &opened.workspace;
    let run_id = &opened.run.run_id;
    let mut scripts = Vec::new();
    // A script recorded as running was left by a `next` that died while it
    // ran (calls hold the lease one at a time). Its processes, marked with
    // the run's id, must not keep writing while it runs again.
    let rows = store.stages(run_id).await?;
    let now = clock::now_ms();
    let left_stage = plan
        .stages
        .iter()
        .any(|stage| rows[stage.index].status == "running" && is_script(stage));
    let left_unit = store
        .units(run_id)
        .await?
        .iter()
        .any(|unit| unit.status == "running" && unit_is_script(opened, unit, now));
    if left_stage || left_unit {
        crate::reconcile::kill_leftovers(run_id);
    }
    loop {
        let rows = store.stages(run_id).await?;
        let mut states = States::new(plan, rows.iter().map(|row| State::from_status(&row.status)));
        let gates = gate::Gates::load(store, run_id, plan, workspace).await?;
        if gates.rejected().is_some() {
            return settle(store, lease, opened, Vec::new(), scripts).await;
        }
        let halting = states.required_failure().is_some();
        let units = units_by_stage(store, run_id).await?;
        let now = clock::now_ms();
        let mut transitions = Vec::new();
        let mut to_run: Vec<Script> = Vec::new();
        let mut envelopes: Vec<Envelope> = Vec::new();
        // Whether something changed that may make more work ready.
        let mut progressed = false;

        // Stages in progress.
        for stage in plan
            .stages
            .iter()
            .filter(|stage| rows[stage.index].status == "running")
        {
            let index = stage.index;
            if !work::is_composite(stage) {
                if is_script(stage) {
                    // Only a `next` that died while the script ran leaves
                    // it running (calls hold the lease one at a time): it
                    // runs again.
                    transitions.push(Transition::AttemptInterrupted {
                        index: as_i64(index),
                        attempt: rows[index].attempts,
                        at: now,
                    });
                    progressed = true;
                }
                continue;
            }
            let own = units.get(&index).map(Vec::as_slice).unwrap_or_default();
            let out = own
                .iter()
                .filter(|unit| unit.status == "running" && !unit_is_script(opened, unit, now))
                .count();
            let handed = out > 0;
            // `--max-parallel` is the orchestrator's business, but a
            // fan-out's own `max_parallel` is part of the workflow: no more
            // of its children are out at once.
            let cap = stage
                .spec
                .fan_out
                .as_ref()
                .and_then(|fan_out| fan_out.max_parallel)
                .map_or(usize::MAX, |cap| usize::try_from(cap).unwrap_or(usize::MAX));
            let waiting: Vec<&UnitRow> = own
                .iter()
                .filter(|unit| {
                    unit.status == "pending"
                        || (unit.status == "running" && unit_is_script(opened, unit, now))
                })
                .take(cap.saturating_sub(out))
                .collect();
            let held_back = own.iter().any(|unit| unit.status == "pending") && waiting.is_empty();
            if halting {
                // As the coordinator does: no new units once the run halts;
                // a stage with none out goes back to pending, its finished
                // units kept.
                if !handed {
                    transitions.push(Transition::AttemptInterrupted {
                        index: as_i64(index),
                        attempt: rows[index].attempts,
                        at: now,
                    });
                    progressed = true;
                }
                continue;
            }
            let context = work::Context {
                plan,
                stage,
                workspace,
                now,
            };
            if !waiting.is_empty() {
                for unit in waiting {
                    transitions.push(Transition::UnitStarted {
                        index: as_i64(index),
                        key: unit.key.clone(),
                        at: now,
                    });
                    match work::materialize(&context, unit) {
                        Err(error) => {
                            transitions.push(Transition::UnitFinished {
                                index: as_i64(index),
                                key: unit.key.clone(),
                                status: "failed".to_owned(),
                                at: now,
                                exit_code: None,
                                error: Some(error),
                                artifacts: Vec::new(),
                            });
                            progressed = true;
                        }
                        Ok(materialized) if is_script(&materialized.stage) => {
                            to_run.push(Script {
                                index,
                                attempt: unit.attempts + 1,
                                stage: materialized.stage,
                                unit: Some(unit.key.clone()),
                                values: materialized.values,
                                env: materialized.env,
                                defer_checks: materialized.defer_checks,
                            });
                        }
                        Ok(materialized) => write_before(&materialized.stage, workspace)?,
                    }
                }
                continue;
            }
            if handed || held_back {
                continue;
            }
            // Every unit has finished: the stage's program takes its next
            // step, exactly as in the coordinator.
            progressed = true;
            match work::step(&context, own) {
                work::Step::Next { units, record } => {
                    transitions.extend(record);
                    if units.is_empty() {
                        transitions.push(stage_finished(
                            index,
                            rows[index].attempts,
                            false,
                            Some("internal error: the stage planned no further work".to_owned()),
                            Vec::new(),
                        ));
                    } else {
                        transitions.push(Transition::UnitsPlanned {
                            index: as_i64(index),
                            units,
                            at: now,
                        });
                    }
                }
                work::Step::Done { record } => {
                    transitions.extend(record);
                    envelopes.push(Envelope {
                        stage: stage.clone(),
                        index,
                        status: "success",
                        started_at: rows[index].started_at,
                        error: None,
                    });
                    let artifacts = hash_outputs(workspace, own);
                    transitions.push(stage_finished(
                        index,
                        rows[index].attempts,
                        true,
                        None,
                        artifacts,
                    ));
                }
                work::Step::Fail { error, record } => {
                    transitions.extend(record);
                    envelopes.push(Envelope {
                        stage: stage.clone(),
                        index,
                        status: "failed",
                        started_at: rows[index].started_at,
                        error: Some(error.clone()),
                    });
                    transitions.push(stage_finished(
                        index,
                        rows[index].attempts,
                        false,
                        Some(error),
                        Vec::new(),
                    ));
                }
            }
        }

        // Stages that may start.
        let ready = if progressed {
            // Look again once this step's changes are recorded.
            Vec::new()
        } else {
            match schedule::next(plan, &mut states, |index| gates.approved(index), usize::MAX) {
                Next::Start(ready) => ready,
                _ => Vec::new(),
            }
        };
        if let Some(stage) = ready
            .iter()
            .map(|&index| &plan.stages[index])
            .find(|stage| unsupported(stage).is_some())
        {
            return Err(Error::Refused(format!(
                "stage '{}' is {}, which the driver protocol does not drive yet; run this workflow with `baton run` instead",
                stage.name(),
                unsupported(stage).unwrap_or_default()
            )));
        }
        for &index in &ready {
            let stage = &plan.stages[index];
            let attempt = rows[index].attempts + 1;
            progressed = true;
            if let Some(decided) = decide_when(stage, attempt, &opened.params, workspace, now)? {
                let status = match &decided {
                    Transition::StageSkipped { .. } => "skipped",
                    _ => "failed",
                };
                envelopes.push(Envelope {
                    stage: stage.clone(),
                    index,
                    status,
                    started_at: Some(now),
                    error: None,
                });
                transitions.push(decided);
                continue;
            }
            if work::is_composite(stage) {
                // Its units are planned on the next pass.
            } else if is_script(stage) {
                to_run.push(Script {
                    index,
                    attempt,
                    stage: stage.clone(),
                    unit: None,
                    values: Vec::new(),
                    env: Vec::new(),
                    defer_checks: false,
                });
            } else {
                // The outputs as they are now, kept on disk for `complete`,
                // which runs in another process; written before the start
                // is recorded so a recorded start always has its snapshot.
                write_before(stage, workspace)?;
            }
            transitions.push(Transition::AttemptStarted {
                index: as_i64(index),
                attempt,
                at: now,
            });
        }
        if !transitions.is_empty() {
            transitions.push(Transition::RunStatus {
                status: "running".to_owned(),
                at: now,
                error: None,
            });
            store.apply(lease, &transitions).await?;
        }
        write_envelopes(workspace, envelopes);
        for script in to_run {
            progressed = true;
            let (index, attempt, unit) = (script.index, script.attempt, script.unit.clone());
            let name = match &unit {
                Some(_) => script.stage.name().to_owned(),
                None => plan.stages[index].name().to_owned(),
            };
            let ran = script.stage.clone();
            let started_at = Some(clock::now_ms());
            let finished = run_script(store, lease, opened, script).await?;
            let status = status_text(finished.success);
            let envelope = Envelope {
                stage: ran,
                index,
                status,
                started_at,
                error: finished.error.clone(),
            };
            scripts.push((name, status.to_owned()));
            let transition = match unit {
                Some(key) => Transition::UnitFinished {
                    index: as_i64(index),
                    key,
                    status: status.to_owned(),
                    at: clock::now_ms(),
                    exit_code: finished.exit_code,
                    error: finished.error,
                    artifacts: finished.artifacts,
                },
                None => Transition::AttemptFinished {
                    index: as_i64(index),
                    attempt,
                    status: status.to_owned(),
                    at: clock::now_ms(),
                    exit_code: finished.exit_code,
                    error: finished.error,
                    artifacts: finished.artifacts,
                },
            };
            store.apply(lease, &[transition]).await?;
            write_envelopes(workspace, vec![envelope]);
        }
        if progressed {
            continue;
        }
        // Settled: every stage and unit handed out and not completed is
        // listed.
        let units = units_by_stage(store, run_id).await?;
        let mut handed = Vec::new();
        for stage in plan
            .stages
            .iter()
            .filter(|stage| rows[stage.index].status == "running")
        {
            if !work::is_composite(stage) {
                let worktree = worktree_for(store, opened, stage.index, stage, &[]).await?;
                handed.push(hand_out(plan, stage, workspace, worktree.as_ref())?);
                continue;
            }
            let context = work::Context {
                plan,
                stage,
                workspace,
                now,
            };
            for unit in units
                .get(&stage.index)
                .into_iter()
                .flatten()
                .filter(|unit| unit.status == "running")
            {
                if let Ok(materialized) = work::materialize(&context, unit) {
                    let worktree = worktree_for(
                        store,
                        opened,
                        stage.index,
                        &materialized.stage,
                        &materialized.env,
                    )
                    .await?;
                    let mut ready =
                        hand_out(plan, &materialized.stage, workspace, worktree.as_ref())?;
                    ready.stage.clone_from(&unit.label);
                    handed.push(ready);
                }
            }
        }
        return settle(store, lease, opened, handed, scripts).await;
    }
}
