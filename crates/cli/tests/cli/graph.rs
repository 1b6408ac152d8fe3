//! Mermaid and DOT output: `baton compile --format mermaid|dot`.
//!
//! The outputs are checked by structure rather than by snapshot: a small
//! parser for each format (written here, so the test needs neither Mermaid
//! nor Graphviz installed) rejects anything a renderer would choke on, such
//! as an unescaped quote, an unbalanced bracket or an edge to a node that was
//! never declared. The parsed graph is then compared with the plan that
//! `baton compile --format json` prints for the same workflow: one node per
//! stage, one solid edge per `depends_on` entry, one dashed "revise" edge per
//! input of a validating stage, a hexagon for each gate and a double border
//! for each fan-out.

use std::collections::HashMap;
use std::path::{Path, PathBuf};

use serde_json::Value;

/// Real workflows from the reference corpus, chosen so that between them
/// they have gates, fan-outs, validating stages and included fragments.
const CORPUS_WORKFLOWS: &[&str] = &[
    "workflows/code/review-and-fix.yaml",
    "workflows/code/design-criteria-audit.yaml",
    "workflows/code/decompose-sweep.yaml",
    "workflows/demo/worker-queue-fanout.yaml",
    "workflows/test/coverage-improve.yaml",
];

/// The fixture whose names hold double quotes and backslashes.
const ESCAPING_FIXTURE: &str = "valid/graph-escaping.yaml";

fn fixtures_dir() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("tests/fixtures")
}

// --- what the plan says the graph must be -----------------------------------

/// A stage as the JSON plan describes it.
#[derive(Debug)]
struct PlanStage {
    index: usize,
    name: String,
    gate: bool,
    fan_out: bool,
}

/// The nodes and edges a drawing of the plan must have.
#[derive(Debug)]
struct ExpectedGraph {
    name: String,
    stages: Vec<PlanStage>,
    /// `(dependency, dependant)` node ids, one per `depends_on` entry.
    dependencies: Vec<(String, String)>,
    /// `(validating stage, stage it sends corrections to)` node ids.
    revisions: Vec<(String, String)>,
}

fn node_id(index: usize) -> String {
    format!("s{index}")
}

fn names(stage: &Value, key: &str) -> Vec<String> {
    stage[key]
        .as_array()
        .unwrap_or_else(|| panic!("`{key}` is a list in {stage}"))
        .iter()
        .map(|name| name.as_str().expect("stage names are strings").to_owned())
        .collect()
}

/// Reads the plan from `baton compile --format json`, an output independent
/// of the drawing code. A validating stage sends corrections back to the
/// stages it reads from, or, when it reads from none, to those it depends on.
fn expected_graph(cwd: &Path, workflow: &str) -> ExpectedGraph {
    let run = crate::baton(cwd, &["compile", workflow, "--format", "json"]);
    assert_eq!(run.code, 0, "{workflow} must compile:\n{}", run.stderr);
    let plan: Value = serde_json::from_str(&run.stdout).expect("compile --format json prints JSON");
    let stages = plan["stages"]
        .as_array()
        .expect("the plan lists its stages");
    let index_of: HashMap<String, usize> = stages
        .iter()
        .map(|stage| {
            let name = stage["name"]
                .as_str()
                .expect("a stage has a name")
                .to_owned();
            let index = stage["index"].as_u64().expect("a stage has an index");
            (name, usize::try_from(index).expect("small index"))
        })
        .collect();
    let id_of = |name: &str| node_id(index_of[name]);

    let mut expected = ExpectedGraph {
        name: plan["name"]
            .as_str()
            .expect("the plan has a name")
            .to_owned(),
        stages: Vec::new(),
        dependencies: Vec::new(),
        revisions: Vec::new(),
    };
    for stage in stages {
        let name = stage["name"].as_str().expect("a stage has a name");
        let id = id_of(name);
        let depends_on = names(stage, "depends_on");
        let reads_from = names(stage, "reads_from");
        for dependency in &depends_on {
            expected.dependencies.push((id_of(dependency), id.clone()));
        }
        if !stage["validation"].is_null() {
            let targets = if reads_from.is_empty() {
                &depends_on
            } else {
                &reads_from
            };
            for target in targets {
                expected.revisions.push((id.clone(), id_of(target)));
            }
        }
        expected.stages.push(PlanStage {
            index: index_of[name],
            name: name.to_owned(),
            gate: stage["human_gate"]
                .as_bool()
                .expect("human_gate is a boolean"),
            fan_out: !stage["fan_out"].is_null(),
        });
    }
    expected.dependencies.sort();
    expected.revisions.sort();
    expected
}

