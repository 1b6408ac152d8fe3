//! `baton list [DIR]`.

use std::path::{Path, PathBuf};

use baton_workflow::load::{self, Document};
use baton_workflow::loader::read_source;
use serde::Serialize;

use crate::args::ListArgs;
use crate::{exit_code, output};

#[derive(Serialize)]
struct Row {
    file: String,
    kind: &'static str,
    name: String,
    version: String,
    description: String,
    stages: Option<usize>,
    error: Option<String>,
}

/// Directories never searched: they hold build output or dependencies.
const SKIPPED_DIRS: &[&str] = &["target", "node_modules", ".git", ".baton"];

pub(crate) fn run(args: &ListArgs) -> u8 {
    let dir = args.dir.clone().unwrap_or_else(|| {
        if Path::new("workflows").is_dir() {
            "workflows".to_owned()
        } else {
            ".".to_owned()
        }
    });
    let mut files = Vec::new();
    collect(Path::new(&dir), &mut files);
    files.sort();
    // The files listed are named from the current directory.
    let loader = baton_engine::loader::FsLoader::new(super::current_dir());
    let rows: Vec<Row> = files
        .iter()
        .map(|file| row(&file.to_string_lossy(), &loader))
        .collect();
    if rows.is_empty() {
        output::stderr_line(&format!("No workflows found under {dir}"));
    }
    output::print(args.format.format(), &rows, || {
        let header = ["file", "kind", "name", "stages", "description"];
        output::table_of(&header, &rows, |row| {
            vec![
                row.file.clone(),
                row.kind.to_owned(),
                row.name.clone(),
                row.stages
                    .map(|count| count.to_string())
                    .unwrap_or_default(),
                row.error.clone().unwrap_or_else(|| row.description.clone()),
            ]
        })
    });
    exit_code::SUCCESS
}

fn collect(dir: &Path, files: &mut Vec<PathBuf>) {
    let Ok(entries) = std::fs::read_dir(dir) else {
        return;
    };
    for entry in entries.flatten() {
        let path = entry.path();
        let name = entry.file_name();
        let name = name.to_string_lossy();
        if name.starts_with('.') && name.len() > 1 {
            continue;
        }
        match entry.file_type() {
            Ok(kind) if kind.is_dir() && !SKIPPED_DIRS.contains(&name.as_ref()) => {
                collect(&path, files)
            }
            Ok(kind) if kind.is_file() && (name.ends_with(".yaml") || name.ends_with(".yml")) => {
                files.push(
                    path.strip_prefix("./")
                        .map(Path::to_path_buf)
                        .unwrap_or(path),
                );
            }
            _ => {}
        }
    }
}

fn row(file: &str, loader: &baton_engine::loader::FsLoader) -> Row {
    let mut row = Row {
        file: file.to_owned(),
        kind: "invalid",
        name: String::new(),
        version: String::new(),
        description: String::new(),
        stages: None,
        error: None,
    };
    let source = match read_source(loader, file) {
        Ok(source) => source,
        Err(error) => {
            row.error = Some(error.message);
            return row;
        }
    };
    match load::document(&source, &mut Vec::new()) {
        Ok(Document::Fragment(fragment)) => {
            row.kind = "fragment";
            row.stages = Some(fragment.stages.len());
        }
        Ok(Document::Workflow(workflow)) => {
            row.kind = "workflow";
            row.name.clone_from(&workflow.name);
            row.version.clone_from(&workflow.version);
            row.description = workflow.description.trim_end().to_owned();
            row.stages = Some(match baton_workflow::load(file, loader) {
                Ok(loaded) => loaded.workflow.stages.len(),
                Err(_) => workflow.stages.len(),
            });
        }
        Err(error) => row.error = Some(error.message),
    }
    row
}
