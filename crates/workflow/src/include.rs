//! Fragment expansion.
//!
//! Each `include` entry, in order: resolve the path (absolute as-is, else
//! relative to the current directory if that file exists, else relative to
//! the including file), load it as a fragment, expand its own includes
//! first, rename its stages with the prefix (default: the file stem), give
//! every root stage the entry's `depends_on` / `reads_from` when those are
//! non-empty, and append the stages after the parent's own.

use std::collections::HashMap;
use std::path::Path;
use std::sync::Arc;

use crate::diagnostic::{Diagnostic, SourceFile};
use crate::load;
use crate::loader::{Loader, read_source};
use crate::schema::{Include, Spanned, Stage};

/// How deeply fragments may include fragments.
pub const MAX_INCLUDE_DEPTH: usize = 32;

/// The most stages a workflow may have after expansion. Fragments included
/// several times at several levels multiply; the bound turns an include bomb
/// into an error instead of an out-of-memory kill.
pub const MAX_STAGES: usize = 50_000;

/// The most stages expansion may produce in total, counting the copies made
/// at every level of nesting: a chain of fragments that each stay under
/// [`MAX_STAGES`] must not hold millions of stages on the way.
const MAX_PRODUCED_STAGES: usize = 2 * MAX_STAGES;

/// The most stage text (descriptions and scripts) expansion may produce: a
/// fragment with a huge description included many times would otherwise
/// multiply it past any file-size bound.
pub const MAX_EXPANDED_BYTES: usize = 32 * 1024 * 1024;

/// Expands the includes of a workflow (or fragment) whose own stages are
/// `stages`, written in `file`. Every file read is added to `files`.
///
/// # Errors
///
/// A missing fragment, a file that is not a fragment, a fragment that fails
/// to load, an include cycle, or too many stages.
pub fn expand(
    stages: Vec<Arc<Stage>>,
    includes: &[Include],
    file: &Arc<SourceFile>,
    loader: &dyn Loader,
    files: &mut Vec<Arc<SourceFile>>,
    warnings: &mut Vec<Diagnostic>,
) -> Result<Vec<Arc<Stage>>, Diagnostic> {
    let mut expander = Expander {
        loader,
        files,
        warnings,
        chain: Vec::new(),
        cache: HashMap::new(),
        produced_stages: 0,
        produced_bytes: 0,
    };
    expander.expand(stages, includes, file)
}

struct Expander<'a> {
    loader: &'a dyn Loader,
    files: &'a mut Vec<Arc<SourceFile>>,
    warnings: &'a mut Vec<Diagnostic>,
    chain: Vec<String>,
    /// Fragments already read, by resolved path: a fragment included many
    /// times is read and parsed once.
    cache: HashMap<String, (Arc<SourceFile>, load::Fragment)>,
    /// Stages emitted so far, at every level.
    produced_stages: usize,
    /// Bytes of stage text emitted so far, at every level.
    produced_bytes: usize,
}