// --- Mermaid ------------------------------------------------------------------

/// The node shapes baton draws.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Shape {
    /// `s0["…"]`: an ordinary stage.
    Box,
    /// `s0[["…"]]`: a double border, for a fan-out.
    DoubleBorder,
    /// `s0{{"…"}}`: a hexagon, for a human gate.
    Hexagon,
}

#[derive(Debug)]
struct MermaidNode {
    shape: Shape,
    /// The label with `#quot;` decoded.
    label: String,
}

#[derive(Debug, Default)]
struct Mermaid {
    nodes: HashMap<String, MermaidNode>,
    /// `sA --> sB`.
    solid: Vec<(String, String)>,
    /// `sA -. revise .-> sB`.
    revise: Vec<(String, String)>,
}

fn is_node_id(text: &str) -> bool {
    text.strip_prefix('s').is_some_and(|digits| {
        !digits.is_empty() && digits.bytes().all(|byte| byte.is_ascii_digit())
    })
}

/// Parses the subset of Mermaid's flowchart syntax that baton emits, and
/// rejects everything else.
fn parse_mermaid(text: &str) -> Result<Mermaid, String> {
    let mut lines = text.lines();
    if lines.next() != Some("flowchart TD") {
        return Err("the first line must be `flowchart TD`".to_owned());
    }
    let mut graph = Mermaid::default();
    for line in lines {
        let line = line.trim();
        let tokens: Vec<&str> = line.split_whitespace().collect();
        match tokens.as_slice() {
            [from, "-->", to] => graph.solid.push(((*from).to_owned(), (*to).to_owned())),
            [from, "-.", "revise", ".->", to] => {
                graph.revise.push(((*from).to_owned(), (*to).to_owned()))
            }
            _ => {
                let (id, node) = parse_mermaid_node(line)?;
                if graph.nodes.insert(id.clone(), node).is_some() {
                    return Err(format!("node {id} is declared twice"));
                }
            }
        }
    }
    for (from, to) in graph.solid.iter().chain(&graph.revise) {
        for end in [from, to] {
            if !graph.nodes.contains_key(end) {
                return Err(format!("edge {from} -> {to} uses undeclared node {end}"));
            }
        }
    }
    Ok(graph)
}

fn parse_mermaid_node(line: &str) -> Result<(String, MermaidNode), String> {
    let open = line
        .find(['[', '{'])
        .ok_or_else(|| format!("neither a node nor an edge: {line}"))?;
    let (id, rest) = line.split_at(open);
    if !is_node_id(id) {
        return Err(format!("bad node id {id:?} in: {line}"));
    }
    // `[[` must be tried before `[`, which is its prefix.
    let shapes = [
        (Shape::DoubleBorder, "[[\"", "\"]]"),
        (Shape::Hexagon, "{{\"", "\"}}"),
        (Shape::Box, "[\"", "\"]"),
    ];
    let (shape, label) = shapes
        .iter()
        .find_map(|(shape, start, end)| {
            let label = rest.strip_prefix(start)?.strip_suffix(end)?;
            Some((*shape, label))
        })
        .ok_or_else(|| format!("unknown node shape in: {line}"))?;
    if label.contains('"') {
        return Err(format!("raw double quote inside a label: {line}"));
    }
    Ok((
        id.to_owned(),
        MermaidNode {
            shape,
            label: label.replace("#quot;", "\""),
        },
    ))
}

// --- DOT ----------------------------------------------------------------------

#[derive(Debug, Clone, PartialEq, Eq)]
enum Token {
    /// An unquoted identifier or number.
    Id(String),
    /// A quoted string, unescaped.
    Quoted(String),
    /// `{ } [ ] ; , = ->`.
    Punct(&'static str),
}

fn tokenize_dot(text: &str) -> Result<Vec<Token>, String> {
    let mut tokens = Vec::new();
    let mut chars = text.chars().peekable();
    while let Some(character) = chars.next() {
        match character {
            _ if character.is_whitespace() => {}
            '"' => {
                let mut value = String::new();
                loop {
                    match chars.next() {
                        None => return Err(format!("unterminated string starting {value:?}")),
                        Some('"') => break,
                        // DOT only gives `\"` a meaning of its own; `\\` and
                        // `\n` are label escapes that Graphviz resolves later.
                        Some('\\') => match chars.next() {
                            Some('"') => value.push('"'),
                            Some('\\') => value.push('\\'),
                            Some('n') => value.push('\n'),
                            Some(other) => {
                                return Err(format!("unexpected escape \\{other} in {value:?}"));
                            }
                            None => return Err("a string ends in a backslash".to_owned()),
                        },
                        Some('\n') => return Err(format!("raw newline inside string {value:?}")),
                        Some(other) => value.push(other),
                    }
                }
                tokens.push(Token::Quoted(value));
            }
            '{' => tokens.push(Token::Punct("{")),
            '}' => tokens.push(Token::Punct("}")),
            '[' => tokens.push(Token::Punct("[")),
            ']' => tokens.push(Token::Punct("]")),
            ';' => tokens.push(Token::Punct(";")),
            ',' => tokens.push(Token::Punct(",")),
            '=' => tokens.push(Token::Punct("=")),
            '-' if chars.peek() == Some(&'>') => {
                chars.next();
                tokens.push(Token::Punct("->"));
            }
            _ if character.is_ascii_alphanumeric() || character == '_' => {
                let mut id = String::from(character);
                while let Some(&next) = chars.peek() {
                    if !(next.is_ascii_alphanumeric() || next == '_' || next == '.') {
                        break;
                    }
                    id.push(next);
                    chars.next();
                }
                tokens.push(Token::Id(id));
            }
            other => return Err(format!("unexpected character {other:?}")),
        }
    }
    Ok(tokens)
}

type Attributes = HashMap<String, String>;

#[derive(Debug, Default)]
struct Dot {
    name: String,
    nodes: HashMap<String, Attributes>,
    edges: Vec<(String, String, Attributes)>,
}

struct DotParser {
    tokens: std::vec::IntoIter<Token>,
    peeked: Option<Token>,
}

impl DotParser {
    fn next(&mut self) -> Option<Token> {
        self.peeked.take().or_else(|| self.tokens.next())
    }

    fn peek(&mut self) -> Option<&Token> {
        if self.peeked.is_none() {
            self.peeked = self.tokens.next();
        }
        self.peeked.as_ref()
    }

    fn expect(&mut self, punct: &'static str) -> Result<(), String> {
        match self.next() {
            Some(Token::Punct(found)) if found == punct => Ok(()),
            other => Err(format!("expected `{punct}`, found {other:?}")),
        }
    }

    fn id(&mut self) -> Result<String, String> {
        match self.next() {
            Some(Token::Id(id)) => Ok(id),
            other => Err(format!("expected an identifier, found {other:?}")),
        }
    }

    fn node_id(&mut self) -> Result<String, String> {
        let id = self.id()?;
        if is_node_id(&id) {
            Ok(id)
        } else {
            Err(format!("bad node id {id:?}"))
        }
    }