impl Expander<'_> {
    fn expand(
        &mut self,
        mut stages: Vec<Arc<Stage>>,
        includes: &[Include],
        file: &Arc<SourceFile>,
    ) -> Result<Vec<Arc<Stage>>, Diagnostic> {
        for include in includes {
            let resolved = resolve(&include.path.value, &file.path, self.loader);
            if !self.loader.exists(Path::new(&resolved)) {
                return Err(Diagnostic::error(
                    "include::missing",
                    format!("include references missing fragment file: {resolved}"),
                )
                .at(file, include.path.span)
                .for_field("<global>", "include")
                .with_label("no such file")
                .with_help(format!(
                    "include paths are tried relative to the current directory first, then to the directory of {}",
                    file.path
                )));
            }
            if self.chain.contains(&resolved) {
                let cycle = self
                    .chain
                    .iter()
                    .chain(std::iter::once(&resolved))
                    .map(String::as_str)
                    .collect::<Vec<_>>()
                    .join(" -> ");
                return Err(Diagnostic::error(
                    "include::cycle",
                    format!("circular include detected — '{resolved}' is already being expanded (cycle: {cycle})"),
                )
                .at(file, include.path.span)
                .with_label("includes a fragment that is already being expanded"));
            }
            if self.chain.len() >= MAX_INCLUDE_DEPTH {
                return Err(Diagnostic::error(
                    "include::depth",
                    format!("includes are nested more than {MAX_INCLUDE_DEPTH} levels deep"),
                )
                .at(file, include.path.span));
            }
            let (fragment_file, fragment) = match self.cache.get(&resolved) {
                Some(cached) => cached.clone(),
                None => {
                    let fragment_file = read_source(self.loader, &resolved)
                        .map_err(|error| error.at(file, include.path.span))?;
                    self.files.push(Arc::clone(&fragment_file));
                    let fragment =
                        load::fragment(&fragment_file, self.warnings).map_err(|error| {
                            // "Not a fragment" is about the include, not a place in the file.
                            if error.code == load::NOT_A_FRAGMENT {
                                error
                                    .at(file, include.path.span)
                                    .with_label(format!("{resolved} has no `fragment: true`"))
                            } else {
                                error
                            }
                        })?;
                    self.cache.insert(
                        resolved.clone(),
                        (Arc::clone(&fragment_file), fragment.clone()),
                    );
                    (fragment_file, fragment)
                }
            };
            self.chain.push(resolved.clone());
            let fragment_stages =
                self.expand(fragment.stages, &fragment.includes, &fragment_file)?;
            self.chain.pop();

            let prefix = include.prefix.clone().unwrap_or_else(|| stem(&resolved));
            let renames: HashMap<String, String> = fragment_stages
                .iter()
                .map(|stage| {
                    let name = &stage.name.value;
                    let renamed = if prefix.is_empty() {
                        name.clone()
                    } else {
                        format!("{prefix}-{name}")
                    };
                    (name.clone(), renamed)
                })
                .collect();
            let rename = |names: &[Spanned<String>]| -> Vec<Spanned<String>> {
                names
                    .iter()
                    .map(|name| {
                        Spanned::new(
                            renames.get(&name.value).unwrap_or(&name.value).clone(),
                            name.span,
                        )
                    })
                    .collect()
            };
            if stages.len() + fragment_stages.len() > MAX_STAGES {
                return Err(Diagnostic::error(
                    "include::too-many-stages",
                    format!("the workflow expands to more than {MAX_STAGES} stages"),
                )
                .at(file, include.path.span));
            }
            for mut shared in fragment_stages {
                // A fragment included twice is renamed twice: each copy is its own.
                let stage = Arc::make_mut(&mut shared);
                self.produced_stages += 1;
                self.produced_bytes += stage.description.value.len()
                    + stage.script.as_ref().map_or(0, |script| script.value.len());
                if self.produced_stages > MAX_PRODUCED_STAGES {
                    return Err(Diagnostic::error(
                        "include::too-many-stages",
                        format!(
                            "the workflow's includes expand to more than {MAX_PRODUCED_STAGES} stages in all"
                        ),
                    )
                    .at(file, include.path.span)
                    .with_help("a fragment included at several levels multiplies; include it once"));
                }
                if self.produced_bytes > MAX_EXPANDED_BYTES {
                    return Err(Diagnostic::error(
                        "include::too-large",
                        format!(
                            "the workflow's includes expand to more than {MAX_EXPANDED_BYTES} bytes of stage text"
                        ),
                    )
                    .at(file, include.path.span)
                    .with_help("include large fragments fewer times, or move long text into files the stages read"));
                }
                let is_root = stage.depends_on.is_empty();
                stage.name.value.clone_from(&renames[&stage.name.value]);
                // The include entry's lists are written in the including
                // file: diagnostics about them point there.
                if is_root && !include.depends_on.is_empty() {
                    stage.depends_on.clone_from(&include.depends_on);
                    stage.depends_on_file = Arc::clone(file);
                } else {
                    stage.depends_on = rename(&stage.depends_on);
                }
                if is_root && !include.reads_from.is_empty() {
                    stage.reads_from.clone_from(&include.reads_from);
                    stage.reads_from_file = Arc::clone(file);
                } else {
                    stage.reads_from = rename(&stage.reads_from);
                }
                if let Some(fan_out) = &mut stage.fan_out
                    && let Some(renamed) = renames.get(&fan_out.source.value)
                {
                    fan_out.source.value.clone_from(renamed);
                }
                stage.include_prefix = Some(prefix.clone());
                stages.push(shared);
            }
        }
        Ok(stages)
    }
}

/// Resolves an include path the way the reference engine does: absolute as
/// is; relative to the current directory if that file exists; otherwise
/// relative to the including file's directory.
pub fn resolve(path: &str, including: &str, loader: &dyn Loader) -> String {
    if Path::new(path).is_absolute() || loader.exists(Path::new(path)) {
        return path.to_owned();
    }
    match Path::new(including).parent() {
        Some(parent) if !parent.as_os_str().is_empty() => {
            parent.join(path).to_string_lossy().into_owned()
        }
        _ => path.to_owned(),
    }
}

fn stem(path: &str) -> String {
    Path::new(path)
        .file_stem()
        .map(|stem| stem.to_string_lossy().into_owned())
        .unwrap_or_default()
}

#[cfg(test)]
mod tests {
    use crate::MemoryLoader;

    const FRAGMENT: &str =
        "fragment: true\nstages:\n  - {name: f, kind: gather, description: d, agent: {role: r}}\n";

    /// Loads a workflow whose include entry is `entry`, expecting one error,
    /// and returns its code, file and the text its span covers.
    fn error_of(entry: &str) -> (&'static str, String, String) {
        let workflow = format!(
            "name: w\nversion: \"1\"\ndescription: d\ntrigger: {{source: manual}}\nstages:\n  - {{name: a, kind: gather, description: d, agent: {{role: r}}}}\ninclude:\n  - {entry}\n"
        );
        let loader = MemoryLoader::new()
            .with("w.yaml", &workflow)
            .with("f.yaml", FRAGMENT);
        let failure = crate::load("w.yaml", &loader).expect_err(entry);
        let error = &failure.errors[0];
        let location = error.location.as_ref().expect("a place");
        let text = &location.file.text;
        let covered = text
            .get(location.span.offset..location.span.offset + location.span.len)
            .expect("the span lies in its file")
            .to_owned();
        (error.code, location.file.path.clone(), covered)
    }

    /// An include entry's `depends_on` and `reads_from` are written in the
    /// including file, so problems with them are shown there.
    #[test]
    fn an_include_entrys_references_are_placed_in_the_including_file() {
        assert_eq!(
            error_of("{path: f.yaml, prefix: x, depends_on: [b]}"),
            ("graph::unknown-stage", "w.yaml".to_owned(), "b".to_owned())
        );
        assert_eq!(
            error_of("{path: f.yaml, prefix: x, reads_from: [a]}"),
            (
                "graph::reads-not-ancestor",
                "w.yaml".to_owned(),
                "a".to_owned()
            )
        );
    }
}