    /// `[key=value, …]`, when the next token opens one.
    fn attributes(&mut self) -> Result<Attributes, String> {
        let mut attributes = Attributes::new();
        if self.peek() != Some(&Token::Punct("[")) {
            return Ok(attributes);
        }
        self.next();
        loop {
            match self.next() {
                Some(Token::Punct("]")) => return Ok(attributes),
                Some(Token::Id(key)) => {
                    self.expect("=")?;
                    let value = match self.next() {
                        Some(Token::Id(value) | Token::Quoted(value)) => value,
                        other => {
                            return Err(format!("expected a value for {key}, found {other:?}"));
                        }
                    };
                    if attributes.insert(key.clone(), value).is_some() {
                        return Err(format!("attribute {key} is set twice"));
                    }
                    match self.next() {
                        Some(Token::Punct(",")) => {}
                        Some(Token::Punct("]")) => return Ok(attributes),
                        other => return Err(format!("expected `,` or `]`, found {other:?}")),
                    }
                }
                other => return Err(format!("expected an attribute, found {other:?}")),
            }
        }
    }
}

/// Parses `digraph "name" { … }` where each statement is a graph attribute
/// (`rankdir=TB;`), a default (`node [...];`), a node (`sN [...];`) or an
/// edge (`sA -> sB [...];`), each ended by `;`, and nothing follows the
/// closing brace.
fn parse_dot(text: &str) -> Result<Dot, String> {
    let mut parser = DotParser {
        tokens: tokenize_dot(text)?.into_iter(),
        peeked: None,
    };
    if parser.id()? != "digraph" {
        return Err("the graph must be a `digraph`".to_owned());
    }
    let mut dot = Dot {
        name: match parser.next() {
            Some(Token::Quoted(name)) => name,
            other => return Err(format!("expected the quoted graph name, found {other:?}")),
        },
        ..Dot::default()
    };
    parser.expect("{")?;
    loop {
        let first = match parser.next() {
            Some(Token::Punct("}")) => break,
            Some(Token::Id(id)) => id,
            other => return Err(format!("expected a statement or `}}`, found {other:?}")),
        };
        match parser.peek() {
            Some(Token::Punct("=")) => {
                parser.next();
                parser.id()?;
            }
            Some(Token::Punct("[")) if matches!(first.as_str(), "graph" | "node" | "edge") => {
                parser.attributes()?;
            }
            Some(Token::Punct("->")) => {
                parser.next();
                if !is_node_id(&first) {
                    return Err(format!("bad node id {first:?}"));
                }
                let to = parser.node_id()?;
                let attributes = parser.attributes()?;
                dot.edges.push((first, to, attributes));
            }
            _ => {
                if !is_node_id(&first) {
                    return Err(format!("bad node id {first:?}"));
                }
                let attributes = parser.attributes()?;
                if dot.nodes.insert(first.clone(), attributes).is_some() {
                    return Err(format!("node {first} is declared twice"));
                }
            }
        }
        parser.expect(";")?;
    }
    if let Some(extra) = parser.next() {
        return Err(format!("{extra:?} after the closing brace"));
    }
    for (from, to, _) in &dot.edges {
        for end in [from, to] {
            if !dot.nodes.contains_key(end) {
                return Err(format!("edge {from} -> {to} uses undeclared node {end}"));
            }
        }
    }
    Ok(dot)
}

// --- the checks ---------------------------------------------------------------

/// What a run over one workflow saw, so callers can make sure the cases
/// they chose really exercise gates, fan-outs and revise edges.
#[derive(Debug, Default)]
struct Seen {
    gates: usize,
    fan_outs: usize,
    revisions: usize,
}

fn sorted(mut edges: Vec<(String, String)>) -> Vec<(String, String)> {
    edges.sort();
    edges
}

fn check_mermaid(workflow: &str, text: &str, expected: &ExpectedGraph) -> HashMap<String, String> {
    let graph = parse_mermaid(text)
        .unwrap_or_else(|error| panic!("{workflow}: invalid Mermaid: {error}\n{text}"));
    assert_eq!(
        graph.nodes.len(),
        expected.stages.len(),
        "{workflow}: one Mermaid node per stage"
    );
    let mut labels = HashMap::new();
    for stage in &expected.stages {
        let id = node_id(stage.index);
        let node = graph
            .nodes
            .get(&id)
            .unwrap_or_else(|| panic!("{workflow}: no Mermaid node {id} for stage {}", stage.name));
        assert!(
            node.label
                .starts_with(&format!("{:03} {}", stage.index, stage.name)),
            "{workflow}: Mermaid label {:?} does not name stage {:?}",
            node.label,
            stage.name
        );
        // A gate that also fans out is drawn as a gate: Mermaid has one
        // shape per node, and the pause for a person matters more.
        let shape = if stage.gate {
            Shape::Hexagon
        } else if stage.fan_out {
            Shape::DoubleBorder
        } else {
            Shape::Box
        };
        assert_eq!(
            node.shape, shape,
            "{workflow}: Mermaid shape of stage {}",
            stage.name
        );
        labels.insert(id, node.label.clone());
    }
    assert_eq!(
        sorted(graph.solid),
        expected.dependencies,
        "{workflow}: Mermaid dependency edges"
    );
    assert_eq!(
        sorted(graph.revise),
        expected.revisions,
        "{workflow}: Mermaid revise edges"
    );
    labels
}

fn check_dot(workflow: &str, text: &str, expected: &ExpectedGraph) -> HashMap<String, String> {
    let graph =
        parse_dot(text).unwrap_or_else(|error| panic!("{workflow}: invalid DOT: {error}\n{text}"));
    assert_eq!(graph.name, expected.name, "{workflow}: DOT graph name");
    assert_eq!(
        graph.nodes.len(),
        expected.stages.len(),
        "{workflow}: one DOT node per stage"
    );
    let mut labels = HashMap::new();
    for stage in &expected.stages {
        let id = node_id(stage.index);
        let attributes = graph
            .nodes
            .get(&id)
            .unwrap_or_else(|| panic!("{workflow}: no DOT node {id} for stage {}", stage.name));
        let label = attributes.get("label").cloned().unwrap_or_default();
        assert!(
            label.starts_with(&format!("{:03} {}", stage.index, stage.name)),
            "{workflow}: DOT label {label:?} does not name stage {:?}",
            stage.name
        );
        assert_eq!(
            attributes.get("shape").map(String::as_str),
            stage.gate.then_some("hexagon"),
            "{workflow}: DOT shape of stage {}",
            stage.name
        );
        assert_eq!(
            attributes.get("peripheries").map(String::as_str),
            stage.fan_out.then_some("2"),
            "{workflow}: DOT border of stage {}",
            stage.name
        );
        labels.insert(id, label);
    }
    let mut solid = Vec::new();
    let mut revise = Vec::new();
    for (from, to, attributes) in graph.edges {
        if attributes.is_empty() {
            solid.push((from, to));
        } else {
            assert_eq!(
                attributes.get("style").map(String::as_str),
                Some("dashed"),
                "{workflow}: {from} -> {to}"
            );
            assert_eq!(
                attributes.get("label").map(String::as_str),
                Some("revise"),
                "{workflow}: {from} -> {to}"
            );
            revise.push((from, to));
        }
    }
    assert_eq!(
        sorted(solid),
        expected.dependencies,
        "{workflow}: DOT dependency edges"
    );
    assert_eq!(
        sorted(revise),
        expected.revisions,
        "{workflow}: DOT revise edges"
    );
    labels
}

/// Compiles `workflow` in `cwd` to both formats and checks each against the
/// JSON plan. Returns the labels, which must agree between the formats.
fn check_workflow(cwd: &Path, workflow: &str) -> (Seen, HashMap<String, String>) {
    let expected = expected_graph(cwd, workflow);
    let mermaid = crate::baton(cwd, &["compile", workflow, "--format", "mermaid"]);
    assert_eq!(
        mermaid.code, 0,
        "{workflow}: --format mermaid failed:\n{}",
        mermaid.stderr
    );
    let dot = crate::baton(cwd, &["compile", workflow, "--format", "dot"]);
    assert_eq!(
        dot.code, 0,
        "{workflow}: --format dot failed:\n{}",
        dot.stderr
    );

    let mermaid_labels = check_mermaid(workflow, &mermaid.stdout, &expected);
    let dot_labels = check_dot(workflow, &dot.stdout, &expected);
    assert_eq!(
        mermaid_labels, dot_labels,
        "{workflow}: Mermaid and DOT label the stages differently"
    );
    let seen = Seen {
        gates: expected.stages.iter().filter(|stage| stage.gate).count(),
        fan_outs: expected.stages.iter().filter(|stage| stage.fan_out).count(),
        revisions: expected.revisions.len(),
    };
    (seen, dot_labels)
}

#[test]
fn corpus_workflows_draw_as_valid_mermaid_and_dot() {
    let Some(compat) = baton_test_support::compat_dir() else {
        return;
    };
    let mut total = Seen::default();
    for workflow in CORPUS_WORKFLOWS {
        let (seen, _) = check_workflow(&compat, workflow);
        total.gates += seen.gates;
        total.fan_outs += seen.fan_outs;
        total.revisions += seen.revisions;
    }
    // The structural checks only mean something if the chosen workflows
    // have every feature the drawings mark.
    assert!(
        total.gates > 0 && total.fan_outs > 0 && total.revisions > 0,
        "{total:?}"
    );
}

#[test]
fn quotes_and_backslashes_are_escaped() {
    let (seen, labels) = check_workflow(&fixtures_dir(), ESCAPING_FIXTURE);
    assert_eq!(
        (seen.gates, seen.fan_outs, seen.revisions),
        (1, 1, 2),
        "{ESCAPING_FIXTURE} lost a feature"
    );
    // The decoded labels must give back the names exactly as written, so a
    // quote or backslash was neither dropped nor doubled.
    let expected = [
        ("s0", r#"000 list "modules""#),
        ("s1", r"001 audit \ each [each module]"),
        ("s2", r#"002 check "C:\temp""#),
        ("s3", r#"003 sign-off "final" (gate)"#),
    ];
    for (id, label) in expected {
        assert_eq!(
            labels.get(id).map(String::as_str),
            Some(label),
            "label of {id}"
        );
    }
}

// --- the parsers reject what a renderer would reject -------------------------

#[test]
fn the_mermaid_checker_rejects_broken_charts() {
    let good = "flowchart TD\n  s0[\"000 a\"]\n  s1[[\"001 b\"]]\n  s2{{\"002 c\"}}\n  s0 --> s1\n  s1 -. revise .-> s0\n";
    let graph = parse_mermaid(good).expect("a well-formed chart parses");
    assert_eq!(
        (graph.nodes.len(), graph.solid.len(), graph.revise.len()),
        (3, 1, 1)
    );
    let broken = [
        ("flowchart LR\n  s0[\"a\"]\n", "wrong header"),
        (
            "flowchart TD\n  s0[\"say \"hi\"\"]\n",
            "raw quote in a label",
        ),
        ("flowchart TD\n  s0[\"a\"\n", "unclosed bracket"),
        ("flowchart TD\n  s0[[\"a\"]\n", "mismatched double border"),
        ("flowchart TD\n  s0{{\"a\"}\n", "mismatched hexagon"),
        (
            "flowchart TD\n  s0[\"a\"]\n  s0 --> s9\n",
            "undeclared endpoint",
        ),
        (
            "flowchart TD\n  s0[\"a\"]\n  s0[\"b\"]\n",
            "node declared twice",
        ),
        ("flowchart TD\n  s0[\"a\"]\n  s0 -> s0\n", "unknown arrow"),
        ("flowchart TD\n  x y[\"a\"]\n", "bad node id"),
    ];
    for (text, why) in broken {
        assert!(
            parse_mermaid(text).is_err(),
            "accepted a chart with {why}: {text}"
        );
    }
}

#[test]
fn the_dot_checker_rejects_broken_graphs() {
    let good = "digraph \"a \\\"b\\\" \\\\ c\" {\n  rankdir=TB;\n  node [shape=box, style=rounded];\n  s0 [label=\"x\"];\n  s1 [label=\"y\", shape=hexagon];\n  s0 -> s1;\n  s1 -> s0 [style=dashed, label=\"revise\"];\n}\n";
    let graph = parse_dot(good).expect("a well-formed graph parses");
    assert_eq!(graph.name, r#"a "b" \ c"#);
    assert_eq!((graph.nodes.len(), graph.edges.len()), (2, 2));
    let broken = [
        (
            "digraph \"g\" {\n  s0 [label=\"say \"hi\"\"];\n}\n",
            "raw quote in a label",
        ),
        (
            "digraph \"g\" {\n  s0 [label=\"a\"];\n",
            "missing closing brace",
        ),
        (
            "digraph \"g\" {\n  s0 [label=\"a\"];\n}\n}\n",
            "extra closing brace",
        ),
        (
            "digraph \"g\" {\n  s0 [label=\"a\";\n}\n",
            "unclosed attribute list",
        ),
        (
            "digraph \"g\" {\n  s0 [label=\"a];\n}\n",
            "unterminated string",
        ),
        (
            "digraph \"g\" {\n  s0 [label=\"a\"]\n}\n",
            "missing semicolon",
        ),
        (
            "digraph \"g\" {\n  s0 [label=\"a\"];\n  s0 -> s1;\n}\n",
            "undeclared endpoint",
        ),
        ("digraph \"g\" {\n  s0;\n  s0;\n}\n", "node declared twice"),
        ("graph \"g\" {\n  s0;\n}\n", "undirected graph"),
    ];
    for (text, why) in broken {
        assert!(
            parse_dot(text).is_err(),
            "accepted a graph with {why}: {text}"
        );
    }
}
